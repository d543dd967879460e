"""What the database holds for a data directory's collection, and whether it is in sync.

Every night's dashboard (`rebuild-database`, the trend's `loaded` column) and
`firechunk runs` answer the same question: which run does the database hold, and how many
published runs on disk are newer? Reading it must never change the database or fail the
caller: an embedded database that was never made holds nothing (nothing is started or
created to find that out), and a database that cannot be reached is a `problem` to show,
not an error to raise.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from firechunk.db import embedded

if TYPE_CHECKING:
    from firechunk.run.history import RunRow

READ_TIMEOUT = 5  # seconds: a glance at the database, not a load


@dataclass(frozen=True)
class Held:
    """The sync row of one collection; `run_id` None when the collection holds nothing,
    `problem` set (one line, no password) when the database could not be read."""

    collection: str | None
    run_id: str | None = None
    run_started: datetime | None = None
    loaded_at: datetime | None = None
    chunks: int | None = None
    model: str | None = None
    dimensions: int | None = None
    problem: str | None = None


def current_collection(runs: list[RunRow]) -> str | None:
    """The collection of the newest published run (the one the data directory's `latest`
    points at), else of the newest run that names one."""
    named = [row for row in runs if row.collection]
    latest = [row for row in named if row.latest]
    return (latest or named)[0].collection if named else None


def read_held(
    url: str | None, data_dir: Path, collection: str | None, timeout: int = READ_TIMEOUT
) -> Held:
    """What the database at `url` (None: the embedded one under `data_dir`) holds for
    `collection`. Never raises for the database's sake: an unreadable one is a `problem`."""
    if collection is None or (url is None and not embedded.exists(data_dir)):
        return Held(collection)
    try:
        return _read(url, data_dir, collection, timeout)
    except Exception as error:  # noqa: BLE001 - any failure to read is shown, never raised
        return Held(collection, problem=_one_line(error))


def _read(url: str | None, data_dir: Path, collection: str, timeout: int) -> Held:
    # psycopg is imported only when there is a database to read: `firechunk runs` on a
    # data directory that never loaded stays as fast as listing files.
    from firechunk.db.connect import connect
    from firechunk.db.embedded import EmbeddedUnavailable
    from firechunk.db.schema import SYNC, has_tables

    try:
        with connect(url, data_dir, create=False, timeout=timeout) as conn:
            if not has_tables(conn):
                return Held(collection)
            row = conn.execute(
                f"select run_id, run_started, loaded_at, chunks, model, dimensions from {SYNC} "
                "where collection = %s",
                [collection],
            ).fetchone()
    except EmbeddedUnavailable:
        if embedded.exists(data_dir):  # made, but not runnable here (root, no namespaces)
            raise
        return Held(collection)  # removed since we looked: nothing is loaded
    return Held(collection, *row) if row else Held(collection)


def runs_behind(held: Held, runs: list[RunRow]) -> int | None:
    """How many published runs of the held collection on disk are newer than the one held
    (0: it holds the newest); None when it holds nothing, or a run neither on disk nor
    dated. Runs of other collections never count."""
    if held.run_id is None:
        return None
    runs = [row for row in runs if row.collection == held.collection]
    ids = [row.run_id for row in runs]  # newest first
    if held.run_id in ids:
        newer = runs[: ids.index(held.run_id)]
    elif held.run_started is not None:
        newer = [row for row in runs if row.started > held.run_started]
    else:
        return None
    return sum(row.verdict == "passed" for row in newer)


def sync_state(held: Held, runs: list[RunRow], this_run: str | None = None) -> str:
    """A few words: "this run", "up to date", "behind by N runs", "not loaded", or that
    the database could not be read."""
    if held.problem is not None:
        return "unknown: the database cannot be read"
    if held.run_id is None:
        return "not loaded"
    if held.run_id == this_run:
        return "this run"
    behind = runs_behind(held, runs)
    if behind is None:
        return f"holds run {held.run_id}, not on disk"
    return "up to date" if behind == 0 else f"behind by {behind} run{'s' * (behind != 1)}"


def describe_held(held: Held, runs: list[RunRow]) -> str:
    """One line for `firechunk runs`: the collection, the run held, its load, and the state."""
    if held.collection is None:
        return "database: no run names a collection yet"
    if held.problem is not None:
        return f"database: {held.collection}: cannot read it: {held.problem}"
    if held.run_id is None:
        return f"database: {held.collection}: not loaded"
    loaded = utc_minute(held.loaded_at)
    return (
        f"database: {held.collection} holds run {held.run_id} ({held.chunks} chunks, loaded "
        f"{loaded}): {sync_state(held, runs)}"
    )


def utc_minute(when: datetime | None) -> str:
    """`2026-11-22 03:00 UTC` (the database answers in its own time zone); "unknown" for None."""
    return f"{when.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if when else "unknown"


def _one_line(error: BaseException) -> str:
    from firechunk.db.failures import redact

    text = str(error).strip()
    return redact(text.splitlines()[0][:300] if text else type(error).__name__)
