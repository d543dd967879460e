"""A chunked crawl becomes a run: one pass over the pages in crawl order, after chunking.

The rules, the same for a run written to its directory (`firechunk.run.stages`) and one held
in memory (`firechunk.run.memory`); only where the rows and records go differs (`RunSink`):
- a page without a usable URL or title (`firechunk.run.titles.page_problem`) is
  quarantined, whatever its content, under what its title was (`recorded_title`);
- a canonical URL crawled again with other content keeps the last crawled page; the
  others are quarantined as `duplicate-url` (`duplicate_urls`);
- pages with the same cleaned content are chunked once, under the smallest canonical URL;
  the others become aliases of it (`primaries`);
- a chunk whose normalised text repeats a chunk kept before it in the run is dropped and
  reported (`firechunk.run.rows`);
- a kept chunk lists the other pages whose copy of its text was dropped (`also_on`);
- chunk ids are uuid5 of canonical URL and text; each chunk carries the overlap of the
  chunk kept before it on its page, and cites the URL of its section when the page was
  served at several URLs (`firechunk.run.citations`);
- a page set aside by validation (`firechunk.validate.set_aside`) is quarantined with the
  expectations it failed, its aliases with it, and the last good run's rows for it are
  written in its place (`Aside`).

What the suites check of each chunk (`ChunkFacts`) is kept beside the rows, so a written
run is validated without reading its text back.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from firechunk.run.citations import cite
from firechunk.run.outcomes import StoredDraft, StoredOutcome
from firechunk.run.plan import PlannedPage
from firechunk.run.rows import duplicates_of, page_chunks
from firechunk.run.titles import page_problem, recorded_title
from firechunk.schemas.chunk import Chunk
from firechunk.schemas.report import (
    ChunkReport,
    HeadingRecord,
    PageRecord,
    QuarantineRecord,
    SetAsidePage,
    SizePercentiles,
)
from firechunk.tokens import TokenCounter
from firechunk.validate.facts import ChunkFacts, chunk_facts


class Outcomes(Protocol):
    """The outcomes of the chunked pages, by the index of the page chunked."""

    def content_hash(self, index: int) -> str | None:
        """The page's cleaned-content hash; None when it was quarantined."""

    def get(self, index: int) -> StoredOutcome: ...


class RunSink(Protocol):
    """Where the run goes as it is assembled, in crawl order: each chunked page's kept
    rows with what the suites check of each (`ChunkFacts`), and every page's record."""

    def add_rows(self, rows: list[dict[str, Any]], facts: list[ChunkFacts]) -> None:
        """Take a page's kept rows."""

    def add_page(self, record: PageRecord) -> None: ...


@dataclass(frozen=True)
class Aside:
    """Pages set aside by validation, and what the last good run wrote for them."""

    pages: Mapping[str, tuple[str, ...]]  # canonical URL -> the expectations it failed
    rows: Mapping[str, list[dict[str, Any]]]  # canonical URL -> the last good run's rows
    carried_from: str | None  # that run's id


NOTHING_ASIDE = Aside(pages={}, rows={}, carried_from=None)


@dataclass
class Assembled:
    """The run, but for its chunk rows and page records (which went to the sink)."""

    quarantine: list[QuarantineRecord]
    report: ChunkReport


@dataclass
class _PageTotals:
    """What the report says of the pages, added up as their records go to the sink."""

    chunked: int = 0
    aliased: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    aliases: dict[str, list[str]] = field(default_factory=dict)

    def add(self, page: PageRecord) -> None:
        if page.status == "alias":
            self.aliased += 1
        elif page.status == "chunked":
            self.chunked += 1
            self.tokens_before += page.tokens_before_cleanup
            self.tokens_after += page.tokens_after_cleanup
            if page.aliases:
                self.aliases[page.canonical_url] = page.aliases


@dataclass
class _Pass:
    """The run-wide state of the pass."""

    sink: RunSink
    also_on: dict[str, list[dict[str, Any]]]  # text hash -> pages whose copy is dropped
    seen: dict[str, str] = field(default_factory=dict)  # text hash -> id of the kept chunk
    token_counts: list[int] = field(default_factory=list)  # of each chunk kept
    page_totals: _PageTotals = field(default_factory=_PageTotals)
    removed: dict[str, int] = field(default_factory=dict)
    duplicates: list = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    quarantine: list[QuarantineRecord] = field(default_factory=list)
    set_aside: list[SetAsidePage] = field(default_factory=list)


