"""The rebuild's first half alone: a saved crawl chunked and written into a run directory.

The run is validated and published by the `validate-publish` flow, given the run directory
this flow returns; the two together do what the `rebuild` flow does on a saved crawl.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from firechunk.flows.names import site_and_date
from firechunk.run.history import record_seconds
from firechunk.settings import RunSettings
from firechunk.tasks.artifacts import report_to_dashboard, timed
from firechunk.tasks.chunk import chunk_on_runner
from firechunk.tasks.run import start, write


@flow(name="chunk", flow_run_name=site_and_date)
def chunk(
    crawl_file: Path,
    run: RunSettings = RunSettings(),
    data_dir: Path = Path("data"),
    run_id: str | None = None,
) -> Path:
    """Chunk every page of `crawl_file` into `data_dir/runs/<run-id>/`, for the
    validate-publish flow. Pages the last good run of its collection (`run.collection`,
    empty: the one the crawl's pages name) chunked are reused unless `run.full`.

    Args:
        crawl_file: A crawl in Firecrawl's result shape, as the crawl flow saves it
            (data/raw/<crawl-id>/crawl.json).
        run: How the run is chunked, validated and published (saved with it, so the
            validate-publish flow uses the same).
        data_dir: The data root: the run goes to runs/<run-id>/; the run its collection's
            latest link points at is the one reused from.
        run_id: The run directory's name (letters, digits, '.', '_', '-'), which must be
            new; empty for the UTC start time and a random suffix.

    Returns:
        The run directory, the validate-publish flow's `run_dir`.
    """
    seconds: dict[str, float] = {}
    started = start(data_dir, run_id, run, crawl_file)
    with timed(seconds, "chunk"):
        chunk_on_runner(started, crawl_file)
    with timed(seconds, "write"):
        written = write(started)
    record_seconds(started.run_dir, seconds)  # the validate-publish flow adds its own
    report_to_dashboard(written.report, seconds)
    return started.run_dir
