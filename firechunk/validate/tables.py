"""The three tables the expectation suites check, derived from a chunking run.

GX expectations test the values of columns. Several checks the user asked for need a value
computed across rows (a token recount, whether a chunk's `prev_chunk_id` is a chunk of the
same page, whether a heading is covered by some chunk, how many of a page's tokens ended
up in chunks). Those values are computed here as plain columns with obvious meanings; every
threshold and allowed value lives in the suite files in `expectations/`, never here.

The tables are built from `ChunkFacts` (`firechunk.validate.facts`), one per chunk: what the
suites need to know about a chunk, without its text. A run held in memory (`ChunkRun`) gives
its facts through `chunk_facts`; a written run (`firechunk.run.assemble`) keeps the same facts
for the chunks it wrote, with the text-derived ones (recount, text hash, heading lines)
computed where the chunk was made, by the same functions, so both check the same values.

Tables (one per suite, the suite's `name` is the table's name):
- `chunks`: one row per chunk.
- `pages`: one row per crawled URL (`PageRecord`), with what the chunks say about it.
- `headers`: one row per H1/H2 of every page, with how (or whether) a chunk covers it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import polars as pl

from firechunk.atomic import atomic_write
from firechunk.chunker.headings import heading_key
from firechunk.layout import RunDir
from firechunk.schemas.chunk import Checked, chunk_leaves
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
# keys, then the values computed across rows (`chunk_columns`).
CHECKED_FIELDS = [leaf for leaf in chunk_leaves() if leaf.marker(Checked)]
COMPUTED_CHUNK_COLUMNS = ["token_recount", "text_hash", "prev_chunk_link"]
CHUNK_COLUMNS = [leaf.key for leaf in CHECKED_FIELDS] + COMPUTED_CHUNK_COLUMNS
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
HEADER_COLUMNS = ["url", "status", "level", "heading", "line", "coverage"]


def _recount(chunk: ChunkFacts) -> int:
    if chunk.token_recount is None:
        raise ValueError(
            f"chunk {chunk.chunk_id} was not recounted: the run has no validation facts"
        )
    return chunk.token_recount


def build_tables(run: ChunkRun, counter: TokenCounter) -> dict[str, pl.DataFrame]:
    """Every table the suites check, keyed by suite name."""
    facts = [chunk_facts(chunk, counter) for chunk in run.chunks]
    return tables_from_facts(facts, run.pages, run.report.duplicates)


def tables_from_facts(
    facts: list[ChunkFacts], pages: list[PageRecord], duplicates: Iterable[DuplicateChunk]
) -> dict[str, pl.DataFrame]:
    """The tables from every chunk's facts, every page's record and the dropped duplicates.

    A broken run may repeat chunk ids (chunk_id_unique reports that): facts are a list, so
    each chunk is still its own row with its own recount.
    """
    index = _PageIndex(facts, pages, duplicates)
    return {
        "chunks": _frame(chunk_columns(facts), CHUNK_COLUMNS),
        "pages": _frame(page_columns(pages, index), PAGE_COLUMNS),
        "headers": _frame(header_columns(pages, index), HEADER_COLUMNS),
    }


Columns = dict[str, list]


def _frame(columns: Columns, names: list[str]) -> pl.DataFrame:
    """A table built column by column: a dict per row took several times the memory of
    the columns (130 MB against 58 for a 20,000-page run). Every column of `names` is
    there, so an empty run fails on row counts, not on a confusing "column does not
    exist"."""
    return pl.DataFrame({name: columns.get(name, []) for name in names}, strict=False)


def _columns(names: list[str]) -> Columns:
    return {name: [] for name in names}


def _append(columns: Columns, row: dict) -> None:
    for name, value in row.items():
        columns[name].append(value)