def assemble(
    pages: list[PlannedPage],
    outcomes: Outcomes,
    sink: RunSink,
    *,
    encoding: str,
    started: float,
    aside: Aside = NOTHING_ASIDE,
) -> Assembled:
    """Walk the pages in crawl order; the rows of each chunked page, and every page's
    record, go to `sink` as they are made."""
    unusable = {
        page.index: problem for page in pages if (problem := page_problem(page.url, page.title))
    }
    content_of = _content_of(outcomes, unusable)
    replaced = duplicate_urls(pages, content_of)
    primary_of = primaries(pages, lambda page: None if page.index in replaced else content_of(page))
    aside_of = _aside_of(pages, primary_of, aside.pages)
    primary_of = {i: primary for i, primary in primary_of.items() if i not in aside_of}
    alias_urls = alias_urls_of(pages, primary_of)
    state = _Pass(sink, also_on_of(pages, outcomes, primary_of))

    @functools.lru_cache(maxsize=4)  # a page's aliases usually come one after another
    def primary_record(index: int) -> PageRecord:
        """What an alias's record copies from the page it is an alias of, which may come
        later in the crawl: its outcome says all of it."""
        primary = pages[index]
        outcome = outcomes.get(primary.chunked_as)
        return chunked_record(primary, alias_urls[index], outcome, [])

    for page in pages:
        i = page.index
        if i in unusable:  # its chunks could not name where they come from
            quarantined, record = quarantine_records(_as_recorded(page), *unusable[i])
            state.quarantine.append(quarantined)
        elif content_of(page) is None:
            outcome = outcomes.get(page.chunked_as)
            quarantined, record = quarantine_records(page, outcome.reason, outcome.detail)
            state.quarantine.append(quarantined)
        elif i in replaced:
            kept = pages[replaced[i]]
            detail = (
                f"{kept.url} (crawled later) has the same canonical URL and other content, "
                f"and is kept; content sha256 {content_of(page)}, kept {content_of(kept)}"
            )
            quarantined, record = quarantine_records(page, DUPLICATE_URL, detail)
            state.quarantine.append(quarantined)
        elif i in aside_of:
            record = _set_aside(page, pages[aside_of[i]], aside, state, encoding)
        elif primary_of[i] == i:
            record = _add_page(page, outcomes.get(page.chunked_as), alias_urls[i], state)
        else:
            record = alias_record(page, primary_record(primary_of[i]))
        sink.add_page(record)
        state.page_totals.add(record)
    report = ChunkReport(pages_in=len(pages), encoding=encoding, duplicates=state.duplicates)
    report.warnings = state.warnings
    report.pages_set_aside = state.set_aside
    fill_report(report, state, time.time() - started)
    return Assembled(state.quarantine, report)


def _add_page(
    page: PlannedPage, outcome: StoredOutcome, alias_urls: list[str], state: _Pass
) -> PageRecord:
    """Send a chunked page's kept rows to the sink; record its facts, repeats and figures."""
    url = page.canonical or page.url
    drafts = outcome.drafts
    text_hashes = [draft.text_hash for draft in drafts]
    cited = cite(url, alias_urls, [d.sections for d in drafts], [d.text for d in drafts])
    repeats, chunks = page_chunks(
        url,
        page.title,
        drafts,
        text_hashes,
        alias_urls,
        state.seen,
        cited=cited,
        also_on=state.also_on,
    )
    rows = [chunk.to_json() for chunk in chunks]
    kept = [draft for draft, earlier in zip(drafts, repeats, strict=True) if earlier is None]
    facts = [_facts(row, draft, url) for row, draft in zip(rows, kept, strict=True)]
    _keep(rows, facts, state)
    state.duplicates.extend(duplicates_of(url, repeats, [draft.tokens for draft in drafts]))
    state.warnings.extend(f"{url}: {warning}" for warning in outcome.warnings)
    for rule, tokens in outcome.removed_tokens.items():
        state.removed[rule] = state.removed.get(rule, 0) + tokens
    return chunked_record(page, alias_urls, outcome, [c.token_count for c in facts])


def _aside_of(
    pages: list[PlannedPage], primary_of: dict[int, int], aside: Mapping[str, tuple[str, ...]]
) -> dict[int, int]:
    """Pages whose chunks would come from a page set aside: index -> that page's index."""
    return {
        i: primary
        for i, primary in primary_of.items()
        if (pages[primary].canonical or pages[primary].url) in aside
    }


