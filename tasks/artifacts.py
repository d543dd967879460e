"""What a run shows on the Prefect dashboard: a summary table, the validation report, links.

Artifacts with a key are versioned by Prefect across runs, so the dashboard can show how a
figure moved from one night to the next. (The progress bar of the chunking step is made in
`tasks.chunk`, where the batches finish.)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from schemas.publish import PublishResult
from schemas.report import ChunkReport
from schemas.validation import ValidationOutcome

SUMMARY_KEY = "rebuild-summary"
VALIDATION_KEY = "validation-report"
OUTPUTS_KEY = "rebuild-outputs"
RUN_DIR_LINK_KEY = "run-directory"


@contextmanager
def timed(seconds: dict[str, float], stage: str) -> Iterator[None]:
    """Add the wall time of the `with` block to `seconds[stage]` (for the summary table)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - started


@task(name="report-to-dashboard", cache_policy=NO_CACHE)
def report_to_dashboard(
    report: ChunkReport,
    seconds: dict[str, float],
    result: PublishResult | None = None,
    removed: list[str] | None = None,
) -> None:
    """The summary table always; the validation report and output links once published.
    `removed`: the old runs and raw crawls the rebuild removed after publishing."""
    create_table_artifact(
        summary_rows(report, seconds, result, removed),
        key=SUMMARY_KEY,
        description="Pages, chunks, tokens and durations of this run",
    )
    if result is None:
        return
    create_markdown_artifact(
        validation_markdown(result.validation),
        key=VALIDATION_KEY,
        description="Great Expectations results of this run",
    )
    create_markdown_artifact(
        outputs_markdown(result), key=OUTPUTS_KEY, description="Where this run's files are"
    )
    create_markdown_artifact(
        f"`{result.run_dir.resolve()}`\n",
        key=RUN_DIR_LINK_KEY,
        description="This run's output directory (a path on the worker's machine)",
    )


def summary_rows(
    report: ChunkReport,
    seconds: dict[str, float],
    result: PublishResult | None = None,
    removed: list[str] | None = None,
) -> list[dict[str, str]]:
    rows = [
        ("pages crawled", report.pages_in),
        ("pages chunked", report.pages_chunked),
        ("aliases (same page, other URL)", report.pages_aliased),
        ("pages quarantined", report.pages_quarantined),
        ("chunks", report.chunks_out),
        ("duplicate chunks dropped", report.duplicate_chunks_dropped),
        ("tokens before clean-up", report.tokens_before_cleanup),
        ("tokens after clean-up", report.tokens_after_cleanup),
        ("tokens in chunks", report.tokens_in_chunks),
        ("median chunk tokens", report.chunk_tokens.p50),
    ]
    rows += [(f"{stage} (s)", f"{value:.2f}") for stage, value in seconds.items()]
    if result is not None:
        outcome = result.validation
        rows += [
            ("run id", result.run_id),
            (
                "validation",
                f"{'passed' if outcome.success else 'FAILED'}: "
                f"{outcome.successful_expectations}/{outcome.evaluated_expectations} expectations",
            ),
            ("published as latest", "yes" if result.published else "no"),
        ]
    if removed is not None:
        rows.append(("old runs and raw crawls removed", len(removed)))
    return [{"measure": name, "value": str(value)} for name, value in rows]


def validation_markdown(outcome: ValidationOutcome) -> str:
    verdict = "passed" if outcome.success else "FAILED"
    lines = [
        f"# Validation {verdict}",
        "",
        f"{outcome.successful_expectations} of {outcome.evaluated_expectations} expectations "
        f"passed in {outcome.seconds:.1f} s (suites: {', '.join(outcome.suites)}).",
        "",
        "| suite | expectation | column | result | unexpected rows | observed |",
        "|---|---|---|---|---|---|",
    ]
    for item in outcome.expectations:
        result = "passed" if item.success else ("error" if item.error else "**failed**")
        unexpected = (
            f"{item.unexpected_count} of {item.element_count}"
            if item.unexpected_count is not None
            else ""
        )
        observed = _cell(item.error or ("" if item.observed_value is None else item.observed_value))
        lines.append(
            f"| {item.suite} | {item.name} | {item.column or ''} | {result} | {unexpected} "
            f"| {observed} |"
        )
    for item in outcome.failed:
        if item.examples:
            lines += ["", f"## {item.suite}/{item.name}: examples", ""]
            lines += [f"- `{_cell(example)}`" for example in item.examples]
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
    docs = result.validation.data_docs_index
    if docs:
        lines += ["", f"Great Expectations Data Docs: `{run_dir / docs}`"]
    latest = Path(result.latest)
    if result.published:
        lines += ["", f"Published: `{latest}` now points at this run."]
    else:
        lines += ["", f"Not published: `{latest}` still points at the last good run."]
    return "\n".join(lines) + "\n"


def _cell(value: object, limit: int = 120) -> str:
    text = str(value).replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"
