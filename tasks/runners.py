"""The task runner that chunks pages in parallel: a local process pool, or a Dask cluster.

A flow's own task runner is fixed when the flow is defined, so the runner chosen by a flow
parameter is built here and entered by `tasks.chunk.on_task_runner` for the chunking
step only. Chunking is CPU-bound Python, so threads would not help: processes, or Dask
workers that are processes.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Literal, Self

from prefect.settings import PREFECT_API_URL, temporary_settings
from prefect.task_runners import ProcessPoolTaskRunner, TaskRunner

from firechunk.tokens import DEFAULT_ENCODING, get_encoding

TaskRunnerKind = Literal["process", "dask"]


def make_task_runner(
    kind: TaskRunnerKind = "process",
    workers: int = 2,
    dask_address: str | None = None,
    encoding: str = DEFAULT_ENCODING,
) -> TaskRunner:
    """`workers` processes on this machine, or a Dask cluster.

    For Dask: the scheduler at `dask_address` when given (its workers are whatever that
    cluster has), else a local cluster of `workers` single-threaded worker processes that
    lives as long as the chunking step.
    """
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if kind == "process":
        # Each worker loads the tokenizer once as it starts, not in its first batch.
        return PreloadedProcessPoolTaskRunner(
            max_workers=workers, initializer=get_encoding, initargs=(encoding,)
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
            },
        )
    raise ValueError(f"unknown task runner {kind!r}: use 'process' or 'dask'")


WORKER_PRELOAD = ("tasks.worker_preload",)


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


def _fork_server() -> multiprocessing.context.BaseContext:
    """The fork-server context, preloading `WORKER_PRELOAD` when the server first starts
    (a server already running keeps what it loaded; platforms without one spawn)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(WORKER_PRELOAD))
    return context


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
