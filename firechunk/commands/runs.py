"""`firechunk runs`: the runs in a data directory, newest first, with verdict and counts,
under a line saying which run the database holds and how far behind it is."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from firechunk.commands.database import DbUrl
from firechunk.commands.options import AsJson, json_text

if TYPE_CHECKING:
    from firechunk.db.held import Held
    from firechunk.run.history import RunRow

_HEADER = (
    f"{'run':<26} {'verdict':<11} {'loaded':<6} {'pages':>6} {'chunks':>7} {'quar.':>6} "
    f"{'upsert':>7} {'delete':>7} {'tokens':>9} {'seconds':>8}  {'started (UTC)':<16}  collection"
)


def runs(
    data_dir: Annotated[
        Path,
        typer.Option(
            envvar="FIRECHUNK_DATA_DIR", metavar="DIR", help="Data root: the runs in runs/."
        ),
    ] = Path("data"),
    limit: Annotated[int, typer.Option(min=1, metavar="N", help="At most this many runs.")] = 20,
    db: DbUrl = None,
    collection: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="Only the runs of this collection (doc set), and the run the database holds "
            "of it (default: every run; the database line for the collection of the last "
            "run published).",
            show_default=False,
        ),
    ] = None,
    as_json: AsJson = False,
) -> None:
    """List the runs: id, verdict, whether the database holds it, pages, chunks,
    quarantined, upserts and deletes, tokens, seconds (the whole run, crawl to publish, as
    the dashboard's summary totals it), when each started, the collection it belongs to, and
    which ones are their collection's `latest`; first, the run the database holds of the
    collection and how many of its published runs it is behind. The embedded database is
    read only if a load made it. `--json`: {"database": ..., "runs": [...]}, the same
    figures, newest run first."""
    from firechunk.layout import DataDir
    from firechunk.run.history import list_runs

    if not DataDir(data_dir).runs.is_dir():
        typer.echo(
            json_text({"database": None, "runs": []}) if as_json else f"no runs in {data_dir} yet"
        )
        return
    every = list_runs(data_dir, collection=collection)
    held = _held(db, data_dir, collection, every)
    if as_json:
        typer.echo(json_text(_as_json(held, every, limit)))
        return
    typer.echo(_database_line(held, every))
    typer.echo(_HEADER)
    for row in every[:limit]:
        typer.echo(_line(row, held))


def _held(db: str | None, data_dir: Path, collection: str | None, every: list[RunRow]) -> Held:
    """What the database holds for the collection, read as the dashboard reads it."""
    import os

    from firechunk.db.held import current_collection, read_held

    # `firechunk.db.connect.database_url`, without importing psycopg where nothing is read.
    url = db or os.environ.get("FIRECHUNK_DB_URL") or None
    return read_held(url, data_dir, collection or current_collection(every))


def _as_json(held: Held, every: list[RunRow], limit: int) -> dict[str, object]:
    """What the lines say, as data: the database's sync row and how far behind it is, and
    each run with `loaded` (the database holds it)."""
    from dataclasses import asdict

    from firechunk.db.held import runs_behind

    database = {**asdict(held), "behind": runs_behind(held, every)}
    runs = [{**asdict(row), "loaded": row.run_id == held.run_id} for row in every[:limit]]
    return {"database": database, "runs": runs}


def _database_line(held: Held, every: list[RunRow]) -> str:
    from firechunk.db.held import describe_held

    return describe_held(held, every)


def _line(row: RunRow, held: Held) -> str:
    """Fixed-width columns, so the figures of successive nights line up; '-' for a figure
    the run did not write; loaded "yes" for the run the database holds, "?" when the
    database could not be read."""
    cells = [
        _cell(value)
        for value in (row.pages, row.chunks, row.quarantined, row.upserts, row.deletes, row.tokens)
    ]
    seconds = "-" if row.seconds is None else f"{row.seconds:.1f}"
    mark = "  <- latest" if row.latest else ""
    loaded = "?" if held.problem else ("yes" if row.run_id == held.run_id else "")
    return (
        f"{row.run_id:<26} {row.verdict:<11} {loaded:<6} {cells[0]:>6} {cells[1]:>7} {cells[2]:>6} "
        f"{cells[3]:>7} {cells[4]:>7} {cells[5]:>9} {seconds:>8}  "
        f"{row.started:%Y-%m-%d %H:%M}  {row.collection or '-'}{mark}"
    )


def _cell(value: int | None) -> str:
    return "-" if value is None else str(value)
