"""The task runner that chunks pages in parallel: a local process pool, or a Dask cluster.

A flow's own task runner is fixed when the flow is defined, so the runner chosen by a flow
parameter is built here and entered by `tasks.chunk.on_task_runner` for the chunking
step only. Chunking is CPU-bound Python, so threads would not help: processes, or Dask
workers that are processes.

The local processes die with the process that started them however it ends, SIGKILL and
the OOM killer included (`firechunk.run.executors.die_with_parent`), as does the temporary
API `firechunk rebuild` starts (`tasks.temporary_api`). The workers ignore a terminal's
Ctrl-C: they are killed when the flow stops early.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from multiprocessing import forkserver, resource_tracker
from typing import Any, Self

from prefect.settings import PREFECT_API_URL, temporary_settings
from prefect.task_runners import ProcessPoolTaskRunner, TaskRunner

from firechunk.activity import is_interrupt
from firechunk.run.executors import (
    ignore_interrupts,
    interrupts_held,
    kill_workers,
)
from firechunk.run.stages import DEFAULT_WORKERS
from firechunk.settings import RunSettings
from firechunk.tokens import get_encoding


def make_task_runner(settings: RunSettings) -> TaskRunner:
    """The settings' `workers` processes (None: `DEFAULT_WORKERS`) on this machine, or a
    Dask cluster (`task_runner`).

    For Dask: the scheduler at `dask_address` when given (its workers are whatever that
    cluster has), else a local cluster of `workers` single-threaded worker processes that
    lives as long as the chunking step.
    """
    kind, dask_address, encoding = settings.task_runner, settings.dask_address, settings.encoding
    workers = DEFAULT_WORKERS if settings.workers is None else settings.workers
    if kind == "process":
        # Each worker loads the tokenizer once as it starts, not in its first batch.
        return PreloadedProcessPoolTaskRunner(
            max_workers=workers, initializer=start_worker, initargs=(encoding,)
        )
    if kind == "dask":
        from prefect_dask import DaskTaskRunner  # imported only when asked for

        if dask_address:
            return DaskTaskRunner(address=dask_address)
        return DaskTaskRunner(
            cluster_class="distributed.LocalCluster",
            cluster_kwargs={
                "n_workers": workers,
                "threads_per_worker": 1,
                "processes": True,
                "dashboard_address": "127.0.0.1:0",  # loopback, any free port
                "preload": ["firechunk.tasks.dask_preload"],  # workers die with this process
            },
        )
    raise ValueError(f"unknown task runner {kind!r}: use 'process' or 'dask'")


WORKER_PRELOAD = ("firechunk.tasks.worker_preload",)


def start_worker(encoding: str) -> None:
    """A process pool worker's set-up: interrupts left to the flow's process, the
    tokenizer loaded once here rather than in its first batch."""
    ignore_interrupts()
    get_encoding(encoding)


class PreloadedProcessPoolTaskRunner(ProcessPoolTaskRunner):
    """Prefect's process pool, with workers forked from a server that has imported Prefect.

    Prefect's runner spawns each worker as a fresh interpreter, which imports Prefect and
    the chunker again: 2-3 s per worker on an idle 2-core machine and several times that
    under load, more than chunking a few hundred pages takes. Here workers fork from
    multiprocessing's fork server, a clean single-threaded process started once per flow
    process that imports `tasks.worker_preload` once; a new worker starts with Prefect,
    the chunker and the tokenizer loaded.
    Forking the fork server (not this process, which runs threads and event loops) keeps
    the isolation that spawn gives. Everything else is Prefect's runner unchanged.

    The fork server dies with the thread that started it (`tasks.worker_preload`), and
    Prefect submits tasks, so would start it, from a pool of resolver threads that ends
    with the runner: it is started here instead, by the flow's own thread.
    """

    def __enter__(self) -> Self:
        super().__enter__()
        # Prefect built a spawn-context executor; no process has started yet (they start
        # on the first submit), so it is swapped for one with the same worker set-up.
        spawning = self._executor
        self._executor = ProcessPoolExecutor(
            max_workers=self._max_workers,
            mp_context=_fork_server(),
            initializer=spawning._initializer,
            initargs=spawning._initargs,
        )
        spawning.shutdown(wait=False)
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        """Stopped early (an interrupt, or the chunk stage closing its batches), the
        workers are stopped at once first: Prefect's shutdown would wait for every batch
        running, and for a worker being started, which waits for the fork server's
        imports."""
        if self._executor is not None and _stopped_early(exc_type, exc_value):
            _stop_at_once(self._executor)
        super().__exit__(exc_type, exc_value, traceback)


class ChunkingStalled(TimeoutError):
    """No batch of pages came back from the task runner in time (`run.batch_timeout`)."""


def _stopped_early(exc_type: type[BaseException] | None, exc_value: BaseException | None) -> bool:
    """An interrupt, the batches' generator closed, or batches that stopped coming back
    (waiting for them to end could take for ever); not a batch that failed."""
    if exc_type is None:
        return False
    return (
        not issubclass(exc_type, Exception)
        or issubclass(exc_type, ChunkingStalled)
        or (exc_value is not None and is_interrupt(exc_value))
    )


def _stop_at_once(executor: ProcessPoolExecutor) -> None:
    """No worker started any more, none left running."""
    # Set without the pool's lock, which a thread starting a worker holds: the threads
    # still submitting batches are refused from now on.
    executor._shutdown_thread = True  # type: ignore[attr-defined]
    _kill_fork_server()
    kill_workers(executor)


def _fork_server() -> multiprocessing.context.BaseContext:
    """The fork-server context, its server started now from this thread, preloading
    `WORKER_PRELOAD` (a server already running keeps what it loaded; platforms without one
    spawn)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(WORKER_PRELOAD))
    # The resource tracker first: it unblocks signals as it starts (it ignores them itself).
    resource_tracker.ensure_running()
    with interrupts_held():  # the server and its workers never take a terminal's Ctrl-C
        forkserver.ensure_running()
    return context


def _kill_fork_server() -> None:
    """SIGKILL the fork server, and with it every worker it forked (each dies with it:
    `tasks.worker_preload`): a worker being started fails at once instead of waiting for
    the server's imports. Left unreaped: multiprocessing reaps it, and starts another if
    this process needs one again."""
    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@contextmanager
def api_shared_with_workers() -> Iterator[None]:
    """Make worker processes report to the API this flow reports to.

    On Prefect's ephemeral API (no PREFECT_API_URL, as with `firechunk rebuild`), the API is
    a temporary server this process started; a worker process, knowing no URL, would start
    a server of its own and time out. Naming the running server's URL in the settings
    passes it on to the workers with the rest of the flow's context.
    """
    if PREFECT_API_URL.value():
        yield
        return
    from prefect.server.api.server import SubprocessASGIServer  # the ephemeral API's server

    server = SubprocessASGIServer()  # the one this process runs (a per-port singleton)
    if not server.running:
        yield
        return
    with temporary_settings({PREFECT_API_URL: server.api_url}):
        yield
