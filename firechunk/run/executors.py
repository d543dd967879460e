"""Where batches of pages are chunked: this process, or a pool of processes.

The per-page work (`firechunk.run.outcomes.chunk_pages`) is a plain picklable function
over a batch of pages, so any executor can run it. An `Executor` takes the batches and
yields each batch's outcomes as it finishes, in any order; the chunk stage
(`firechunk.run.stages.chunk_stage`) is handed one. Here are this process (`in_process`)
and a pool of forked processes (`process_pool`); the Prefect flows hand it their task
runner instead (`tasks.chunk.on_task_runner`), a process pool or a Dask cluster.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor

from firechunk.chunker.page import ChunkerOptions
from firechunk.run.outcomes import PackedOutcome, chunk_pages
from firechunk.run.plan import PageInput
from firechunk.tokens import get_encoding

Executor = Callable[[list[list[PageInput]], str, ChunkerOptions], Iterable[list[PackedOutcome]]]


def in_process(
    batches: list[list[PageInput]], encoding: str, options: ChunkerOptions
) -> Iterator[list[PackedOutcome]]:
    """The batches one after another, in this process."""
    return (chunk_pages(batch, encoding, options) for batch in batches)


def process_pool(workers: int) -> Executor:
    """`workers` processes, this one among them: it takes every `workers`-th batch itself
    while `workers - 1` forked processes take the others, so one process fewer is started
    and this one does not sit idle waiting."""

    def run(
        batches: list[list[PageInput]], encoding: str, options: ChunkerOptions
    ) -> Iterator[list[PackedOutcome]]:
        if workers <= 1 or len(batches) <= 1:
            yield from in_process(batches, encoding, options)
            return
        get_encoding(encoding)  # loaded once here, inherited by forked workers
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        mine = batches[::workers]
        theirs = [batch for i, batch in enumerate(batches) if i % workers]
        context = multiprocessing.get_context(method)
        with ProcessPoolExecutor(workers - 1, mp_context=context) as pool:
            futures = [pool.submit(chunk_pages, batch, encoding, options) for batch in theirs]
            for batch in mine:
                yield chunk_pages(batch, encoding, options)
            for future in futures:
                yield future.result()

    return run
