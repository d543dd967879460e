"""`firechunk runs`: the runs in a data directory, newest first, with verdict and counts."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from firechunk.run.history import RunRow

_HEADER = (
    f"{'run':<26} {'verdict':<11} {'pages':>6} {'chunks':>7} {'quar.':>6} "
    f"{'upsert':>7} {'delete':>7} {'tokens':>9} {'seconds':>8}  {'started (UTC)':<16}  collection"
)


def runs(
    data_dir: Annotated[
        Path, typer.Option(envvar="FIRECHUNK_DATA_DIR", help="Data root (latest/, runs/).")
    ] = Path("data"),
    limit: Annotated[int, typer.Option(min=1, help="At most this many runs.")] = 20,
) -> None:
    """List the runs: id, verdict, pages, chunks, quarantined, upserts and deletes, tokens,
    seconds, when each started, the collection it loads into, and which one `latest`
    points at."""
    from firechunk.publish import RUNS_DIR
    from firechunk.run.history import list_runs

    if not (data_dir / RUNS_DIR).is_dir():
        typer.echo(f"no runs in {data_dir} yet")
        return
    typer.echo(_HEADER)
    for row in list_runs(data_dir, limit):
        typer.echo(_line(row))


def _line(row: RunRow) -> str:
    """Fixed-width columns, so the figures of successive nights line up; '-' for a figure
    the run did not write."""
    cells = [
        _cell(value)
        for value in (row.pages, row.chunks, row.quarantined, row.upserts, row.deletes, row.tokens)
    ]
    seconds = "-" if row.seconds is None else f"{row.seconds:.1f}"
    mark = "  <- latest" if row.latest else ""
    return (
        f"{row.run_id:<26} {row.verdict:<11} {cells[0]:>6} {cells[1]:>7} {cells[2]:>6} "
        f"{cells[3]:>7} {cells[4]:>7} {cells[5]:>9} {seconds:>8}  "
        f"{row.started:%Y-%m-%d %H:%M}  {row.collection or '-'}{mark}"
    )


def _cell(value: int | None) -> str:
    return "-" if value is None else str(value)
