"""Prefect tasks of the run's stages: start, write, validate, publish, prune.

Thin wrappers around `firechunk.run.stages`; each takes the run's `RunStart` (a few paths
and ids) and hands on a small summary, so any of them can be retried or run elsewhere.
A run that fails validation fails its `validate-run` task, so the dashboard shows where
the night failed; the exception carries the result so the flow can still report it. A run
the shrink guard refuses, or one another run overtakes, is the guard working, not an error:
`publish-run` logs the reason as one ERROR line and returns the result in a Completed state
named for it ("Refused", "Superseded"); a task returning a Failed state or raising would
add Prefect's own ERROR lines, the whole result or a traceback. Either way the flow gets
the `PublishResult` (`validated_and_published`), reports it, and ends Failed with
`not_published`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.states import Completed, Failed, State

from firechunk.layout import DataDir
from firechunk.publish import format_outcome, format_result, short_reason
from firechunk.retention import prune_raw_crawls, prune_runs
from firechunk.run.baseline import damage_warning
from firechunk.run.changes import read_changes
from firechunk.run.stages import (
    RunStart,
    Written,
    publish_stage,
    start_run,
    validate_stage,
    write_stage,
)
from firechunk.run.write import read_report
from firechunk.schemas.changes import ChangeSet
from firechunk.schemas.job import CrawlTarget
from firechunk.schemas.publish import PublishResult
from firechunk.schemas.report import ChunkReport
from firechunk.schemas.validation import ValidationOutcome
from firechunk.settings import RunSettings
from firechunk.tasks.artifacts import report_pages

CHANGES_KEY = "rebuild-changes"


class RunNotPublished(RuntimeError):
    """The run failed validation, the shrink guard refused it, or `latest` moved to another
    run while it ran: it is kept in runs/, marked failed or superseded, and was not
    published. What a caller of the flow gets (the CLI: one line, exit 1)."""

    def __init__(self, message: str, result: PublishResult | None = None) -> None:
        super().__init__(message)
        self.result = result


@task(name="start-run", cache_policy=NO_CACHE)
def start(
    data_dir: Path, run_id: str | None, settings: RunSettings, source: Path | CrawlTarget
) -> RunStart:
    """Claim the run (`firechunk.run.stages.start_run`); `source`, the crawl file or the
    crawl's target, names its collection when the settings do not."""
    started = start_run(data_dir, run_id, settings, source=source)
    get_run_logger().info(
        "run %s of %s in %s; baseline: %s%s",
        started.run_id,
        started.collection,
        started.run_dir,
        f"run {started.baseline_id}" if started.baseline_id else "none (no good run yet)",
        " (full rebuild: its outcomes are not reused)"
        if settings.full and started.baseline_id
        else "",
    )
    if started.baseline_damaged:
        get_run_logger().warning(
            "%s", damage_warning(str(started.baseline_id), started.baseline_damaged)
        )
    return started


@task(name="write-run", cache_policy=NO_CACHE)
def write(run: RunStart) -> Written:
    """Assemble and write the run's files and changes.json; put the changes on the dashboard."""
    written = write_stage(run)
    changes_to_dashboard(run, written.report, written.changes)
    return written


def changes_to_dashboard(run: RunStart, report: ChunkReport, changes: ChangeSet) -> None:
    """Log the run's figures; its change set and changed pages as artifacts."""
    get_run_logger().info(
        "%s; changes: %d to upsert, %d to delete, pages %d added, %d changed, %d removed",
        run_summary(report),
        len(changes.upsert),
        len(changes.delete),
        len(changes.pages_added),
        len(changes.pages_changed),
        len(changes.pages_removed),
    )
    create_table_artifact(
        changes_rows(changes),
        key=CHANGES_KEY,
        description="What this run changes for the vector database (changes.json)",
    )
    report_pages(run.run_dir, changes)


@task(name="validate-run", cache_policy=NO_CACHE)
def validate(run: RunStart) -> ValidationOutcome:
    """Run the suites; a run that fails them fails this task (`RunNotPublished`). Pages
    set aside were written again: their changes replace the write task's on the dashboard."""
    outcome = validate_stage(run)
    if outcome.pages_set_aside:
        changes_to_dashboard(run, read_report(run.run_dir), read_changes(run.run_dir))
    if not outcome.success:
        result = PublishResult(
            run_id=run.run_id,
            run_dir=run.run_dir,
            published=False,
            latest=DataDir(run.data_dir or run.run_dir).collection_latest(run.collection),
            validation=outcome,
        )
        get_run_logger().error(format_result(result))
        raise RunNotPublished(format_result(result), result)
    log = get_run_logger().warning if outcome.pages_set_aside else get_run_logger().info
    log(format_outcome(outcome, run.run_dir))
    return outcome


@task(name="publish-run", cache_policy=NO_CACHE)
def publish(run: RunStart, outcome: ValidationOutcome) -> PublishResult | State:
    """Point `latest` at the run. A run the shrink guard refuses, or one overtaken by a run
    published while it ran, is said in one ERROR line and returned in a state named
    "Refused" or "Superseded": the flow run fails, with no traceback for a guard that
    worked."""
    result = publish_stage(run, outcome)
    if not result.published:
        get_run_logger().error(format_result(result))
        name = "Refused" if result.refused is not None else "Superseded"
        return Completed(name=name, message=short_reason(result), data=result)
    get_run_logger().info(format_result(result))
    return result


def validated_and_published(run: RunStart) -> PublishResult:
    """Validate the run and publish it if it passed (the two tasks, inside a flow): the
    `PublishResult`, published or not. Only an unexpected failure (a bug, a full disk)
    raises."""
    try:
        published = publish(run, validate(run))
    except RunNotPublished as failed:  # its task failed, the report logged: on to the flow
        return failed.result
    # A task that returns a state hands its caller the state: the result is its data.
    return published.result() if isinstance(published, State) else published


def not_published(result: PublishResult) -> State:
    """What a flow returns when its run was not published: Failed, with the reason in short
    as its message, and the `RunNotPublished` a caller of the flow raises (the CLI says
    `format_result` in one line and exits 1). Returned, not raised: no traceback is logged
    for a guard that did its job."""
    return Failed(
        message=f"Run {result.run_id} not published: {short_reason(result)}",
        data=RunNotPublished(format_result(result), result),
    )


@task(name="prune-old-runs", cache_policy=NO_CACHE)
def prune_old_runs(data_dir: Path, keep: int, crawl_file: Path | None = None) -> list[str]:
    """As a run starts, and once it is published: remove ended runs (finished, or killed)
    and raw crawls beyond the `keep` newest (`firechunk.retention`), never `crawl_file`'s,
    the crawl the run was rebuilt from, and what dead writers left; 0 keeps every run. A
    removal that fails is logged, not raised: the next run tries again."""
    logger = get_run_logger()
    try:
        runs = prune_runs(Path(data_dir), keep)
        crawls = prune_raw_crawls(Path(data_dir), keep, spare=crawl_file)
    except OSError as error:
        logger.warning("could not remove old runs from %s: %s", data_dir, error)
        return []
    for what, removed in (("run", runs), ("raw crawl", crawls)):
        if removed:
            logger.info(
                "removed %d old %s(s), keeping the %d newest: %s",
                len(removed),
                what,
                keep,
                ", ".join(removed),
            )
    return runs + crawls


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
