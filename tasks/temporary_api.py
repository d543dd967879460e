"""Prefect's API for one `firechunk rebuild`, when no API is configured.

A flow run needs an API to report to. With no PREFECT_API_URL, Prefect would start its own
temporary server on first use: after the flow's modules are imported, from whichever thread
first needs it, having imported its whole server package into this process (about 4 s of
CPU here), and as a plain subprocess that outlives a SIGKILL of the command. Instead the
command starts the server process itself, before importing the flow, so the server boots on
one core while the flow's modules load on the other; names it in PREFECT_API_URL for the
run, so Prefect uses it as it would any server; and stops it when the run ends.

The server's process dies with this one however it ends, SIGKILL and the OOM killer
included (`firechunk.run.executors.die_with_parent`), and runs in a session of its own: a
terminal's Ctrl-C is the command's, and the interrupted flow can still report its end to it
before the command stops it. This module imports nothing of Prefect until the run needs it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import firechunk
from firechunk.run.executors import die_with_parent

if TYPE_CHECKING:
    from fastapi import FastAPI

# A fresh Prefect database is migrated as the server first starts: 20-30 s on a busy
# 2-core machine, so the wait is generous; a server that exits ends it at once.
STARTUP_TIMEOUT = 120.0
STOP_TIMEOUT = 10.0
# Tells the server's process which process started it (`temporary_api_app`).
_API_PARENT = "FIRECHUNK_API_PARENT_PID"


@dataclass(frozen=True)
class TemporaryApi:
    """A server process this command started, and the API URL it serves on."""

    process: subprocess.Popen[bytes]
    url: str


class TemporaryApiError(RuntimeError):
    """The temporary API did not come up."""


@contextmanager
def temporary_api() -> Iterator[TemporaryApi | None]:
    """The server process, started at once and stopped when the block ends; None when
    PREFECT_API_URL names an API in the environment. Enter it from the main thread: the
    server dies with it."""
    if os.environ.get("PREFECT_API_URL"):
        yield None
        return
    port = _free_port()
    print(f"Starting Prefect's temporary server on http://127.0.0.1:{port}", file=sys.stderr)
    process = _api_process(port)
    try:
        yield TemporaryApi(process, f"http://127.0.0.1:{port}/api")
    finally:
        _stop(process)


def wait_until_answering(api: TemporaryApi | None) -> None:
    """Return once `api` answers; at once for no server, or for one a Prefect profile
    overrides by naming an API (the server is stopped then, unused)."""
    if api is None:
        return
    if _api_configured():
        _stop(api.process)
        return
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if api.process.poll() is not None:
            raise TemporaryApiError(
                f"Prefect's temporary server exited with status {api.process.returncode} "
                "before it answered (its error is above)"
            )
        try:
            with urllib.request.urlopen(f"{api.url}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.1)
    raise TemporaryApiError(
        f"Prefect's temporary server did not answer within {STARTUP_TIMEOUT:.0f} s"
    )


@contextmanager
def reporting_to(api: TemporaryApi | None) -> Iterator[None]:
    """Prefect reports to `api` inside the block, from every thread and worker process: its
    URL is put in the environment and Prefect's global settings are read again. A Prefect
    profile that names an API wins: the temporary server is then left unused. The server
    has no UI, so no "View at" link is printed for it."""
    if api is None or _api_configured():
        yield
        return
    from prefect.context import refresh_global_settings_context

    named = {"PREFECT_API_URL": api.url, "PREFECT_UI_URL": os.environ.get("PREFECT_UI_URL", "")}
    before = {name: os.environ.get(name) for name in named}
    os.environ.update(named)
    refresh_global_settings_context()
    try:
        yield
    finally:
        _send_what_is_queued()
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        refresh_global_settings_context()


def _send_what_is_queued() -> None:
    """Prefect's log and event workers send in the background: what they hold goes to the
    server before it stops, or they retry a dead server for a minute at exit."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    with contextlib.suppress(RuntimeError):  # no log was queued: no worker to drain
        APILogWorker.instance().drain()
    EventsWorker.drain_all()


def _api_configured() -> bool:
    from prefect.settings import PREFECT_API_URL

    return bool(PREFECT_API_URL.value())


def temporary_api_app() -> FastAPI:
    """Prefect's API app without UI or services, built in the server's process once that
    process is tied to the one that started it (uvicorn's app factory)."""
    die_with_parent(int(os.environ[_API_PARENT]))
    from prefect.server.api.server import create_app

    return create_app(ephemeral=True, final=True)


def _free_port() -> int:
    """A port nothing listens on now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# The directory holding the firechunk package: site-packages for an install, the checkout
# for an editable one (whose finder maps firechunk.tasks to tasks/).
_APP_DIR = str(Path(firechunk.__file__).resolve().parents[1])


def _api_process(port: int) -> subprocess.Popen[bytes]:
    """uvicorn serving `temporary_api_app` (imported from the firechunk this process
    runs, whatever the directory the command runs in holds); Prefect's settings come from
    the environment and profile, as the command's own do."""
    return subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--app-dir", _APP_DIR]
        + ["--factory", f"{__name__}:temporary_api_app", "--host", "127.0.0.1"]
        + ["--port", str(port), "--log-level", "error", "--lifespan", "on"],
        env={**os.environ, "PREFECT_UI_ENABLED": "0", _API_PARENT: str(os.getpid())},
        start_new_session=True,  # a terminal's Ctrl-C is the command's, not the API's
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (uvicorn finishes its requests), then SIGKILL if it takes too long."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
