"""Which database to use, and a connection to it.

With no URL, firechunk runs its own PostgreSQL 18 with pgvector in `<data dir>/postgres`
(`firechunk.db.embedded`): made on first use (about a second; 0.1 s to start when it
exists), reached over a Unix socket only, and stopped when the command is done. A URL
(`--db`, else `FIRECHUNK_DB_URL`) names any Postgres with pgvector, Supabase's included.
A URL's password is never printed: messages use `redact`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from firechunk.db import embedded
from firechunk.db.failures import DatabaseError, NotAPostgresUrl, explained, redact
from firechunk.layout import DataDir

if TYPE_CHECKING:
    import psycopg

DB_URL_ENV = "FIRECHUNK_DB_URL"
# TCP keepalives, so a connection idle while chunks are embedded is not dropped by a
# firewall or load balancer on the way to a remote database (ignored on a Unix socket).
_KEEPALIVES: dict[str, Any] = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10}


def database_url(explicit: str | None) -> str | None:
    """`--db`, else `FIRECHUNK_DB_URL`, else None (the embedded database)."""
    return explicit or os.environ.get(DB_URL_ENV) or None


@contextlib.contextmanager
def embedded_server(data_dir: Path, create: bool = True) -> Iterator[str]:
    """Start (or join) the embedded Postgres under `data_dir` and yield its URL; stopped
    on leaving unless another process still uses it. With `create` false (a command that
    only reads), a data directory where nothing was ever loaded is an error, not a new
    39 MB cluster."""
    with embedded.running(data_dir, create) as url:
        yield url


@contextlib.contextmanager
def connect(
    url: str | None, data_dir: Path, create: bool = True, timeout: int = 15
) -> Iterator[psycopg.Connection]:
    """A connection (autocommit off) to `url`, or to the embedded database under
    `data_dir` (`create`: see `embedded_server`), with pgvector's types registered once the
    extension exists. `timeout`: seconds to wait for the server to answer; a command that
    only glances at the database (`firechunk runs`) waits less than a load."""
    # Imported here, the database extra's: a rebuild that does not load needs neither.
    import psycopg
    from pgvector.psycopg import register_vector

    if url:
        check_url(url)
    with contextlib.ExitStack() as stack:
        target = url or stack.enter_context(embedded_server(data_dir, create))
        try:
            conn = stack.enter_context(
                psycopg.connect(target, connect_timeout=timeout, **_KEEPALIVES)
            )
        except psycopg.Error as error:
            where = redact(target) if url else f"the embedded database in {data_dir}"
            message = redact(str(error).strip().splitlines()[0] if str(error) else repr(error))
            raise DatabaseError(f"cannot connect to {where}: {message}") from None
        conn.execute("create extension if not exists vector")
        conn.commit()
        register_vector(conn)
        yield conn


def check_url(url: str) -> None:
    """Refuse what libpq cannot parse before connecting: psycopg's own words name neither
    the option nor the forms it takes."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        raise NotAPostgresUrl(
            f"the database URL {redact(url)!r} is not a Postgres URL: give "
            "postgresql://user@host:port/db or a key=value conninfo"
        ) from None


@contextlib.contextmanager
def connection(url: str | None, data_dir: Path, create: bool = True) -> Iterator:
    """An autocommit connection to `url` (`database_url`), else to the embedded database
    under `data_dir`; a database failure inside becomes a `DatabaseError` whose one line
    says what to do (`firechunk.db.failures`). `create` false for a reader: it never makes
    a new embedded cluster. What the library's `firechunk.load` and `firechunk.search` open."""
    embedded_dir = None if url else DataDir(data_dir).postgres
    with connect(url, Path(data_dir), create) as conn, explained(embedded_dir):
        conn.autocommit = True
        yield conn
