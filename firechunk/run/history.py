"""The runs in a data directory, newest first, each with its verdict and figures.

Read from what every run leaves on disk (`run.json`, `report.json`, `status.json`,
`changes.json`, `seconds.json`, `validation/summary.json`), never from Prefect: `firechunk
runs` lists them and the dashboard's trend table shows the last nights, and both must agree
with the files a loader or an operator reads. A file a run has not written yet (it is
running, or it was killed) leaves its figures empty rather than hiding the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from firechunk.atomic import write_json
from firechunk.layout import DataDir, RunDir
from firechunk.publish import SHRINK_GUARD
from firechunk.retention import run_is_running
from firechunk.run.collection import run_collection

# In seconds.json, beside each stage's seconds as the rebuild flow timed them: the whole
# run, the figure the trend, its chart and `firechunk runs` show (`record_seconds`).
TOTAL = "total"


@dataclass(frozen=True)
class RunRow:
    """One run as the operator compares it with the nights before: None where the run did
    not get as far as writing that figure."""

    run_id: str
    # passed, failed (validation), refused (the shrink guard), superseded, interrupted;
    # running, unfinished, unreadable
    verdict: str
    started: datetime
    latest: bool  # its collection's `latest` points at it
    pages: int | None = None
    chunks: int | None = None
    tokens: int | None = None
    quarantined: int | None = None
    upserts: int | None = None
    deletes: int | None = None
    # The whole run: crawl (unless replayed), chunk, write, validate and publish, not a load
    # after it; the rebuild-summary's "total (s)" (seconds.json). A run from before that file:
    # its chunk stage (report.json) + validation (summary.json), all it left.
    seconds: float | None = None
    collection: str | None = None  # its doc set: the vector database collection it loads into
    why: str | None = None  # why it ended unpublished (status.json); None if it passed

    def as_table_row(self, loaded: bool = False) -> dict[str, Any]:
        """The row of a table artifact, narrow enough that no column is cut off at 1400 px:
        numbers stay numbers, "latest" stands for "passed, and `latest` points at it", and
        `loaded` says the database holds this run. The run id says when it started; the
        collection, the same for every run of the trend, goes in the description."""
        return {
            "run": self.run_id,
            "status": "latest" if self.latest else self.verdict,
            "db": "yes" if loaded else None,
            "pages": self.pages,
            "chunks": self.chunks,
            "quar.": self.quarantined,
            "upsert": self.upserts,
            "delete": self.deletes,
            "s": self.seconds,
        }


def list_runs(
    data_dir: Path, limit: int | None = None, collection: str | None = None
) -> list[RunRow]:
    """The runs under `data_dir/runs/`, newest first (by when each started), at most
    `limit`. With `collection`, its runs, and the runs that name none (killed before they
    wrote their run.json: they may be its)."""
    data = DataDir(data_dir)
    published = data.published_runs()
    paths = data.run_dirs()
    if collection is not None:
        paths = [path for path in paths if run_collection(path) in (collection, None)]
    dated = sorted(((run_started(path), path) for path in paths), reverse=True)
    return [read_run(path, started, path.resolve() in published) for started, path in dated[:limit]]


def read_run(run_dir: Path, started: datetime | None = None, latest: bool = False) -> RunRow:
    """One run's row, from whichever of its files it has written."""
    run = RunDir(run_dir)
    report = _json(run.report_json)
    changes = _json(run.changes_json)
    validation = _json(run.validation_summary)
    return RunRow(
        run_id=run_dir.name,
        verdict=_verdict(run_dir),
        started=started or run_started(run_dir),
        latest=latest,
        pages=_int(report.get("pages_in")),
        chunks=_int(report.get("chunks_out")),
        tokens=_int(report.get("tokens_in_chunks")),
        quarantined=_int(report.get("pages_quarantined")),
        upserts=_count(changes.get("upsert")),
        deletes=_count(changes.get("delete")),
        seconds=_seconds(_json(run.seconds_json), report, validation),
        collection=run_collection(run_dir),
        why=why_not_published(run_dir),
    )


def record_seconds(run_dir: Path, stages: dict[str, float]) -> float:
    """Add `stages` (seconds per stage, as a flow timed them; a "total" among them is
    ignored) to the run's seconds.json, and their sum as its total, which it returns: the
    rebuild flow writes all its stages once it knows whether the run is published, the
    stage flows (chunk, then validate-publish) each their own."""
    path = RunDir(run_dir).seconds_json
    recorded = {
        stage: value
        for stage, value in _json(path).items()
        if stage != TOTAL and isinstance(value, int | float)
    }
    recorded |= {stage: round(value, 3) for stage, value in stages.items() if stage != TOTAL}
    recorded[TOTAL] = round(sum(recorded.values()), 3)
    write_json(path, recorded)
    return recorded[TOTAL]


def why_not_published(run_dir: Path) -> str | None:
    """Why the run ended without being published, from its status.json: a clause such as
    "it passed validation, but publishing it was refused by the shrink guard: the run
    drops 9 of its 13 pages (69%) …"; None for a run that passed, or has no verdict yet."""
    try:
        status = RunDir(run_dir).read_status()
    except (OSError, ValueError):
        return None
    if status is None or status.status == "passed":
        return None
    error = (status.error or "").strip().rstrip(".")
    if status.status == "superseded":
        return f"it was superseded: {error}" if error else "it was superseded"
    if status.status == "interrupted":
        return f"it was {error}" if error.startswith("interrupted") else "it was interrupted"
    if SHRINK_GUARD in status.failed_expectations:
        return f"it passed validation, but publishing it was refused by the shrink guard: {error}"
    if status.failed_expectations:
        failed = status.failed_expectations
        listed = ", ".join(failed[:3]) + (f" and {len(failed) - 3} more" if len(failed) > 3 else "")
        return (
            f"it failed validation ({len(failed)} of {status.evaluated_expectations} "
            f"expectations: {listed})"
        )
    return f"it failed: {error}" if error else "it failed"


def _verdict(run_dir: Path) -> str:
    try:
        status = RunDir(run_dir).read_status()
    except ValueError:
        return "unreadable"
    if status is not None and SHRINK_GUARD in status.failed_expectations:
        return "refused"  # it passed validation: not the failure a failed run is
    if status is not None:
        return status.status
    return "running" if run_is_running(run_dir) else "unfinished"


def run_started(run_dir: Path) -> datetime:
    """When the run was claimed: its run.json is written then and never again (the
    directory's own time moves with every file added)."""
    source = RunDir(run_dir).run_json
    try:
        stamp = source.stat().st_mtime
    except OSError:
        stamp = run_dir.stat().st_mtime
    return datetime.fromtimestamp(stamp, UTC)


def _seconds(
    recorded: dict[str, Any], report: dict[str, Any], validation: dict[str, Any]
) -> float | None:
    """seconds.json's total; for a run without it, what it left: its chunk stage
    (report.json) and its validation (validation/summary.json)."""
    if isinstance(recorded.get(TOTAL), int | float):
        return round(recorded[TOTAL], 1)
    parts = [
        value
        for value in (report.get("seconds"), validation.get("seconds"))
        if isinstance(value, int | float)
    ]
    return round(sum(parts), 1) if parts else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _count(value: Any) -> int | None:
    return len(value) if isinstance(value, list) else None


def _json(path: Path) -> dict[str, Any]:
    """The file's JSON object; empty if the run has not written it (or it is not one)."""
    try:
        value = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}
