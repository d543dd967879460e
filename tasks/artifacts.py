"""What a run shows on the Prefect dashboard, so an operator can answer "what happened
tonight, and is it like the other nights" without opening the worker's disk.

- `rebuild-summary`: the run's figures and seconds per stage (numbers as numbers);
- `rebuild-pages-added`, `-changed`, `-removed`, `rebuild-quarantine`: the URLs behind the
  counts, with each quarantined page's reason (`report_pages`, from the write stage);
- `rebuild-chunk-sizes`: a histogram of chunk token counts;
- `rebuild-trend`, `rebuild-trend-chart`: the last nights on disk side by side
  (`firechunk.run.history`), as a table and as bars (`tasks.trend_chart`), with the run
  the database holds marked where the flow looked (`tasks.database`);
- `validation-report`, `rebuild-outputs`, `run-directory`: the verdict and where the files
  are, as paths (the files are on the worker's machine; a browser opens no file:// link).

Every artifact has a key, so Prefect versions it across runs: the key's page lists the
nights. A table artifact's values are numbers where the figure is one, so the UI sorts and
compares them. (Which stage event makes which artifact: `tasks.dashboard`.)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from firechunk.db.held import Held
from firechunk.layout import RunDir
from firechunk.publish import short_reason
from firechunk.run.history import RunRow, list_runs, why_not_published
from firechunk.run.sizes import Bucket, size_histogram, token_counts
from firechunk.run.write import read_quarantine
from firechunk.schemas.changes import ChangeSet, PageChange
from firechunk.schemas.publish import PublishResult
from firechunk.schemas.report import ChunkReport, QuarantineRecord
from firechunk.schemas.validation import ValidationOutcome
from firechunk.tasks.trend_chart import trend_svg
from firechunk.tasks.verdict import Verdict, allowed_values, failing_line, readable
from firechunk.words import counted

if TYPE_CHECKING:
    from firechunk.db.load import LoadResult

# Every card of a night, in the order it is read: the verdict first, then why, then what
# changed, what the database holds, the figures and where the files are. Prefect's UI lists
# a flow run's own artifacts before its task runs', and those in no order of their own: so
# the verdict is the one card made by the flow itself (`tasks.dashboard`), every other one
# is made in a task run and its description starts with its place here.
CARDS: dict[str, str] = {
    "rebuild-verdict": "the verdict",
    "validation-report": "validation, failing expectations first",
    "rebuild-changes": "what changes for the vector database",
    "rebuild-page-changes": "chunks added, removed, changed per page",
    "rebuild-pages-added": "pages added",
    "rebuild-pages-changed": "pages changed",
    "rebuild-pages-removed": "pages removed",
    "rebuild-quarantine": "pages quarantined, with the reason",
    "rebuild-database": "what the database holds",
    "rebuild-load": "what the load changed",
    "rebuild-summary": "the run's figures and seconds",
    "rebuild-trend": "the last nights",
    "rebuild-trend-chart": "the last nights, as bars",
    "rebuild-chunk-sizes": "chunk sizes",
    "rebuild-outputs": "where the files are",
    "run-directory": "the run's directory",
    "chunking-progress": "chunking progress",
    "embedding-progress": "embedding progress, with the time left",
}


def card_key(name: str) -> str:
    """The artifact key of card `name` (one of `CARDS`)."""
    assert name in CARDS, name
    return name


def card_description(name: str, text: str) -> str:
    """`3 · Validation FAILED: …`: the card's place in `CARDS`, then what it says (the
    dashboard shows the first ~45 characters of a description on the card)."""
    return f"{list(CARDS).index(name) + 1} · {text}"


MODEL_CHARS = 60  # of the model's name in a table: a longer one is cut with "…"
TREND_RUNS = 14  # two weeks of nights
OBSERVED_CHARS = 12  # of an observed value in the validation table; longer ones go below it
MAX_ROWS = 200  # of a URL table: a first run adds every page, thousands of them
BAR_WIDTH = 40  # characters of the histogram's longest bar


@contextmanager
def timed(seconds: dict[str, float], stage: str) -> Iterator[None]:
    """Add the wall time of the `with` block to `seconds[stage]` (for the summary table)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - started


