"""What this process is doing now, so that an interrupt can say what it stopped and kept.

Ctrl-C or a SIGTERM can land anywhere in a long command. Only the code doing the work
knows what it is doing and what stopping there leaves behind (a run not published, a
database still holding the run before); only the command decides how to end. So the work
says it here (`doing`), and the command, once the interrupt has unwound the work, reads
back what it stopped (`take_stopped`) and says it in one line
(`firechunk.commands.interrupts`).

Nothing here imports more than the standard library: every command loads it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Activity:
    """One piece of work: "run X" "chunking", and what an interrupt there leaves."""

    subject: str  # "run 20261127T030000Z-ab12cd", "load"
    what: str  # "chunking", "embedding"
    kept: Callable[[], str]  # said once the interrupt has unwound: "latest unchanged"


_stopped: Activity | None = None
_interrupted = False  # a signal came (`note_interrupt`)


@contextmanager
def doing(subject: str, what: str, kept: Callable[[], str]) -> Iterator[None]:
    """Note the work of the `with` block: an interrupt that ends it is remembered as
    having stopped this work, the innermost one (the first to see it pass)."""
    global _stopped
    try:
        yield
    except BaseException as error:
        if _stopped is None and is_interrupt(error):
            _stopped = Activity(subject, what, kept)
        raise


def take_stopped() -> Activity | None:
    """The work the last interrupt stopped, forgotten as it is read."""
    global _stopped
    stopped, _stopped = _stopped, None
    return stopped


def note_interrupt() -> None:
    """A Ctrl-C or SIGTERM came: said by the signal handler as it raises KeyboardInterrupt."""
    global _interrupted
    _interrupted = True


def interrupted() -> bool:
    return _interrupted


def stop_if_interrupted() -> None:
    """Raise the interrupt again where work can stop: one raised while the main thread ran a
    finalizer (a weakref callback, a `__del__`) is reported by Python and swallowed."""
    if _interrupted:
        raise KeyboardInterrupt


def is_interrupt(error: BaseException) -> bool:
    """Ctrl-C or SIGTERM: a KeyboardInterrupt (how firechunk raises both), the exception
    Prefect's flow engine raises for a SIGTERM while a flow runs, or any error once a
    signal came: a library turns the KeyboardInterrupt raised in its code into an error
    of its own (pydantic's serializers do), which is still the interrupt unwinding the
    work. Prefect's class is looked up, not imported: only a process that runs a flow
    can raise it."""
    if _interrupted or isinstance(error, KeyboardInterrupt):
        return True
    termination = getattr(sys.modules.get("prefect.exceptions"), "TerminationSignal", None)
    return isinstance(termination, type) and isinstance(error, termination)
