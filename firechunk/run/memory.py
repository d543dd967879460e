"""A whole crawl chunked into a run held in memory: for tests, benchmarks and notebooks.

The same plan, worker and assembly as a written run (`firechunk.run.stages`); the outcomes
stay in a dict instead of the page cache, and the rows become `Chunk`s instead of lines in
the run's files. Nothing is reused, validated or published, so the drafts go without what
only validation reads (`ChunkerOptions.validation_facts`).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from firechunk.chunker.page import ChunkerOptions
from firechunk.run.assemble import assemble
from firechunk.run.collection import collection_for_run
from firechunk.run.executors import in_process, process_pool
from firechunk.run.outcomes import PackedOutcome, StoredOutcome
from firechunk.run.plan import make_batches, page_inputs, plan_pages, useful_workers
from firechunk.tokens import DEFAULT_ENCODING, Sizer
from schemas.chunk import Chunk
from schemas.page import CrawlResult
from schemas.report import ChunkRun


def chunk_crawl(
    crawl: CrawlResult,
    *,
    workers: int = 1,
    encoding: str | Sizer = DEFAULT_ENCODING,
    options: ChunkerOptions | None = None,
) -> ChunkRun:
    """Chunk every page of `crawl` on up to `workers` processes; the run, in memory.
    `encoding`: a tiktoken encoding's name, or a sizer (`firechunk.tokens.Sizer`)."""
    started = time.time()
    options = replace(options or ChunkerOptions(), validation_facts=False)
    plan = plan_pages(page_inputs(crawl))
    workers = useful_workers(plan.to_chunk, workers)
    batches = list(make_batches(plan.to_chunk, workers))
    executor = process_pool(workers) if workers > 1 else in_process
    outcomes = InMemoryOutcomes(
        {o.index: o for outcomes in executor(batches, encoding, options) for o in outcomes}
    )
    sink = ChunkList()
    name = encoding if isinstance(encoding, str) else encoding.encoding_name
    assembled = assemble(plan.pages, outcomes, sink, encoding=name, started=started)
    urls = (page.canonical_url for page in assembled.pages)
    assembled.report.collection = collection_for_run(None, urls)
    return ChunkRun(
        chunks=sink.chunks,
        pages=assembled.pages,
        quarantine=assembled.quarantine,
        report=assembled.report,
    )


class InMemoryOutcomes:
    """Packed outcomes by page index, unpacked when assembly first asks for them
    (`Outcomes`), and kept: assembly reads each page's twice, and the run holds every
    chunk anyway."""

    def __init__(self, packed: dict[int, PackedOutcome]) -> None:
        self._packed = packed
        self._unpacked: dict[int, StoredOutcome] = {}

    def content_hash(self, index: int) -> str | None:
        return self._packed[index].content_hash

    def get(self, index: int) -> StoredOutcome:
        if index not in self._unpacked:
            self._unpacked[index] = StoredOutcome.from_payload(index, self._packed[index].payload)
        return self._unpacked[index]


class ChunkList:
    """The row sink of an in-memory run: each row as a `Chunk`."""

    def __init__(self) -> None:
        self.chunks: list[Chunk] = []

    def add_rows(self, rows: list[dict[str, Any]]) -> list[str]:
        self.chunks.extend(Chunk.model_validate(row) for row in rows)
        return []
