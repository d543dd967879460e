"""Site chrome: the lines a crawl repeats on most of its pages.

Navigation bars, breadcrumbs, sidebars, version lists and footers are the same lines on
page after page, which no single page can tell from content. So the crawl decides: a line
(stripped, outside fenced code) is a chrome line when it stands on more than `SHARE` of
the crawl's distinct pages, and the crawl has at least `MIN_PAGES` of them. Each page is
handed its own chrome lines; the page's clean-up (`site_chrome` in
`firechunk.chunker.cleanup`) decides which blocks of them to drop, so content that merely
repeats stays.

The crawl is read twice: once to count the lines of each distinct page (`LineCounts`, by
hash), once to hand each page its chrome lines (`Chrome.lines_of`).
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

MIN_PAGES = 10  # below this, how often a line recurs says nothing
SHARE = 0.5  # a chrome line stands on more than this share of the distinct pages

_FENCES = ("```", "~~~")

# The line hashes are kept in this many arrays, by hash, so that each is counted on its
# own: a crawl has about a hundred distinct lines a page, and a dict entry for each of
# them would take a hundred bytes where an array's takes eight.
_BUCKETS = 256


class LineCounts:
    """On how many distinct pages each line stands, by the line's hash."""

    def __init__(self) -> None:
        self.pages = 0
        self._buckets = [array("q") for _ in range(_BUCKETS)]

    def add(self, markdown: str) -> None:
        """Count the lines of one more distinct page, each line once."""
        self.pages += 1
        for key in {hash(line) for line in _lines(markdown)}:
            self._buckets[key % _BUCKETS].append(key)

    def chrome(self, min_pages: int = MIN_PAGES, share: float = SHARE) -> Chrome:
        """The lines standing on more than `share` of the pages, when there are `min_pages`."""
        if self.pages < min_pages:
            return Chrome(frozenset())
        frequent: set[int] = set()
        for bucket in self._buckets:
            frequent.update(
                key for key, pages in Counter(bucket).items() if pages > share * self.pages
            )
        return Chrome(frozenset(frequent))


@dataclass(frozen=True)
class Chrome:
    """A crawl's chrome lines, by hash: in this process only (a `str` hash is salted)."""

    frequent: frozenset[int]

    def lines_of(self, markdown: object) -> frozenset[str]:
        """The lines of a page that are the crawl's chrome."""
        if not self.frequent or not isinstance(markdown, str):
            return frozenset()
        return frozenset(line for line in _lines(markdown) if hash(line) in self.frequent)


def chrome_lines(
    markdowns: Sequence[object], min_pages: int = MIN_PAGES, share: float = SHARE
) -> list[frozenset[str]]:
    """For each page, in order, the lines of it that are the crawl's chrome. Pages with the
    same markdown count once (a single-page app served at 49 URLs is one page)."""
    counts = LineCounts()
    for markdown in {markdown for markdown in markdowns if isinstance(markdown, str)}:
        counts.add(markdown)
    chrome = counts.chrome(min_pages, share)
    return [chrome.lines_of(markdown) for markdown in markdowns]


def _lines(markdown: str) -> Iterator[str]:
    """The page's stripped, non-blank lines outside fenced code."""
    fence: str | None = None
    for raw in markdown.split("\n"):
        line = raw.strip()
        if not line:
            continue
        if line.startswith(_FENCES):
            marks = line[: len(line) - len(line.lstrip(line[0]))]
            if fence is None:
                fence = marks
            elif line == len(line) * fence[0] and len(marks) >= len(fence):
                fence = None
            continue
        if fence is None:
            yield line
