"""Chunk pages on an executor, and a whole crawl into a run held in memory.

The per-page work (`firechunk.incremental.chunk_pages`) is a plain picklable function over
a batch of pages, so any executor can run it: this process, the process pool here
(`run_batches`), or a Prefect task runner (`tasks.chunk`). `chunk_crawl` is the in-memory
run tests and benchmarks use: the same plan, worker and assembly as a written run
(`firechunk.rebuild`), with the rows kept as `Chunk`s instead of written to files.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from firechunk.assemble import assemble
from firechunk.chunker.page import ChunkerOptions
from firechunk.incremental import PackedOutcome, StoredOutcome, chunk_pages
from firechunk.plan import AliasPlan, PageInput, make_batches, page_inputs, useful_workers
from firechunk.tokens import DEFAULT_ENCODING, get_encoding
from schemas.chunk import Chunk
from schemas.page import CrawlResult
from schemas.report import ChunkRun

Progress = Callable[[int], None]  # called with the number of pages just finished


def chunk_crawl(
    crawl: CrawlResult,
    *,
    workers: int = 1,
    encoding: str = DEFAULT_ENCODING,
    options: ChunkerOptions | None = None,
    progress: Progress | None = None,
) -> ChunkRun:
    """Chunk every page of `crawl` on up to `workers` processes; the run, in memory."""
    started = time.perf_counter()
    options = options or ChunkerOptions()
    inputs = page_inputs(crawl)
    plan = AliasPlan.from_inputs(inputs)
    outcomes = InMemoryOutcomes(run_batches(plan.to_chunk, workers, encoding, options, progress))
    sink = ChunkList()
    assembled = assemble(inputs, plan, outcomes, sink, encoding=encoding, started=started)
    return ChunkRun(
        chunks=sink.chunks,
        pages=assembled.pages,
        quarantine=assembled.quarantine,
        report=assembled.report,
    )


class InMemoryOutcomes:
    """Packed outcomes by page index, unpacked when assembly asks for them."""

    def __init__(self, packed: dict[int, PackedOutcome]) -> None:
        self._packed = packed

    def content_hash(self, index: int) -> str | None:
        return self._packed[index].content_hash

    def get(self, index: int) -> StoredOutcome:
        return StoredOutcome.from_payload(index, self._packed[index].payload)


class ChunkList:
    """The row sink of an in-memory run: each row as a `Chunk`."""

    def __init__(self) -> None:
        self.chunks: list[Chunk] = []

    def add_rows(self, rows: list[dict[str, Any]]) -> list[str]:
        self.chunks.extend(Chunk.model_validate(row) for row in rows)
        return []


def run_batches(
    pages: list[PageInput],
    workers: int,
    encoding: str,
    options: ChunkerOptions,
    progress: Progress | None = None,
) -> dict[int, PackedOutcome]:
    """Chunk pages in up to `workers` processes (in this process when 1), batch by batch."""
    workers = useful_workers(pages, workers)
    batches = list(make_batches(pages, workers))
    results: dict[int, PackedOutcome] = {}
    for outcomes in map_batches(batches, workers, encoding, options):
        results.update((outcome.index, outcome) for outcome in outcomes)
        if progress:
            progress(len(outcomes))
    return results


def map_batches(
    batches: list[list[PageInput]], workers: int, encoding: str, options: ChunkerOptions
) -> Iterator[list[PackedOutcome]]:
    """Outcomes batch by batch. With several workers this process is one of them: it takes
    every `workers`-th batch itself while `workers - 1` forked processes take the others,
    so one process fewer is started and this one does not sit idle waiting."""
    if workers <= 1 or len(batches) <= 1:
        yield from (chunk_pages(batch, encoding, options) for batch in batches)
        return
    get_encoding(encoding)  # loaded once here, inherited by forked workers
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    mine = batches[::workers]
    theirs = [batch for i, batch in enumerate(batches) if i % workers]
    with ProcessPoolExecutor(workers - 1, mp_context=multiprocessing.get_context(method)) as pool:
        futures = [pool.submit(chunk_pages, batch, encoding, options) for batch in theirs]
        for batch in mine:
            yield chunk_pages(batch, encoding, options)
        for future in futures:
            yield future.result()
