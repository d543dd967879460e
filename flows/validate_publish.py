"""The rebuild's second half alone: validate a written run, publish it if it passed."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from firechunk.run.stages import RunStart
from firechunk.run.write import read_report
from flows.names import site_and_date
from schemas.publish import PublishResult
from tasks.artifacts import report_to_dashboard, timed
from tasks.run import RunNotPublished, publish, validate


@flow(name="validate-publish", flow_run_name=site_and_date)
def validate_publish(run_dir: Path) -> PublishResult:
    """Validate the run the chunk flow wrote and make it `latest` if it passed; a failed
    validation fails the flow run after the dashboard has the report.

    Args:
        run_dir: The run directory the chunk flow wrote and returned
            (data/runs/<run-id>/).

    Returns:
        The run's id, directory and validation verdict, and whether it was published.
    """
    run = RunStart.load(run_dir)
    seconds: dict[str, float] = {}
    try:
        with timed(seconds, "validate + publish"):
            result = publish(run, validate(run))
    except RunNotPublished as failed:  # the dashboard gets the report, then the flow fails
        report_to_dashboard(read_report(run_dir), seconds, failed.result)
        raise
    report_to_dashboard(read_report(run_dir), seconds, result)
    return result
