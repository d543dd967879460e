"""Nothing a killed command started outlives it, and what a killed run left is cleared.

A SIGKILL (or the OOM killer) gives a command no chance to stop what it started: the
chunking workers, a local Dask cluster's and their resource tracker must die by
themselves. The commands run here as a user runs them, in a session of their own, so that
every process they start can be listed (and, should the test fail, ended) by its group.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psutil
import pytest

from firechunk.layout import DataDir
from firechunk.run.stages import start_run
from tests.prefect_helpers import ROOT, SAMPLE_CRAWL

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="processes die with their parent on Linux"
)

WORKER_TIMEOUT = 120.0  # a loaded machine starts Prefect's API slowly
# How long what the command left may take to end. Polled, so it costs nothing once they
# are gone: on a loaded two-core machine they were gone only after 10 s (a fixed 3 s wait
# failed there); one still running after this long was never going to end.
LEFT_TIMEOUT = 120.0
# A child younger than this may be a fork about to exec another program (it shows its
# parent's command line until then), not a worker.
SETTLED = 0.5


def big_crawl(path: Path, copies: int) -> Path:
    """The sample crawl's pages `copies` times over, each copy at its own URLs (under the
    sample's /docs, so the same doc set) and with markdown of its own (so none is an alias
    of another): seconds of chunking."""
    crawl = json.loads(SAMPLE_CRAWL.read_text(encoding="utf-8"))
    pages = []
    for copy in range(copies):
        for page in crawl["data"]:
            metadata = dict(page["metadata"])
            for key in ("url", "sourceURL", "ogUrl"):
                if metadata.get(key):
                    parts = urlsplit(metadata[key])
                    moved = parts.path.replace("/docs/", f"/docs/copy{copy}/", 1)
                    metadata[key] = urlunsplit(parts._replace(path=moved))
            markdown = f"{page['markdown']}\n\nCopy {copy} of this page.\n"
            pages.append({"markdown": markdown, "metadata": metadata})
    crawl.update(data=pages, total=len(pages), completed=len(pages))
    path.write_text(json.dumps(crawl), encoding="utf-8")
    return path


def in_group(group: int) -> list[psutil.Process]:
    """Every live process of process group `group`."""
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(ProcessLookupError):
            if os.getpgid(process.pid) == group and alive(process):
                found.append(process)
    return found


def workers_of(processes: list[psutil.Process]) -> list[psutil.Process]:
    """The chunking workers among `processes`: forked by another of them (the command),
    so each has its parent's command line, or spawned by multiprocessing (from a Prefect
    flow's process, which runs other threads)."""
    by_pid = {process.pid: process for process in processes}
    workers = []
    for process in processes:
        with contextlib.suppress(psutil.Error):
            parent = by_pid.get(process.ppid())
            settled = time.time() - process.create_time() > SETTLED
            command = process.cmdline()
            spawned = "from multiprocessing.spawn import spawn_main" in " ".join(command)
            if parent is not None and settled and (spawned or command == parent.cmdline()):
                workers.append(process)
    return workers


def describe(processes: list[psutil.Process]) -> list[str]:
    described = []
    for process in processes:
        with contextlib.suppress(psutil.Error):
            described.append(f"{process.pid} {' '.join(process.cmdline())[:120]}")
    return described


