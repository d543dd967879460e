"""Old runs and raw crawls are removed, so nightly rebuilds do not fill the disk, and what
killed runs and writes left behind goes with them.

Every run directory holds a whole run: its chunk files, `pages.parquet`, validation results
and the outcome store the next run reuses, about 100 MB for 5,000 pages. A nightly
deployment would keep adding that forever. `prune_runs` keeps:

- the run `latest` and each collection's `latest` point at (the published ones, each the
  baseline of its doc set's next run);
- the `keep` most recently ended runs, the published ones counted among them: finished ones (passed,
  failed, superseded or interrupted alike, so a failed night stays there to be looked at)
  as of their `status.json`, and dead ones as of their last change;
- every running run: the process running a run holds its lock (`hold_run_lock`) for as long
  as it lives, and the OS releases it when that process ends, however it ends.

A run with no `status.json` whose lock no process holds is dead: killed (SIGKILL, the OOM
killer, a reboot) before it finished. It is counted like a failed run, so a night killed
for want of memory or disk does not stay forever. (A run the chunk flow wrote and the
validate-publish flow has not validated yet counts too, as of when it was written; a run
with no lock file at all, once it has not changed for `LOCKLESS_GRACE`.)

It removes the other run directories under `runs/`. Each is first renamed out of `runs/`,
then deleted: an interrupted removal leaves a hidden directory, never half a run that looks
like a run, and the next pruning deletes what such a removal left. So it does with what a
kill left of an atomic write (`firechunk.atomic`: `.<name>.<random>.tmp`) in a run that is
not running, a raw crawl or the job states, once nothing has written to it for
`STRAY_AFTER` (a write under way, of another run or a crawl, stays).

Each nightly crawl also leaves its raw pages (`raw/<job-id>/`: `pages.jsonl` and
`crawl.json`, each about as large as the crawl's JSON, 45 MB for 5,000 pages).
`prune_raw_crawls` keeps the `keep` newest complete crawls, every crawl a job state under
`jobs/` names (it may be resumed), every crawl still downloading (no `crawl.json` yet), and
the crawl the run was rebuilt from.
"""

from __future__ import annotations

import fcntl
import secrets
import shutil
import stat
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from pydantic import ValidationError

from firechunk.crawl.errors import CrawlError
from firechunk.crawl.jobstate import CrawlPaths, load_state
from firechunk.layout import DataDir, RunDir
from firechunk.settings import check_keep

_REMOVING = ".removing-"  # a directory being removed is renamed to this prefix first
# A run with no lock file at all is dead only once it has not changed for this long: it
# may have been claimed an instant ago (the lock comes next), or be run by a process that
# takes no lock. No run takes a day.
LOCKLESS_GRACE = 24 * 3600.0  # seconds
# An atomic write's temporary file nothing has written to for this long was left by a
# writer that died: the longest write (a run's chunk files, piece by piece) adds to it
# every few seconds and is renamed within minutes.
STRAY_AFTER = 3600.0  # seconds
_STRAY = ".*.tmp"  # `firechunk.atomic`'s temporary files: `.<name>.<random>.tmp`

# The runs this process runs, each lock file kept open (so locked) until the run finishes.
_held: dict[Path, IO[bytes]] = {}


@dataclass(frozen=True)
class FinishedRun:
    """A run that ended: finished (its `status.json`), or dead (none, and not running)."""

    run_id: str
    run_dir: Path
    finished_at: str  # UTC, ISO 8601: sorts in time order


def prune_runs(data_dir: Path, keep: int) -> list[str]:
    """Remove ended runs beyond the `keep` newest (never a `latest`, never a running run), and
    the temporary files dead writers left in runs not running; return the ids removed,
    oldest first. `keep` 0 removes no run."""
    check_keep(keep)
    data = DataDir(data_dir)
    _finish_removals(data.runs)
    for run_dir in data.run_dirs():
        if not run_is_running(run_dir):
            _remove_stray_files(run_dir, recursive=True)
    if keep == 0:
        return []
    published = data.published_runs()
    runs = sorted(finished_runs(data_dir), key=lambda run: (run.finished_at, run.run_id))
    kept = {run.run_dir for run in runs[-keep:]}
    doomed = [
        run for run in runs if run.run_dir not in kept and run.run_dir.resolve() not in published
    ]
    return [run.run_id for run in doomed if _remove(run.run_dir)]


def finished_runs(data_dir: Path) -> list[FinishedRun]:
    """The runs of `data_dir` that ended, finished or dead."""
    found = []
    for run_dir in DataDir(data_dir).run_dirs():
        try:
            ended = _ended_at(run_dir)
        except (OSError, ValidationError):
            continue  # unreadable (or removed meanwhile): not ours to judge or remove
        if ended is not None:
            found.append(FinishedRun(run_dir.name, run_dir, ended))
    return found


