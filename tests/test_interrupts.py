"""Ctrl-C (and SIGTERM) in `chunk`, `rebuild` and `load`: exit 130, one line saying what
was kept, the run marked interrupted, no traceback and no process left.

The commands run as a terminal runs them: in a process group of their own, the signal
sent to the whole group, as Ctrl-C is (the workers, the fork server and the resource
tracker get it too). What is left is looked for among the processes the command started
(recorded just before the signal) and those that name its data directory (the embedded
Postgres, which pg_ctl detaches), polled with a generous deadline. How long each command
took to exit is measured and printed, not asserted: a loaded machine is slow.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from firechunk.activity import take_stopped
from firechunk.layout import RunDir
from firechunk.publish import mark_interrupted, switch_latest
from firechunk.run.stages import chunk_stage, start_out_run, start_run
from firechunk.schemas.publish import RunStatus
from firechunk.settings import RunSettings
from tests.prefect_helpers import ROOT, SAMPLE_CRAWL
from tests.test_embedded_postgres import processes_naming
from tests.test_leftovers import (
    LEFT_TIMEOUT,
    WORKER_TIMEOUT,
    alive,
    big_crawl,
    describe,
    in_group,
    workers_of,
)

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="signals and process groups as on Linux"
)

EXIT_TIMEOUT = 60.0  # the command is expected out within seconds; this only bounds a hang
INTERRUPTED = 130


class Command:
    """`firechunk ARGS` in a session of its own, stdout and stderr in files."""

    def __init__(self, args: list[str], env: dict[str, str], logs: Path) -> None:
        self.stdout, self.stderr = logs / "stdout.txt", logs / "stderr.txt"
        with self.stdout.open("w") as out, self.stderr.open("w") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "firechunk.cli", *args],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        return self.stdout.read_text() + self.stderr.read_text()

    def wait_for(self, done: Callable[[], object], what: str) -> None:
        """Poll `done` until it is true; the command must still run meanwhile."""
        deadline = time.monotonic() + WORKER_TIMEOUT
        while not done():
            assert self.process.poll() is None, (
                f"exited {self.process.returncode} before {what}:\n{self.output()}"
            )
            assert time.monotonic() < deadline, f"not {what} after {WORKER_TIMEOUT:.0f} s"
            time.sleep(0.05)

    def interrupt(self, number: int = signal.SIGINT) -> Interrupted:
        """Send `number` to the command's whole process group, as a terminal's Ctrl-C
        does; wait for it to exit."""
        started = psutil.Process(self.pid).children(recursive=True)
        running = describe(started)
        sent = time.monotonic()
        os.killpg(self.pid, number)
        code = self.process.wait(timeout=EXIT_TIMEOUT)
        seconds = time.monotonic() - sent
        return Interrupted(code, seconds, started, running, self.stderr.read_text())


class Interrupted:
    """How the command ended after the signal."""

    def __init__(
        self,
        code: int,
        seconds: float,
        started: list[psutil.Process],
        running: list[str],
        stderr: str,
    ) -> None:
        self.code, self.seconds, self.stderr = code, seconds, stderr
        self.started, self.running = started, running  # what ran as the signal was sent

    def line(self) -> str:
        """The one line saying what was interrupted: the last of stderr, and the only one
        saying "interrupted"; no traceback anywhere."""
        assert "Traceback" not in self.stderr, self.stderr
        assert "Error logging to API" not in self.stderr, self.stderr
        said = [line for line in self.stderr.splitlines() if re.search(r"\binterrupted\b", line)]
        assert len(said) == 1, self.stderr
        assert self.stderr.strip().splitlines()[-1] == said[0], self.stderr
        return said[0]


@contextlib.contextmanager
def command(args: list[str], env: dict[str, str], logs: Path) -> Iterator[Command]:
    """A `Command`; whatever of its process group is left at the end is killed, so a
    failing test leaves nothing behind either."""
    cli = Command(args, env, logs)
    try:
        yield cli
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(cli.pid, signal.SIGKILL)
        cli.process.wait()


def left_running(group: int, started: list[psutil.Process], data_dir: Path) -> list[str]:
    """What still runs of the command's group, of the processes it had started, or naming
    its data directory, once all of it ended or `LEFT_TIMEOUT` passed."""

    def left() -> list[str]:
        alive_now = {p.pid: p for p in in_group(group) + started if alive(p)}
        return describe(list(alive_now.values())) + processes_naming(data_dir)

    deadline = time.monotonic() + LEFT_TIMEOUT
    while (found := left()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return found


def firechunk(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "firechunk.cli", *args],
        cwd=ROOT,
        env=env or _env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _env() -> dict[str, str]:
    """No database URL or data directory inherited."""
    return {
        k: v
        for k, v in os.environ.items()
        if k not in ("FIRECHUNK_DB_URL", "FIRECHUNK_DATA_DIR", "PREFECT_API_URL")
    }


def only_run(data_dir: Path) -> Path:
    [run_dir] = [path for path in (data_dir / "runs").iterdir() if path.is_dir()]
    return run_dir


def assert_listed_interrupted(data_dir: Path, run_id: str) -> None:
    listed = firechunk("runs", "--data-dir", str(data_dir))
    assert listed.returncode == 0, listed.stderr
    [row] = [line for line in listed.stdout.splitlines() if line.startswith(run_id)]
    assert row.split()[1] == "interrupted", listed.stdout


def assert_interrupted_while_chunking(ended, data_dir: Path) -> Path:
    """Exit 130, the one line for a run stopped while chunking, its status interrupted."""
    assert ended.code == INTERRUPTED, ended.stderr
    run_dir = only_run(data_dir)
    assert re.fullmatch(
        rf"run {run_dir.name} interrupted while chunking; latest unchanged \(no run published "
        r"yet\)",
        ended.line(),
    ), ended.stderr
    status = RunDir(run_dir).read_status()
    assert status is not None and status.status == "interrupted", status
    return run_dir


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_chunk_interrupted_while_chunking(tmp_path, number):
    crawl = big_crawl(tmp_path / "crawl.json", copies=200)
    data_dir = tmp_path / "data"
    args = ["chunk", str(crawl), "--data-dir", str(data_dir), "--workers", "3"]

    with command(args, _env(), tmp_path) as cli:
        cli.wait_for(lambda: workers_of(in_group(cli.pid)), "chunking")
        ended = cli.interrupt(number)

    print(f"chunk: exit {ended.code} {ended.seconds:.1f} s after {signal.Signals(number).name}")
    run_dir = assert_interrupted_while_chunking(ended, data_dir)
    assert RunDir(run_dir).read_status().error == "interrupted while chunking"
    assert not (data_dir / "latest").exists()
    assert_listed_interrupted(data_dir, run_dir.name)
    assert left_running(cli.pid, ended.started, data_dir) == []


def test_rebuild_interrupted_while_chunking(tmp_path):
    """The same as `chunk`'s: the rebuild runs the same pipeline in its own process."""
    crawl = big_crawl(tmp_path / "crawl.json", copies=200)
    data_dir = tmp_path / "data"
    args = ["rebuild", "--replay", str(crawl), "--data-dir", str(data_dir), "--workers", "2"]

    with command(args, _env(), tmp_path) as cli:
        cli.wait_for(lambda: workers_of(in_group(cli.pid)), "chunking")
        ended = cli.interrupt()

    print(f"rebuild: exit {ended.code} {ended.seconds:.1f} s after SIGINT")
    run_dir = assert_interrupted_while_chunking(ended, data_dir)
    assert_listed_interrupted(data_dir, run_dir.name)
    assert left_running(cli.pid, ended.started, data_dir) == []


