"""The end of every rebuild night on the dashboard: what the database holds, and the trend.

Whatever became of the night (published and loaded, failed validation, published but not
loaded, a load refused, a crawl that failed), its last artifacts answer "what does the
database hold, and is it this run?": `rebuild-database` (the collection, the run held, its
rows, when it was loaded, the model, and "this run", "up to date", "behind by N runs" or
"not loaded"), then the trend with that run marked (`tasks.artifacts.trend_to_dashboard`).

The database is the load's (`firechunk.pipeline.load`: the Secret block, else FIRECHUNK_DB_URL, else
the embedded Postgres under the data directory), read without creating anything: where the
embedded one was never made, nothing is loaded. A database that cannot be read never fails
the night; the artifact says so.
"""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from firechunk.db.connect import DB_URL_ENV
from firechunk.db.held import Held, current_collection, read_held, sync_state, utc_minute
from firechunk.run.history import RunRow, list_runs
from firechunk.settings import DatabaseSettings
from firechunk.tasks.artifacts import markdown_card, short_model, trend_to_dashboard
from firechunk.tasks.secrets import secret_or_env


@task(name="report-database", cache_policy=NO_CACHE)
def database_to_dashboard(
    data_dir: Path,
    run_id: str | None,
    database: DatabaseSettings = DatabaseSettings(),
    collection: str | None = None,
    verdict: str | None = None,
) -> Held:
    """`rebuild-database` and the trend, for run `run_id` (None: the night wrote no run,
    and `verdict` says why) of `data_dir`; the collection: the run's, else `collection`
    (the night's doc set), else that of the data directory's newest published run."""
    data_dir, load = Path(data_dir), database.load
    db_secret_block = database.db_secret_block
    runs = list_runs(data_dir)
    this = next((row for row in runs if row.run_id == run_id), None)
    chosen = (this.collection if this else None) or collection or current_collection(runs)
    held = _read(data_dir, chosen, db_secret_block)
    headline = _headline(held, runs, this)
    get_run_logger().info("%s (%s)", headline, chosen or "no collection yet")
    markdown_card(
        "rebuild-database",
        database_markdown(held, runs, this, load, verdict),
        f"{headline} ({chosen or 'no collection yet'})",
    )
    trend_to_dashboard(data_dir, held)
    return held


def _read(data_dir: Path, collection: str | None, db_secret_block: str) -> Held:
    """The load's database, read; a Secret block that cannot be read is a problem shown."""
    try:
        url, _ = secret_or_env(db_secret_block, DB_URL_ENV)
    except Exception as error:  # noqa: BLE001 - the Prefect API, not this night, failed
        return Held(
            collection, problem=f"cannot read the Secret block {db_secret_block!r}: {error}"
        )
    return read_held(url, data_dir, collection)


def database_markdown(
    held: Held, runs: list[RunRow], this: RunRow | None, load: bool, verdict: str | None = None
) -> str:
    """A heading that answers the question, why this run is or is not the one held, and
    the sync row as a table."""
    lines = [f"# {_headline(held, runs, this)}", "", _why(held, this, load, verdict), ""]
    if held.problem is not None:
        lines += [f"The database could not be read: `{held.problem}`", ""]
    lines += ["| figure | value |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in _figures(held, runs, this)]
    if held.model and short_model(held.model) != held.model:  # the table has its name only
        lines += ["", f"Model: {held.model}"]
    return "\n".join(lines) + "\n"


def _headline(held: Held, runs: list[RunRow], this: RunRow | None) -> str:
    state = sync_state(held, runs, this.run_id if this else None)
    if held.collection is None:
        return "No run here names a collection yet: nothing to look up"
    if held.problem is not None:
        return "The database cannot be read"
    if held.run_id is None:
        return "The database holds nothing of this collection: not loaded"
    if state == "this run":
        return "The database holds this run"
    if state == "up to date":
        return f"The database is up to date: it holds run {held.run_id}, not this one"
    return f"The database is {state}: it holds run {held.run_id}"


def _why(held: Held, this: RunRow | None, load: bool, stopped: str | None = None) -> str:
    """Why this night's run is not the one held, from what it left on disk (`stopped`:
    the verdict of a night that wrote none)."""
    if this is None:
        return f"This night wrote no run: {stopped or 'it stopped before chunking'}."
    if held.problem is not None:
        return f"Whether it holds run {this.run_id} ({this.verdict}) is not known."
    if held.run_id == this.run_id:
        return f"Run {this.run_id} was published and loaded."
    if this.verdict in ("failed", "refused", "superseded", "interrupted") and this.why:
        return f"Run {this.run_id} was not published, so not loaded: {this.why}."
    if this.verdict == "failed":
        return f"Run {this.run_id} failed: not published, not loaded."
    if this.verdict == "superseded":
        return f"Run {this.run_id} was superseded by a run published while it ran: not loaded."
    if this.verdict != "passed":
        return f"Run {this.run_id} did not finish ({this.verdict}): not loaded."
    if not load:
        return f"Run {this.run_id} was published but not loaded: the flow ran with `load` off."
    return (
        f"Run {this.run_id} was published; its load did not complete (see the load-database task)."
    )


def _figures(held: Held, runs: list[RunRow], this: RunRow | None) -> list[tuple[str, object]]:
    """Short cells: a markdown table is cut, not wrapped, at the dashboard's width."""
    return [
        ("collection", held.collection or "– (no run names one yet)"),
        ("run held", held.run_id or "none"),
        ("rows (chunks)", "–" if held.chunks is None else held.chunks),
        ("loaded at", utc_minute(held.loaded_at) if held.loaded_at else "–"),
        ("model", short_model(held.model) if held.model else "–"),
        ("dimensions", "–" if held.dimensions is None else held.dimensions),
        ("this run", f"{this.run_id} ({this.verdict})" if this else "none"),
        ("in sync", sync_state(held, runs, this.run_id if this else None)),
    ]
