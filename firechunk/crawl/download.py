"""Downloading a finished job's results page by page into pages.jsonl, resumable at any point.

Each result page is appended to pages.jsonl and flushed to disk, then the job state records
the new file size and the `next` cursor. That order makes a crash harmless: on resume the
file is cut back to the size the state vouches for, and the download goes on from the saved
cursor, so no page is stored twice and no page already saved is fetched again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from firechunk.crawl.client import StatusPage
from firechunk.crawl.errors import CrawlError, DownloadError
from firechunk.schemas.job import CrawlJobState

TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})


class PageLog:
    """pages.jsonl: one Firecrawl page per line, trusted up to the size the job state records."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def size(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def cut_back_to(self, committed_bytes: int) -> None:
        """Drop a batch appended after the last saved state: it will be downloaded again."""
        size = self.size()
        if size < committed_bytes:
            raise CrawlError(
                f"{self.path} holds {size} bytes but the job state vouches for "
                f"{committed_bytes}: the file was changed outside firechunk"
            )
        if size > committed_bytes:
            with open(self.path, "r+b") as handle:
                handle.truncate(committed_bytes)
                os.fsync(handle.fileno())

    def append(self, pages: Iterable[dict[str, Any]]) -> int:
        """Append pages, flush them to disk, and return the file's new size."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab") as handle:
            for page in pages:
                handle.write(json.dumps(page, ensure_ascii=False).encode("utf-8") + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
            return handle.tell()

    def pages(self) -> Iterator[dict[str, Any]]:
        """Every page, read a line at a time (a crawl's pages are not held whole); a line
        that is not a JSON object is an error naming the line."""
        if not self.path.exists():
            return
        with open(self.path, encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    yield self._page(line, number)

    def count(self) -> int:
        """The pages in the file, read as `pages` reads them."""
        return sum(1 for _ in self.pages())

    def _page(self, line: str, number: int) -> dict[str, Any]:
        try:
            page = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as error:
            page = error
        if not isinstance(page, dict):
            raise CrawlError(
                f"{self.path}, line {number}: not a page ({str(page)[:80]}); the file was "
                "changed outside firechunk: delete its folder and crawl again (--recrawl)"
            )
        return page


def check_result_page(page: StatusPage, cursor: str | None) -> None:
    """Refuse a result page that would lose or repeat pages if it were followed."""
    where = cursor or "the first result page"
    if page.status not in TERMINAL_STATUSES:
        raise DownloadError(f"{where}: the job is '{page.status}' again while its results are read")
    if page.next and page.next == cursor:
        raise DownloadError(f"{where}: the page's `next` link points back at itself")


def download_results(
    state: CrawlJobState,
    log: PageLog,
    fetch_first: Callable[[], StatusPage],
    fetch_next: Callable[[str], StatusPage],
    save: Callable[[CrawlJobState], None],
    report: Callable[[str], None],
    first_page: StatusPage | None = None,
) -> None:
    """Follow `next` from the saved cursor to the last result page, committing each batch.

    `first_page` is the final status answer of the poll, which already carries the first
    result page; it is used only when nothing has been saved yet. An empty page ends the
    download even if it has a `next` link, as in both firecrawl-py clients; the count
    check against `total` that follows tells whether pages are missing.
    """
    log.cut_back_to(state.saved_bytes)
    page = first_page if state.cursor is None and state.pages_saved == 0 else None
    while True:
        if page is None:
            page = fetch_first() if state.cursor is None else fetch_next(state.cursor)
        check_result_page(page, state.cursor)
        last = not page.next or not page.pages
        state.saved_bytes = log.append(page.pages)
        state.pages_saved += len(page.pages)
        state.cursor = None if last else page.next
        if last:
            state.status = "downloaded"
        save(state)
        report(f"saved {state.pages_saved}/{state.total} pages")
        if last:
            return
        page = None