def test_load_interrupted_while_embedding_keeps_the_run_the_database_held(tmp_path):
    """The sample is loaded; a bigger run (400 more chunks to embed) is published and its
    load interrupted as embedding starts: the database still holds the sample's run, and
    the embedded Postgres is stopped."""
    data_dir = tmp_path / "data"
    for crawl in (SAMPLE_CRAWL, big_crawl(tmp_path / "crawl.json", copies=40)):
        # The copies are at other URLs: the sample's own pages are gone from the second.
        chunked = firechunk("chunk", str(crawl), "--data-dir", str(data_dir), "--allow-shrink")
        assert chunked.returncode == 0, chunked.stderr
        if crawl == SAMPLE_CRAWL:
            held = (data_dir / "latest").resolve().name
            loaded = firechunk("load", "--data-dir", str(data_dir))
            assert loaded.returncode == 0, loaded.stderr

    with command(["load", "--data-dir", str(data_dir)], _env(), tmp_path) as cli:
        cli.wait_for(lambda: "Embedding" in cli.stderr.read_text(), "embedding")
        ended = cli.interrupt()

    print(f"load: exit {ended.code} {ended.seconds:.1f} s after SIGINT")
    assert ended.code == INTERRUPTED, ended.stderr
    assert ended.line() == (
        f"load interrupted while embedding; nothing was committed: the database still holds "
        f"run {held}"
    )
    assert left_running(cli.pid, ended.started, data_dir) == []
    collections = firechunk("collections", "--data-dir", str(data_dir))
    assert collections.returncode == 0, collections.stderr
    assert held in collections.stdout, collections.stdout
    assert left_running(cli.pid, [], data_dir) == []


