"""Exit codes of every `firechunk` sub-command, and the one wrapper that turns errors into them.

A script or a scheduler tells outcomes apart by the code alone: a night whose validation
failed needs a look at the report, a bad option a fixed command line, a network failure a
retry later, a bug a report. So every sub-command goes through `handled` (firechunk.cli
registers them that way), and a failure the person running it can act on is one line on
stderr with no traceback; `firechunk --debug` adds the traceback. Two ends are not
failures: Ctrl-C or SIGTERM (`firechunk.commands.interrupts`: one line saying what was
kept, 130), and a reader that stopped reading the output (`firechunk runs | head -3`:
nothing said, 141, what `ls | head` gives).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import select
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from enum import IntEnum
from pathlib import Path
from typing import NamedTuple, NoReturn, ParamSpec, TypeVar

import click
import typer

from firechunk.activity import interrupted, is_interrupt


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1  # validation failed, or publishing (or a load) was refused
    BAD_INPUT = 2  # bad input or usage: an option, a file, a missing key
    NETWORK = 3  # the crawl, the network (Firecrawl, the database, an embedding API), a full disk
    INTERNAL = 4  # an unexpected exception: a bug in firechunk
    INTERRUPTED = 130  # Ctrl-C or SIGTERM (128 + SIGINT, as a shell reports Ctrl-C)
    BROKEN_PIPE = 141  # the output's reader went away (128 + SIGPIPE, as `ls | head`)


EXIT_CODES_HELP = (
    "Exit codes: 0 ok; 1 validation failed or publish refused; 2 bad input or usage; "
    "3 crawl or network error, or a full disk; 4 internal error (a bug: rerun with --debug); "
    "130 interrupted (Ctrl-C, SIGTERM); 141 output pipe closed."
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
    """`command` with its errors turned into one line and a documented exit code, and
    Ctrl-C and SIGTERM into one line saying what was kept (`firechunk.commands.interrupts`).

    typer reads the wrapped signature (functools.wraps keeps it), so options are unchanged.
    Exits and click's usage errors pass through: they already carry their code.
    """

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        from firechunk.commands import interrupts

        previous = interrupts.install()
        already = interrupted()
        try:
            result = command(*args, **kwargs)
            if interrupted() and not already:
                # The KeyboardInterrupt was raised inside a finalizer, which Python reports
                # and swallows: the work went on, but the signal still ends the command.
                raise KeyboardInterrupt
        except BaseException as error:
            if is_interrupt(error):
                _interrupted(command.__name__, error)
            interrupts.restore(previous)
            if isinstance(error, BrokenPipeError):
                broken_pipe(error)
            if closed_by_rich(error):
                raise typer.Exit(code=int(ExitCode.BROKEN_PIPE)) from None
            if isinstance(error, _PASS_THROUGH) or not isinstance(error, Exception):
                raise
            _missing_extra(command.__name__, error)
            fail(error)
        interrupts.restore(previous)
        return result

    return run


def _missing_extra(command: str, error: Exception) -> None:
    """A module of an extra that is not installed (`firechunk.extras`): one line naming
    the extra to install, exit 2. Anything else returns."""
    from firechunk.extras import missing_line

    line = missing_line(error, command)
    if line is None:
        return
    if _debug:
        sys.stderr.write(_traceback_text(error))
    typer.echo(line, err=True)
    raise typer.Exit(code=int(ExitCode.BAD_INPUT))


def _interrupted(command: str, error: BaseException) -> NoReturn:
    """Ctrl-C or SIGTERM, once the work has unwound: the one line, exit 130. Signal
    handlers stay firechunk's until the process ends: a second signal ends it at once."""
    from firechunk.commands import interrupts

    try:
        line = interrupts.end(command)
    except Exception as failure:  # marking the run failed (a full disk): still say it
        line = f"{command} interrupted ({_first_line(str(failure))})"
    if _debug:
        sys.stderr.write(_traceback_text(error))
    typer.echo(line, err=True)
    raise typer.Exit(code=int(ExitCode.INTERRUPTED))


