"""The Prefect dashboard's side of a run: a `Listener` that turns the pipeline's stage
events into log lines and artifacts (`tasks.artifacts` says what each artifact shows).

No flow or task says what to report: `firechunk.pipeline.run_pipeline` tells this listener
what each stage did, and it reports it. The chunking progress bar moves as batches finish;
the changes and the changed pages appear as soon as the run is written (so a run that then
fails validation shows them too); the summary, the validation report and where the files
are once it is published or refused; the load's figures after the load; and, whatever
became of the night, what the database holds and the trend (`tasks.database`).
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

from prefect import get_run_logger, task
from prefect.artifacts import create_progress_artifact, update_progress_artifact
from prefect.cache_policies import NO_CACHE

from firechunk.activity import is_interrupt
from firechunk.pipeline import Listener, Night, Request, StageName
from firechunk.publish import format_outcome, format_result
from firechunk.run.baseline import damage_warning
from firechunk.run.stages import Chunked, RunStart
from firechunk.run.write import read_report
from firechunk.schemas.publish import PublishResult
from firechunk.schemas.report import ChunkReport
from firechunk.schemas.validation import ValidationOutcome
from firechunk.tasks.artifacts import (
    card_description,
    card_key,
    changes_rows,
    load_description,
    load_rows,
    markdown_card,
    report_pages,
    report_to_dashboard,
    run_summary,
    table_card,
    verdict_card,
)
from firechunk.tasks.database import database_to_dashboard
from firechunk.tasks.verdict import night_verdict, pages_changed
from firechunk.words import counted, reuse_phrase, time_left

if TYPE_CHECKING:
    from firechunk.db.load import LoadResult
    from firechunk.schemas.changes import ChangeSet

LOGGED_EVERY = 0.1  # of a load's windows to embed: a progress line at each tenth


class Dashboard(Listener):
    """Reports one flow run's stages to the Prefect API it runs on."""

    def __init__(self) -> None:
        self._progress_id: UUID | None = None
        self._embedding_id: UUID | None = None
        self._embedding_since = 0.0
        self._logged: dict[StageName, int] = {}
        self._start: RunStart | None = None
        self._stage: StageName = "crawl"

    def say(self, message: str) -> None:
        get_run_logger().info("%s", message)

    def stage_started(self, stage: StageName, request: Request) -> None:
        self._stage = stage
        if stage == "chunk":
            self._progress_id = _progress_card()
        elif stage == "load":
            self._embedding_id = _embedding_card()
            self._embedding_since = time.monotonic()

    def progress(self, stage: StageName, done: int, total: int) -> None:
        if stage == "chunk" and self._progress_id is not None:
            update_progress_artifact(self._progress_id, progress=100.0 * done / max(1, total))
            get_run_logger().info("chunked %d/%d pages", done, total)
            return
        logged = self._logged.get(stage, 0)
        if done == total or done - logged >= max(1, int(total * LOGGED_EVERY)):
            self._logged[stage] = done
            left = time_left(time.monotonic() - self._embedding_since, done, total)
            get_run_logger().info("embedded %d of %d windows, %s", done, total, left)
            if self._embedding_id is not None:
                text = f"Windows embedded: {done:,} of {total:,}, {left}"
                update_progress_artifact(
                    self._embedding_id,
                    progress=100.0 * done / max(1, total),
                    description=card_description("embedding-progress", text),
                )

    def stage_finished(self, stage: StageName, result: Any, seconds: float) -> None:
        if stage == "start":
            self._start = result
            _started(result)
        elif stage == "chunk":
            self._chunked(result)
        elif stage == "write":
            changes_to_dashboard(self._run_dir, result.report, result.changes())
        elif stage == "validate":
            _validated(self._run_dir, result)
        elif stage == "publish":
            _published(result)
        elif stage == "load":
            _loaded(result)

    def ended(self, request: Request, night: Night, error: BaseException | None) -> None:
        """The verdict first, whatever became of the night; then the summary (once there
        is a publish result) and what the database holds: also for a night that failed,
        before its error fails the flow run. An interrupted night gets its verdict only,
        if the API still answers."""
        if error is not None and is_interrupt(error):
            with contextlib.suppress(Exception):
                verdict_card(night_verdict(request, night, error, self._stage, True), night.run_id)
            return
        verdict = night_verdict(request, night, error, self._stage)
        verdict_card(verdict, night.run_id)
        if night.result is not None:
            report_to_dashboard(
                read_report(night.result.run_dir), night.seconds, night.result, night.removed
            )
        # The state, not the result: a failure to report must neither fail a good night
        # nor hide why a bad one failed.
        database_to_dashboard(
            request.data_dir,
            night.run_id,
            request.database,
            night.start.collection if night.start else request.run.collection,
            verdict.headline,
            return_state=True,
        )

    def not_started(self, request: Request, error: BaseException) -> None:
        """A night refused before any stage ran (`flows.checks`): one ERROR line and the
        verdict card."""
        get_run_logger().error("%s", error)
        verdict_card(night_verdict(request, Night(), error, "crawl"), None)

    @property
    def _run_dir(self) -> Path:
        assert self._start is not None, "the start stage comes first"
        return self._start.run_dir

    def _chunked(self, chunked: Chunked) -> None:
        start = self._start
        if self._progress_id is not None:
            update_progress_artifact(self._progress_id, progress=100.0)
        repeats = chunked.pages_in - chunked.pages_to_chunk
        get_run_logger().info(
            "%s in: %s%s%s",  # 13 pages in: 10 reused from run X, 1 chunked, 2 the same ...
            counted(chunked.pages_in, "page"),
            reuse_phrase(
                chunked.pages_reused,
                chunked.pages_chunked,
                start.baseline_id if start else None,
                start.settings.full if start else False,
            ),
            " in this process (too few to start workers)" if chunked.in_this_process else "",
            f", {repeats} the same URL or markdown as another page" if repeats else "",
        )