@contextlib.contextmanager
def command(args: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen]:
    """`firechunk ARGS` in a session of its own; whatever of its group is left at the end
    is killed, so a failing test leaves nothing behind either."""
    with log.open("w") as out:
        cli = subprocess.Popen(
            [sys.executable, "-m", "firechunk.cli", *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield cli
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(cli.pid, signal.SIGKILL)
        cli.wait()


def dask_workers_of(processes: list[psutil.Process]) -> list[psutil.Process]:
    """The workers of a local Dask cluster: spawned (a fresh interpreter), not forked."""
    found = []
    for process in processes:
        with contextlib.suppress(psutil.Error):
            if "spawn_main" in " ".join(process.cmdline()):
                found.append(process)
    return found if len(found) >= 2 else []


def kill_while_chunking(
    cli: subprocess.Popen, log: Path, workers=workers_of
) -> tuple[list[str], list[str]]:
    """SIGKILL the command once a chunking worker runs (`workers` finds them); return what
    ran then (in its process group, or started by it) and what is still left (in its
    process group, or recorded before the kill) once it all ended or `LEFT_TIMEOUT` passed."""
    deadline = time.monotonic() + WORKER_TIMEOUT
    while not workers(running := in_group(cli.pid)):
        assert cli.poll() is None, f"exited {cli.returncode} before chunking:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"no worker after {WORKER_TIMEOUT:.0f} s"
        time.sleep(0.05)
    recorded = psutil.Process(cli.pid).children(recursive=True)
    described = describe(list({p.pid: p for p in running + recorded}.values()))
    cli.send_signal(signal.SIGKILL)
    cli.wait()
    deadline = time.monotonic() + LEFT_TIMEOUT
    while (left := leftovers(cli.pid, recorded)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return described, describe(left)


def leftovers(group: int, recorded: list[psutil.Process]) -> list[psutil.Process]:
    """What still runs of process group `group` or of the processes `recorded`."""
    left = {process.pid: process for process in in_group(group)}
    left.update((process.pid, process) for process in recorded if alive(process))
    return list(left.values())


def alive(process: psutil.Process) -> bool:
    """Still running (the same process: psutil checks its start time), not a zombie."""
    with contextlib.suppress(psutil.Error):
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    return False


@linux_only
def test_nothing_the_rebuild_started_outlives_a_sigkill(tmp_path):
    """The workers it forked, which a night killed for want of memory must not leave to
    the next."""
    crawl = big_crawl(tmp_path / "crawl.json", copies=200)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}  # run here
    args = ["rebuild", "--replay", str(crawl), "--data-dir", str(tmp_path / "data")]
    log = tmp_path / "rebuild.log"

    with command([*args, "--workers", "3"], env, log) as cli:
        running, left = kill_while_chunking(cli, log)

    assert len(running) >= 3, running  # the command and its two forked workers
    assert left == [], f"left running after a SIGKILL of the command: {left}"


@linux_only
def test_nothing_a_local_dask_cluster_started_outlives_a_sigkill(tmp_path):
    """`--task-runner dask` without an address starts a local cluster: its spawned workers
    and their resource tracker go with the command too."""
    crawl = big_crawl(tmp_path / "crawl.json", copies=200)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}  # run here
    args = ["rebuild", "--replay", str(crawl), "--data-dir", str(tmp_path / "data")]
    log = tmp_path / "rebuild.log"

    with command([*args, "--task-runner", "dask", "--workers", "2"], env, log) as cli:
        running, left = kill_while_chunking(cli, log, dask_workers_of)

    assert sum("spawn_main" in line for line in running) >= 2, running
    assert left == [], f"left running after a SIGKILL of the command: {left}"


@linux_only
def test_nothing_chunk_started_outlives_a_sigkill(tmp_path):
    """`firechunk chunk` forks its workers itself (`firechunk.run.executors.process_pool`)."""
    crawl = big_crawl(tmp_path / "crawl.json", copies=200)
    log = tmp_path / "chunk.log"
    args = ["chunk", str(crawl), "--data-dir", str(tmp_path / "data"), "--workers", "3"]

    with command(args, dict(os.environ), log) as cli:
        running, left = kill_while_chunking(cli, log)

    assert len(running) >= 2, running
    assert left == [], f"left running after a SIGKILL of the command: {left}"


def test_a_link_a_killed_publication_left_is_removed_as_a_run_starts(tmp_path):
    # Made beside `latest` to be renamed over it; the kill came in between.
    stray = DataDir.new_link(DataDir(tmp_path).latest, "abcd")
    os.symlink(os.path.relpath(DataDir(tmp_path).run("published").path, tmp_path), stray)

    start_run(tmp_path, source=SAMPLE_CRAWL)

    assert not os.path.lexists(stray)
    assert not os.path.lexists(DataDir(tmp_path).latest)  # nothing was published meanwhile
