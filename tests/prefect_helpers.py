"""Shared pieces of the Prefect tests: a hermetic Prefect home, and reading runs back.

Every test that runs a flow talks to a real Prefect API (a temporary server); what the
dashboard would show is read back through the Prefect client, never assumed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    FlowRunFilter,
    FlowRunFilterId,
    LogFilter,
    LogFilterFlowRunId,
)

from firechunk.crawlfile import read_crawl
from firechunk.run.memory import chunk_crawl

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_CRAWL = ROOT / "data" / "sample" / "crawl.json"

# Prefect settings every test server and flow gets: nothing phones home, a fresh database
# is given time to migrate on a small machine.
QUIET_PREFECT = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
}


def prefect_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a Prefect subprocess: its own PREFECT_HOME, no inherited API URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(QUIET_PREFECT, PREFECT_HOME=str(home), **extra)
    return env


SERVER_START_TIMEOUT = 180.0  # a fresh server database migrates first


def prefect_cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "prefect", *args]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


SERVER_UNIT = ROOT / "deploy" / "firechunk-server.service"


def server_unit_environment() -> dict[str, str]:
    """The `Environment=` settings of the server's systemd unit: a test server runs as the
    deployed one does (its lease storage, above all), from the one place that says it."""
    settings = {}
    for line in SERVER_UNIT.read_text(encoding="utf-8").splitlines():
        if line.startswith("Environment="):
            name, _, value = line.removeprefix("Environment=").partition("=")
            settings[name] = value
    return settings


class PrefectServer:
    """A real `prefect server` on a loopback port of its own, configured as
    deploy/firechunk-server.service is, with `env` (its own PREFECT_HOME). Restarting it
    keeps its port and its database, as `systemctl restart` would."""

    def __init__(self, env: dict[str, str], cwd: Path, log: Path) -> None:
        self.port = free_port()
        self.api_url = f"http://127.0.0.1:{self.port}/api"
        self._env = {k: v for k, v in env.items() if k != "PREFECT_API_URL"}
        self._env.update(server_unit_environment())
        self._env["PREFECT_UI_URL"] = self.api_url.removesuffix("/api")  # its own port
        self._cwd, self._log = cwd, log
        self._process: subprocess.Popen | None = None

    def start(self) -> None:
        command = ["server", "start", "--host", "127.0.0.1", "--port", str(self.port)]
        with self._log.open("a") as out:
            self._process = subprocess.Popen(
                prefect_cli(*command),
                cwd=self._cwd,
                env=self._env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its uvicorn and services end with it
            )
        _wait_until_healthy(self.api_url, self._process, self._log)

    def stop(self) -> None:
        stop_process_group(self._process)

    def restart(self) -> None:
        self.stop()
        self.start()


@contextlib.contextmanager
def prefect_server(env: dict[str, str], cwd: Path, log: Path) -> Iterator[str]:
    """A `PrefectServer`, started; yields its API URL once healthy, and stops it and its
    children on the way out."""
    server = PrefectServer(env, cwd, log)
    try:
        server.start()
        yield server.api_url
    finally:
        server.stop()


def _wait_until_healthy(api_url: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"prefect server exited ({server.returncode}):\n{log.read_text()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{api_url}/health", timeout=2).status_code == 200:
                return
        time.sleep(0.5)
    raise TimeoutError(f"prefect server not healthy after {SERVER_START_TIMEOUT:.0f} s")


def stop_process_group(process: subprocess.Popen | None) -> None:
    """End a process we started in a session of its own, and everything in that session."""
    if process is None or process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def chunk_ids(chunks_json: Path) -> list[str]:
    return [chunk["chunk_id"] for chunk in json.loads(chunks_json.read_text(encoding="utf-8"))]


def expected_sample_ids() -> list[str]:
    """The chunk ids `firechunk chunk` (chunk_crawl, its own process pool) gives the sample."""
    return [chunk.chunk_id for chunk in chunk_crawl(read_crawl(SAMPLE_CRAWL), workers=2).chunks]


def artifacts_of(flow_run_id: UUID) -> dict[str, Any]:
    """The run's keyed artifacts by key (the latest version of each)."""
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    return {artifact.key: artifact for artifact in found if artifact.key}


def table_of(artifact: Any) -> dict[str, Any]:
    """A measure/value table artifact as {measure: value} (numbers stay numbers)."""
    rows = json.loads(artifact.data) if isinstance(artifact.data, str) else artifact.data
    return {row["measure"]: row["value"] for row in rows}


def flow_run(flow_run_id: UUID):
    with get_client(sync_client=True) as client:
        return client.read_flow_run(flow_run_id)


def task_runs_of(flow_run_id: UUID, timeout: float = 60.0):
    """The run's task runs, once the server has recorded them all.

    Prefect's server records task runs from the events the client sends, in the background
    (on a loaded machine its SQLite database can make that take seconds). So the events
    still queued here are sent first, then the server is read until two reads agree and
    every task run is in a final state, or `timeout` passes.
    """
    from prefect.events.worker import EventsWorker

    EventsWorker.drain_all(timeout=10)
    deadline = time.monotonic() + timeout
    seen = None
    while True:
        with get_client(sync_client=True) as client:
            runs = client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
            )
        now = sorted((str(run.id), str(run.state_type)) for run in runs)
        final = all(run.state is not None and run.state.is_final() for run in runs)
        if (runs and final and now == seen) or time.monotonic() > deadline:
            return runs
        seen = now
        time.sleep(0.5)


def logs_of(flow_run_id: UUID) -> list[str]:
    """Every log message of the run, after flushing what is still queued in this process."""
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)
    with get_client(sync_client=True) as client:
        logs = client.read_logs(
            log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))
        )
    return [log.message for log in logs]
