"""Exit codes of every `firechunk` sub-command, and the one wrapper that turns errors into them.

A script or a scheduler tells outcomes apart by the code alone: a night whose validation
failed needs a look at the report, a bad option a fixed command line, a network failure a
retry later, a bug a report. So every sub-command goes through `handled` (firechunk.cli
registers them that way), and a failure the person running it can act on is one line on
stderr with no traceback; `firechunk --debug` adds the traceback.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from enum import IntEnum
from pathlib import Path
from typing import NoReturn, ParamSpec, TypeVar

import click
import typer


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1  # validation failed, or publishing (or a load) was refused
    BAD_INPUT = 2  # bad input or usage: an option, a file, a missing key
    NETWORK = 3  # the crawl or the network (Firecrawl, the database, an embedding API)
    INTERNAL = 4  # an unexpected exception: a bug in firechunk


EXIT_CODES_HELP = (
    "Exit codes: 0 ok; 1 validation failed or publish refused; 2 bad input or usage; "
    "3 crawl or network error; 4 internal error (a bug: rerun with --debug)."
)


class CommandError(Exception):
    """A failure the person running the command can act on; its message is the line shown."""

    def __init__(self, message: str, code: ExitCode = ExitCode.BAD_INPUT) -> None:
        super().__init__(message)
        self.code = code


_debug = False


def set_debug(enabled: bool) -> None:
    """`--debug`: show the traceback of every error, known or not."""
    global _debug
    _debug = enabled


def debugging() -> bool:
    return _debug


# Exits and usage errors carry their own code and message; typer has its own copies of
# click's classes, and click's are kept for code that raises those.
_PASS_THROUGH = (
    typer.Exit,
    typer.Abort,
    typer.TyperException,
    click.exceptions.Exit,
    click.ClickException,
    click.Abort,
)

P = ParamSpec("P")
R = TypeVar("R")


def handled(command: Callable[P, R]) -> Callable[P, R]:
    """`command` with its errors turned into one line and a documented exit code.

    typer reads the wrapped signature (functools.wraps keeps it), so options are unchanged.
    Exits and click's usage errors pass through: they already carry their code.
    """

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except _PASS_THROUGH:
            raise
        except Exception as error:
            fail(error)

    return run


def fail(error: Exception) -> NoReturn:
    """Say what went wrong in one line and exit with its code."""
    known = classify(error)
    if known is None:
        _internal(error)
    code, prefix = known
    if _debug:
        sys.stderr.write(_traceback_text(error))
    message = _secret_free(str(error)) or type(error).__name__
    typer.echo(f"{prefix}{message}", err=True)
    raise typer.Exit(code=int(code))


def classify(error: BaseException) -> tuple[ExitCode, str] | None:
    """The exit code and line prefix of a known failure; None for anything else (a bug).

    Modules are looked up in sys.modules, not imported: an error can only come from a
    module that was loaded, and a failing `crawl` must not pay for importing Prefect.
    """
    if isinstance(error, CommandError):
        return error.code, "error: "
    for module, name, code, prefix in _KNOWN:
        kind = getattr(sys.modules.get(module), name, None)
        if isinstance(kind, type) and isinstance(error, kind):
            return code, prefix
    return None


# (module, exception class, exit code, prefix), the more specific before the more general.
_KNOWN: tuple[tuple[str, str, ExitCode, str], ...] = (
    ("tasks.run", "RunNotPublished", ExitCode.FAILED, ""),
    ("firechunk.run.stages", "RunSuperseded", ExitCode.FAILED, "error: "),
    ("firechunk.db.load", "LoadRefused", ExitCode.FAILED, "refused: "),
    ("firechunk.crawl.errors", "MissingApiKeyError", ExitCode.BAD_INPUT, "error: "),
    ("firechunk.crawl.errors", "CrawlError", ExitCode.NETWORK, "error: "),
    ("firechunk.crawlfile", "CrawlFileError", ExitCode.BAD_INPUT, "error: "),
    ("firechunk.run.baseline", "BaselineError", ExitCode.BAD_INPUT, "error: "),
    ("firechunk.db.runs", "RunNotLoadable", ExitCode.BAD_INPUT, "error: "),
    ("firechunk.db.connect", "NotAPostgresUrl", ExitCode.BAD_INPUT, "error: "),
    ("firechunk.db.connect", "DatabaseError", ExitCode.NETWORK, "error: "),
    ("firechunk.db.embedded", "EmbeddedUnavailable", ExitCode.BAD_INPUT, "error: "),
    ("firechunk.db.embedded", "EmbeddedError", ExitCode.NETWORK, "error: "),
    ("firechunk.embedders", "EmbedderError", ExitCode.NETWORK, "error: "),
)


def _internal(error: Exception) -> NoReturn:
    """A bug: one line saying so, and where the traceback went (or the traceback itself)."""
    text = _traceback_text(error)
    summary = f"{type(error).__name__}: {_first_line(_secret_free(str(error)))}".rstrip(": ")
    if _debug:
        sys.stderr.write(text)
        where = "the traceback is above"
    else:
        saved = _save_traceback(text)
        where = (
            f"the traceback is in {saved}" if saved else "rerun with --debug to see the traceback"
        )
    typer.echo(f"internal error (a bug in firechunk): {summary}; {where}", err=True)
    raise typer.Exit(code=int(ExitCode.INTERNAL))


def _traceback_text(error: BaseException) -> str:
    return _secret_free("".join(traceback.format_exception(error)))


def _save_traceback(text: str) -> Path | None:
    """The traceback in a file of its own under the temporary directory, or None when
    that cannot be written either (the one line then says to rerun with --debug)."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    try:
        handle, name = tempfile.mkstemp(prefix=f"firechunk-error-{stamp}-", suffix=".txt")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError:
        return None
    return Path(name)


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0][:300] if lines else ""


# Keys that may sit in the environment of any command; no message or saved traceback
# repeats them.
_SECRET_ENV = ("FIRECRAWL_API_KEY", "OPENAI_API_KEY")


def _secret_free(text: str) -> str:
    from firechunk.crawl.redact import redact

    for name in _SECRET_ENV:
        text = redact(text, os.environ.get(name) or None)
    return redact(text, None)
