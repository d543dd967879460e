"""Prefect task of the last stage: write the run, validate it with GX, publish it if it passed.

`firechunk.publish.build_and_publish` does the work and decides: only a run that passed
becomes `data/latest`. A failed validation is not an error of the task (the run is written
and kept, marked failed); the flow reports it on the dashboard first and then fails.
"""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from firechunk.publish import build_and_publish, format_result
from firechunk.rebuild import RunStart, WrittenRun, publish_stage
from firechunk.retention import prune_raw_crawls, prune_runs
from firechunk.validation_process import ValidationProcess
from schemas.publish import PublishResult
from schemas.report import ChunkRun


class RunNotPublished(RuntimeError):
    """The run failed validation, or `latest` moved to another run while it ran: it is kept
    in runs/, marked failed or superseded, and was not published."""


@task(name="validate-publish", cache_policy=NO_CACHE)
def validate_and_publish(run: ChunkRun, data_dir: Path, run_id: str | None = None) -> PublishResult:
    # Absolute, so the output links on the dashboard work and GX gets the paths it needs.
    result = build_and_publish(run, Path(data_dir).resolve(), run_id=run_id)
    _log(result)
    return result


@task(name="validate-publish", cache_policy=NO_CACHE)
def publish_written(
    start: RunStart, written: WrittenRun, validator: ValidationProcess | None = None
) -> PublishResult:
    """Validate a run the rebuild has written; publish it as `latest` only if it passed."""
    result = publish_stage(start, written, validator)
    _log(result)
    return result


def _log(result: PublishResult) -> None:
    logger = get_run_logger()
    message = format_result(result)
    if result.published:
        logger.info(message)
    else:
        logger.error(message)


@task(name="prune-old-runs", cache_policy=NO_CACHE)
def prune_old_runs(data_dir: Path, keep: int, crawl_file: Path | None = None) -> list[str]:
    """After a run was published: remove finished runs and raw crawls beyond the `keep`
    newest (`firechunk.retention`), never `crawl_file`'s, the crawl the run was rebuilt
    from; 0 keeps everything. A removal that fails is logged, not raised: the run is
    published, and the next run tries again."""
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


def raise_if_failed(result: PublishResult) -> None:
    """Fail the flow run when the run was not published, with the message that says why."""
    if not result.published:
        raise RunNotPublished(format_result(result))
