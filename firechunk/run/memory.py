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
from firechunk.run.collection import collection_of_urls
from firechunk.run.executors import process_pool
from firechunk.run.outcomes import StoredOutcome, page_outcome, page_sizer
from firechunk.run.plan import (
    PageInput,
    characters,
    make_batches,
    page_inputs,
    plan_crawl,
    useful_workers,
)
from firechunk.schemas.chunk import Chunk
from firechunk.schemas.page import CrawlResult
from firechunk.schemas.report import ChunkRun, PageRecord
from firechunk.tokens import DEFAULT_ENCODING, Sizer
from firechunk.validate.facts import ChunkFacts


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
    plan = plan_crawl(crawl.data)
    to_chunk = list(page_inputs(crawl.data, plan, plan.to_chunk))
    workers = useful_workers(to_chunk, workers)
    outcomes = InMemoryOutcomes(_outcomes(to_chunk, workers, encoding, options))
    sink = RunInMemory()
    name = encoding if isinstance(encoding, str) else encoding.encoding_name
    assembled = assemble(plan.pages, outcomes, sink, encoding=name, started=started)
    urls = (page.canonical_url for page in sink.pages)
    assembled.report.collection = collection_of_urls(urls)
    return ChunkRun(
        chunks=sink.chunks,
        pages=sink.pages,
        quarantine=assembled.quarantine,
        report=assembled.report,
    )


def _outcomes(
    pages: list[PageInput], workers: int, encoding: str | Sizer, options: ChunkerOptions
) -> dict[int, StoredOutcome]:
    """Each page's outcome by its index. On 1 worker the outcomes stay objects: packing
    them (`chunk_pages`) only to unpack them took a twentieth of the run. From worker
    processes they come packed, as every executor gives them, and are unpacked here."""
    if workers <= 1:
        sizer = page_sizer(encoding)
        return {page.index: page_outcome(page, sizer, options) for page in pages}
    batches = make_batches(pages, workers, characters(pages))
    packed = (o for batch in process_pool(workers)(batches, encoding, options) for o in batch)
    return {o.index: StoredOutcome.from_payload(o.index, o.payload) for o in packed}


class InMemoryOutcomes:
    """Outcomes by page index, as assembly reads them (`Outcomes`)."""

    def __init__(self, outcomes: dict[int, StoredOutcome]) -> None:
        self._outcomes = outcomes

    def content_hash(self, index: int) -> str | None:
        outcome = self._outcomes[index]
        return outcome.content_hash if outcome.chunked else None

    def get(self, index: int) -> StoredOutcome:
        return self._outcomes[index]


class RunInMemory:
    """The sink of an in-memory run (`firechunk.run.assemble.RunSink`): each row as a
    `Chunk`, and the page records; the facts are for validation, which it does not do."""

    def __init__(self) -> None:
        self.chunks: list[Chunk] = []
        self.pages: list[PageRecord] = []

    def add_rows(self, rows: list[dict[str, Any]], facts: list[ChunkFacts]) -> None:
        self.chunks.extend(Chunk.model_validate(row) for row in rows)

    def add_page(self, record: PageRecord) -> None:
        self.pages.append(record)
