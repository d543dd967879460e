"""The chunk stage alone: a saved crawl in, chunks out, on a process pool or a Dask cluster."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.names import site_and_date
from schemas.report import ChunkRun
from tasks.artifacts import report_to_dashboard, timed
from tasks.chunk import chunk_in_parallel, save_chunk_run
from tasks.crawl import load_crawl
from tasks.runners import TaskRunnerKind, make_task_runner


@flow(name="chunk", flow_run_name=site_and_date)
def chunk(
    crawl_file: Path,
    out_dir: Path | None = None,
    task_runner: TaskRunnerKind = "process",
    dask_address: str | None = None,
    workers: int = 2,
) -> ChunkRun:
    """Chunk every page of `crawl_file`; with `out_dir`, save the run for the validate flow."""
    seconds: dict[str, float] = {}
    with timed(seconds, "load crawl"):
        crawl = load_crawl(crawl_file)
    with timed(seconds, "chunk"):
        run = chunk_in_parallel(
            crawl, make_task_runner(task_runner, workers, dask_address), workers=workers
        )
    if out_dir is not None:
        save_chunk_run(run, out_dir)
    report_to_dashboard(run.report, seconds)
    return run
