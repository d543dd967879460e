"""A whole crawl in, a `ChunkRun` out: aliases, parallel chunking, duplicates, ids, overlap.

The per-page work (`chunk_batch`) is a plain picklable function over a batch of pages, so
any executor can run it: the process pool here, or a Prefect task runner (flows/).
"""

from __future__ import annotations

import hashlib
import math
import multiprocessing
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from firechunk.chrome import chrome_lines
from firechunk.chunk_rows import duplicates_of, page_rows
from firechunk.chunker.overlap import overlap_after
from firechunk.chunker.page import (
    ChunkerOptions,
    PageChunks,
    PageRejected,
    chunk_page,
    content_hash,
)
from firechunk.tokens import DEFAULT_ENCODING, TokenCounter, get_encoding
from firechunk.urls import canonical_url
from schemas.chunk import Chunk
from schemas.page import CrawlResult
from schemas.report import (
    ChunkReport,
    ChunkRun,
    HeadingRecord,
    PageRecord,
    QuarantineRecord,
    SizePercentiles,
)

Progress = Callable[[int], None]  # called with the number of pages just finished


@dataclass(frozen=True)
class PageInput:
    index: int
    url: str
    title: str
    markdown: object
    # The lines of this page that are the site's chrome (`firechunk.chrome`): decided
    # across the crawl, removed by the page's clean-up.
    chrome: frozenset[str] = frozenset()


@dataclass
class PageOutcome:
    index: int
    chunks: PageChunks | None = None
    reason: str | None = None
    detail: str = ""


def chunk_batch(
    batch: list[PageInput], encoding: str = DEFAULT_ENCODING, options: ChunkerOptions | None = None
) -> list[PageOutcome]:
    """Chunk a batch of pages; a page that fails becomes an outcome with a reason."""
    counter = TokenCounter(encoding)
    limit = (options or ChunkerOptions()).limits.overlap
    outcomes = []
    for page in batch:
        try:
            chunks = chunk_page(page.markdown, page.title, counter.count, options, page.chrome)
            for draft in chunks.chunks[:-1]:
                draft.overlap = overlap_after(draft.text, draft.breadcrumb, counter, limit)
            outcomes.append(PageOutcome(page.index, chunks))
        except PageRejected as rejected:
            outcomes.append(PageOutcome(page.index, reason=rejected.reason, detail=rejected.detail))
        except Exception as error:  # a parser bug must not sink the run
            outcomes.append(
                PageOutcome(
                    page.index, reason="parse-error", detail=f"{type(error).__name__}: {error}"
                )
            )
    return outcomes


def chunk_crawl(
    crawl: CrawlResult,
    *,
    workers: int = 1,
    encoding: str = DEFAULT_ENCODING,
    options: ChunkerOptions | None = None,
    progress: Progress | None = None,
) -> ChunkRun:
    started = time.perf_counter()
    options = options or ChunkerOptions()
    inputs = page_inputs(crawl)
    plan = AliasPlan.from_inputs(inputs)
    outcomes = run_batches(plan.to_chunk, workers, encoding, options, progress)
    return assemble(inputs, plan, outcomes, encoding, started)


def page_inputs(crawl: CrawlResult) -> list[PageInput]:
    """The crawl's pages as the chunker takes them, numbered in crawl order, each with the
    lines the crawl shows to be site chrome."""
    chrome = chrome_lines([page.markdown for page in crawl.data])
    return [
        PageInput(i, page.url, page.metadata.title or page.url, page.markdown, chrome[i])
        for i, page in enumerate(crawl.data)
    ]


def run_batches(
    pages: list[PageInput],
    workers: int,
    encoding: str,
    options: ChunkerOptions,
    progress: Progress | None = None,
) -> dict[int, PageOutcome]:
    """Chunk pages in up to `workers` processes (in this process when 1), batch by batch."""
    workers = useful_workers(pages, workers)
    batches = list(make_batches(pages, workers))
    results: dict[int, PageOutcome] = {}
    for outcomes in _map_batches(batches, workers, encoding, options):
        results.update((outcome.index, outcome) for outcome in outcomes)
        if progress:
            progress(len(outcomes))
    return results


