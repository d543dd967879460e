"""Prefect tasks of the last stage: validate the run with GX, publish it if it passed.

`firechunk.publish` does the work and decides: only a run that passed becomes
`data/latest`. A run not published (failed validation, or overtaken by another run) fails
its task, so the dashboard shows where the night failed; the run is kept, marked failed,
and the exception carries the result so the flow can still report it.
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

    def __init__(self, result: PublishResult) -> None:
        super().__init__(format_result(result))
        self.result = result


@task(name="write-validate-publish", cache_policy=NO_CACHE)
def validate_and_publish(run: ChunkRun, data_dir: Path, run_id: str | None = None) -> PublishResult:
    """Write a chunk run held in memory, validate it, publish it only if it passed."""
    # Absolute, so the output links on the dashboard work and GX gets the paths it needs.
    return _published(build_and_publish(run, Path(data_dir).resolve(), run_id=run_id))


@task(name="validate-publish", cache_policy=NO_CACHE)
def publish_written(
    start: RunStart, written: WrittenRun, validator: ValidationProcess | None = None
) -> PublishResult:
    """Validate a run the rebuild has written; publish it as `latest` only if it passed."""
    return _published(publish_stage(start, written, validator))


def _published(result: PublishResult) -> PublishResult:
    """Log the verdict; raise `RunNotPublished` (failing the task) unless published."""
    logger = get_run_logger()
    if not result.published:
        logger.error(format_result(result))
        raise RunNotPublished(result)
    logger.info(format_result(result))
    return result


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
