"""The terminal's side of a run: a `Listener` (`firechunk.pipeline`) that draws the
chunking and embedding progress bars on stderr and prints the lines the stages say.

A bar shows from the first batch done and stops with the last: a run that reuses every
page shows none (the summary says what was reused), and validation's time is not counted
as chunking.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from firechunk.commands.console import console, progress_bar
from firechunk.pipeline import Listener, Night, Request, StageName

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

BAR_LABELS: dict[str, str] = {"chunk": "chunking pages", "load": "embedding chunks"}


class Terminal(Listener):
    """Progress bars and lines on stderr for one run."""

    def __init__(self, pages: int | None = None) -> None:
        self._pages = pages  # crawled, for the chunking bar's label
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def say(self, message: str) -> None:
        console().print(message, style="dim", markup=False, highlight=False)

    def progress(self, stage: StageName, done: int, total: int) -> None:
        if self._bar is None:
            self._bar = progress_bar()
            self._bar.start()
            label = BAR_LABELS.get(stage, stage)
            if stage == "chunk" and self._pages is not None:
                label = f"{label} ({self._pages} crawled)"
            self._task = self._bar.add_task(label, total=total)
        assert self._task is not None
        self._bar.update(self._task, completed=done)
        if done >= total:
            self._stop()

    def stage_finished(self, stage: StageName, result: object, seconds: float) -> None:
        self._stop()

    def ended(self, request: Request, night: Night, error: BaseException | None) -> None:
        self._stop()

    def _stop(self) -> None:
        """Once: rich's stop prints a line of its own on a terminal-less stderr."""
        if self._bar is not None:
            self._bar.stop()
            self._bar, self._task = None, None
