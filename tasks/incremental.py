"""Prefect tasks of the incremental rebuild: start the run, write it, show what changed.

Thin wrappers around `firechunk.rebuild`'s stages (chunking is `tasks.chunk.chunk_into_store`,
publishing `tasks.publish.publish_written`). The change set goes to the dashboard as the
`rebuild-changes` table, so a night's churn can be followed from run to run.
"""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE

from firechunk.rebuild import ChunkedRun, RunStart, WrittenRun, start_run, write_stage
from schemas.changes import ChangeSet
from tasks.chunk import run_summary

CHANGES_KEY = "rebuild-changes"


@task(name="start-run", cache_policy=NO_CACHE)
def start_rebuild(data_dir: Path, run_id: str | None, full: bool) -> RunStart:
    start = start_run(data_dir, run_id, full=full)
    baseline = start.baseline[0] if start.baseline else None
    get_run_logger().info(
        "run %s in %s; baseline: %s%s",
        start.run_id,
        start.run_dir,
        f"run {baseline}" if baseline else "none (no good run yet)",
        " (full rebuild: its outcomes are not reused)" if full and baseline else "",
    )
    return start


@task(name="write-run", cache_policy=NO_CACHE)
def write_run(chunked: ChunkedRun) -> tuple[WrittenRun, ChangeSet]:
    """Assemble and write the run's files and changes.json; put the changes on the dashboard."""
    written, changes = write_stage(chunked)
    get_run_logger().info(
        "%s; changes: %d to upsert, %d to delete, pages %d added, %d changed, %d removed",
        run_summary(written.report),
        len(changes.upsert),
        len(changes.delete),
        len(changes.pages_added),
        len(changes.pages_changed),
        len(changes.pages_removed),
    )
    create_table_artifact(
        changes_rows(changes),
        key=CHANGES_KEY,
        description="What this run changes for the vector database (changes.json)",
    )
    return written, changes


def changes_rows(changes: ChangeSet) -> list[dict[str, str]]:
    rows = [
        ("baseline run", changes.baseline or "none: every chunk is an upsert"),
        ("full rebuild", "yes" if changes.full else "no"),
        ("pages chunked", changes.pages_rechunked),
        ("pages reused from the baseline", changes.pages_reused),
        ("chunk ids to upsert", len(changes.upsert)),
        ("chunk ids to delete", len(changes.delete)),
        ("pages added", len(changes.pages_added)),
        ("pages changed", len(changes.pages_changed)),
        ("pages removed", len(changes.pages_removed)),
    ]
    return [{"measure": name, "value": str(value)} for name, value in rows]
