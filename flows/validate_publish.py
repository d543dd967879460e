"""The rebuild's second half alone: validate a written run, publish it if it passed."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from firechunk.run.stages import RunStart
from firechunk.run.write import REPORT_JSON
from flows.names import site_and_date
from schemas.publish import PublishResult
from schemas.report import ChunkReport
from tasks.artifacts import report_to_dashboard, timed
from tasks.run import RunNotPublished, publish, validate


@flow(name="validate-publish", flow_run_name=site_and_date)
def validate_publish(run_dir: Path) -> PublishResult:
    """`run_dir` is the run directory the chunk flow wrote (`data/runs/<run-id>/`)."""
    run = RunStart.load(run_dir)
    report = ChunkReport.model_validate_json((Path(run_dir) / REPORT_JSON).read_bytes())
    seconds: dict[str, float] = {}
    try:
        with timed(seconds, "validate + publish"):
            result = publish(run, validate(run))
    except RunNotPublished as failed:  # the dashboard gets the report, then the flow fails
        report_to_dashboard(report, seconds, failed.result)
        raise
    report_to_dashboard(report, seconds, result)
    return result
