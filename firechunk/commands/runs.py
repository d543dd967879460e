"""`firechunk runs`: the runs in a data directory, newest first, with verdict and counts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import orjson
import typer

from firechunk.publish import LATEST, RUN_ID, RUNS_DIR, read_status


def runs(
    data_dir: Annotated[
        Path, typer.Option(envvar="FIRECHUNK_DATA_DIR", help="Data root (latest/, runs/).")
    ] = Path("data"),
    limit: Annotated[int, typer.Option(min=1, help="At most this many runs.")] = 20,
) -> None:
    """List the runs: id, verdict, pages, chunks, quarantined, upserts and deletes, and
    which one `latest` points at."""
    runs_dir = data_dir / RUNS_DIR
    if not runs_dir.is_dir():
        typer.echo(f"no runs in {data_dir} yet")
        return
    latest = (data_dir / LATEST).resolve() if (data_dir / LATEST).is_symlink() else None
    names = sorted((p for p in runs_dir.iterdir() if RUN_ID.fullmatch(p.name) and p.is_dir()),
                   key=lambda p: p.name, reverse=True)  # fmt: skip
    typer.echo(f"{'run':<26} {'verdict':<11} {'pages':>6} {'chunks':>7} {'quar.':>6} "
               f"{'upsert':>7} {'delete':>7}")  # fmt: skip
    for run_dir in names[:limit]:
        typer.echo(_line(run_dir, run_dir.resolve() == latest))


def _line(run_dir: Path, is_latest: bool) -> str:
    try:
        status = read_status(run_dir)
        verdict = status.status if status else "unfinished"
    except ValueError:
        verdict = "unreadable"
    report = _json(run_dir / "report.json")
    changes = _json(run_dir / "changes.json")
    cells = [
        report.get("pages_in", "-"),
        report.get("chunks_out", "-"),
        report.get("pages_quarantined", "-"),
        len(changes["upsert"]) if "upsert" in changes else "-",
        len(changes["delete"]) if "delete" in changes else "-",
    ]
    mark = "  <- latest" if is_latest else ""
    return (
        f"{run_dir.name:<26} {verdict:<11} {cells[0]:>6} {cells[1]:>7} {cells[2]:>6} "
        f"{cells[3]:>7} {cells[4]:>7}{mark}"
    )


def _json(path: Path) -> dict:
    try:
        value = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}
