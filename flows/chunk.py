"""The rebuild's first half alone: a saved crawl chunked and written into a run directory.

The run is validated and published by the `validate-publish` flow, given the run directory
this flow returns; the two together do what the `rebuild` flow does on a saved crawl.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from firechunk.flows.names import site_and_date
from firechunk.run.history import record_seconds
from firechunk.tasks.artifacts import report_to_dashboard, timed
from firechunk.tasks.chunk import chunk_on_runner
from firechunk.tasks.run import start, write
from firechunk.tasks.runners import TaskRunnerKind, make_task_runner
from firechunk.validate.set_aside import DEFAULT_MAX_FAILED_PAGES


@flow(name="chunk", flow_run_name=site_and_date)
def chunk(
    crawl_file: Path,
    data_dir: Path = Path("data"),
    task_runner: TaskRunnerKind = "process",
    dask_address: str | None = None,
    workers: int | None = None,
    run_id: str | None = None,
    full: bool = False,
    allow_shrink: bool = False,
    allow_partial: bool = False,
    max_failed_pages: float = DEFAULT_MAX_FAILED_PAGES,
) -> Path:
    """Chunk every page of `crawl_file` into `data_dir/runs/<run-id>/`, for the
    validate-publish flow. Pages the last good run chunked are reused unless `full`.

    Args:
        crawl_file: A crawl in Firecrawl's result shape, as the crawl flow saves it
            (data/raw/<crawl-id>/crawl.json).
        data_dir: The data root: the run goes to runs/<run-id>/; the run the latest link
            points at is the one reused from.
        task_runner: Where pages are chunked: "process" (processes on the worker's machine)
            or "dask" (a Dask cluster).
        dask_address: The Dask scheduler to chunk on (tcp://host:8786); empty for a local
            cluster of `workers` processes.
        workers: How many processes chunk pages side by side; empty for 2, or none (the
            flow's own process) when under 2 MB of pages is left to chunk.
        run_id: The run directory's name (letters, digits, '.', '_', '-'), which must be
            new; empty for the UTC start time and a random suffix.
        full: Chunk every page again, reusing nothing from the last good run.
        allow_shrink: Let the run be published even if it drops over 20 % of the last good
            run's pages or chunks.
        allow_partial: Chunk a crawl whose status is not "completed".
        max_failed_pages: The largest share of pages (0.01: 1 %) that may fail page-level
            expectations and be set aside (quarantined, their last good chunks kept) while
            the run still publishes.

    Returns:
        The run directory, the validate-publish flow's `run_dir`.
    """
    seconds: dict[str, float] = {}
    run = start(data_dir, run_id, full, allow_shrink, allow_partial, max_failed_pages)
    with timed(seconds, "chunk"):
        chunk_on_runner(
            run, crawl_file, make_task_runner(task_runner, workers, dask_address), workers
        )
    with timed(seconds, "write"):
        written = write(run)
    record_seconds(run.run_dir, seconds)  # the validate-publish flow adds its own
    report_to_dashboard(written.report, seconds)
    return run.run_dir