def test_a_stage_an_interrupt_stops_marks_its_run_and_says_what_it_was_doing(tmp_path):
    def interrupted(batches, encoding, options):
        raise KeyboardInterrupt
        yield  # a generator, as the executors are

    start = start_run(tmp_path / "data", settings=RunSettings(workers=2), source=SAMPLE_CRAWL)
    with pytest.raises(KeyboardInterrupt):
        chunk_stage(start, SAMPLE_CRAWL, interrupted)
    status = RunDir(start.run_dir).read_status()
    assert status is not None and status.status == "interrupted", status
    assert status.error == "interrupted while chunking"
    stopped = take_stopped()
    assert stopped is not None and take_stopped() is None  # said once
    assert (stopped.subject, stopped.what) == (f"run {start.run_id}", "chunking")
    assert stopped.kept() == "latest unchanged (no run published yet)"


def test_an_error_still_marks_the_run_failed(tmp_path):
    def failing(batches, encoding, options):
        raise ValueError("a bug")
        yield

    start = start_run(tmp_path / "data", settings=RunSettings(workers=2), source=SAMPLE_CRAWL)
    with pytest.raises(ValueError):
        chunk_stage(start, SAMPLE_CRAWL, failing)
    assert RunDir(start.run_dir).read_status().status == "failed"
    assert take_stopped() is None


def test_only_a_run_that_had_not_ended_is_marked_interrupted(tmp_path):
    """A verdict stands, except a pass not yet published: the interrupt came while it was
    being published. A run written with --out ends at its verdict."""
    data_dir = tmp_path / "data"
    runs = {}
    for name, verdict in [("none", None), ("failed", "failed"), ("passed", "passed")]:
        runs[name] = start_run(data_dir, run_id=name, source=SAMPLE_CRAWL)
        if verdict:
            RunDir(runs[name].run_dir).write_status(RunStatus(run_id=name, status=verdict))
    published = start_run(data_dir, run_id="published", source=SAMPLE_CRAWL)
    RunDir(published.run_dir).write_status(RunStatus(run_id="published", status="passed"))
    switch_latest(data_dir, published.run_dir, published.collection)
    out = start_out_run(tmp_path / "out", source=SAMPLE_CRAWL)
    RunDir(out.run_dir).write_status(RunStatus(run_id=out.run_id, status="passed"))

    def mark(start) -> str | None:
        mark_interrupted(start.data_dir, start.run_dir, start.run_id, "testing")
        status = RunDir(start.run_dir).read_status()
        return status.status if status else None

    assert mark(runs["none"]) == "interrupted"
    assert mark(runs["failed"]) == "failed"
    assert mark(runs["passed"]) == "interrupted"
    assert mark(published) == "passed"
    assert mark(out) == "passed"


def test_load_interrupted_as_the_embedded_postgres_starts_leaves_no_server(tmp_path):
    """SIGINT to the command alone (pg_ctl, in its group, would take a group's), as the
    server's pid file appears: a server started for no holder is stopped again."""
    data_dir = tmp_path / "data"
    chunked = firechunk("chunk", str(SAMPLE_CRAWL), "--data-dir", str(data_dir))
    assert chunked.returncode == 0, chunked.stderr
    pid_file = data_dir / "postgres" / "postmaster.pid"

    with command(["load", "--data-dir", str(data_dir)], _env(), tmp_path) as cli:
        cli.wait_for(pid_file.exists, "starting the database")
        started = psutil.Process(cli.pid).children(recursive=True)
        cli.process.send_signal(signal.SIGINT)
        code = cli.process.wait(timeout=EXIT_TIMEOUT)

    assert code == INTERRUPTED, cli.stderr.read_text()
    assert "Traceback" not in cli.stderr.read_text()
    assert left_running(cli.pid, started, data_dir) == []
