"""Assemble a run from stored page outcomes and write its files as it goes.

The rebuild's second pass. The first (`tasks.chunk.chunk_into_store`) put every chunked
page's outcome into the run's `OutcomeStore`, fresh or reused from the last good run. Here
the pages are walked in crawl order, one outcome at a time, and each page's chunks are
written to `chunks.parquet` / `chunks.json` as soon as they are made. What stays in memory
is what the run needs globally and is small: each chunk's normalised-text hash (to drop
repeats) and its `ChunkFacts` (what validation checks, without the text), each page's
record, and the report's figures. Memory for chunk text is one page at a time plus one
Parquet row group.

The rules are `firechunk.pipeline.assemble`'s, applied to the same outcomes: pages with
the same cleaned content are chunked once under the smallest canonical URL and the others
become aliases; a chunk whose normalised text repeats an earlier chunk of the run is
dropped and reported; ids are uuid5 of canonical URL and text; each chunk's overlap comes
from the chunk kept before it on its page. `tests/test_incremental.py` checks that both
give the same chunks, pages and report.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from firechunk.atomic import write_json
from firechunk.incremental import OutcomeStore, StoredDraft, StoredOutcome
from firechunk.outputs import REPORT_JSON, ChunkFileWriter, write_page_files
from firechunk.pipeline import (
    CHUNK_NAMESPACE,
    AliasPlan,
    PageInput,
    alias_record,
    alias_urls_of,
    chunked_record,
    fill_report,
    primaries,
    quarantine_records,
)
from firechunk.validation_tables import ChunkFacts
from schemas.chunk import Chunk
from schemas.report import (
    ChunkReport,
    DuplicateChunk,
    PageRecord,
    QuarantineRecord,
)


@dataclass
class WrittenRun:
    """What the written run's validation, change set and dashboard need."""

    run_dir: Path
    report: ChunkReport
    pages: list[PageRecord]
    facts: list[ChunkFacts]
    chunk_rows: dict[str, str]  # chunk id -> sha256 of its chunks.json line, in run order


@dataclass
class _Assembly:
    """The run-wide state of one pass over the pages."""

    writer: ChunkFileWriter
    report: ChunkReport
    seen: dict[str, str] = field(default_factory=dict)  # dedupe key -> id of the kept chunk
    facts: list[ChunkFacts] = field(default_factory=list)
    chunk_rows: dict[str, str] = field(default_factory=dict)
    token_counts: list[int] = field(default_factory=list)
    removed: dict[str, int] = field(default_factory=dict)
    quarantine: list[QuarantineRecord] = field(default_factory=list)


def assemble_and_write(
    inputs: list[PageInput],
    plan: AliasPlan,
    keys: dict[int, str],
    store: OutcomeStore,
    run_dir: Path,
    *,
    encoding: str,
    started: float,
) -> WrittenRun:
    """Write the run's files into `run_dir` from the outcomes in `store`.

    `keys` maps each page of `plan.to_chunk` (by index) to its outcome's key in `store`.
    The chunk rows' digests are added to `store` for the next run's change set.
    """
    run_dir = Path(run_dir)
    outcome_key = {page.index: keys[plan.same_as.get(page.index, page.index)] for page in inputs}
    content = store.content_hashes()
    primary_of = primaries(inputs, plan, lambda i: content[outcome_key[i]])
    alias_urls = alias_urls_of(inputs, plan, primary_of)
    report = ChunkReport(pages_in=len(inputs), encoding=encoding)
    records: dict[int, PageRecord] = {}
    with ChunkFileWriter(run_dir) as writer:
        state = _Assembly(writer, report)
        for page in inputs:
            i = page.index
            key = outcome_key[i]
            if content[key] is None:
                records[i] = _quarantine(page, plan, store.get(key, i), state)
            elif primary_of[i] == i:
                records[i] = _emit_page(page, plan, store.get(key, i), alias_urls[i], state)
    for page in inputs:
        if page.index not in records:
            records[page.index] = alias_record(page, plan, records[primary_of[page.index]])
    pages = [records[page.index] for page in inputs]
    fill_report(
        report,
        pages,
        len(state.quarantine),
        state.token_counts,
        state.removed,
        time.perf_counter() - started,
    )
    write_page_files(run_dir, pages, state.quarantine)
    write_json(run_dir / REPORT_JSON, report.model_dump(mode="json"))
    store.put_chunk_rows(state.chunk_rows.items())
    return WrittenRun(run_dir, report, pages, state.facts, state.chunk_rows)


