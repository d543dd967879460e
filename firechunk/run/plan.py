"""A crawl as the chunker takes it: which pages to chunk, one input per page, in batches.

The crawl is read a page at a time, twice (a crawl file is never held whole,
`firechunk.crawlfile.CrawlReader`). The first reading plans it (`plan_crawl`): pages are
numbered in crawl order, markdown identical to a page before it is not chunked again, a
page quarantined whatever its content (its URL or title is unusable:
`firechunk.run.titles.page_problem`) is not chunked at all, and the lines of each distinct
page are counted for the crawl's chrome (`firechunk.run.chrome`). The second gives the
pages to chunk as the chunker takes them (`page_inputs`), cut into batches of about equal
size for the executor (`make_batches`). The plan keeps no markdown: a few hundred bytes a
page.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass

from firechunk.crawlfile import CrawlFileError
from firechunk.run.chrome import Chrome, LineCounts
from firechunk.run.titles import clean_title, title_problem
from firechunk.schemas.page import CrawledPage
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
    # app) that each URL names a section of (set by the plan).
    many_urls: bool = False


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
    return _chars(len(page.markdown) if isinstance(page.markdown, str) else 0)


def _chars(markdown_chars: int) -> int:
    """A page's size for batches: its characters, at least 1 (what has none still costs)."""
    return max(1, markdown_chars)


# The most characters one batch gets: about 8 s of chunking on one core of the 2-core
# machine, so progress moves at least that often on any crawl.
MAX_BATCH_CHARS = 8_000_000


def make_batches(pages: Iterable[PageInput], workers: int, total: int) -> Iterator[list[PageInput]]:
    """Batches of about equal characters, as `pages` (of `total` characters: `characters`,
    `Plan.characters`) come: two per worker, more for a crawl so large that they would
    exceed `MAX_BATCH_CHARS`, always a multiple of `workers`.

    Each batch is one Prefect task run, and task runs cost Prefect's bookkeeping beyond
    their work: in the process pool on the 2-core machine, 8 no-op task runs on 2 workers
    took 1.5 s, 4 took 0.9 s. Two batches per worker still let one worker take a batch
    while the other finishes a longer one.
    """
    workers = max(1, workers)
    total = max(1, total)
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


NOT_CHUNKED = -1  # `PlannedPage.chunked_as` of a page no outcome stands for


@dataclass(frozen=True)
class Plan:
    """Every page of the crawl (`pages`), the ones to chunk (`to_chunk`, indexes in crawl
    order), those of them the crawl got at other URLs too (`many_urls`), and the crawl's
    chrome lines."""

    pages: list[PlannedPage]
    to_chunk: list[int]
    many_urls: frozenset[int]
    chrome: Chrome

    def characters(self, indexes: Iterable[int]) -> int:
        """The size of these pages' markdown, as `characters` counts it."""
        return sum(_chars(self.pages[index].markdown_chars) for index in indexes)


def plan_crawl(pages: Iterable[CrawledPage]) -> Plan:
    """Chunk one page per identical markdown: the first in crawl order. Two pages at one
    canonical URL with different markdown are both chunked; assembly keeps the last
    (`firechunk.run.assemble.duplicate_urls`).

    A page with an unusable URL or title is not chunked and stands for no other page: its
    title would otherwise reach the chunks of a page with the same markdown (as their `h1`
    when the page has none), and the chunks of such a page are never published. Its lines
    still count for the crawl's chrome, as every distinct page's do."""
    urls_by_markdown: dict[str, set[str]] = {}
    first_by_markdown: dict[str, int] = {}
    counted: set[str] = set()  # the markdown (by hash) whose lines are counted
    lines = LineCounts()
    planned, to_chunk = [], []
    for index, page in enumerate(pages):
        title = _title(page)
        bad_url = url_problem(page.url)
        canonical = "" if bad_url else canonical_url(page.url)
        raw_hash = _raw_hash(page.markdown)
        if isinstance(page.markdown, str) and raw_hash not in counted:
            counted.add(raw_hash)
            lines.add(page.markdown)
        size = len(page.markdown) if isinstance(page.markdown, str) else 0
        known = NOT_CHUNKED
        if not (bad_url or title_problem(title, page.url)):
            # The same markdown: one outcome stands for both.
            known = first_by_markdown.setdefault(raw_hash, index)
            urls_by_markdown.setdefault(raw_hash, set()).add(canonical)
            if known == index:
                to_chunk.append(index)
        planned.append(PlannedPage(index, page.url, title, canonical, raw_hash, known, size))
    many = {raw for raw, urls in urls_by_markdown.items() if len(urls) > 1}
    many_urls = frozenset(index for index in to_chunk if planned[index].raw_hash in many)
    return Plan(planned, to_chunk, many_urls, lines.chrome())


def page_inputs(
    pages: Iterable[CrawledPage], plan: Plan, indexes: Collection[int]
) -> Iterator[PageInput]:
    """The pages of `indexes` as the chunker takes them, in crawl order, each with the
    lines the crawl shows to be site chrome. `pages` is the crawl `plan` was made of, read
    again: a page that is not the one planned (the crawl file changed in between) is an
    error, not chunks of another page under the plan's URL."""
    wanted = set(indexes)
    count = 0
    for index, page in enumerate(pages):
        planned = plan.pages[index] if index < len(plan.pages) else None
        if planned is None or planned.raw_hash != _raw_hash(page.markdown):
            raise _changed(index)
        count += 1
        if index in wanted:
            chrome = plan.chrome.lines_of(page.markdown)
            many = index in plan.many_urls
            yield PageInput(index, planned.url, planned.title, page.markdown, chrome, many)
    if count != len(plan.pages):
        raise _changed(count)


def _changed(index: int) -> CrawlFileError:
    return CrawlFileError(
        f"the crawl changed while it was chunked: its page {index + 1} is not the one "
        "planned (the file was written again?); chunk it again"
    )


def _title(page: CrawledPage) -> str:
    """A page's title; a page without one is titled by its URL."""
    return clean_title(page.metadata.title) or page.url


def _raw_hash(markdown: object) -> str:
    """The sha256 of a page's markdown as crawled (of its `repr` when it is not text)."""
    return _sha256(markdown if isinstance(markdown, str) else repr(markdown))


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()
