"""Site chrome: the lines a crawl repeats on most of its pages.

Navigation bars, breadcrumbs, sidebars, version lists and footers are the same lines on
page after page, which no single page can tell from content. So the crawl decides: a line
(stripped, outside fenced code) is a chrome line when it stands on more than `SHARE` of
the crawl's distinct pages, and the crawl has at least `MIN_PAGES` of them. Each page is
handed its own chrome lines; the page's clean-up (`site_chrome` in
`firechunk.chunker.cleanup`) decides which blocks of them to drop, so content that merely
repeats stays.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

MIN_PAGES = 10  # below this, how often a line recurs says nothing
SHARE = 0.5  # a chrome line stands on more than this share of the distinct pages

_FENCES = ("```", "~~~")


def chrome_lines(
    markdowns: Sequence[object], min_pages: int = MIN_PAGES, share: float = SHARE
) -> list[frozenset[str]]:
    """For each page, in order, the lines of it that are the crawl's chrome.

    Pages with the same markdown count once (a single-page app served at 49 URLs is one
    page). Lines are counted by hash in a first pass, so memory does not grow with the
    crawl's text; the second pass picks each page's chrome lines by their hash.
    """
    distinct = {markdown for markdown in markdowns if isinstance(markdown, str)}
    none: frozenset[str] = frozenset()
    if len(distinct) < min_pages:
        return [none] * len(markdowns)
    counts = Counter(
        key for markdown in distinct for key in {hash(line) for line in _lines(markdown)}
    )
    frequent = {key for key, pages in counts.items() if pages > share * len(distinct)}
    if not frequent:
        return [none] * len(markdowns)
    found: dict[str, frozenset[str]] = {}
    for markdown in distinct:
        found[markdown] = frozenset(line for line in _lines(markdown) if hash(line) in frequent)
    return [
        found.get(markdown, none) if isinstance(markdown, str) else none for markdown in markdowns
    ]


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