def table_card(name: str, rows: list[dict[str, Any]], text: str) -> None:
    """Card `name` of `CARDS` as a table; `text` its description after its place."""
    create_table_artifact(rows, key=card_key(name), description=card_description(name, text))


def markdown_card(name: str, markdown: str, text: str) -> None:
    """Card `name` of `CARDS` as markdown; `text` its description after its place."""
    create_markdown_artifact(markdown, key=card_key(name), description=card_description(name, text))


def verdict_card(verdict: Verdict, run_id: str | None) -> None:
    """The first card: its description is the verdict; below it, the reasons and the other
    cards in the order they are read. Made by the flow, not a task (see `CARDS`)."""
    create_markdown_artifact(
        verdict_markdown(verdict, run_id), key=card_key("rebuild-verdict"),
        description=verdict.headline,
    )  # fmt: skip


def verdict_markdown(verdict: Verdict, run_id: str | None) -> str:
    lines = [f"# {verdict.headline}", ""]
    if run_id:
        lines += [f"Run `{run_id}`.", ""]
    lines += [f"- {detail}" for detail in verdict.details]
    lines += ["", "## The other cards, in order", ""]
    lines += [f"{place}. `{key}`: {what}" for place, (key, what) in
              enumerate(CARDS.items(), start=1) if key != "rebuild-verdict"]  # fmt: skip
    return "\n".join(lines) + "\n"


@task(name="report-to-dashboard", cache_policy=NO_CACHE)
def report_to_dashboard(
    report: ChunkReport,
    seconds: dict[str, float],
    result: PublishResult | None = None,
    removed: list[str] | None = None,
) -> None:
    """The summary table always; once validated (passed or not) the validation report and
    where the files are (the trend comes last, with what the database holds:
    `tasks.database`). `removed`: the old runs and raw crawls the night removed."""
    table_card(
        "rebuild-summary",
        summary_rows(report, seconds, result, removed),
        summary_description(result),
    )
    if result is None:
        return
    run_dir = result.run_dir.resolve()
    outcome = result.validation
    markdown_card(
        "validation-report",
        validation_markdown(outcome, RunDir(run_dir).report_html, run_dir),
        validation_headline(outcome),
    )
    published = "published" if result.published else "not published"
    markdown_card(
        "rebuild-outputs", outputs_markdown(result), f"Where this run's files are ({published})"
    )
    markdown_card(
        "run-directory",
        f"`{run_dir}`\n",
        "This run's output directory (a path on the worker's machine)",
    )


def validation_headline(outcome: ValidationOutcome) -> str:
    """`Validation FAILED: 1 of 23 · pages/page_tokens_in_chunks_ratio …`."""
    evaluated = outcome.evaluated_expectations
    if outcome.success:
        return f"Validation passed: {outcome.successful_expectations} of {evaluated}"
    failed = evaluated - outcome.successful_expectations
    names = ", ".join(f"{item.suite}/{item.name}" for item in outcome.failed)
    return f"Validation FAILED: {failed} of {evaluated} expectations · {names}"


def report_pages(run_dir: Path, changes: ChangeSet) -> None:
    """The URLs behind the change and quarantine counts, and the chunk-size histogram: made
    as soon as the run is written, so a run that then fails validation shows them too."""
    run = RunDir(run_dir)
    quarantined = read_quarantine(run_dir)
    per_page = page_change_rows(run_dir, changes)
    table_card(
        "rebuild-page-changes",
        per_page,
        f"Chunks added, removed, changed on {counted(len(per_page), 'page')}",
    )
    tables = [
        ("rebuild-pages-added", added_rows, changes.pages_added, "added"),
        ("rebuild-pages-changed", changed_rows, changes.pages_changed, "changed"),
        ("rebuild-pages-removed", removed_rows, changes.pages_removed, "removed"),
    ]
    for name, rows, pages, what in tables:
        table_card(
            name,
            rows(pages, run.changes_json),
            f"Pages {what} since the last good run: {len(pages)}",
        )
    table_card(
        "rebuild-quarantine",
        quarantine_rows(quarantined, run.quarantine_jsonl),
        f"Pages quarantined (not chunked), with the reason: {len(quarantined)}",
    )
    markdown_card(
        "rebuild-chunk-sizes",
        sizes_markdown(size_histogram(token_counts(run_dir))),
        "How many chunks of each size (tokens), from chunks.parquet",
    )


