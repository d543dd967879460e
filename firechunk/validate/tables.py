"""The three tables the expectation suites check, derived from a chunking run.

GX expectations test the values of columns. Several checks the user asked for need a value
computed across rows (a token recount, whether a chunk's `prev_chunk_id` is a chunk of the
same page, whether a heading is covered by some chunk, how many of a page's tokens ended
up in chunks). Those values are computed here as plain columns with obvious meanings; every
threshold and allowed value lives in the suite files in `expectations/`, never here.

The tables are built (`TableBuilder`) from `ChunkFacts` (`firechunk.validate.facts`), one per
chunk: what the suites need to know about a chunk, without its text; from the pages'
records; and from the dropped duplicates. A run held in memory (`ChunkRun`) gives its facts
through `chunk_facts`; a written run (`firechunk.run.assemble`) hands the builder the same
facts for each page's chunks as it writes them, with the text-derived ones (recount, text
hash, heading lines) computed where the chunk was made, by the same functions, so both
check the same values.

Tables (one per suite, the suite's `name` is the table's name):
- `chunks`: one row per chunk.
- `pages`: one row per crawled URL (`PageRecord`), with what the chunks say about it.
- `headers`: one row per H1/H2 of every page, with how (or whether) a chunk covers it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import NamedTuple

import polars as pl

from firechunk.atomic import atomic_write
from firechunk.chunker.headings import heading_key
from firechunk.layout import RunDir
from firechunk.schemas.chunk import Checked, chunk_leaves
from firechunk.schemas.parquet import PARQUET_COMPRESSION, ROWS_PER_GROUP
from firechunk.schemas.report import ChunkRun, DuplicateChunk, PageRecord
from firechunk.tokens import TokenCounter
from firechunk.validate.facts import ChunkFacts, chunk_facts

# Columns named in failure examples, so a failing row can be found in the outputs.
ID_COLUMNS: dict[str, list[str]] = {
    "chunks": ["chunk_id", "sourceUrl", "chunk_index"],
    "pages": ["url", "status"],
    "headers": ["url", "level", "heading"],
}

# The column of each table that names the page a row belongs to (`chunks`: the canonical URL
# of the chunked page; `pages` and `headers`: the URL as crawled).
PAGE_URL_COLUMN = {"chunks": "sourceUrl", "pages": "url", "headers": "url"}

# The chunks table: the chunk's fields marked `Checked` (`schemas.chunk`), under their JSON
# keys, then the values computed from its text where it was made (`ChunkFacts`), then the
# one computed across rows.
CHECKED_FIELDS = [leaf for leaf in chunk_leaves() if leaf.marker(Checked)]
FACT_CHUNK_COLUMNS = [leaf.key for leaf in CHECKED_FIELDS] + ["token_recount", "text_hash"]
CHUNK_COLUMNS = [*FACT_CHUNK_COLUMNS, "prev_chunk_link"]
PAGE_COLUMNS = [
    "url",
    "canonical_url",
    "status",
    "alias_of",
    "alias_target_status",
    "content_hash",
    "tokens_after_cleanup",
    "chunk_count",
    "chunks_found",
    "duplicate_chunks_dropped",
    "chunk_tokens_found",
    "dropped_duplicate_tokens",
    "token_gap",
    "token_ratio",
]
# The headers table: each heading as its page's record gives it, then how it is covered.
HEADING_COLUMNS = ["url", "status", "level", "heading", "line"]
HEADER_COLUMNS = [*HEADING_COLUMNS, "coverage"]


def build_tables(run: ChunkRun, counter: TokenCounter) -> dict[str, pl.DataFrame]:
    """Every table the suites check, keyed by suite name."""
    tables = TableBuilder()
    tables.add_chunks(chunk_facts(chunk, counter) for chunk in run.chunks)
    for page in run.pages:
        tables.add_page(page)
    tables.add_duplicates(run.report.duplicates)
    return dict(tables.tables())


Columns = dict[str, list]


class TableBuilder:
    """The three tables, gathered as a run is assembled, in any order: chunk facts, page
    records, dropped duplicates; `tables()` once all are in.

    What a row needs of other rows (the page of a chunk's `prev_chunk_id`, the chunks and
    dropped chunks at a page's URLs, the headers and heading lines that cover a heading)
    is kept by URL or chunk id as it comes, and each such column is filled in at the end.
    So a run holds columns and each chunk's row number by URL and id, not every page's
    record and every chunk's facts: a 20,000-page run's are tens of MB, not hundreds.

    A broken run may repeat chunk ids (chunk_id_unique reports that): each chunk is still
    its own row with its own recount; the last of an id stands for it where it is looked
    up, as in a dict.
    """

    def __init__(self) -> None:
        self._chunks: Columns = {name: [] for name in [*FACT_CHUNK_COLUMNS, "prev_chunk_id"]}
        # Each chunk row's heading lines, one per line of one string: a string per line and
        # a tuple per chunk took three times the memory.
        self._heading_lines: list[str] = []
        self._row_of: dict[str, int] = {}  # chunk id -> its row
        self._rows_at: dict[str, list[int]] = {}  # URL -> the rows of the chunks there
        self._dropped: dict[str, list[DuplicateChunk]] = {}  # URL -> chunks dropped there
        self._pages: list[_Page] = []
        self._headings: Columns = {name: [] for name in ["page", *HEADING_COLUMNS]}
        self._taken = False

    def add_chunks(self, facts: Iterable[ChunkFacts]) -> None:
        for chunk in facts:
            if chunk.token_recount is None:
                raise ValueError(
                    f"chunk {chunk.chunk_id} was not recounted: the run has no validation facts"
                )
            row = len(self._heading_lines)
            for leaf in CHECKED_FIELDS:
                self._chunks[leaf.key].append(getattr(chunk, leaf.name))
            self._chunks["token_recount"].append(chunk.token_recount)
            self._chunks["text_hash"].append(chunk.text_hash)
            self._chunks["prev_chunk_id"].append(chunk.prev_chunk_id)
            self._heading_lines.append("\n".join(chunk.heading_lines))
            self._row_of[chunk.chunk_id] = row
            self._rows_at.setdefault(chunk.source_url, []).append(row)

    def add_page(self, page: PageRecord) -> None:
        number = len(self._pages)
        self._pages.append(
            _Page(
                page.url,
                page.canonical_url,
                page.status,
                page.alias_of,
                page.content_hash,
                page.tokens_after_cleanup,
                page.chunk_count,
            )
        )
        for heading in page.headings:
            for name, value in zip(
                self._headings,
                (number, page.url, page.status, heading.level, heading.text, heading.line),
                strict=True,
            ):
                self._headings[name].append(value)

    def add_duplicates(self, duplicates: Iterable[DuplicateChunk]) -> None:
        for duplicate in duplicates:
            self._dropped.setdefault(duplicate.source_url, []).append(duplicate)

    def tables(self) -> Iterator[tuple[str, pl.DataFrame]]:
        """Each table with its suite's name, once all is in; the chunks table last.

        One table at a time, each made from columns the builder hands over, so a run
        does not hold a table's Python columns beside its frame, nor all three frames at
        once. The builder is empty after, and says so if asked again."""
        if self._taken:
            raise RuntimeError("the tables were already taken from this builder")
        self._taken = True
        targets = self._targets()
        yield "headers", _frame(self._header_columns(targets), HEADER_COLUMNS)
        yield "pages", _frame(self._page_columns(targets), PAGE_COLUMNS)
        del targets
        self._pages, self._rows_at, self._dropped, self._heading_lines = [], {}, {}, []
        yield "chunks", _frame(self._chunk_columns(), CHUNK_COLUMNS)

    def _chunk_columns(self) -> Columns:
        columns, self._chunks = self._chunks, {}
        prev_ids = columns.pop("prev_chunk_id")
        urls = columns["sourceUrl"]
        page_of = {chunk_id: urls[row] for chunk_id, row in self._row_of.items()}
        self._row_of = {}
        columns["prev_chunk_link"] = [
            prev_chunk_link(prev_id, url, page_of)
            for prev_id, url in zip(prev_ids, urls, strict=True)
        ]
        return columns

    def _targets(self) -> list[_Page | None]:
        """For each page, the page whose chunks stand for it: itself, or the page it is an
        alias of. A URL variant of a page (an alias) shares its canonical URL: the chunked
        page must win that key, whatever the crawl order."""
        by_url: dict[str, _Page] = {}
        for page in sorted(self._pages, key=lambda page: page.status != "chunked"):
            by_url.setdefault(page.canonical_url, page)
            by_url.setdefault(page.url, page)
        return [
            by_url.get(page.alias_of or "") if page.status == "alias" else page
            for page in self._pages
        ]

    def _urls(self, target: _Page | None) -> tuple[str, ...]:
        """Where the chunks of `target` are: its URL, and its canonical URL when another."""
        if target is None:
            return ()
        if target.canonical_url == target.url:
            return (target.url,)
        return (target.url, target.canonical_url)

    def _page_columns(self, targets: list[_Page | None]) -> Columns:
        """One row per page. Tokens are accounted for with recounted chunk tokens.

        Recounts, not the chunks' declared `token_count`: a wrong count is the chunks
        suite's finding; here the question is whether the page's text made it into chunks.
        Chunks dropped as duplicates of another page's chunk still account for their page's
        text.
        """
        columns: Columns = {name: [] for name in PAGE_COLUMNS}
        recounts = self._chunks["token_recount"]
        for page, target in zip(self._pages, targets, strict=True):
            urls = self._urls(target)
            rows = [row for url in urls for row in self._rows_at.get(url, [])]
            dropped = [d for url in urls for d in self._dropped.get(url, [])]
            found_tokens = sum(recounts[row] for row in rows)
            dropped_tokens = sum(duplicate.token_count for duplicate in dropped)
            accounted = found_tokens + dropped_tokens
            tokens = page.tokens_after_cleanup
            row = {
                "url": page.url,
                "canonical_url": page.canonical_url,
                "status": page.status,
                "alias_of": page.alias_of,
                "alias_target_status": _alias_target_status(page, target),
                "content_hash": page.content_hash,
                "tokens_after_cleanup": tokens,
                "chunk_count": page.chunk_count,
                "chunks_found": len(rows),
                "duplicate_chunks_dropped": len(dropped),
                "chunk_tokens_found": found_tokens,
                "dropped_duplicate_tokens": dropped_tokens,
                "token_gap": accounted - tokens,
                "token_ratio": accounted / tokens if tokens else None,
            }
            for name, value in row.items():
                columns[name].append(value)
        return columns

    def _header_columns(self, targets: list[_Page | None]) -> Columns:
        """One row per H1/H2 of every page, and how the chunks of its target cover it:
        'headers' (a chunk's h1 or h2 is the heading), 'text' (a heading line of it is in a
        chunk's text, or in the earlier chunk a dropped chunk of the page repeats: their
        headers are their own page's, so only their lines count), 'missing', or
        'page_quarantined'."""
        columns, self._headings = self._headings, {}
        # A page's headings come together: what covers them is kept for one target at a time.
        covered_target = -1
        covered: tuple[set, set[str]] = (set(), set())
        coverage = []
        for number, status, level, text in zip(
            columns.pop("page"), columns["status"], columns["level"], columns["heading"],
            strict=True,
        ):  # fmt: skip
            if status == "quarantined":
                coverage.append("page_quarantined")
                continue
            target = targets[number]
            if id(target) != covered_target:
                covered_target, covered = id(target), self._covered(target)
            named, lines = covered
            if (level, text) in named:
                coverage.append("headers")
            else:
                coverage.append("text" if heading_key(text) in lines else "missing")
        columns["coverage"] = coverage
        return columns

    def _covered(self, target: _Page | None) -> tuple[set, set[str]]:
        """The (level, header) pairs of the chunks at `target`'s URLs, and the heading lines
        of those chunks and of the chunks its dropped chunks repeat."""
        urls = self._urls(target)
        rows = [row for url in urls for row in self._rows_at.get(url, [])]
        h1, h2 = self._chunks["h1"], self._chunks["h2"]
        named = {(1, h1[row]) for row in rows} | {(2, h2[row]) for row in rows}
        repeated = [
            self._row_of[duplicate.duplicate_of]
            for url in urls
            for duplicate in self._dropped.get(url, [])
            if duplicate.duplicate_of in self._row_of
        ]
        lines = {
            line for row in rows + repeated for line in self._heading_lines[row].split("\n") if line
        }
        return named, lines


class _Page(NamedTuple):
    """What the tables need of a page's record: the record without its headings."""

    url: str
    canonical_url: str
    status: str
    alias_of: str | None
    content_hash: str
    tokens_after_cleanup: int
    chunk_count: int


def _frame(columns: Columns, names: list[str]) -> pl.DataFrame:
    """A table built column by column (a dict per row took several times the memory of
    the columns), each Python list let go once it is a column. Every column of `names`
    is there, so an empty run fails on row counts, not on a confusing "column does not
    exist"."""
    return pl.DataFrame([pl.Series(name, columns.pop(name, []), strict=False) for name in names])


def prev_chunk_link(prev_id: str | None, url: str, page_of: dict[str, str]) -> str:
    """'none', 'same_page', 'other_page' or 'unknown_chunk' (not a chunk of this run)."""
    if prev_id is None:
        return "none"
    if prev_id not in page_of:
        return "unknown_chunk"
    return "same_page" if page_of[prev_id] == url else "other_page"


def _alias_target_status(page: _Page, target: _Page | None) -> str | None:
    """For an alias page, the status of the page it points at ('missing' if none)."""
    if page.status != "alias":
        return None
    return target.status if target is not None else "missing"


def write_tables(run_dir: Path, tables: Iterable[tuple[str, pl.DataFrame]]) -> list[Path]:
    """Each table as `<run-dir>/validation/tables/<name>.parquet`, what the validate stage
    reads: the tables are built where the run is assembled, checked in another task.
    Each is let go once written, before the next is made (`TableBuilder.tables`)."""
    paths = []
    for name, table in tables:
        path = RunDir(run_dir).table(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        write = partial(
            table.write_parquet, compression=PARQUET_COMPRESSION, row_group_size=ROWS_PER_GROUP
        )
        paths.append(atomic_write(path, write))
        del table
    return paths


class TableFiles(Mapping[str, pl.DataFrame]):
    """The run's tables, as `write_tables` wrote them, each read when it is asked for:
    validation then holds one table at a time, not all three for every suite."""

    def __init__(self, run_dir: Path) -> None:
        self._run = RunDir(run_dir)

    def __getitem__(self, name: str) -> pl.DataFrame:
        path = self._run.table(name)
        if not path.is_file():
            raise KeyError(name)
        return pl.read_parquet(path)

    def __iter__(self) -> Iterator[str]:
        return (path.stem for path in sorted(self._run.tables_dir.glob("*.parquet")))

    def __len__(self) -> int:
        return sum(1 for _ in self)