def write_tables(run_dir: Path, tables: dict[str, pl.DataFrame]) -> list[Path]:
    """Each table as `<run-dir>/validation/tables/<name>.parquet`, what the validate stage
    reads: the tables are built where the run is assembled, checked in another task."""
    paths = []
    for name, table in tables.items():
        path = RunDir(run_dir).table(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        paths.append(atomic_write(path, table.write_parquet))
    return paths


def read_tables(run_dir: Path) -> dict[str, pl.DataFrame]:
    """The run's tables, as `write_tables` wrote them."""
    return {
        path.stem: pl.read_parquet(path)
        for path in sorted(RunDir(run_dir).tables_dir.glob("*.parquet"))
    }


def chunk_columns(facts: list[ChunkFacts]) -> Columns:
    """One row per chunk: each checked field, from the `ChunkFacts` attribute of its name."""
    page_of = {chunk.chunk_id: chunk.source_url for chunk in facts}
    columns = {leaf.key: [getattr(chunk, leaf.name) for chunk in facts] for leaf in CHECKED_FIELDS}
    columns["token_recount"] = [chunk.token_recount for chunk in facts]
    columns["text_hash"] = [chunk.text_hash for chunk in facts]
    columns["prev_chunk_link"] = [prev_chunk_link(chunk, page_of) for chunk in facts]
    return columns


def prev_chunk_link(chunk: ChunkFacts, page_of: dict[str, str]) -> str:
    """'none', 'same_page', 'other_page' or 'unknown_chunk' (not a chunk of this run)."""
    prev_id = chunk.prev_chunk_id
    if prev_id is None:
        return "none"
    if prev_id not in page_of:
        return "unknown_chunk"
    return "same_page" if page_of[prev_id] == chunk.source_url else "other_page"


class _PageIndex:
    """Finds the chunks of a page, whichever of its URLs (crawled, canonical) they carry.

    An alias page has no chunks of its own: it is answered by the page it is an alias of.
    """

    def __init__(
        self,
        facts: list[ChunkFacts],
        pages: list[PageRecord],
        duplicates: Iterable[DuplicateChunk],
    ) -> None:
        # A URL variant of a page (an alias) shares its canonical URL: the chunked page
        # must win that key, whatever the crawl order.
        self.by_url: dict[str, PageRecord] = {}
        for page in sorted(pages, key=lambda page: page.status != "chunked"):
            self.by_url.setdefault(page.canonical_url, page)
            self.by_url.setdefault(page.url, page)
        self.chunks: dict[str, list[ChunkFacts]] = defaultdict(list)
        for chunk in facts:
            self.chunks[chunk.source_url].append(chunk)
        self.dropped: dict[str, list[DuplicateChunk]] = defaultdict(list)
        for duplicate in duplicates:
            self.dropped[duplicate.source_url].append(duplicate)
        self.by_id = {chunk.chunk_id: chunk for chunk in facts}

    def target(self, page: PageRecord) -> PageRecord | None:
        """The page whose chunks stand for `page`: itself, or the page it is an alias of."""
        if page.status != "alias":
            return page
        return self.by_url.get(page.alias_of or "")

    def chunks_of(self, page: PageRecord) -> list[ChunkFacts]:
        target = self.target(page)
        if target is None:
            return []
        found = self.chunks.get(target.url, [])
        if target.canonical_url != target.url:
            found = found + self.chunks.get(target.canonical_url, [])
        return found

    def repeated_by(self, page: PageRecord) -> list[ChunkFacts]:
        """The kept chunks that the page's dropped chunks repeat: their text is the page's."""
        found = (self.by_id.get(duplicate.duplicate_of) for duplicate in self.dropped_of(page))
        return [chunk for chunk in found if chunk is not None]

    def dropped_of(self, page: PageRecord) -> list[DuplicateChunk]:
        """Chunks of the page dropped because an earlier chunk of the run had their text."""
        target = self.target(page)
        if target is None:
            return []
        urls = {target.url, target.canonical_url}
        return [duplicate for url in urls for duplicate in self.dropped.get(url, [])]


def page_columns(pages: list[PageRecord], index: _PageIndex) -> Columns:
    """One row per page. Tokens are accounted for with recounted chunk tokens.

    Recounts, not the chunks' declared `token_count`: a wrong count is the chunks suite's
    finding; here the question is whether the page's text made it into chunks. Chunks
    dropped as duplicates of another page's chunk still account for their page's text.
    """
    columns = _columns(PAGE_COLUMNS)
    for page in pages:
        chunks = index.chunks_of(page)
        target = index.target(page)
        dropped = index.dropped_of(page)
        found_tokens = sum(_recount(chunk) for chunk in chunks)
        dropped_tokens = sum(duplicate.token_count for duplicate in dropped)
        accounted = found_tokens + dropped_tokens
        _append(
            columns,
            {
                "url": page.url,
                "canonical_url": page.canonical_url,
                "status": page.status,
                "alias_of": page.alias_of,
                "alias_target_status": _alias_target_status(page, target),
                "content_hash": page.content_hash,
                "tokens_after_cleanup": page.tokens_after_cleanup,
                "chunk_count": page.chunk_count,
                "chunks_found": len(chunks),
                "duplicate_chunks_dropped": len(dropped),
                "chunk_tokens_found": found_tokens,
                "dropped_duplicate_tokens": dropped_tokens,
                "token_gap": accounted - page.tokens_after_cleanup,
                "token_ratio": (
                    accounted / page.tokens_after_cleanup if page.tokens_after_cleanup else None
                ),
            },
        )
    return columns


def _alias_target_status(page: PageRecord, target: PageRecord | None) -> str | None:
    """For an alias page, the status of the page it points at ('missing' if none)."""
    if page.status != "alias":
        return None
    return target.status if target is not None else "missing"


def header_columns(pages: list[PageRecord], index: _PageIndex) -> Columns:
    columns = _columns(HEADER_COLUMNS)
    covered: dict[int, _Covered] = {}  # by the page whose chunks stand for a page
    for page in pages:
        target = index.target(page)
        key = id(target)
        if key not in covered:
            covered[key] = _Covered(index.chunks_of(page), index.repeated_by(page))
        for heading in page.headings:
            _append(
                columns,
                {
                    "url": page.url,
                    "status": page.status,
                    "level": heading.level,
                    "heading": heading.text,
                    "line": heading.line,
                    "coverage": (
                        "page_quarantined"
                        if page.status == "quarantined"
                        else covered[key].coverage(heading.level, heading.text)
                    ),
                },
            )
    return columns


class _Covered:
    """What the chunks of one page say about its headings.

    A chunk dropped because an earlier chunk of the run (often on another page) has the
    same text still covers the heading lines in that text: `repeated` are those earlier
    chunks. Their headers (h1, h2) are their own page's, so only their lines count.
    """

    def __init__(self, chunks: list[ChunkFacts], repeated: list[ChunkFacts]) -> None:
        self.headers = {(1, chunk.h1) for chunk in chunks}
        self.headers |= {(2, chunk.h2) for chunk in chunks}
        self.heading_lines = set().union(*(chunk.heading_lines for chunk in chunks + repeated))

    def coverage(self, level: int, text: str) -> str:
        """'headers', 'text' or 'missing'."""
        if (level, text) in self.headers:
            return "headers"
        return "text" if heading_key(text) in self.heading_lines else "missing"