def page_change_rows(run_dir: Path, changes: ChangeSet) -> list[dict[str, Any]]:
    """Per page whose chunks changed, how many were added (new ids), removed (the
    baseline's ids gone) and changed (the same id, another row), most changed first:
    what the counts of changes.json mean for each page. Pages by the URL each chunk
    cites."""
    this = _ids_by_page(RunDir(run_dir).chunks_parquet)
    before = (
        _ids_by_page(RunDir(run_dir.parent / changes.baseline).chunks_parquet)
        if changes.baseline
        else {}
    )
    upsert, delete = set(changes.upsert), set(changes.delete)
    known: set[str] = set().union(*before.values()) if before else set()
    counts = []
    for url in sorted(set(this) | set(before)):
        upserted = this.get(url, set()) & upsert
        removed = before.get(url, set()) & delete
        added, changed = len(upserted - known), len(upserted & known)
        if added or removed or changed:
            counts.append((added + len(removed) + changed, url, added, len(removed), changed))
    counts.sort(key=lambda count: -count[0])
    rows: list[dict[str, Any]] = [
        {"url": url, "added": added, "removed": removed, "changed": changed}
        for _, url, added, removed, changed in counts
    ]
    blanks = {"added": None, "removed": None, "changed": None}
    return rows[:MAX_ROWS] + _more(len(rows), RunDir(run_dir).changes_json, blanks)


def _ids_by_page(chunks_parquet: Path) -> dict[str, set[str]]:
    """Chunk ids by the URL they cite; empty when the file is gone (a pruned baseline)."""
    if not chunks_parquet.is_file():
        return {}
    table = pl.read_parquet(chunks_parquet, columns=["chunk_id", "metadata"])
    urls = table.get_column("metadata").struct.field("sourceUrl")
    pages: dict[str, set[str]] = {}
    for chunk_id, url in zip(table.get_column("chunk_id"), urls, strict=True):
        pages.setdefault(url, set()).add(chunk_id)
    return pages


def summary_description(result: PublishResult | None) -> str:
    """What the table is and, for a run not published, why in full (a description wraps;
    the table's cells are cut at the dashboard's width)."""
    described = "Pages, chunks, tokens and seconds per stage of this run (total: the whole run)"
    if result is None or result.published:
        return described
    why = why_not_published(result.run_dir) or short_reason(result)
    return f"{described}.\n\n**Not published**: {why}."


