"""Old runs and raw crawls are removed after a run is published, so nightly rebuilds do not
fill the disk.

Every run directory holds a whole run: its chunk files, `pages.parquet`, validation results
and the outcome store the next run reuses, about 100 MB for 5,000 pages. A nightly
deployment would keep adding that forever. `prune_runs` keeps:

- the run `latest` points at (the published one, and the next run's baseline);
- the `keep` most recently finished runs (passed, failed or superseded alike, so a failed
  night stays there to be looked at), `latest` counted among them;
- every run that has not finished: no `status.json` yet, so it may be running now.

It removes the other run directories under `runs/`. Each is first renamed out of `runs/`,
then deleted: an interrupted removal leaves a hidden directory, never half a run that looks
like a run, and the next pruning deletes what such a removal left.

Each nightly crawl also leaves its raw pages (`raw/<job-id>/`: `pages.jsonl` and
`crawl.json`, each about as large as the crawl's JSON, 45 MB for 5,000 pages).
`prune_raw_crawls` keeps the `keep` newest complete crawls, every crawl a job state under
`jobs/` names (it may be resumed), every crawl still downloading (no `crawl.json` yet), and
the crawl the run was rebuilt from.
"""

from __future__ import annotations

import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from firechunk.crawl.errors import CrawlError
from firechunk.crawl.jobstate import CrawlPaths, load_state
from firechunk.publish import LATEST, RUN_ID, RUNS_DIR, read_status

# The least `keep` allowed: the published run and the one before it, which a run that
# started before the last publication may still be reading as its baseline.
MIN_KEEP = 2
_REMOVING = ".removing-"  # a directory being removed is renamed to this prefix first


@dataclass(frozen=True)
class FinishedRun:
    run_id: str
    run_dir: Path
    finished_at: str  # UTC, ISO 8601: sorts in time order


def check_keep(keep: int) -> None:
    """`keep` as a rebuild takes it: 0 keeps every run, else at least `MIN_KEEP`."""
    if keep != 0 and keep < MIN_KEEP:
        raise ValueError(f"keep_runs must be 0 (keep every run) or at least {MIN_KEEP}, got {keep}")


def prune_runs(data_dir: Path, keep: int) -> list[str]:
    """Remove finished runs beyond the `keep` newest (never `latest`, never an unfinished
    run); return the ids removed, oldest first. `keep` 0 removes nothing."""
    check_keep(keep)
    if keep == 0:
        return []
    data_dir = Path(data_dir)
    latest = (data_dir / LATEST).resolve() if (data_dir / LATEST).is_symlink() else None
    _finish_removals(data_dir / RUNS_DIR)
    runs = sorted(finished_runs(data_dir / RUNS_DIR), key=lambda run: (run.finished_at, run.run_id))
    kept = {run.run_dir for run in runs[-keep:]}
    doomed = [run for run in runs if run.run_dir not in kept and run.run_dir.resolve() != latest]
    return [run.run_id for run in doomed if _remove(run.run_dir)]


def finished_runs(runs_dir: Path) -> list[FinishedRun]:
    """The run directories in `runs_dir` that have a readable `status.json`."""
    found = []
    for run_dir in sorted(runs_dir.iterdir()) if runs_dir.is_dir() else []:
        if not (RUN_ID.fullmatch(run_dir.name) and run_dir.is_dir()):
            continue
        try:
            status = read_status(run_dir)
        except (OSError, ValidationError):
            continue  # unreadable: not ours to judge, so not ours to remove
        if status is not None:
            found.append(FinishedRun(run_dir.name, run_dir, status.finished_at))
    return found


def prune_raw_crawls(data_dir: Path, keep: int, *, spare: Path | None = None) -> list[str]:
    """Remove complete raw crawls beyond the `keep` newest (by when `crawl.json` was
    written); never one a job state names, one still downloading, or the one holding
    `spare`. Return the job ids removed. `keep` 0 removes nothing; so does a job state
    that cannot be read (which crawls it needs is then unknown)."""
    check_keep(keep)
    paths = CrawlPaths(Path(data_dir))
    raw_root = paths.raw_root
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
