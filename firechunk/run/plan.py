"""A crawl as the chunker takes it: one input per page, which pages to chunk, in batches.

Pages are numbered in crawl order. Markdown identical to a page before it is not chunked
again, and a page quarantined whatever its content (its URL or title is unusable:
`firechunk.run.titles.page_problem`) is not chunked at all (`plan_pages`); the rest are
cut into batches of about equal size for the executor (`make_batches`).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace

from firechunk.run.chrome import chrome_lines
from firechunk.run.titles import clean_title, title_problem
from firechunk.schemas.page import CrawlResult
from firechunk.urls import canonical_url, url_problem


@dataclass(frozen=True)
class PageInput:
    index: int
    url: str
    title: str
    markdown: object
    # The lines of this page that are the site's chrome (`firechunk.run.chrome`): decided
    # across the crawl, removed by the page's clean-up.
    chrome: frozenset[str] = frozenset()
    # Whether the crawl got this same markdown at other URLs too: one page (a single-page
    # app) that each URL names a section of (set by `plan_pages`).
    many_urls: bool = False


def page_inputs(crawl: CrawlResult) -> list[PageInput]:
    """The crawl's pages as the chunker takes them, numbered in crawl order, each with the
    lines the crawl shows to be site chrome. A page without a title is titled by its URL."""
    chrome = chrome_lines([page.markdown for page in crawl.data])
    return [
        PageInput(
            i, page.url, clean_title(page.metadata.title) or page.url, page.markdown, chrome[i]
        )
        for i, page in enumerate(crawl.data)
    ]


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


@dataclass(frozen=True)
class PlannedPage:
    """A crawled page as assembly needs it, once the plan has decided who chunks it.

    `chunked_as` is the index of the page whose outcome stands for this one: itself, or the
    first page with the same canonical URL or identical markdown; `NOT_CHUNKED` for a page
    quarantined whatever its content (`firechunk.run.titles.page_problem`). Small, with no
    markdown, so a run's plan is kept in its page cache and handed from stage to stage there.
    """

    index: int
    url: str
    title: str
    canonical: str
    raw_hash: str  # sha256 of the markdown as crawled
    chunked_as: int
    markdown_chars: int


@dataclass(frozen=True)
class Plan:
    """Every page of the crawl (`pages`) and the ones to chunk (`to_chunk`, crawl order)."""

    pages: list[PlannedPage]
    to_chunk: list[PageInput]


NOT_CHUNKED = -1  # `PlannedPage.chunked_as` of a page no outcome stands for


def plan_pages(inputs: list[PageInput]) -> Plan:
    """Chunk one page per identical markdown: the first in crawl order. Two pages at one
    canonical URL with different markdown are both chunked; assembly keeps the last
    (`firechunk.run.assemble.duplicate_urls`).

    A page with an unusable URL or title is not chunked and stands for no other page: its
    title would otherwise reach the chunks of a page with the same markdown (as their `h1`
    when the page has none), and the chunks of such a page are never published."""
    urls_by_markdown: dict[str, set[str]] = {}
    first_by_markdown: dict[str, int] = {}
    pages, to_chunk = [], []
    for page in inputs:
        bad_url = url_problem(page.url)
        canonical = "" if bad_url else canonical_url(page.url)
        markdown = page.markdown if isinstance(page.markdown, str) else repr(page.markdown)
        raw_hash = _sha256(markdown)
        size = len(page.markdown) if isinstance(page.markdown, str) else 0
        known = NOT_CHUNKED
        if not (bad_url or title_problem(page.title, page.url)):
            # The same markdown: one outcome stands for both.
            known = first_by_markdown.setdefault(raw_hash, page.index)
            urls_by_markdown.setdefault(raw_hash, set()).add(canonical)
            if known == page.index:
                to_chunk.append(page)
        pages.append(
            PlannedPage(page.index, page.url, page.title, canonical, raw_hash, known, size)
        )
    many = {raw for raw, urls in urls_by_markdown.items() if len(urls) > 1}
    to_chunk = [
        replace(page, many_urls=True) if pages[page.index].raw_hash in many else page
        for page in to_chunk
    ]
    return Plan(pages, to_chunk)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()