def _map_batches(batches, workers, encoding, options) -> Iterator[list[PageOutcome]]:
    """Outcomes batch by batch. With several workers this process is one of them: it takes
    every `workers`-th batch itself while `workers - 1` forked processes take the others,
    so one process fewer is started and this one does not sit idle waiting."""
    if workers <= 1 or len(batches) <= 1:
        yield from (chunk_batch(batch, encoding, options) for batch in batches)
        return
    get_encoding(encoding)  # loaded once here, inherited by forked workers
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    mine = batches[::workers]
    theirs = [batch for i, batch in enumerate(batches) if i % workers]
    with ProcessPoolExecutor(workers - 1, mp_context=multiprocessing.get_context(method)) as pool:
        futures = [pool.submit(chunk_batch, batch, encoding, options) for batch in theirs]
        for batch in mine:
            yield chunk_batch(batch, encoding, options)
        for future in futures:
            yield future.result()


# Forking a worker and sending pages and chunks back costs 10-15 ms here; chunking runs at
# about 0.6 us a character on one core. Below this many characters per worker, a worker
# wins too little for that, and nothing at all when no CPU is idle.
MIN_CHARS_PER_WORKER = 100_000


def useful_workers(pages: list[PageInput], workers: int) -> int:
    """How many of `workers` processes are worth starting for these pages (at least 1)."""
    return max(1, min(workers, characters(pages) // MIN_CHARS_PER_WORKER))


def characters(pages: list[PageInput]) -> int:
    """The pages' markdown size, what batches and worker counts are sized by."""
    return sum(_size(page) for page in pages)


def _size(page: PageInput) -> int:
    return len(page.markdown) if isinstance(page.markdown, str) else 1


# The most characters one batch gets: about 8 s of chunking on one core of the 2-core
# machine, so progress moves at least that often on any crawl.
MAX_BATCH_CHARS = 8_000_000


def make_batches(pages: list[PageInput], workers: int) -> Iterator[list[PageInput]]:
    """Batches of about equal characters: two per worker, more for a crawl so large that
    they would exceed `MAX_BATCH_CHARS`, always a multiple of `workers`.

    Each batch is one Prefect task run, and task runs cost Prefect's bookkeeping beyond
    their work: in the process pool on the 2-core machine, 8 no-op task runs on 2 workers
    took 1.5 s, 4 took 0.9 s. Two batches per worker still let one worker take a batch
    while the other finishes a longer one.
    """
    workers = max(1, workers)
    total = max(1, characters(pages))
    count = workers * max(2, math.ceil(total / (workers * MAX_BATCH_CHARS)))
    batch: list[PageInput] = []
    number = 0  # of the batch being filled
    before = 0  # characters of the pages before this one
    for page in pages:
        # A page goes to the batch its first character falls in, of `count` equal slices.
        if batch and before * count // total > number:
            yield batch
            batch, number = [], before * count // total
        batch.append(page)
        before += _size(page)
    if batch:
        yield batch


@dataclass
class AliasPlan:
    """Which pages to chunk: one per canonical URL and per identical markdown."""

    canonical: list[str]
    raw_hash: list[str]
    same_as: dict[int, int]  # page index -> index of the page chunked for it
    to_chunk: list[PageInput]

    @classmethod
    def from_inputs(cls, inputs: list[PageInput]) -> AliasPlan:
        canonical = [canonical_url(page.url) for page in inputs]
        raw = [
            _sha256(page.markdown if isinstance(page.markdown, str) else repr(page.markdown))
            for page in inputs
        ]
        first_by_key: dict[tuple[str, str], int] = {}
        first_by_url: dict[str, int] = {}
        same_as: dict[int, int] = {}
        to_chunk = []
        for page in inputs:
            i = page.index
            known = first_by_url.get(canonical[i]) if canonical[i] else None
            known = known if known is not None else first_by_key.get(("raw", raw[i]))
            if known is not None:
                same_as[i] = known
                continue
            first_by_url.setdefault(canonical[i], i)
            first_by_key[("raw", raw[i])] = i
            to_chunk.append(page)
        return cls(canonical, raw, same_as, to_chunk)


def assemble(
    inputs: list[PageInput],
    plan: AliasPlan,
    outcomes: dict[int, PageOutcome],
    encoding: str,
    started: float,
) -> ChunkRun:
    """Resolve aliases by content, drop repeated chunks, assign ids and overlap links."""

    def content_of(i: int) -> str | None:
        chunks = outcomes[plan.same_as.get(i, i)].chunks
        return None if chunks is None else chunks.content_hash

    primary_of = primaries(inputs, plan, content_of)
    alias_urls = alias_urls_of(inputs, plan, primary_of)
    run = ChunkRun(report=ChunkReport(pages_in=len(inputs), encoding=encoding))
    seen: dict[str, str] = {}  # normalised chunk text hash -> chunk id
    records: dict[int, PageRecord] = {}
    for page in inputs:
        i = page.index
        outcome = outcomes[plan.same_as.get(i, i)]
        if outcome.chunks is None:
            records[i] = _quarantine(page, plan, outcome, run)
        elif primary_of[i] == i:
            records[i] = _emit_page(page, plan, outcome.chunks, alias_urls[i], seen, run)
    for page in inputs:
        i = page.index
        if i not in records:
            primary = records[primary_of[i]]
            records[i] = alias_record(page, plan, primary)
    run.pages = [records[page.index] for page in inputs]
    _fill_report(run, inputs, plan, outcomes, time.perf_counter() - started)
    return run


def alias_urls_of(
    inputs: list[PageInput], plan: AliasPlan, primary_of: dict[int, int]
) -> dict[int, list[str]]:
    """For each primary page, the other URLs that returned it, as crawled, each once and
    without the page's own."""
    others: dict[int, set[str]] = {}
    for i, primary in primary_of.items():
        if i != primary:
            others.setdefault(primary, set()).add(inputs[i].url)
    return {
        i: sorted(url for url in others.get(i, ()) if url and url != plan.canonical[i])
        for i in primary_of
    }


def primaries(
    inputs: list[PageInput], plan: AliasPlan, content_of: Callable[[int], str | None]
) -> dict[int, int]:
    """For each chunkable page, the page whose chunks stand for it: among pages with the same
    cleaned content, the one with the smallest canonical URL (stable from night to night).

    `content_of(i)` is page i's cleaned-content hash, None when it was quarantined.
    """
    groups: dict[str, list[int]] = {}
    for page in inputs:
        content_hash = content_of(page.index)
        if content_hash is not None:
            groups.setdefault(content_hash, []).append(page.index)
    primary_of = {}
    for members in groups.values():
        chosen = min(members, key=lambda i: (plan.canonical[i], i))
        primary_of.update((i, chosen) for i in members)
    return primary_of


def _emit_page(page, plan, result: PageChunks, alias_urls, seen, run) -> PageRecord:
    """Add a chunked page's kept chunks to the run (`chunk_rows.page_rows`: the rule and the
    rows the rebuild writes too), its repeats to the report; return its page record."""
    url = plan.canonical[page.index] or page.url
    text_hashes = [content_hash(draft.text) for draft in result.chunks]
    repeats, rows = page_rows(url, page.title, result.chunks, text_hashes, alias_urls, seen)
    kept = [Chunk.model_validate(row) for row in rows]
    kept_hashes = [
        key for key, earlier in zip(text_hashes, repeats, strict=True) if earlier is None
    ]
    seen.update(zip(kept_hashes, (chunk.chunk_id for chunk in kept), strict=True))
    run.report.duplicates.extend(
        duplicates_of(url, repeats, [draft.tokens for draft in result.chunks])
    )
    run.chunks.extend(kept)
    run.report.warnings.extend(f"{url}: {warning}" for warning in result.warnings)
    return chunked_record(page, plan, alias_urls, result, [c.metadata.token_count for c in kept])


class PageFigures(Protocol):
    """What a chunked page's record takes from its outcome (`PageChunks`, or the stored
    outcome an incremental run reads back)."""

    content_hash: str
    tokens_before: int
    tokens_after: int
    headings: list[tuple[int, str, int]]


def chunked_record(
    page: PageInput,
    plan: AliasPlan,
    alias_urls: list[str],
    figures: PageFigures,
    chunk_tokens: list[int],
) -> PageRecord:
    """The `pages.parquet` row of a chunked page, whose kept chunks have `chunk_tokens`.

    Made with `model_construct`, without pydantic's validation: every value comes from the
    chunker's own typed results, and validating a page's records, headings by the dozen,
    took 0.6 s of a 5,000-page rebuild.
    """
    return PageRecord.model_construct(
        url=page.url,
        canonical_url=plan.canonical[page.index] or page.url,
        page_title=page.title,
        status="chunked",
        aliases=alias_urls,
        raw_hash=plan.raw_hash[page.index],
        content_hash=figures.content_hash,
        tokens_before_cleanup=figures.tokens_before,
        tokens_after_cleanup=figures.tokens_after,
        chunk_count=len(chunk_tokens),
        chunk_tokens=sum(chunk_tokens),
        headings=[
            HeadingRecord.model_construct(level=lv, text=title, line=line)
            for lv, title, line in figures.headings
        ],
    )


def _quarantine(page, plan, outcome: PageOutcome, run: ChunkRun) -> PageRecord:
    record, page_record = quarantine_records(page, plan, outcome.reason, outcome.detail)
    run.quarantine.append(record)
    return page_record


def quarantine_records(
    page: PageInput, plan: AliasPlan, reason: str | None, detail: str | None
) -> tuple[QuarantineRecord, PageRecord]:
    """A quarantined page's record for `quarantine.jsonl` and its row in `pages.parquet`."""
    markdown = page.markdown if isinstance(page.markdown, str) else ""
    record = QuarantineRecord(
        url=page.url,
        reason=reason or "unknown",
        detail=detail,
        page_title=page.title,
        markdown_chars=len(markdown),
    )
    page_record = PageRecord(
        url=page.url,
        canonical_url=plan.canonical[page.index],
        page_title=page.title,
        status="quarantined",
        raw_hash=plan.raw_hash[page.index],
        content_hash="",
        quarantine_reason=reason,
    )
    return record, page_record


def alias_record(page: PageInput, plan: AliasPlan, primary: PageRecord) -> PageRecord:
    """The `pages.parquet` row of a URL that returned the same page as `primary`."""
    return PageRecord(
        url=page.url,
        canonical_url=plan.canonical[page.index],
        page_title=page.title,
        status="alias",
        alias_of=primary.canonical_url,
        raw_hash=plan.raw_hash[page.index],
        content_hash=primary.content_hash,
        tokens_before_cleanup=primary.tokens_before_cleanup,
        tokens_after_cleanup=primary.tokens_after_cleanup,
        headings=primary.headings,
    )


def _fill_report(run: ChunkRun, inputs, plan, outcomes, seconds: float) -> None:
    removed: dict[str, int] = {}
    for page, record in zip(inputs, run.pages, strict=True):  # run.pages is in input order
        if record.status != "chunked":
            continue
        outcome = outcomes[plan.same_as.get(page.index, page.index)]
        for rule, tokens in outcome.chunks.removed_tokens.items():
            removed[rule] = removed.get(rule, 0) + tokens
    token_counts = [c.metadata.token_count for c in run.chunks]
    fill_report(run.report, run.pages, len(run.quarantine), token_counts, removed, seconds)


def fill_report(
    report: ChunkReport,
    pages: list[PageRecord],
    quarantined: int,
    token_counts: list[int],
    removed: dict[str, int],
    seconds: float,
) -> None:
    """The report's figures, from the run's page records and its chunks' token counts."""
    chunked = [p for p in pages if p.status == "chunked"]
    report.pages_chunked = len(chunked)
    report.pages_aliased = sum(p.status == "alias" for p in pages)
    report.pages_quarantined = quarantined
    report.chunks_out = len(token_counts)
    report.duplicate_chunks_dropped = len(report.duplicates)
    report.tokens_before_cleanup = sum(p.tokens_before_cleanup for p in chunked)
    report.tokens_after_cleanup = sum(p.tokens_after_cleanup for p in chunked)
    report.tokens_in_chunks = sum(token_counts)
    report.cleanup_tokens_removed = removed
    report.aliases = {p.canonical_url: p.aliases for p in chunked if p.aliases}
    report.chunk_tokens = percentiles(token_counts)
    report.seconds = round(seconds, 3)


def percentiles(values: Iterable[int]) -> SizePercentiles:
    ordered = sorted(values)
    if not ordered:
        return SizePercentiles()

    def at(q: float) -> int:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    return SizePercentiles(
        p0=at(0), p5=at(0.05), p25=at(0.25), p50=at(0.5), p75=at(0.75), p95=at(0.95), p100=at(1)
    )


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()
