"""What a database failure means for the person running firechunk, and what to do next.

A load or search that fails in the database is not a bug in firechunk: the server went
away, ran out of disk, or its files are damaged. `explained` turns psycopg's error into a
`DatabaseError` (exit code 3) whose one line names the cause, says that nothing was
committed, and names the way out, which for the embedded database is often to rebuild it
from the published run.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg


class DatabaseError(RuntimeError):
    """The database cannot be reached or used; the message names it, without a password."""


class NotAPostgresUrl(DatabaseError):
    """The URL given is not one libpq reads: the command line must change, so exit 2."""


def redact(url: str) -> str:
    """The URL with any password replaced by `***` (key=value and URL forms)."""
    url = re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", url, flags=re.IGNORECASE)


# SQLSTATE classes (the first two characters) and what each says about the database.
_DAMAGED = {"58", "XX"}  # system error (a file missing), internal error (data corrupted)
_STOPPED = {"57"}  # operator intervention: the server shut down or crashed
_RESOURCES = {"53"}  # insufficient resources: disk full, out of memory, too many connections


@contextlib.contextmanager
def explained(embedded_dir: Path | None) -> Iterator[None]:
    """Run the block; a psycopg error inside becomes a `DatabaseError` that says what to
    do. `embedded_dir`: the embedded database's directory, None for a `--db` URL."""
    import psycopg  # the database extra's: imported once a database is used

    try:
        yield
    except psycopg.Error as error:
        raise DatabaseError(describe(error, embedded_dir)) from error


def describe(error: psycopg.Error, embedded_dir: Path | None) -> str:
    """One line: what failed, that nothing was committed, what to do."""
    import psycopg

    state = error.sqlstate or ""
    said = redact(_first_line(error))
    if state[:2] in _DAMAGED:
        return f"the database's files are damaged ({said}); nothing was committed. " + (
            f"Move {embedded_dir} aside and run `firechunk load` to rebuild it from the "
            "published run."
            if embedded_dir
            else "Restore the database, or load into another one with --db."
        )
    if state[:2] in _RESOURCES:
        return (
            f"the database ran out of resources ({said}); nothing was committed. Free disk "
            "space or memory and run the command again."
        )
    if state[:2] in _STOPPED or isinstance(error, psycopg.OperationalError):
        where = f" (its log: {embedded_dir / 'log'})" if embedded_dir else ""
        return (
            f"the database connection was lost ({said}); nothing was committed. Run the "
            f"command again; if it keeps failing, look at the server{where}."
        )
    return f"the database refused the command ({said}); nothing was committed."


def _first_line(error: psycopg.Error) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__