def summary_rows(
    report: ChunkReport,
    seconds: dict[str, float],
    result: PublishResult | None = None,
    removed: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Measure and value: ints and seconds as numbers, text only where the value is text."""
    rows: list[tuple[str, Any]] = [
        ("pages crawled", report.pages_in),
        ("pages chunked", report.pages_chunked),
        ("aliases (same page, other URL)", report.pages_aliased),
        ("pages quarantined", report.pages_quarantined),
        ("pages set aside by validation (of the quarantined)", len(report.pages_set_aside)),
        ("chunks", report.chunks_out),
        ("duplicate chunks dropped", report.duplicate_chunks_dropped),
        ("tokens before clean-up", report.tokens_before_cleanup),
        ("tokens after clean-up", report.tokens_after_cleanup),
        ("tokens in chunks", report.tokens_in_chunks),
        ("median chunk tokens", report.chunk_tokens.p50),
    ]
    rows += [(f"{stage} (s)", round(value, 2)) for stage, value in seconds.items()]
    if result is not None:
        outcome = result.validation
        rows += [
            ("run id", result.run_id),
            ("validation", "passed" if outcome.success else "FAILED"),
            ("expectations passed", outcome.successful_expectations),
            ("expectations evaluated", outcome.evaluated_expectations),
            ("published as latest", "yes" if result.published else "no"),
        ]
        if not result.published:  # in full in the description
            rows.append(("not published because", short_reason(result)))
    if removed is not None:
        rows.append(("old runs and raw crawls removed", len(removed)))
    return [{"measure": name, "value": value} for name, value in rows]


def validation_markdown(
    outcome: ValidationOutcome, report_html: Path | None = None, run_dir: Path | None = None
) -> str:
    """The verdict, each failing expectation with the value it saw and what is allowed (read
    from `run_dir`'s results), then every expectation as a row, failing ones first;
    `report_html`, the offline page with the same results, is named as a path."""
    verdict = "passed" if outcome.success else "FAILED"
    lines = [
        f"# Validation {verdict}",
        "",
        f"{outcome.successful_expectations} of {outcome.evaluated_expectations} expectations "
        f"passed in {outcome.seconds:.1f} s (suites: {', '.join(outcome.suites)}).",
        "",
    ]
    rules = allowed_values(run_dir) if run_dir is not None else {}
    lines += [f"- **{failing_line(item, rules)}**" for item in outcome.failed]
    if outcome.failed:
        lines.append("")
    if report_html is not None and report_html.is_file():
        lines += [f"Full report, readable offline: `{report_html}`", ""]
    # Five columns, cells kept short: the dashboard cuts a table off at its width (828 px
    # at 1400) instead of wrapping it. What is cut here is given in full below the table.
    lines += [
        "result: passed or failed, and for an expectation on rows, how many rows broke it "
        "of the rows checked. observed: the value measured; a long one is in full below.",
        "",
        "| suite | expectation | column | result | observed |",
        "|---|---|---|---|---|",
    ]
    in_full = []
    for item in sorted(outcome.expectations, key=lambda item: item.success):
        result = "passed" if item.success else ("error" if item.error else "**failed**")
        if item.unexpected_count is not None:
            result += f" ({item.unexpected_count} of {item.element_count})"
        observed = _cell(item.error or readable(item.observed_value))
        if len(observed) > OBSERVED_CHARS:
            in_full.append(f"- {item.suite}/{item.name}: `{_cell(observed, 2000)}`")
        lines.append(
            f"| {item.suite} | {item.name} | {item.column or ''} | {result} "
            f"| {_clip(observed, OBSERVED_CHARS)} |"
        )
    if in_full:
        lines += ["", "## Observed in full", "", *in_full]
    for item in outcome.failed:
        if item.examples:
            lines += ["", f"## {item.suite}/{item.name}: failing rows", ""]
            lines += [f"- {_cell(readable(example), 400)}" for example in item.examples]
    return "\n".join(lines) + "\n"


def _size(path: Path) -> str:
    if path.is_dir():
        return "folder"
    size = path.stat().st_size
    return f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.1f} kB"


def outputs_markdown(result: PublishResult) -> str:
    run_dir = result.run_dir.resolve()
    files = sorted(path for path in run_dir.iterdir() if not path.name.startswith("."))
    # Paths as text: a browser does not open file:// links from the dashboard, and the
    # files are on the worker's machine, not the viewer's.
    lines = [f"# Outputs of run {result.run_id}", "", f"Directory: `{run_dir}`", ""]
    lines += [f"- `{path.name}` ({_size(path)})" for path in files]
    lines += [
        "",
        f"Validation report (self-contained HTML): `{RunDir(run_dir).report_html}`",
    ]
    docs = result.validation.data_docs_index
    if docs:
        lines += [
            "",
            f"Great Expectations Data Docs (need internet for styles): `{run_dir / docs}`",
        ]
    latest = Path(result.latest)
    if result.published:
        lines += ["", f"Published: `{latest}` now points at this run."]
    else:
        lines += ["", f"Not published: `{latest}` still points at the last good run."]
    return "\n".join(lines) + "\n"


def _cell(value: object, limit: int = 120) -> str:
    return _clip(str(value).replace("|", "\\|").replace("\n", " "), limit)


def added_rows(pages: list[PageChange], source: Path) -> list[dict[str, Any]]:
    """URL and what became of it in this run (chunked, alias or quarantined); `source`, the
    run's changes.json, named when the table is cut."""
    rows = [{"url": page.url, "status": page.status} for page in pages[:MAX_ROWS]]
    return rows + _more(len(pages), source, {"status": None})


def changed_rows(pages: list[PageChange], source: Path) -> list[dict[str, Any]]:
    """URL, whether its text or its status changed, and its status before and now."""
    rows = [
        {
            "url": page.url,
            "change": _what_changed(page),
            "status before": page.previous_status,
            "status now": page.status,
        }
        for page in pages[:MAX_ROWS]
    ]
    blanks = {"change": None, "status before": None, "status now": None}
    return rows + _more(len(pages), source, blanks)


def removed_rows(pages: list[PageChange], source: Path) -> list[dict[str, Any]]:
    """URL and its status in the last good run: its chunks are deleted from the database."""
    rows = [{"url": page.url, "status before": page.previous_status} for page in pages[:MAX_ROWS]]
    return rows + _more(len(pages), source, {"status before": None})


def quarantine_rows(records: list[QuarantineRecord], source: Path) -> list[dict[str, Any]]:
    """URL, the reason code, its detail and the page's size: what to fix and where."""
    rows = [
        {
            "url": record.url,
            "reason": record.reason,
            "detail": _clip(record.detail, 200),
            "markdown chars": record.markdown_chars,
        }
        for record in records[:MAX_ROWS]
    ]
    blanks = {"reason": None, "detail": None, "markdown chars": None}
    return rows + _more(len(records), source, blanks)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _what_changed(page: PageChange) -> str:
    text = page.content_hash != page.previous_content_hash
    status = page.status != page.previous_status
    return "text and status" if text and status else ("status" if status else "text")


def _more(total: int, source: Path, blanks: dict[str, Any]) -> list[dict[str, Any]]:
    """The last row of a table cut at MAX_ROWS: how many rows are left out, and in which of
    the run's files they all are (a first run adds every page: thousands of rows would make
    a huge artifact)."""
    if total <= MAX_ROWS:
        return []
    return [{"url": f"… and {total - MAX_ROWS} more: all {total} are in {source.name}", **blanks}]


def trend_to_dashboard(
    data_dir: Path, held: Held | None = None, *, collection: str | None = None
) -> None:
    """The newest TREND_RUNS runs on disk of one collection (`held`'s, else `collection`)
    as a table and as bars; `held`: what the database holds, None where the flow did not
    look. Another doc set's runs in the same data directory are not this one's nights."""
    collection = held.collection if held is not None and held.collection else collection
    runs = list_runs(data_dir, TREND_RUNS, collection)
    held_run = held.run_id if held else None
    table_card("rebuild-trend", trend_rows(runs, held_run), trend_description(runs, held))
    markdown_card(
        "rebuild-trend-chart",
        trend_markdown(runs, held_run),
        "Chunks, pages, quarantined and seconds (of the whole run) of the last "
        "nights, oldest left, each under its start (UTC)",
    )


def trend_rows(runs: list[RunRow], held_run: str | None = None) -> list[dict[str, Any]]:
    """One row per run, newest first; `db` marks the run the database holds."""
    return [row.as_table_row(loaded=row.run_id == held_run) for row in runs]


def trend_description(runs: list[RunRow], held: Held | None) -> str:
    """What the columns mean, the collection, and which run the database holds: the
    table's own cells stay narrow."""
    collection = next((row.collection for row in runs if row.collection), None)
    if held is None:
        database = "db: not read by this flow"
    elif held.problem is not None:
        database = "db: the database could not be read"
    elif held.run_id is None:
        database = "db: the database holds no run of it"
    else:
        database = f"db: yes for the run the database holds ({held.run_id})"
    return (
        f"The last {TREND_RUNS} runs on disk{f' of {collection}' if collection else ''}, "
        f"newest first. status latest: passed, and its collection's `latest` points at it; "
        f"{database}; "
        "quar.: pages quarantined; upsert, delete: chunk ids; s: seconds of the whole run "
        "(crawl, chunk, write, validate, publish; not a load), the summary's total."
    )


def trend_markdown(runs: list[RunRow], held_run: str | None = None) -> str:
    """A heading and the bars (inline SVG, which the dashboard renders)."""
    nights = min(len(runs), TREND_RUNS)
    return f"# The last {nights} run{'s' * (nights != 1)}\n\n{trend_svg(runs, held_run)}\n"


def sizes_markdown(buckets: list[Bucket]) -> str:
    """The histogram as a table with a bar of block characters (the UI renders markdown
    tables, not charts), and each bucket's share of the chunks."""
    total = sum(bucket.chunks for bucket in buckets)
    widest = max((bucket.chunks for bucket in buckets), default=0) or 1
    lines = [
        f"# Chunk sizes: {total} chunks",
        "",
        "| tokens | chunks | share | |",
        "|---|--:|--:|---|",
    ]
    for bucket in buckets:
        share = f"{100 * bucket.chunks / total:.1f} %" if total else ""
        bar = "█" * round(BAR_WIDTH * bucket.chunks / widest)
        lines.append(f"| {bucket.label} | {bucket.chunks} | {share} | {bar} |")
    return "\n".join(lines) + "\n"


def run_summary(report: ChunkReport) -> str:
    """One log line with the run's page and chunk counts."""
    return (
        f"{report.pages_in} pages in: {report.pages_chunked} chunked, "
        f"{report.pages_aliased} aliases, {report.pages_quarantined} quarantined -> "
        f"{report.chunks_out} chunks, {report.duplicate_chunks_dropped} duplicate chunks dropped"
    )


def changes_rows(changes: ChangeSet) -> list[dict[str, Any]]:
    """Measure and value, counts as numbers (the URLs are in `tasks.artifacts.report_pages`)."""
    rows: list[tuple[str, Any]] = [
        ("collection", changes.collection or "–"),
        ("baseline run", changes.baseline or "none: every chunk is an upsert"),
        ("full rebuild", "yes" if changes.full else "no"),
        ("full replacement", changes.full_replacement_reason or "no"),
        ("pages chunked", changes.pages_rechunked),
        ("pages reused from the baseline", changes.pages_reused),
        ("chunk ids to upsert", len(changes.upsert)),
        ("chunk ids to delete", len(changes.delete)),
        ("pages added", len(changes.pages_added)),
        ("pages changed", len(changes.pages_changed)),
        ("pages removed", len(changes.pages_removed)),
    ]
    return [{"measure": name, "value": value} for name, value in rows]


def short_model(model: str) -> str:
    """The model's name without the description of its build that may follow it in
    parentheses, cut to MODEL_CHARS: short enough for a table cell, which the dashboard
    cuts off at its width rather than wrap."""
    name = model.split(" (", 1)[0].strip() or model
    return name if len(name) <= MODEL_CHARS else name[: MODEL_CHARS - 1] + "…"


def load_description(result: LoadResult) -> str:
    """The load artifact's description, which wraps: the model in full on a line of its own."""
    figures = f"{result.inserted} inserted, {result.updated} updated, {result.deleted} deleted"
    return f"Loaded: {figures}.\n\nModel: {result.model} ({result.dimensions} dimensions)"


def load_rows(result: LoadResult) -> list[dict[str, Any]]:
    """The load artifact's table: numbers as numbers, every cell short enough to fit at
    1400 px (the model in full is in the description)."""
    return [
        {"figure": "collection", "value": result.collection},
        {"figure": "rows inserted", "value": result.inserted},
        {"figure": "rows updated", "value": result.updated},
        {"figure": "rows deleted", "value": result.deleted},
        {"figure": "chunks embedded", "value": result.embedded},
        {"figure": "chunks held", "value": result.chunks},
        {"figure": "seconds", "value": result.seconds},
        {"figure": "run", "value": result.run_id},
        {"figure": "previous run", "value": result.previous_run_id or "none"},
        {"figure": "model", "value": short_model(result.model)},
        {"figure": "dimensions", "value": result.dimensions},
    ]
