"""Checks a command makes before it does any work, each failing as one sentence.

A typo in a URL, or a data directory the command cannot write, should cost a second, not
a crawl's credits or a run's chunking that is then thrown away at its first write.
"""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from firechunk.commands.exits import CommandError, ExitCode

DATA_DIR_HINT = "choose another with --data-dir or FIRECHUNK_DATA_DIR"


def check_url(url: str, what: str) -> str:
    """`url` if it is an http(s) URL with a host; `what` names it in the error ("site URL")."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as error:
        raise CommandError(f"the {what} {url!r} is not a well-formed URL ({error})") from None
    if parts.scheme not in ("http", "https"):
        raise CommandError(
            f"the {what} {url!r} must start with http:// or https:// "
            f"(e.g. https://{url.split('://')[-1].lstrip('/') or 'example.com'})"
        )
    if not host:
        raise CommandError(f"the {what} {url!r} has no host name")
    return url


def check_resolves(url: str, what: str) -> str:
    """`url` if its host name resolves. Said at once, before a flow whose crawl task Prefect
    retries for minutes: a name that does not resolve now is a typo or no network."""
    host = urlsplit(url).hostname or ""
    try:
        socket.getaddrinfo(host, None)
    except (socket.gaierror, UnicodeError) as error:
        raise CommandError(
            f"the {what} {url!r} does not resolve: DNS lookup of {host} failed ({error}); "
            "check the host name and this machine's network",
            ExitCode.NETWORK,
        ) from None
    return url


def check_data_dir(path: Path) -> Path:
    """`path` if the command can write its runs, jobs and raw crawls there."""
    return check_writable_dir(path, "data directory", DATA_DIR_HINT)


def check_writable_dir(path: Path, what: str, hint: str) -> Path:
    """`path` if the command can write there: the directory itself when it exists, else
    the nearest folder above it (the command creates the rest). Nothing is created."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise CommandError(f"the {what} {path} is a file, not a directory; {hint}")
    existing = _nearest_existing(path)
    if not existing.is_dir():
        raise CommandError(
            f"the {what} {path} cannot be created: {existing} is not a directory; {hint}"
        )
    problem = _write_problem(existing)
    if problem is not None:
        where = path if existing == path.absolute() else f"{path} (to be made in {existing})"
        raise CommandError(f"the {what} {where} is not writable ({problem}); {hint}")
    return path


def _nearest_existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _write_problem(directory: Path) -> str | None:
    """Why a file cannot be created in `directory`, or None. A real file is created and
    removed: permission bits say nothing of a read-only mount, and root ignores them."""
    try:
        handle, name = tempfile.mkstemp(prefix=".firechunk-write-check-", dir=directory)
    except OSError as error:
        return error.strerror or type(error).__name__
    os.close(handle)
    os.unlink(name)
    return None
