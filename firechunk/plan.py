"""A crawl as the chunker takes it: one input per page, which pages to chunk, in batches.

Pages are numbered in crawl order. A URL that canonicalises to one chunked before it, or
markdown identical to a page before it, is not chunked again (`AliasPlan`); the rest are
cut into batches of about equal size for the executor (`make_batches`).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass

from firechunk.chrome import chrome_lines
from firechunk.urls import canonical_url
from schemas.page import CrawlResult


@dataclass(frozen=True)
class PageInput:
    index: int
    url: str
    title: str
    markdown: object
    # The lines of this page that are the site's chrome (`firechunk.chrome`): decided
    # across the crawl, removed by the page's clean-up.
    chrome: frozenset[str] = frozenset()


def page_inputs(crawl: CrawlResult) -> list[PageInput]:
    """The crawl's pages as the chunker takes them, numbered in crawl order, each with the
    lines the crawl shows to be site chrome."""
    chrome = chrome_lines([page.markdown for page in crawl.data])
    return [
        PageInput(i, page.url, page.metadata.title or page.url, page.markdown, chrome[i])
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


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()
