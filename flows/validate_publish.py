"""The last stage alone: validate a saved chunk run, write its outputs, publish it if it passed."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.names import site_and_date
from schemas.publish import PublishResult
from tasks.artifacts import report_to_dashboard, timed
from tasks.chunk import load_chunk_run
from tasks.publish import RunNotPublished, validate_and_publish


@flow(name="validate-publish", flow_run_name=site_and_date)
def validate_publish(
    chunk_run: Path, data_dir: Path = Path("data"), run_id: str | None = None
) -> PublishResult:
    """`chunk_run` is the file (or the directory holding it) the chunk flow saved."""
    seconds: dict[str, float] = {}
    run = load_chunk_run(chunk_run)
    try:
        with timed(seconds, "validate + publish"):
            result = validate_and_publish(run, data_dir, run_id)
    except RunNotPublished as failed:  # the dashboard gets the report, then the flow fails
        report_to_dashboard(run.report, seconds, failed.result)
        raise
    report_to_dashboard(run.report, seconds, result)
    return result
