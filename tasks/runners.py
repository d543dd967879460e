"""The task runner that chunks pages in parallel: a local process pool, or a Dask cluster.

A flow's own task runner is fixed when the flow is defined, so the runner chosen by a flow
parameter is built here and entered by `tasks.chunk.chunk_in_parallel` for the chunking
step only. Chunking is CPU-bound Python, so threads would not help: processes, or Dask
workers that are processes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

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
        return ProcessPoolTaskRunner(
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