def _ended_at(run_dir: Path) -> str | None:
    """When the run ended: the time in its `status.json`; for a dead run (none, and not
    running) its directory's last change; None while it runs, or may run."""
    status = RunDir(run_dir).read_status()
    if status is not None:
        return status.finished_at
    if run_is_running(run_dir):
        return None
    changed = run_dir.stat().st_mtime
    if not RunDir(run_dir).run_lock.exists() and time.time() - changed < LOCKLESS_GRACE:
        return None  # claimed an instant ago, or run by a process that takes no lock
    return datetime.fromtimestamp(changed, UTC).isoformat(timespec="seconds")


def hold_run_lock(run_dir: Path) -> None:
    """Mark the run as running for as long as this process lives, or until the run has its
    `status.json`: an exclusive lock on its lock file, which the OS releases when the
    process ends, however it ends (so a kill leaves a run that is plainly dead). Call it as
    the run's directory is claimed."""
    finished = [held for held in _held if RunDir(held).status_json.exists() or not held.is_dir()]
    for held_dir in finished:
        _held.pop(held_dir).close()  # finished: judged by its status.json from now on
    handle = open(RunDir(run_dir).run_lock, "ab")  # noqa: SIM115 (kept open: it is the lock)
    fcntl.flock(handle, fcntl.LOCK_EX)  # waits out a pruner's momentary check only
    _held[Path(run_dir)] = handle


def held_runs() -> list[Path]:
    """The runs this process runs or ran (their locks it holds): an interrupt marks those
    that have no verdict yet."""
    return list(_held)


def run_is_running(run_dir: Path) -> bool:
    """Whether a live process holds the run's lock (a run that has no lock file holds none:
    it was never run by a process that takes one)."""
    try:
        with open(RunDir(run_dir).run_lock, "rb") as handle:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)  # released as it closes
    except FileNotFoundError:
        return False
    except BlockingIOError:
        return True
    return False


def prune_raw_crawls(data_dir: Path, keep: int, *, spare: Path | None = None) -> list[str]:
    """Remove complete raw crawls beyond the `keep` newest (by when `crawl.json` was
    written); never one a job state names, one still downloading, or the one holding
    `spare`; and the temporary files dead writers left in raw crawls and job states. Return
    the job ids removed. `keep` 0 removes no crawl; nor does a job state that cannot be
    read (which crawls it needs is then unknown)."""
    check_keep(keep)
    paths = CrawlPaths(Path(data_dir))
    raw_root = paths.raw_root
    _remove_stray_files(paths.jobs_dir)
    for raw in raw_root.iterdir() if raw_root.is_dir() else []:
        if raw.is_dir() and not raw.name.startswith("."):
            _remove_stray_files(raw)
    if keep == 0 or not raw_root.is_dir():
        return []
    named = _job_ids_named(paths.jobs_dir)
    if named is None:
        return []
    _finish_removals(raw_root)
    spared = Path(spare).resolve().parent if spare is not None else None
    complete = sorted(
        (paths.crawl_file(raw.name).stat().st_mtime, raw.name)
        for raw in raw_root.iterdir()
        if raw.is_dir() and not raw.name.startswith(".") and paths.crawl_file(raw.name).is_file()
    )
    doomed = [
        job_id
        for _, job_id in complete[:-keep]
        if job_id not in named and paths.raw_dir(job_id).resolve() != spared
    ]
    return [job_id for job_id in doomed if _remove(paths.raw_dir(job_id))]


def _job_ids_named(jobs_dir: Path) -> set[str] | None:
    """The job ids the job state files name; None if one cannot be read."""
    named = set()
    for state_file in sorted(jobs_dir.glob("*.json")) if jobs_dir.is_dir() else []:
        try:
            state = load_state(state_file)
        except (OSError, CrawlError):
            return None
        if state is not None and state.job_id:
            named.add(state.job_id)
    return named


def _remove_stray_files(directory: Path, *, recursive: bool = False) -> None:
    """Delete the temporary files of atomic writes in `directory` that nothing has written
    to for `STRAY_AFTER`: their writers died (killed between writing and renaming)."""
    found = directory.rglob(_STRAY) if recursive else directory.glob(_STRAY)
    before = time.time() - STRAY_AFTER
    for path in found if directory.is_dir() else []:
        try:
            info = path.lstat()
            if stat.S_ISREG(info.st_mode) and info.st_mtime < before:
                path.unlink()
        except FileNotFoundError:
            continue  # renamed into place, or removed by another pruner, meanwhile


def _finish_removals(parent: Path) -> None:
    """Delete what an interrupted removal left in `parent`."""
    for leftover in parent.glob(f"{_REMOVING}*") if parent.is_dir() else []:
        shutil.rmtree(leftover, ignore_errors=True)


def _remove(run_dir: Path) -> bool:
    """Remove a run's (or a raw crawl's) directory; False if it was gone already (another
    rebuild, finishing at the same time, removed it)."""
    hidden = run_dir.with_name(f"{_REMOVING}{run_dir.name}-{secrets.token_hex(3)}")
    try:
        run_dir.rename(hidden)
    except FileNotFoundError:
        return False
    shutil.rmtree(hidden)
    return True