def _started(start: RunStart) -> None:
    logger = get_run_logger()
    logger.info(
        "run %s of %s in %s; baseline: %s%s",
        start.run_id,
        start.collection,
        start.run_dir,
        f"run {start.baseline_id}" if start.baseline_id else "none (no good run yet)",
        " (full rebuild: its outcomes are not reused)"
        if start.settings.full and start.baseline_id
        else "",
    )
    if start.baseline_damaged:
        logger.warning("%s", damage_warning(str(start.baseline_id), start.baseline_damaged))


@task(name="report-embedding", cache_policy=NO_CACHE)
def _embedding_card() -> UUID:
    """The load's embedding progress bar, made in a task run, its description the time
    left."""
    return create_progress_artifact(  # type: ignore[return-value]
        progress=0.0,
        key=card_key("embedding-progress"),
        description=card_description("embedding-progress", "Windows embedded"),
    )


@task(name="report-progress", cache_policy=NO_CACHE)
def _progress_card() -> UUID:
    """The chunking progress bar, made in a task run (see `tasks.artifacts.CARDS`)."""
    return create_progress_artifact(  # type: ignore[return-value]
        progress=0.0,
        key=card_key("chunking-progress"),
        description=card_description("chunking-progress", "Pages chunked (of those not reused)"),
    )


@task(name="report-changes", cache_policy=NO_CACHE)
def changes_to_dashboard(run_dir: Path, report: ChunkReport, changes: ChangeSet) -> None:
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
    table_card(
        "rebuild-changes",
        changes_rows(changes),
        f"{pages_changed(changes)}: {counted(len(changes.upsert), 'chunk')} to upsert, "
        f"{len(changes.delete)} to delete (changes.json)",
    )
    report_pages(run_dir, changes)


def _validated(run_dir: Path, outcome: ValidationOutcome) -> None:
    """A warning for a failure: the publish stage's line that follows is the night's
    ERROR line."""
    logger = get_run_logger()
    log = logger.info
    if not outcome.success or outcome.pages_set_aside:
        log = logger.warning
    log("%s", format_outcome(outcome, run_dir))


def _published(result: PublishResult) -> None:
    log = get_run_logger().info if result.published else get_run_logger().error
    log("%s", format_result(result))


@task(name="report-load", cache_policy=NO_CACHE)
def _loaded(result: LoadResult | None) -> None:
    if result is None:
        newer = "Not loaded: a newer run was published meanwhile"
        markdown_card("rebuild-load", newer, newer)
        return
    get_run_logger().info(
        "run %s loaded into %s: %d inserted, %d updated, %d deleted, %d embedded in %.1f s",
        result.run_id, result.collection, result.inserted, result.updated, result.deleted,
        result.embedded, result.seconds,
    )  # fmt: skip
    table_card("rebuild-load", load_rows(result), load_description(result))
