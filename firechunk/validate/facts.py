"""What the suites need to know of one chunk, without its text (`ChunkFacts`).

A run held in memory (`firechunk.run.memory`) and a written run (`firechunk.run.assemble`)
both make them; the tables the suites check (`firechunk.validate.tables`) are built from
them. They live apart from the tables so that chunking a crawl in memory needs no polars.
"""

from __future__ import annotations

from dataclasses import dataclass

from firechunk.chunker.headings import heading_lines
from firechunk.chunker.page import content_hash
from firechunk.schemas.chunk import Chunk
from firechunk.tokens import TokenCounter
from firechunk.urls import page_url


@dataclass(slots=True)  # not frozen: a frozen dataclass is slow to make, and runs make 1000s
class ChunkFacts:
    """One chunk as the suites see it: its metadata and what its text says, not the text.
    Each field marked `Checked` in `schemas.chunk` is an attribute of the same name."""

    chunk_id: str
    source_url: str  # the page's canonical URL (`rows.page_url`), not the one it cites
    page_title: str
    h1: str | None
    h2: str | None
    chunk_index: int
    token_count: int
    # the run's TokenCounter over data.text; None in a run made without validation facts
    # (`ChunkerOptions.validation_facts`), which no suite checks
    token_recount: int | None
    text_hash: str  # `content_hash(data.text)`
    prev_chunk_id: str | None
    heading_lines: tuple[str, ...]  # `heading_lines(data.text)`


def chunk_facts(chunk: Chunk, counter: TokenCounter) -> ChunkFacts:
    text = chunk.data.text
    return ChunkFacts(
        chunk_id=chunk.chunk_id,
        source_url=page_url(chunk),
        page_title=chunk.metadata.page_title,
        h1=chunk.data.headers.h1,
        h2=chunk.data.headers.h2,
        chunk_index=chunk.metadata.chunk_index,
        token_count=chunk.metadata.token_count,
        token_recount=counter.count(text),
        text_hash=content_hash(text),
        prev_chunk_id=chunk.data.overlap_text.prev_chunk_id,
        heading_lines=heading_lines(text),
    )
