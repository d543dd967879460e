"""The rebuild's first half alone: a saved crawl chunked and written into a run directory.

The run is validated and published by the `validate-publish` flow, given the run directory
this flow returns; the two together do what the `rebuild` flow does on a saved crawl.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.names import site_and_date
from tasks.artifacts import report_to_dashboard, timed
from tasks.chunk import chunk_on_runner
from tasks.run import start, write
from tasks.runners import TaskRunnerKind, make_task_runner


@flow(name="chunk", flow_run_name=site_and_date)
def chunk(
    crawl_file: Path,
    data_dir: Path = Path("data"),
    task_runner: TaskRunnerKind = "process",
    dask_address: str | None = None,
    workers: int = 2,
    run_id: str | None = None,
    full: bool = False,
    allow_shrink: bool = False,
    allow_partial: bool = False,
) -> Path:
    """Chunk every page of `crawl_file` into `data_dir/runs/<run-id>/`; returns that
    directory, for the validate-publish flow. Pages the last good run chunked are reused
    unless `full`; `allow_shrink` lets it be published even if it drops over 20 % of the
    last good run's pages or chunks; `allow_partial` chunks a crawl whose status is not
    "completed"."""
    seconds: dict[str, float] = {}
    run = start(data_dir, run_id, full, allow_shrink, allow_partial)
    with timed(seconds, "chunk"):
        chunk_on_runner(
            run, crawl_file, make_task_runner(task_runner, workers, dask_address), workers
        )
    with timed(seconds, "write"):
        written = write(run)
    report_to_dashboard(written.report, seconds)
    return run.run_dir