def _set_aside(
    page: PlannedPage, primary: PlannedPage, aside: Aside, state: _Pass, encoding: str
) -> PageRecord:
    """Quarantine a page set aside by validation (or an alias of one); for the page itself,
    write the last good run's rows in place of its own."""
    url = primary.canonical or primary.url
    names = aside.pages[url]
    carried = 0
    if page.index == primary.index:
        carried = _carry(aside.rows.get(url, []), state, TokenCounter(encoding))
        state.set_aside.append(
            SetAsidePage(
                url=url,
                expectations=list(names),
                chunks_carried=carried,
                carried_from=aside.carried_from if carried else None,
            )
        )
    why = f"failed validation ({', '.join(names)})"
    if page.index != primary.index:
        why += f" as an alias of {url}"
    elif carried:
        why += f"; its {carried} chunks of run {aside.carried_from} are kept"
    record, page_record = quarantine_records(page, names[0], why)
    state.quarantine.append(record)
    return page_record


def _carry(rows: list[dict[str, Any]], state: _Pass, counter: TokenCounter) -> int:
    """Write a set-aside page's rows from the last good run; the number written. None if
    any repeats a chunk already kept: the rows link to each other, so all or none."""
    facts = [chunk_facts(Chunk.model_validate(row), counter) for row in rows]
    if any(chunk.text_hash in state.seen for chunk in facts):
        state.warnings.append(
            f"{facts[0].source_url}: its last good chunks were not carried forward; "
            "their text is in chunks this run kept"
        )
        return 0
    _keep(rows, facts, state)
    return len(facts)


def _keep(rows: list[dict[str, Any]], facts: list[ChunkFacts], state: _Pass) -> None:
    """Hand kept rows and their facts to the sink; note their texts and sizes."""
    state.sink.add_rows(rows, facts)
    state.seen.update((chunk.text_hash, chunk.chunk_id) for chunk in facts)
    state.token_counts.extend(chunk.token_count for chunk in facts)


def also_on_of(
    pages: list[PlannedPage], outcomes: Outcomes, primary_of: dict[int, int]
) -> dict[str, list[dict[str, Any]]]:
    """By text hash, the pages after the first to hold that text (URL and breadcrumb):
    their copies are dropped, so the kept chunk names them. A pass before the rows are
    written, which reads the outcomes' drafts once more."""
    first: dict[str, int] = {}
    also_on: dict[str, list[dict[str, Any]]] = {}
    for page in pages:
        if primary_of.get(page.index) != page.index:
            continue
        url = page.canonical or page.url
        for draft in outcomes.get(page.chunked_as).drafts:
            if first.setdefault(draft.text_hash, page.index) != page.index:
                entry = {"url": url, "breadcrumb": list(draft.breadcrumb)}
                entries = also_on.setdefault(draft.text_hash, [])
                if entry not in entries:
                    entries.append(entry)
    return also_on


def _facts(row: dict[str, Any], draft: StoredDraft, page_url: str) -> ChunkFacts:
    metadata, data = row["metadata"], row["data"]
    return ChunkFacts(
        chunk_id=row["chunk_id"],
        source_url=page_url,
        page_title=metadata["page_title"],
        h1=draft.h1,
        h2=draft.h2,
        chunk_index=metadata["chunk_index"],
        token_count=draft.tokens,
        token_recount=draft.recount,
        text_hash=draft.text_hash,
        prev_chunk_id=data["overlap_text"]["prev_chunk_id"],
        heading_lines=tuple(draft.heading_lines),
    )


DUPLICATE_URL = "duplicate-url"


def _content_of(
    outcomes: Outcomes, unusable: dict[int, tuple[str, str]]
) -> Callable[[PlannedPage], str | None]:
    """A page's cleaned-content hash; None for a page quarantined, or whose URL or title is
    unusable."""
    return lambda page: None if page.index in unusable else outcomes.content_hash(page.chunked_as)


def _as_recorded(page: PlannedPage) -> PlannedPage:
    """The page as its quarantine records name it: its title as `recorded_title` shows it,
    so no record carries a NUL or a megabyte in a title."""
    return replace(page, title=recorded_title(page.title))


def duplicate_urls(
    pages: list[PlannedPage], content_of: Callable[[PlannedPage], str | None]
) -> dict[int, int]:
    """Pages replaced by a later page at the same canonical URL with other content: index
    -> index of the page kept (the last crawled). The same content stays an alias."""
    by_url: dict[str, list[PlannedPage]] = {}
    for page in pages:
        if page.canonical and content_of(page) is not None:
            by_url.setdefault(page.canonical, []).append(page)
    replaced = {}
    for same_url in by_url.values():
        kept = same_url[-1]
        for page in same_url[:-1]:
            if content_of(page) != content_of(kept):
                replaced[page.index] = kept.index
    return replaced


