"""One page's chunker outcome, as the page cache keeps it, and the worker that makes it.

An outcome is a page's draft chunks before the run-wide assembly (or why the page was
quarantined), with what each draft's text alone tells: the token recount and text hash the
validation suites check, the heading lines in the text, and the overlap text the draft
gives the chunk after it. All of it is computed in the worker that chunked the page
(`chunk_pages`, the one function every executor runs), so it is done in parallel, once per
page text, and reused with the outcome on later nights.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from functools import lru_cache

import orjson

from firechunk.chunker.headings import heading_lines
from firechunk.chunker.overlap import overlap_after
from firechunk.chunker.page import (
    ChunkerOptions,
    DraftChunk,
    PageChunks,
    PageRejected,
    chunk_page,
    content_hash,
)
from firechunk.chunker.sizer import Sizer
from firechunk.run.budget import PageTimeout, time_budget
from firechunk.run.plan import PageInput
from firechunk.tokens import Sizer as TokenSizer
from firechunk.tokens import TokenCounter


@dataclass(kw_only=True)
class StoredDraft(DraftChunk):
    """A draft chunk as the chunker made it, with what its text alone tells."""

    # TokenCounter.count(text): what the suites compare `tokens` with; None when the run
    # is not validated (`ChunkerOptions.validation_facts`)
    recount: int | None
    text_hash: str  # content_hash(text): what the suites check, and the key of repeats
    heading_lines: list[str]  # `chunker.headings.heading_lines` ([]: not validated)


@dataclass
class StoredOutcome:
    """One page's outcome: its drafts and page figures, or why it was quarantined."""

    index: int  # the page's position in the crawl it was chunked from (not stored)
    reason: str | None = None
    detail: str = ""
    content_hash: str = ""
    drafts: list[StoredDraft] = field(default_factory=list)
    headings: list[tuple[int, str, int]] = field(default_factory=list)
    tokens_before: int = 0
    tokens_after: int = 0
    removed_tokens: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def chunked(self) -> bool:
        return self.reason is None

    def to_payload(self) -> bytes:
        """zlib-compressed JSON (orjson: thousands of pages are read back on every run)."""
        return zlib.compress(orjson.dumps(self), 1)

    def packed(self) -> PackedOutcome:
        return PackedOutcome(
            self.index, self.content_hash if self.chunked else None, self.to_payload()
        )

    @classmethod
    def from_payload(cls, index: int, payload: bytes) -> StoredOutcome:
        """The outcome stored as `payload`, for the page at `index` of this run's crawl."""
        data = orjson.loads(zlib.decompress(payload))
        data["index"] = index
        data["drafts"] = [
            StoredDraft(**{**d, "source_lines": tuple(d["source_lines"])}) for d in data["drafts"]
        ]
        data["headings"] = [tuple(h) for h in data["headings"]]
        return cls(**data)


@dataclass(frozen=True)
class PackedOutcome:
    """A page's outcome as the store keeps it: what the alias planning reads (the content
    hash, None for a quarantined page) and the payload (`StoredOutcome.to_payload`)."""

    index: int  # the page's position in the crawl it was chunked from
    content_hash: str | None
    payload: bytes


def chunk_pages(
    batch: list[PageInput], encoding: str | TokenSizer, options: ChunkerOptions
) -> list[PackedOutcome]:
    """Chunk a batch of pages, add what each draft's text tells, pack each outcome; a page
    that fails becomes an outcome with a reason, and costs that page only. `encoding`: a
    tiktoken encoding's name, or a sizer of the library's caller (`firechunk.ChunkConfig`).

    Runs in a worker: the recounts, overlaps and packing are the bulk of the work after
    chunking itself, and done here they are done in parallel, once per page text.
    """
    sizer = page_sizer(encoding)
    return [page_outcome(page, sizer, options).packed() for page in batch]


def page_sizer(encoding: str | TokenSizer) -> Sizer:
    """The chunker's sizer for a tiktoken encoding's name or a caller's own sizer."""
    return _encoding_sizer(encoding) if isinstance(encoding, str) else Sizer(encoding)


@lru_cache(maxsize=8)
def _encoding_sizer(encoding: str) -> Sizer:
    """One sizer per encoding in a process: the counts a sizer keeps of separators after
    short tails (`firechunk.chunker.sizer`) then serve every page, not only the first one
    a new sizer sees (`firechunk.chunk_markdown` sizes one page per call)."""
    return Sizer(TokenCounter(encoding))


def page_outcome(page: PageInput, sizer: Sizer, options: ChunkerOptions) -> StoredOutcome:
    """One page's outcome (what `chunk_pages` packs): its drafts, or why it is quarantined."""
    try:
        with time_budget(options.page_seconds):
            chunks = chunk_page(
                page.markdown, page.title, sizer, options, page.chrome, page.many_urls
            )
    except PageTimeout as timeout:
        return StoredOutcome(page.index, reason="timeout", detail=str(timeout))
    except PageRejected as rejected:
        return StoredOutcome(page.index, reason=rejected.reason, detail=rejected.detail)
    except Exception as error:  # a parser bug must not sink the run
        detail = f"{type(error).__name__}: {error}"
        return StoredOutcome(page.index, reason="parse-error", detail=detail)
    return _stored(page.index, chunks, sizer, options)


def _stored(index: int, page: PageChunks, sizer: Sizer, options: ChunkerOptions) -> StoredOutcome:
    overlap = options.limits.overlap
    for draft in page.chunks[:-1] if overlap > 0 else ():  # 0: no overlap text
        draft.overlap = overlap_after(draft.text, draft.sections[-1], sizer, overlap)
    facts = options.validation_facts
    return StoredOutcome(
        index=index,
        content_hash=page.content_hash,
        drafts=[_stored_draft(draft, sizer, facts) for draft in page.chunks],
        headings=list(page.headings),
        tokens_before=page.tokens_before,
        tokens_after=page.tokens_after,
        removed_tokens=dict(page.removed_tokens),
        warnings=list(page.warnings),
    )


def _stored_draft(draft: DraftChunk, sizer: Sizer, facts: bool) -> StoredDraft:
    """The draft as it is, with what its text tells added: its hash, which repeats are
    found by, and with `facts` what validation checks (the recount encodes the whole text:
    it checks the counts the sizer derived)."""
    return StoredDraft(
        **vars(draft),
        recount=sizer.count(draft.text) if facts else None,
        text_hash=content_hash(draft.text),
        heading_lines=list(heading_lines(draft.text)) if facts else [],
    )