def broken_pipe(error: BrokenPipeError) -> NoReturn:
    """The reader of the output went away (`| head`): nothing more to say to it, and
    nothing wrong: exit 141, never a failure's code. Any other broken pipe (a worker's, a
    server's) is a failure."""
    gone = _gone_readers()
    if not gone:
        fail(error)
    # What still writes on the way out (a progress bar stopping, the interpreter's last
    # flush) must not fail again, nor turn the exit into click's code 1 for a closed pipe.
    devnull = os.open(os.devnull, os.O_WRONLY)
    for descriptor in gone:
        os.dup2(devnull, descriptor)
    raise typer.Exit(code=int(ExitCode.BROKEN_PIPE))


def closed_by_rich(error: BaseException) -> bool:
    """Whether `error` is rich's way of saying the reader went away: its Console (typer's
    help, a progress bar) ends the process with SystemExit(1) while handling the
    BrokenPipeError, having already sent stdout to /dev/null (`Console.on_broken_pipe`).
    That is a closed pipe (exit 141), not a failure's code 1."""
    return (
        isinstance(error, SystemExit)
        and error.code == 1
        and isinstance(error.__context__, BrokenPipeError)
    )


def _gone_readers() -> list[int]:
    """The file descriptors of stdout and stderr that are pipes whose reading end is
    closed (poll says POLLERR for the writing end of such a pipe)."""
    poller = select.poll()
    for stream in (sys.stdout, sys.stderr):
        try:
            poller.register(stream.fileno(), select.POLLOUT)
        except (AttributeError, OSError, ValueError):
            continue  # not a file (a test's capture): not a pipe either
    return [descriptor for descriptor, events in poller.poll(0) if events & select.POLLERR]


