"""The rebuild's second half alone: validate a written run, publish it if it passed."""

from __future__ import annotations

from pathlib import Path

from prefect import flow
from prefect.states import State

from firechunk.flows.names import site_and_date
from firechunk.run.history import record_seconds
from firechunk.run.stages import RunStart
from firechunk.run.write import read_report
from firechunk.schemas.publish import PublishResult
from firechunk.tasks.artifacts import report_to_dashboard, timed
from firechunk.tasks.run import not_published, validated_and_published


@flow(name="validate-publish", flow_run_name=site_and_date)
def validate_publish(run_dir: Path) -> PublishResult | State:
    """Validate the run the chunk flow wrote and make it `latest` if it passed; a run not
    published fails the flow run after the dashboard has the report.

    Args:
        run_dir: The run directory the chunk flow wrote and returned
            (data/runs/<run-id>/).

    Returns:
        The run's id, directory and validation verdict, and whether it was published.
    """
    run = RunStart.load(run_dir)
    seconds: dict[str, float] = {}
    with timed(seconds, "validate + publish"):
        result = validated_and_published(run)
    record_seconds(run_dir, seconds)  # beside the chunk flow's: the run's total
    report_to_dashboard(read_report(run_dir), seconds, result)
    return result if result.published else not_published(result)
