"""Renaming a collection in the database: its rows, vectors and sync row, in one transaction.

Nothing is embedded again: the rows keep their ids, text and vectors, under the new name.
Under both collections' load locks (`firechunk.db.load`), so no load of either runs
meanwhile. Refused, with nothing changed, when the database holds the new name already.
"""

from __future__ import annotations

import psycopg

from firechunk.db.load import COLLECTION_LOCK
from firechunk.db.schema import CHUNKS, SYNC, has_tables


class NameTaken(ValueError):
    """The database holds the new name already; nothing was changed."""


def holds(conn: psycopg.Connection, name: str) -> bool:
    """Whether the database has rows or a sync row of the collection `name`."""
    if not has_tables(conn):
        return False
    return bool(
        conn.execute(
            f"select 1 from {SYNC} where collection = %s union all "
            f"select 1 from {CHUNKS} where collection = %s limit 1",
            [name, name],
        ).fetchone()
    )


def rename_in_database(conn: psycopg.Connection, old: str, new: str) -> int:
    """Rename `old` to `new`; the number of chunks renamed (0: the database held nothing of
    `old`, or has no firechunk tables)."""
    if not has_tables(conn):
        return 0
    with conn.transaction():
        for name in sorted((old, new)):  # the same order in every process: no deadlock
            conn.execute(COLLECTION_LOCK, [name])
        if holds(conn, new):
            raise NameTaken(f"the database holds a collection {new!r} already")
        # The vectors follow their chunks (on update cascade).
        renamed = conn.execute(
            f"update {CHUNKS} set collection = %s where collection = %s", [new, old]
        ).rowcount
        conn.execute(f"update {SYNC} set collection = %s where collection = %s", [new, old])
    return renamed
