"""`firechunk rename-collection`: a doc set renamed on purpose, in the data directory and in
the database, so that its next runs, declared under the new name, carry on from its last."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from firechunk.commands.database import DbUrl
from firechunk.commands.exits import CommandError
from firechunk.commands.options import DataDir


def rename_collection(
    old: Annotated[str, typer.Argument(help="The collection's name now.")],
    new: Annotated[str, typer.Argument(help="Its new name.")],
    data_dir: DataDir = Path("data"),
    db: DbUrl = None,
) -> None:
    """Rename a collection (a doc set): its latest and its runs in the data directory, its
    rows in the database (nothing is embedded again). Its next runs must declare the new
    name (--collection NEW, flow parameter run.collection): one that derives its name from
    its crawl again is the old collection, started afresh."""
    from firechunk.rename import RenameRefused, check_rename, has_collection, rename_in_data_dir
    from firechunk.settings import check_collection

    try:
        check_collection(new)
        check_rename(data_dir, old, new)
    except ValueError as error:  # RenameRefused among them
        raise CommandError(str(error)) from None
    in_database = _rename_in_database(db, data_dir, old, new)
    if not has_collection(data_dir, old) and in_database is None:
        raise CommandError(f"no collection {old!r} in {data_dir} or its database")
    try:
        renamed = rename_in_data_dir(data_dir, old, new)
    except RenameRefused as error:
        raise CommandError(str(error)) from None
    latest = f"latest run {renamed.latest}, " if renamed.latest else ""
    rows = f"{in_database} chunks in the database" if in_database is not None else "no rows"
    typer.echo(
        f"{old} is now {new}: {latest}{renamed.runs} run(s) in {data_dir}, {rows}. Declare "
        f"--collection {new!r} (flow parameter run.collection) for its next runs."
    )


def _rename_in_database(db: str | None, data_dir: Path, old: str, new: str) -> int | None:
    """The chunks renamed in the database; None when it holds nothing of `old` (or there is
    no database: the embedded one was never made, and is not made now)."""
    from firechunk.db import embedded
    from firechunk.db.connect import database_url

    url = database_url(db)
    if url is None and not embedded.exists(data_dir):
        return None
    from firechunk.db.connect import connection
    from firechunk.db.rename import NameTaken, holds, rename_in_database

    with connection(url, data_dir, create=False) as conn:
        if holds(conn, new):
            raise CommandError(f"the database holds a collection {new!r} already")
        if not holds(conn, old):
            return None
        try:
            return rename_in_database(conn, old, new)
        except NameTaken as error:
            raise CommandError(str(error)) from None