def fail(error: Exception) -> NoReturn:
    """Say what went wrong in one line and exit with its code."""
    error = environment_failure(error) or error
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

    Of the known types `error` is an instance of, the one nearest its own class wins
    (`MissingApiKeyError` before the `CrawlError` it is a kind of), whatever the table's
    order.
    """
    if isinstance(error, CommandError):
        return error.code, "error: "
    matches = [known for known in loaded_known_failures() if isinstance(error, known.kind)]
    if not matches:
        return None
    mro = type(error).__mro__
    nearest = min(matches, key=lambda known: mro.index(known.kind))
    return nearest.code, nearest.prefix


class KnownFailure(NamedTuple):
    """An exception type the person running a command can act on: its exit code and the
    prefix of its one line."""

    kind: type[Exception]
    code: ExitCode
    prefix: str


def loaded_known_failures() -> list[KnownFailure]:
    """The known failures of every module of `KNOWN_FAILURES` that is loaded.

    An error can only come from a module that was loaded, so a module that was not is not
    imported: a failing `crawl` must not pay for importing Prefect, nor `chunk` need the
    database extra.
    """
    return [
        known
        for module, failures in KNOWN_FAILURES.items()
        if module in sys.modules
        for known in failures()
    ]


def _publish() -> list[KnownFailure]:
    from firechunk.publish import RunNotPublished

    return [KnownFailure(RunNotPublished, ExitCode.FAILED, "")]


def _run_stages() -> list[KnownFailure]:
    from firechunk.run.stages import RunNotStarted, RunSuperseded

    return [
        KnownFailure(RunSuperseded, ExitCode.FAILED, "error: "),
        KnownFailure(RunNotStarted, ExitCode.BAD_INPUT, "error: "),
    ]


def _db_load() -> list[KnownFailure]:
    from firechunk.db.load import LoadRefused

    return [KnownFailure(LoadRefused, ExitCode.FAILED, "refused: ")]


def _crawl_errors() -> list[KnownFailure]:
    from firechunk.crawl.errors import CrawlError, MissingApiKeyError

    return [
        KnownFailure(MissingApiKeyError, ExitCode.BAD_INPUT, "error: "),
        KnownFailure(CrawlError, ExitCode.NETWORK, "error: "),
    ]


def _crawlfile() -> list[KnownFailure]:
    from firechunk.crawlfile import CrawlFileError

    return [KnownFailure(CrawlFileError, ExitCode.BAD_INPUT, "error: ")]


def _run_baseline() -> list[KnownFailure]:
    from firechunk.run.baseline import BaselineError

    return [KnownFailure(BaselineError, ExitCode.BAD_INPUT, "error: ")]


def _db_runs() -> list[KnownFailure]:
    from firechunk.db.runs import RunNotLoadable

    return [KnownFailure(RunNotLoadable, ExitCode.BAD_INPUT, "error: ")]


def _db_failures() -> list[KnownFailure]:
    from firechunk.db.failures import DatabaseError, NotAPostgresUrl

    return [
        KnownFailure(NotAPostgresUrl, ExitCode.BAD_INPUT, "error: "),
        KnownFailure(DatabaseError, ExitCode.NETWORK, "error: "),
    ]


def _db_embedded() -> list[KnownFailure]:
    from firechunk.db.embedded import EmbeddedError, EmbeddedUnavailable

    return [
        KnownFailure(EmbeddedUnavailable, ExitCode.BAD_INPUT, "error: "),
        KnownFailure(EmbeddedError, ExitCode.NETWORK, "error: "),
    ]


def _embedders() -> list[KnownFailure]:
    from firechunk.embedders import EmbedderError

    return [KnownFailure(EmbedderError, ExitCode.NETWORK, "error: ")]


# The known failures, by the module that defines their types (a test checks each type is
# defined there, so the key cannot drift from the import).
KNOWN_FAILURES: dict[str, Callable[[], list[KnownFailure]]] = {
    "firechunk.publish": _publish,
    "firechunk.run.stages": _run_stages,
    "firechunk.db.load": _db_load,
    "firechunk.crawl.errors": _crawl_errors,
    "firechunk.crawlfile": _crawlfile,
    "firechunk.run.baseline": _run_baseline,
    "firechunk.db.runs": _db_runs,
    "firechunk.db.failures": _db_failures,
    "firechunk.db.embedded": _db_embedded,
    "firechunk.embedders": _embedders,
}


# What an OSError's errno says of the machine rather than of firechunk: the disk written
# to is full (or the user's quota is), or it is mounted read-only.
_DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
_READ_ONLY = frozenset({errno.EROFS})


class Destination(NamedTuple):
    """A directory a command writes into, as its lines name it: "the `what` `path`", and
    `hint`, how to choose another ("choose another with --data-dir")."""

    path: Path
    what: str
    hint: str


@contextlib.contextmanager
def writing_into(destination: Destination) -> Iterator[None]:
    """Run the block, which writes into `destination`; a disk that is full or read-only
    under it becomes one line naming it and the way out."""
    try:
        yield
    except OSError as error:
        failure = environment_failure(error, destination)
        if failure is None:
            raise
        raise failure from error


def environment_failure(
    error: BaseException, written: Destination | None = None
) -> CommandError | None:
    """A write the machine refused, as the line to show and its exit code: a full disk is
    exit 3 (free space and run again, as after a network failure), a read-only one exit 2
    (the command must write elsewhere). `written`: where the command writes, if it said
    (`writing_into`). None for any other error."""
    if not isinstance(error, OSError) or error.errno not in _DISK_FULL | _READ_ONLY:
        return None
    place, way_out = _place(error, written)
    cause = error.strerror or os.strerror(error.errno)
    if error.errno in _DISK_FULL:
        also = f" or {way_out}" if way_out else ""
        return CommandError(
            f"{place} is on a full disk ({cause}); free space there{also}, then run again",
            ExitCode.NETWORK,
        )
    return CommandError(
        f"{place} is not writable ({cause}); {way_out or 'mount it read-write, then run again'}"
    )


def _place(error: OSError, written: Destination | None) -> tuple[str, str | None]:
    """The directory a failed write is said of, and how to choose another (None when no
    option of the command does): the one the command writes into, unless the failing
    file is elsewhere (a cache, a temporary file); then that file's own directory."""
    failed = Path(os.fsdecode(error.filename)) if isinstance(error.filename, str | bytes) else None
    if written is not None:
        inside = failed is None or failed.absolute().is_relative_to(Path(written.path).absolute())
        if inside:
            return f"the {written.what} {written.path}", written.hint
    if failed is not None:
        return f"the directory {failed.parent}", None
    return "a directory firechunk writes to", None


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
