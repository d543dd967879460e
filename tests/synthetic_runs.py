"""Small chunking runs built directly from the models, for validation/output/publish tests.

`RunBuilder` assembles pages the way the chunker would: one chunk per section, chunk text
verbatim, the page text being the chunks joined by blank lines, exact token counts,
`prev_chunk_id` chained within the page. The `*_run` functions give a clean run and runs
with one defect each.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from pathlib import Path

from firechunk.run.collection import collection_of_urls
from firechunk.run.stages import publish_stage, start_run, validate_stage
from firechunk.run.write import write_run_outputs
from firechunk.schemas.chunk import Chunk, ChunkData, ChunkMetadata, Headers, Overlap
from firechunk.schemas.publish import PublishResult
from firechunk.schemas.report import (
    ChunkReport,
    ChunkRun,
    DuplicateChunk,
    HeadingRecord,
    PageRecord,
)
from firechunk.settings import RunSettings
from firechunk.tokens import TokenCounter
from firechunk.validate.suites import SUITES_DIR
from firechunk.validate.tables import build_tables, write_tables

COUNTER = TokenCounter()

_NOUNS = ("client", "table", "policy", "bucket", "function", "query", "token", "session")
_VERBS = ("returns", "stores", "updates", "checks", "signs", "reads", "writes", "lists")
_ADVERBS = ("quickly", "safely", "twice", "locally", "again", "eagerly", "lazily")


def prose(tokens: int, seed: int) -> str:
    """Deterministic English-like sentences of about `tokens` tokens."""
    rng = random.Random(seed)
    sentences: list[str] = []
    counted = 0
    while counted < tokens:
        sentence = (
            f"The {rng.choice(_NOUNS)} {rng.choice(_VERBS)} the {rng.choice(_NOUNS)} "
            f"{rng.choice(_ADVERBS)} in step {rng.randint(1, 99)}."
        )
        sentences.append(sentence)
        counted += COUNTER.count(" " + sentence)
    return " ".join(sentences)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class RunBuilder:
    def __init__(self) -> None:
        self.chunks: list[Chunk] = []
        self.pages: list[PageRecord] = []
        self.duplicates: list[DuplicateChunk] = []

    def add_page(
        self,
        url: str,
        title: str,
        sections: list[tuple[str | None, str]],
        *,
        dropped_duplicate: str | None = None,
    ) -> PageRecord:
        """A page of `sections` (H2 title or None for the H1 intro, body text).

        `dropped_duplicate`: text of a further section whose chunk the chunker dropped as a
        duplicate of another page's chunk: it is in the page's tokens, not in its chunks.
        """
        texts = [f"## {h2}\n\n{body}" if h2 else f"# {title}\n\n{body}" for h2, body in sections]
        page_text = "\n\n".join(texts + ([dropped_duplicate] if dropped_duplicate else []))
        chunks = self._chunks(url, title, sections, texts)
        if dropped_duplicate:
            self.duplicates.append(
                DuplicateChunk(
                    source_url=url,
                    chunk_index=len(chunks),
                    duplicate_of="earlier-chunk",
                    token_count=COUNTER.count(dropped_duplicate),
                )
            )
        page = PageRecord(
            url=url,
            canonical_url=url,
            page_title=title,
            status="chunked",
            raw_hash=sha(page_text),
            content_hash=sha(page_text),
            tokens_before_cleanup=COUNTER.count(page_text) + 3,
            tokens_after_cleanup=COUNTER.count(page_text),
            chunk_count=len(chunks),
            chunk_tokens=sum(chunk.metadata.token_count for chunk in chunks),
            headings=_headings(title, sections, texts),
        )
        self.chunks += chunks
        self.pages.append(page)
        return page

    def _chunks(self, url, title, sections, texts) -> list[Chunk]:
        chunks: list[Chunk] = []
        line = 1
        for index, ((h2, _body), text) in enumerate(zip(sections, texts, strict=True)):
            last = line + text.count("\n")
            chunks.append(
                Chunk(
                    chunk_id=str(uuid.uuid5(uuid.NAMESPACE_URL, url + "\n" + text)),
                    metadata=ChunkMetadata(
                        token_count=COUNTER.count(text),
                        source_url=url,
                        page_title=title,
                        breadcrumb=[title] + ([h2] if h2 else []),
                        chunk_index=index,
                        source_lines=(line, last),
                    ),
                    data=ChunkData(
                        headers=Headers(h1=title, h2=h2),
                        text=text,
                        overlap_text=Overlap(
                            prev_chunk_id=chunks[-1].chunk_id if chunks else None,
                            text=chunks[-1].data.text.splitlines()[0] if chunks else "",
                        ),
                    ),
                )
            )
            line = last + 2
        return chunks

    def add_alias(self, url: str, of: PageRecord) -> None:
        of.aliases.append(url)
        self.pages.append(
            of.model_copy(
                update={"url": url, "status": "alias", "alias_of": of.url, "aliases": []},
                deep=True,
            )
        )

    def add_quarantined(self, url: str, reason: str = "empty page") -> None:
        self.pages.append(
            PageRecord(
                url=url,
                canonical_url=url,
                page_title="Empty",
                status="quarantined",
                raw_hash=sha(""),
                content_hash=sha(""),
                headings=[HeadingRecord(level=1, text="Empty", line=1)],
                quarantine_reason=reason,
            )
        )

    def build(self) -> ChunkRun:
        tokens = [chunk.metadata.token_count for chunk in self.chunks]
        return ChunkRun(
            chunks=self.chunks,
            pages=self.pages,
            report=ChunkReport(
                pages_in=len(self.pages),
                chunks_out=len(self.chunks),
                duplicate_chunks_dropped=len(self.duplicates),
                tokens_in_chunks=sum(tokens),
                duplicates=self.duplicates,
            ),
        )


def _headings(title, sections, texts) -> list[HeadingRecord]:
    headings = [HeadingRecord(level=1, text=title, line=1)]
    line = 1
    for (h2, _body), text in zip(sections, texts, strict=True):
        if h2:
            headings.append(HeadingRecord(level=2, text=h2, line=line))
        line += text.count("\n") + 2
    return headings


BASE = "https://docs.example.com"
SHARED_FOOTER = "## Need help?\n\n" + prose(60, seed=99)


def clean_builder() -> RunBuilder:
    """Three chunked pages (one 600-token chunk), an alias, a quarantined page, and a chunk
    dropped as a cross-page duplicate."""
    builder = RunBuilder()
    auth = builder.add_page(
        f"{BASE}/auth",
        "Auth",
        [(None, prose(150, 1)), ("Sign in", prose(400, 2)), ("Sessions", prose(600, 3))],
    )
    buckets = prose(150, 5) + "\n\n## Bucket `policies`\n\n" + prose(150, 10)
    storage = builder.add_page(
        f"{BASE}/storage",
        "Storage",
        [(None, prose(120, 4)), ("Buckets", buckets), ("Need help?", prose(60, 99))],
    )
    # A short H2 section the chunker kept inside the "Buckets" chunk: covered by its text.
    storage.headings.insert(3, HeadingRecord(level=2, text="Bucket policies", line=9))
    builder.add_page(
        f"{BASE}/rpc",
        "Call `rpc()`",
        [(None, prose(80, 6))],
        dropped_duplicate=SHARED_FOOTER,
    )
    builder.add_alias(f"{BASE}/auth/", of=auth)
    builder.add_quarantined(f"{BASE}/empty")
    return builder


def clean_run() -> ChunkRun:
    return clean_builder().build()


def duplicated_chunk_run() -> ChunkRun:
    """The same section text chunked on two pages: both chunks were kept."""
    builder = clean_builder()
    builder.add_page(f"{BASE}/realtime", "Realtime", [(None, prose(90, 7)), ("Buckets", "")])
    run = builder.build()
    storage_buckets = run.chunks[4]  # "## Buckets" chunk of /storage
    realtime = run.chunks[-1]
    realtime.data.text = storage_buckets.data.text
    realtime.metadata.token_count = storage_buckets.metadata.token_count
    page = run.pages[-1]
    page_text = run.chunks[-2].data.text + "\n\n" + realtime.data.text
    page.tokens_after_cleanup = COUNTER.count(page_text)
    return run


def over_limit_run() -> ChunkRun:
    builder = clean_builder()
    builder.add_page(f"{BASE}/big", "Big", [(None, prose(100, 8)), ("Huge", prose(1200, 9))])
    return builder.build()


def missing_h2_run() -> ChunkRun:
    run = clean_run()
    run.pages[0].headings.append(HeadingRecord(level=2, text="Troubleshooting", line=40))
    return run


def broken_token_count_run() -> ChunkRun:
    run = clean_run()
    run.chunks[1].metadata.token_count += 7
    return run


def synthetic_run(pages: int, chunks_per_page: int, tokens_per_chunk: int = 300) -> ChunkRun:
    """A clean run of `pages * chunks_per_page` chunks, for timing validation."""
    builder = RunBuilder()
    for number in range(pages):
        sections: list[tuple[str | None, str]] = [(None, prose(tokens_per_chunk, number * 1000))]
        sections += [
            (f"Section {index}", prose(tokens_per_chunk, number * 1000 + index))
            for index in range(1, chunks_per_page)
        ]
        builder.add_page(f"{BASE}/page-{number}", f"Page {number}", sections)
    return builder.build()


def publish_run(
    run: ChunkRun, data_dir: Path, run_id: str | None = None, *, suites_dir: Path = SUITES_DIR
) -> PublishResult:
    """A run made in memory written into a new run of `data_dir` (its files and validation
    tables), then validated and published by the run's own stages."""
    urls = (page.url for page in run.pages)
    start = start_run(data_dir, run_id, RunSettings(collection=collection_of_urls(urls)))
    write_run_outputs(run, start.run_dir)
    write_tables(start.run_dir, build_tables(run, TokenCounter(run.report.encoding)).items())
    return publish_stage(start, validate_stage(start, suites_dir))
