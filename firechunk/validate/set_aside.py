"""Which pages a failed validation sets aside, so that one bad page costs that page only.

An expectation marked `meta.page_scoped` in its suite file checks something of each page
(its chunks' limits and recounts, its headings' coverage, its tokens in chunks): its
failing rows name pages. When every failed expectation is page-scoped and the pages they
name are at most `max_failed_pages` (a share of the run's pages), those pages are set
aside: quarantined with the expectation as reason, the last good run's chunks for them
carried forward (`firechunk.run.assemble`), and the run written and validated again. Any
other failure, or more pages than that, fails the run as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from firechunk.words import counted

if TYPE_CHECKING:  # only the validate stage needs these
    import polars as pl

    from firechunk.schemas.validation import ValidationOutcome


@dataclass(frozen=True)
class SetAside:
    """The verdict on a failed validation: the pages to set aside, or why it cannot be."""

    pages: dict[str, tuple[str, ...]] = field(default_factory=dict)  # canonical URL -> names
    refused: str | None = None


def pages_to_set_aside(
    outcome: ValidationOutcome, pages_table: pl.DataFrame, max_share: float
) -> SetAside:
    """The pages the failed expectations of `outcome` belong to, by canonical URL, when
    every failure belongs to pages and they are few enough; else why not."""
    failed = outcome.failed
    if not failed:
        return SetAside()
    run_level = [f"{item.suite}/{item.name}" for item in failed if not item.failed_urls]
    if run_level:
        return SetAside(refused=f"run-level expectations failed: {', '.join(run_level)}")
    page_of = _chunked_page_of(pages_table)
    pages: dict[str, list[str]] = {}
    for item in failed:
        for url in item.failed_urls:
            page = page_of.get(url)
            if page is None:
                return SetAside(refused=f"{item.suite}/{item.name} failed on {url}, not a page")
            names = pages.setdefault(page, [])
            if item.name not in names:
                names.append(item.name)
    allowed = math.floor(max_share * pages_table.height + 1e-9)
    if len(pages) > allowed:
        return SetAside(
            refused=f"{counted(len(pages), 'page')} failed page-level expectations, more than "
            f"max_failed_pages allows ({max_share:.1%} of {counted(pages_table.height, 'page')} "
            f"= {allowed})"
        )
    return SetAside(pages={url: tuple(names) for url, names in pages.items()})


def _chunked_page_of(pages_table: pl.DataFrame) -> dict[str, str]:
    """Any URL a table row may name (as crawled, canonical) -> the canonical URL of the
    chunked page whose chunks stand for it (an alias's is the page it is an alias of)."""
    rows = pages_table.select("url", "canonical_url", "status", "alias_of").rows()
    page_of: dict[str, str] = {}
    for url, canonical, status, _alias_of in rows:
        if status == "chunked":
            page_of[url] = page_of[canonical] = canonical
    for url, _canonical, status, alias_of in rows:
        if status == "alias" and alias_of in page_of:
            page_of.setdefault(url, page_of[alias_of])
    return page_of
