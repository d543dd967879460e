"""Ctrl-C and SIGTERM in any command: exit 130 at once, with one line saying what was kept.

A terminal's Ctrl-C reaches every process of the command's process group at once. Only
the command reacts (the chunking workers ignore both signals: `firechunk.run.executors`,
or they would each print a traceback): SIGINT and
SIGTERM raise KeyboardInterrupt in it, the work unwinds (each stage marks its run
interrupted, workers are killed, the embedded Postgres is stopped), and `handled` ends the
command here: the run marked, one line, exit status 130 (128 + SIGINT, as a shell reports
a command Ctrl-C ended). A second signal ends the process at once: whatever it was waiting
for, its workers die with it, and the next command stops an embedded
Postgres it left.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import signal
import sys
import threading
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import FrameType, ModuleType

from firechunk.activity import interrupted, is_interrupt, note_interrupt, take_stopped

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
INTERRUPTED = 130  # the exit status: 128 + SIGINT
_quiet = False  # an interrupt is being handled: only the command's line is said
_said = False  # the line was said


def install() -> dict[int, object]:
    """SIGINT and SIGTERM raise KeyboardInterrupt in the main thread from now on; returns
    the handlers they replace (nothing is changed outside the main thread, where Python
    cannot set handlers: a command invoked in a test's thread keeps the test's)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    if "polars" not in sys.modules and not any(isinstance(f, _AfterPolars) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterPolars())
    return {number: signal.signal(number, _raise_interrupt) for number in _SIGNALS}


class _AfterPolars(importlib.abc.MetaPathFinder):
    """Puts firechunk's SIGINT handler back once polars is imported. polars installs its
    own as it loads, with SA_RESTART (pola-rs/polars#21739): the kernel then resumes
    whatever the main thread was blocked in (waiting for a batch, a query), and Ctrl-C
    would wait for it to finish."""

    def find_spec(
        self, name: str, path: object = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name != "polars":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        loader = spec.loader if spec is not None else None
        if loader is not None:
            load = loader.exec_module

            def load_then_reinstall(module: ModuleType) -> None:
                load(module)
                if signal.getsignal(signal.SIGINT) is _raise_interrupt:
                    signal.signal(signal.SIGINT, _raise_interrupt)

            loader.exec_module = load_then_reinstall  # type: ignore[method-assign]
        return spec


def restore(previous: dict[int, object]) -> None:
    """Put back the handlers `install` replaced (a command that ended without interrupt)."""
    for number, handler in previous.items():
        signal.signal(number, handler)  # type: ignore[arg-type]


def _raise_interrupt(number: int, frame: FrameType | None) -> None:
    global _quiet
    if interrupted():  # the second: no more waiting
        if not _said:
            os.write(2, b"interrupted again: stopped at once\n")
        os._exit(INTERRUPTED)
    note_interrupt()
    _quiet = True
    raise KeyboardInterrupt(signal.Signals(number).name)


def quiet() -> bool:
    """Whether the terminal should hear no more from the libraries: once an interrupt has
    come (ours, or Prefect's SIGTERM bridge, which raises its own exception while a flow
    runs and logs as that exception is handled), only the command's one line is said."""
    global _quiet
    handling = sys.exc_info()[1]
    if handling is not None and is_interrupt(handling):
        _quiet = True
    return _quiet


def end(command: str) -> str:
    """After an interrupt has unwound the command's work: the runs this process left
    without a verdict marked interrupted, and the line to say (said by the caller, at
    once: what is left is the exit, Prefect's last reports and its temporary API
    stopped)."""
    global _quiet, _said
    _quiet = _said = True
    stopped = take_stopped()
    runs = _held_runs()
    marked = [run_dir for run_dir in runs if _mark(run_dir)]
    if stopped is not None:
        return f"{stopped.subject} interrupted while {stopped.what}; {stopped.kept()}"
    if not runs:
        return f"{command} interrupted"
    from firechunk.layout import RunDir
    from firechunk.publish import describe_latest

    run_dir = runs[-1]
    kept = describe_latest(run_dir.parent.parent, run_dir.name)
    if run_dir in marked:
        return f"run {run_dir.name} interrupted; {kept}"
    status = RunDir(run_dir).read_status()
    ended = f" ({status.status})" if status is not None else ""
    return f"{command} interrupted after run {run_dir.name} ended{ended}; {kept}"


def _held_runs() -> list[Path]:
    """The runs this process ran, oldest first. Looked up, not imported: a process that
    never loaded `firechunk.retention` ran no run."""
    retention = sys.modules.get("firechunk.retention")
    return [run_dir for run_dir in retention.held_runs() if run_dir.is_dir()] if retention else []


def _mark(run_dir: Path) -> bool:
    """Mark a run this process left without a verdict interrupted (an interrupt between
    two stages, which no stage saw); whether it was."""
    from firechunk.publish import mark_interrupted

    return mark_interrupted(run_dir.parent.parent, run_dir, run_dir.name)
