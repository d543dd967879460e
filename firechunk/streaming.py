"""Assemble a run from stored page outcomes and write its files as it goes.

The chunk stage (`firechunk.rebuild.chunk_stage`) puts every page's outcome into the run's
`OutcomeStore`, fresh from a worker or reused from the last good run, and tells the
`RunWriter`, which walks the pages in crawl order as far as their outcomes are in, and
writes each page's chunks to `chunks.parquet` / `chunks.json` at once: the writing is done
while the workers chunk. A page the last good run wrote the same way is copied from its
files (`firechunk.emissions`). What stays in memory is what the run needs globally and is
small: each chunk's normalised-text hash (to drop repeats) and its `ChunkFacts` (what
validation checks, without the text), each page's record, and the report's figures.
Memory for chunk text is one page at a time plus one Parquet row group.

The rules are `firechunk.pipeline.assemble`'s, applied to the same outcomes: pages with
the same cleaned content are chunked once under the smallest canonical URL and the others
become aliases; a chunk whose normalised text repeats an earlier chunk of the run is
dropped and reported; ids are uuid5 of canonical URL and text; each chunk's overlap comes
from the chunk kept before it on its page. The last three, and each row, come from
`firechunk.chunk_rows`, which both use. `tests/test_incremental.py` checks that both give
the same chunks, pages and report.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from firechunk.atomic import write_json
from firechunk.chunk_rows import check_row_shape, duplicates_of, page_rows, repeats_of
from firechunk.emissions import (
    ROWS_VERSION_KEY,
    BaselineRows,
    PageEmission,
    facts_to_json,
    figures_of,
    rows_version,
)
from firechunk.incremental import OutcomeStore, StoredDraft, StoredOutcome
from firechunk.outputs import REPORT_JSON, ChunkFileWriter, RowSpan, write_page_files
from firechunk.pipeline import (
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
from schemas.report import (
    ChunkReport,
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
    pages_copied: int = 0  # pages whose rows were copied from the baseline's files


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
    shape_checked: bool = False  # the first row built was checked against the Chunk model
    pages_copied: int = 0


class RunWriter:
    """Writes a run's files from the outcomes in its store, while pages are still chunked.

    Rows go out in crawl order, and a page's rows depend only on the pages before it (a
    repeated chunk is dropped in favour of the earlier one) and on which member of its
    alias group stands for the group: among pages with the same cleaned content, the one
    with the smallest canonical URL. Cleaned content is only known once every page is
    chunked. Until then (`content` None) the writer assumes the groups are the pages whose
    markdown has the same letters (`_letters_digest`: the same page served with other
    line-number markers, as the 49 Python reference URLs are, has the same letters), and
    writes each page as soon as its outcome and those of all pages before it are in the
    store (`add`). `finish` checks the assumption against the content hashes; where it
    does not hold, the streamed files are dropped and the run is written again in one pass,
    the groups now known (`content`).

    `keys` maps each page of `plan.to_chunk` (by index) to its outcome's key in `store`.
    """

    def __init__(
        self,
        inputs: list[PageInput],
        plan: AliasPlan,
        keys: dict[int, str],
        store: OutcomeStore,
        run_dir: Path,
        *,
        encoding: str,
        started: float,
        content: dict[str, str | None] | None = None,
        baseline: BaselineRows | None = None,
    ) -> None:
        self._inputs, self._plan, self._keys, self._store = inputs, plan, keys, store
        self._run_dir = Path(run_dir)
        self._encoding, self._started = encoding, started
        self._baseline = baseline  # closed by finish() or abandon()
        store.set_meta(ROWS_VERSION_KEY, rows_version())
        self._key = {page.index: keys[plan.same_as.get(page.index, page.index)] for page in inputs}
        if content is None:
            group = _letters_groups(inputs, plan)
        else:
            group = {page.index: content[self._key[page.index]] for page in inputs}
        self._assumed = content is None
        self._primary_of = primaries(inputs, plan, group.get)
        self._alias_urls = alias_urls_of(inputs, plan, self._primary_of)
        self._content: dict[str, str | None] = {}  # key -> content hash, outcomes in the store
        self._records: dict[int, PageRecord] = {}
        self._next = 0  # position in `inputs` of the next page to write
        self._writer = ChunkFileWriter(run_dir).__enter__()
        self._state = _Assembly(self._writer, ChunkReport(pages_in=len(inputs), encoding=encoding))
        self.rewritten = False  # finish() found other groups and wrote the run again

    @property
    def pages_written(self) -> int:
        """How many pages of the crawl, from its start, have been written (or skipped as
        another page's alias)."""
        return self._next

    def add(self, outcomes: dict[str, str | None]) -> None:
        """Note outcomes now in the store (key -> content hash, None: quarantined) and write
        every page that has its outcome, up to the first that has not."""
        self._content.update(outcomes)
        inputs = self._inputs
        while self._next < len(inputs) and self._key[inputs[self._next].index] in self._content:
            self._write(inputs[self._next])
            self._next += 1

    def finish(self) -> WrittenRun:
        """Write the rest and the page files, report and chunk rows; every page must have
        its outcome in the store by now."""
        try:
            return self._finish()
        except BaseException:
            self.abandon()
            raise

    def _finish(self) -> WrittenRun:
        inputs, plan, store, run_dir = self._inputs, self._plan, self._store, self._run_dir
        self.add({})
        if self._next < len(inputs):
            self.abandon()
            raise RuntimeError(f"{inputs[self._next].url}: its outcome is not in the run's store")
        if self._assumed and not self._groups_hold():
            self._writer.abandon()
            store.clear_emissions()
            again = RunWriter(
                inputs,
                plan,
                self._keys,
                store,
                run_dir,
                encoding=self._encoding,
                started=self._started,
                content=self._content,
                baseline=self._baseline,
            )
            self._baseline = None  # the second writer closes it
            again.add(self._content)
            written = again.finish()
            self.rewritten = True
            return written
        self._writer.close()
        self._close_baseline()
        records, state = self._records, self._state
        for page in inputs:
            if page.index not in records:
                primary = records[self._primary_of[page.index]]
                records[page.index] = alias_record(page, plan, primary)
        pages = [records[page.index] for page in inputs]
        report = state.report
        fill_report(
            report,
            pages,
            len(state.quarantine),
            state.token_counts,
            state.removed,
            time.perf_counter() - self._started,
        )
        write_page_files(run_dir, pages, state.quarantine)
        write_json(run_dir / REPORT_JSON, report.model_dump(mode="json"))
        store.put_chunk_rows(state.chunk_rows.items())
        return WrittenRun(run_dir, report, pages, state.facts, state.chunk_rows, state.pages_copied)

    def abandon(self) -> None:
        """Leave no chunk files behind: the run failed."""
        self._writer.abandon()
        self._close_baseline()

    def _close_baseline(self) -> None:
        if self._baseline is not None:
            self._baseline.close()
            self._baseline = None

    def _write(self, page: PageInput) -> None:
        plan, store = self._plan, self._store
        i, key = page.index, self._key[page.index]
        if self._content[key] is None:
            self._records[i] = _quarantine(page, plan, store.get(key, i), self._state)
        elif self._primary_of[i] == i:
            copyable = self._copyable(page, key)
            if copyable is not None:
                emission, blob, (lines, digests, rows) = copyable
                span = self._writer.copy_rows(lines, rows)
                facts = emission.chunk_facts()
                self._state.pages_copied += 1
            else:
                outcome = store.get(key, i)
                emission, facts, span, digests = _build_page(
                    page, plan, outcome, self._alias_urls[i], self._state
                )
                blob = emission.to_blob()
            store.put_emission(key, blob, span)
            self._records[i] = _apply_page(page, plan, emission, facts, digests, self._state)

    def _copyable(
        self, page: PageInput, key: str
    ) -> tuple[PageEmission, bytes, tuple[list[bytes], list[str], pa.Table]] | None:
        """The baseline's emission of this page's outcome, its blob and its rows (lines,
        digests, Parquet rows), if this run would write the same rows: same URL, title and
        aliases, and the same drafts dropped as repeats; and the baseline's files still
        hold those rows as written."""
        found = self._baseline.emission(key) if self._baseline is not None else None
        if found is None:
            return None
        emission = found[0]
        url = self._plan.canonical[page.index] or page.url
        if (emission.url, emission.title, emission.aliases) != (
            url,
            page.title,
            self._alias_urls[page.index],
        ):
            return None
        kept_ids = iter([facts["chunk_id"] for facts in emission.facts])
        repeats, _ = repeats_of(emission.text_hashes, self._state.seen, lambda _: next(kept_ids))
        if repeats != emission.repeats:
            return None
        rows = self._baseline.page_rows(emission, found[2])
        return None if rows is None else (emission, found[1], rows)

    def _groups_hold(self) -> bool:
        """Whether the groups by cleaned content are the groups the rows were written for."""
        actual = primaries(self._inputs, self._plan, lambda i: self._content[self._key[i]])
        return actual == {i: p for i, p in self._primary_of.items() if i in actual}


# Every byte but the ASCII letters, for bytes.translate to delete.
_NOT_LETTERS = bytes(b for b in range(256) if not (65 <= b <= 90 or 97 <= b <= 122))


def _letters_groups(inputs: list[PageInput], plan: AliasPlan) -> dict[int, str]:
    """Page index -> the letters digest of the page chunked for it (pages that share an
    outcome are one group whatever their markdown)."""
    root = {page.index: plan.same_as.get(page.index, page.index) for page in inputs}
    letters = {i: _letters_digest(inputs[i].markdown) for i in set(root.values())}
    return {i: letters[r] for i, r in root.items()}


def _letters_digest(markdown: object) -> str:
    """sha256 of the ASCII letters of a page's markdown, nothing else (a fast C pass).

    Only a guess at which pages clean up to the same content, checked once they have."""
    text = markdown if isinstance(markdown, str) else repr(markdown)
    data = text.encode("utf-8", errors="surrogatepass").translate(None, _NOT_LETTERS)
    return hashlib.sha256(data).hexdigest()


def _build_page(
    page: PageInput, plan: AliasPlan, outcome: StoredOutcome, alias_urls, state: _Assembly
) -> tuple[PageEmission, list[ChunkFacts], RowSpan, list[str]]:
    """Build and write the rows of a chunked page from its outcome: a draft whose text
    repeats a chunk kept before it (on this page or an earlier one) is dropped."""
    url = plan.canonical[page.index] or page.url
    drafts = outcome.drafts
    text_hashes = [draft.text_hash for draft in drafts]
    repeats, rows = page_rows(url, page.title, drafts, text_hashes, alias_urls, state.seen)
    if rows and not state.shape_checked:
        check_row_shape(rows[0])
        state.shape_checked = True
    kept = [draft for draft, earlier in zip(drafts, repeats, strict=True) if earlier is None]
    facts = [_facts(row, draft) for row, draft in zip(rows, kept, strict=True)]
    span, digests = state.writer.add_rows(rows)
    emission = PageEmission(
        url=url,
        title=page.title,
        aliases=list(alias_urls),
        repeats=repeats,
        text_hashes=text_hashes,
        tokens=[draft.tokens for draft in drafts],
        facts=[facts_to_json(chunk) for chunk in facts],
        figures=figures_of(outcome),
    )
    return emission, facts, span, digests


def _apply_page(
    page: PageInput,
    plan: AliasPlan,
    emission: PageEmission,
    facts: list[ChunkFacts],
    digests: list[str],
    state: _Assembly,
) -> PageRecord:
    """Add a written page (built or copied) to the run: its chunks' facts and digests, the
    repeats it dropped, its clean-up figures; return its page record."""
    for chunk, digest in zip(facts, digests, strict=True):
        state.seen[chunk.text_hash] = chunk.chunk_id
        state.chunk_rows[chunk.chunk_id] = digest
    state.facts.extend(facts)
    state.token_counts.extend(chunk.token_count for chunk in facts)
    state.report.duplicates.extend(duplicates_of(emission.url, emission.repeats, emission.tokens))
    figures = emission.page_figures()
    state.report.warnings.extend(f"{emission.url}: {warning}" for warning in figures.warnings)
    for rule, tokens in figures.removed_tokens.items():
        state.removed[rule] = state.removed.get(rule, 0) + tokens
    tokens = [chunk.token_count for chunk in facts]
    return chunked_record(page, plan, emission.aliases, figures, tokens)


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