def primaries(
    pages: list[PlannedPage], content_of: Callable[[PlannedPage], str | None]
) -> dict[int, int]:
    """For each chunkable page, the page whose chunks stand for it: among pages with the same
    cleaned content, the one with the smallest canonical URL (stable from night to night).

    `content_of(page)` is the page's cleaned-content hash, None when it was quarantined.
    """
    groups: dict[str, list[int]] = {}
    for page in pages:
        content_hash = content_of(page)
        if content_hash is not None:
            groups.setdefault(content_hash, []).append(page.index)
    primary_of: dict[int, int] = {}
    for members in groups.values():
        chosen = min(members, key=lambda i: (pages[i].canonical, i))
        primary_of.update((i, chosen) for i in members)
    return primary_of


def alias_urls_of(pages: list[PlannedPage], primary_of: dict[int, int]) -> dict[int, list[str]]:
    """For each primary page, the other URLs that returned it, as crawled, each once and
    without the page's own."""
    others: dict[int, set[str]] = {}
    for i, primary in primary_of.items():
        if i != primary:
            others.setdefault(primary, set()).add(pages[i].url)
    return {
        i: sorted(url for url in others.get(i, ()) if url and url != pages[i].canonical)
        for i in primary_of
    }


def chunked_record(
    page: PlannedPage,
    alias_urls: list[str],
    outcome: StoredOutcome,
    chunk_tokens: list[int],
) -> PageRecord:
    """The `pages.parquet` row of a chunked page, whose kept chunks have `chunk_tokens`.

    Made with `model_construct`, without pydantic's validation: every value comes from the
    chunker's own typed results, and validating a page's records, headings by the dozen,
    took 0.6 s of a 5,000-page rebuild.
    """
    return PageRecord.model_construct(
        url=page.url,
        canonical_url=page.canonical or page.url,
        page_title=page.title,
        status="chunked",
        alias_of=None,
        aliases=alias_urls,
        raw_hash=page.raw_hash,
        content_hash=outcome.content_hash,
        tokens_before_cleanup=outcome.tokens_before,
        tokens_after_cleanup=outcome.tokens_after,
        chunk_count=len(chunk_tokens),
        chunk_tokens=sum(chunk_tokens),
        headings=[HeadingRecord(level, title, line) for level, title, line in outcome.headings],
        quarantine_reason=None,
    )


def quarantine_records(
    page: PlannedPage, reason: str | None, detail: str
) -> tuple[QuarantineRecord, PageRecord]:
    """A quarantined page's record for `quarantine.jsonl` and its row in `pages.parquet`."""
    record = QuarantineRecord(
        url=page.url,
        reason=reason or "unknown",
        detail=detail,
        page_title=page.title,
        markdown_chars=page.markdown_chars,
    )
    page_record = PageRecord(
        url=page.url,
        canonical_url=page.canonical,
        page_title=page.title,
        status="quarantined",
        raw_hash=page.raw_hash,
        content_hash="",
        quarantine_reason=reason,
    )
    return record, page_record


def alias_record(page: PlannedPage, primary: PageRecord) -> PageRecord:
    """The `pages.parquet` row of a URL that returned the same page as `primary`."""
    return PageRecord(
        url=page.url,
        canonical_url=page.canonical,
        page_title=page.title,
        status="alias",
        alias_of=primary.canonical_url,
        raw_hash=page.raw_hash,
        content_hash=primary.content_hash,
        tokens_before_cleanup=primary.tokens_before_cleanup,
        tokens_after_cleanup=primary.tokens_after_cleanup,
        headings=primary.headings,
    )


def fill_report(report: ChunkReport, state: _Pass, seconds: float) -> None:
    """The report's figures, from what the pass added up."""
    totals = state.page_totals
    report.pages_chunked = totals.chunked
    report.pages_aliased = totals.aliased
    report.pages_quarantined = len(state.quarantine)
    report.chunks_out = len(state.token_counts)
    report.duplicate_chunks_dropped = len(report.duplicates)
    report.tokens_before_cleanup = totals.tokens_before
    report.tokens_after_cleanup = totals.tokens_after
    report.tokens_in_chunks = sum(state.token_counts)
    report.cleanup_tokens_removed = state.removed
    report.aliases = totals.aliases
    report.chunk_tokens = percentiles(state.token_counts)
    report.seconds = round(seconds, 3)


def percentiles(values: Iterable[int]) -> SizePercentiles:
    ordered = sorted(values)
    if not ordered:
        return SizePercentiles()

    def at(q: float) -> int:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    return SizePercentiles(
        p0=at(0), p5=at(0.05), p25=at(0.25), p50=at(0.5), p75=at(0.75), p95=at(0.95), p100=at(1)
    )