def _emit_page(
    page: PageInput, plan: AliasPlan, outcome: StoredOutcome, alias_urls, state: _Assembly
) -> PageRecord:
    url = plan.canonical[page.index] or page.url
    kept: list[tuple[str, StoredDraft]] = []
    for position, draft in enumerate(outcome.drafts):
        chunk_id = str(uuid.uuid5(CHUNK_NAMESPACE, f"{url}\n{draft.text}"))
        if draft.text_hash in state.seen:
            state.report.duplicates.append(
                DuplicateChunk(
                    source_url=url,
                    chunk_index=position,
                    duplicate_of=state.seen[draft.text_hash],
                    token_count=draft.tokens,
                )
            )
            continue
        state.seen[draft.text_hash] = chunk_id
        previous = kept[-1] if kept else None
        row = _chunk_row(chunk_id, draft, url, page.title, len(kept), alias_urls, previous)
        if not state.chunk_rows:
            _check_row_shape(row)
        state.chunk_rows[chunk_id] = state.writer.add(row)
        state.facts.append(_facts(row, draft))
        state.token_counts.append(draft.tokens)
        kept.append((chunk_id, draft))
    state.report.warnings.extend(f"{url}: {warning}" for warning in outcome.warnings)
    for rule, tokens in outcome.removed_tokens.items():
        state.removed[rule] = state.removed.get(rule, 0) + tokens
    return chunked_record(page, plan, alias_urls, outcome, [draft.tokens for _, draft in kept])


def _chunk_row(
    chunk_id: str,
    draft: StoredDraft,
    url: str,
    title: str,
    index: int,
    aliases: list[str],
    previous: tuple[str, StoredDraft] | None,
) -> dict[str, Any]:
    """The chunk's JSON object, key for key what `Chunk.to_json()` gives."""
    return {
        "chunk_id": chunk_id,
        "metadata": {
            "token_count": draft.tokens,
            "sourceUrl": url,
            "page_title": title,
            "breadcrumb": list(draft.breadcrumb),
            "chunk_index": index,
            "source_lines": list(draft.source_lines),
            "aliases": list(aliases),
        },
        "data": {
            "headers": {"h1": draft.h1, "h2": draft.h2},
            "text": draft.text,
            "overlap_text": {
                "prev_chunk_id": previous[0] if previous else None,
                "text": previous[1].overlap if previous else "",
            },
        },
    }


def _check_row_shape(row: dict[str, Any]) -> None:
    """The rows are built here, not by the model: a field added to `Chunk` must stop the run
    rather than go missing from the files. Checked on the run's first row."""
    expected = Chunk.model_validate(row).to_json()
    if expected != row:
        raise ValueError(
            "firechunk.streaming builds chunk rows that differ from schemas.chunk.Chunk: "
            f"{sorted(expected)} vs {sorted(row)}; update _chunk_row"
        )


def _facts(row: dict[str, Any], draft: StoredDraft) -> ChunkFacts:
    metadata, data = row["metadata"], row["data"]
    return ChunkFacts(
        chunk_id=row["chunk_id"],
        source_url=metadata["sourceUrl"],
        page_title=metadata["page_title"],
        h1=draft.h1,
        h2=draft.h2,
        chunk_index=metadata["chunk_index"],
        token_count=draft.tokens,
        token_recount=draft.recount,
        text_hash=draft.text_hash,
        prev_chunk_id=data["overlap_text"]["prev_chunk_id"],
        heading_lines=frozenset(draft.heading_lines),
    )


def _quarantine(page, plan, outcome: StoredOutcome, state: _Assembly) -> PageRecord:
    record, page_record = quarantine_records(page, plan, outcome.reason, outcome.detail)
    state.quarantine.append(record)
    return page_record
