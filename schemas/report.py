"""Records a chunking run writes beside its chunks: quarantined pages and the run report."""

from __future__ import annotations

from typing import Annotated, NamedTuple

from pydantic import BaseModel, Field, PlainSerializer

from firechunk.schemas.chunk import Chunk


class QuarantineRecord(BaseModel):
    """A page that could not be chunked, kept with the reason instead of being lost."""

    url: str
    reason: str
    detail: str = ""
    page_title: str | None = None
    markdown_chars: int = 0


class DuplicateChunk(BaseModel):
    """A chunk dropped because an earlier chunk of the run has the same normalised text."""

    source_url: str
    chunk_index: int
    duplicate_of: str = Field(description="chunk_id of the kept chunk with the same text.")
    token_count: int


class SetAsidePage(BaseModel):
    """A page that failed page-level expectations: quarantined instead of failing the run,
    with the chunks the last good run had for it carried forward."""

    url: str = Field(description="The page's canonical URL.")
    expectations: list[str] = Field(description="The expectations its rows broke (meta.name).")
    chunks_carried: int = Field(description="Chunks carried forward from `carried_from`.")
    carried_from: str | None = Field(
        default=None, description="The last good run's id; None when there was none."
    )


class SizePercentiles(BaseModel):
    p0: int = 0
    p5: int = 0
    p25: int = 0
    p50: int = 0
    p75: int = 0
    p95: int = 0
    p100: int = 0


class ChunkReport(BaseModel):
    pages_in: int = 0
    pages_chunked: int = 0
    pages_aliased: int = 0
    pages_quarantined: int = 0
    chunks_out: int = 0
    duplicate_chunks_dropped: int = 0
    tokens_before_cleanup: int = 0
    tokens_after_cleanup: int = 0
    tokens_in_chunks: int = 0
    cleanup_tokens_removed: dict[str, int] = Field(default_factory=dict)
    chunk_tokens: SizePercentiles = Field(default_factory=SizePercentiles)
    aliases: dict[str, list[str]] = Field(
        default_factory=dict, description="Chunked URL -> other URLs that returned the same page."
    )
    duplicates: list[DuplicateChunk] = Field(default_factory=list)
    pages_set_aside: list[SetAsidePage] = Field(
        default_factory=list, description="Pages quarantined by validation (`max_failed_pages`)."
    )
    warnings: list[str] = Field(default_factory=list)
    encoding: str = "cl100k_base"
    seconds: float = 0.0
    collection: str | None = Field(
        default=None,
        description="The collection (doc set) the run belongs to and loads into, as its "
        "run.json records it (`firechunk.run.collection`).",
    )


class HeadingRecord(NamedTuple):
    """An H1 or H2 of a page, as clean text, with its 1-based line in the page markdown.

    A tuple, not a model: a run holds one per heading of every page until its files are
    written (about 100,000 for 20,000 pages), and a model took seven times the memory."""

    level: int
    text: str
    line: int


class PageRecord(BaseModel):
    """What became of one crawled URL: chunked, aliased to another URL, or quarantined."""

    url: str = Field(description="The URL as crawled (sourceURL).")
    canonical_url: str
    page_title: str
    status: str = Field(description="'chunked', 'alias' (same page as `alias_of`) or 'quarantined'")
    alias_of: str | None = None
    aliases: list[str] = Field(default_factory=list)
    raw_hash: str = Field(description="sha256 of the markdown as crawled.")
    content_hash: str = Field(description="sha256 of the markdown after clean-up, normalised.")
    tokens_before_cleanup: int = 0
    tokens_after_cleanup: int = 0
    chunk_count: int = 0
    chunk_tokens: int = 0
    headings: list[
        # In JSON an object, as the Parquet struct reads; in Python the tuple, which Arrow
        # takes for that struct as it is.
        Annotated[HeadingRecord, PlainSerializer(HeadingRecord._asdict, when_used="json")]
    ] = Field(default_factory=list)
    quarantine_reason: str | None = None


class ChunkRun(BaseModel):
    """Everything one chunking run produced, before it is validated and written."""

    chunks: list[Chunk] = Field(default_factory=list)
    pages: list[PageRecord] = Field(default_factory=list)
    quarantine: list[QuarantineRecord] = Field(default_factory=list)
    report: ChunkReport = Field(default_factory=ChunkReport)
