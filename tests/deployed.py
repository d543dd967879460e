"""The pieces of a deployed firechunk that the operations tests drive: a process worker that
can be killed as an operator's machine kills it, and the notifications the automations send.

Everything here acts on real processes and a real server; nothing is simulated.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from uuid import UUID

import psutil
from prefect.client.orchestration import get_client

from tests.prefect_helpers import prefect_cli

POOL = "firechunk-process"
RUNS_TIMEOUT = 300.0  # a sample rebuild takes well under a minute; this only bounds a hang


class Worker:
    """`prefect worker start --pool firechunk-process`, in a session of its own, its output
    in a file. Each `start` after a kill is systemd's `Restart=always`."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self._env, self._cwd = env, cwd
        self._process: subprocess.Popen | None = None
        self._log = cwd / "worker.log"
        self._seen: set[int] = set()  # every process it started, for the clean-up

    def start(self) -> None:
        with self._log.open("a") as out:
            self._process = subprocess.Popen(
                prefect_cli("worker", "start", "--pool", POOL),
                cwd=self._cwd,
                env=self._env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def descendants(self) -> list[psutil.Process]:
        """The flow runs it started and their workers, while it is alive."""
        assert self._process is not None
        with suppress(psutil.Error):
            found = psutil.Process(self._process.pid).children(recursive=True)
            self._seen |= {process.pid for process in found}
            return found
        return []

    def kill(self) -> None:
        """SIGKILL the worker alone: its flow runs go on without it."""
        assert self._process is not None
        self._process.kill()
        self._process.wait(timeout=30)

    def kill_with_its_runs(self) -> None:
        """SIGKILL the worker and everything it started at once, as the OOM killer or a
        power cut would: nobody is left to tell the server."""
        assert self._process is not None
        everything = [psutil.Process(self._process.pid), *self.descendants()]
        for process in everything:
            with suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(everything, timeout=30)

    def stop(self) -> None:
        """The end of the test: the worker's session and any run it left behind."""
        if self._process is not None and self._process.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait(timeout=30)
        for pid in self._seen:
            with suppress(psutil.Error):
                psutil.Process(pid).kill()

    def log(self) -> str:
        return self._log.read_text(errors="replace")[-3000:]


@contextmanager
def worker(env: dict[str, str], cwd: Path) -> Iterator[Worker]:
    started = Worker(env, cwd)
    started.start()
    try:
        yield started
    finally:
        started.stop()


class Notifications:
    """A local HTTP endpoint that keeps every JSON body POSTed to it: where the webhook
    notification block sends (no internet)."""

    def __init__(self) -> None:
        self._bodies: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        bodies, lock = self._bodies, self._lock

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                with lock:
                    bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:  # quiet
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_port}/notify"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def about(self, run_id: UUID) -> list[dict[str, Any]]:
        """The notifications naming the run (its dashboard link carries its id: run names,
        made of the site and the minute, can repeat)."""
        with self._lock:
            return [body for body in self._bodies if str(run_id) in json.dumps(body)]

    def saying(self, text: str) -> list[dict[str, Any]]:
        """The notifications whose subject holds `text`."""
        with self._lock:
            return [body for body in self._bodies if text in body.get("subject", "")]

    def wait_for(self, run_id: UUID, timeout: float = 90.0) -> list[dict[str, Any]]:
        """The notifications about the run once at least one has come, or none after
        `timeout`; then a few more seconds, so that a second one would be seen too."""
        return self._wait(lambda: self.about(run_id), timeout)

    def wait_saying(self, text: str, timeout: float = 90.0) -> list[dict[str, Any]]:
        """`wait_for`, for notifications whose subject holds `text`."""
        return self._wait(lambda: self.saying(text), timeout)

    @staticmethod
    def _wait(found: Callable[[], list[dict[str, Any]]], timeout: float) -> list[dict[str, Any]]:
        if wait_until(found, timeout):
            time.sleep(5)
        return found()

    def close(self) -> None:
        self._httpd.shutdown()


def wait_until(done: Callable[[], object], timeout: float, every: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(every)
    return True


def flow_runs(run_ids: list[UUID]) -> list[Any]:
    with get_client(sync_client=True) as client:
        return [client.read_flow_run(run_id) for run_id in run_ids]


def wait_until_final(run_ids: list[UUID], timeout: float = RUNS_TIMEOUT) -> list[Any]:
    """The runs once every one is in a final state, or as they are after `timeout`."""
    wait_until(lambda: all(r.state and r.state.is_final() for r in flow_runs(run_ids)), timeout)
    return flow_runs(run_ids)


def wait_until_state(run_id: UUID, names: set[str], timeout: float = RUNS_TIMEOUT) -> Any:
    """The run once its state is one of `names`, or as it is after `timeout`."""
    wait_until(lambda: flow_runs([run_id])[0].state_name in names, timeout)
    return flow_runs([run_id])[0]


def states_of(flow_run_id: UUID) -> list[Any]:
    with get_client(sync_client=True) as client:
        return client.read_flow_run_states(flow_run_id)
