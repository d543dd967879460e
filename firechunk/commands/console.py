"""The commands' stderr console: progress bars and lines for a person, made on first use,
so `--help` and `--version` need no rich, and importing nothing of the pipeline (the
database's commands run without it).

A reader that goes away (`firechunk chunk CRAWL 2>&1 | head -1`) silences it: the work
goes on and the command exits with its own code. rich's own Console would end the
process with exit code 1 there, a failed run's code."""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress


@functools.cache
def console() -> Console:
    """stderr, long paths kept whole in logs (no soft wrapping)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.file.fileno())

    return _Console(stderr=True, soft_wrap=True)


def progress_bar() -> Progress:
    """The commands' one progress bar: what it counts, done of total, the time so far and
    the time left at the pace so far (a first load's embedding takes minutes to hours),
    said as the flow's log says it (`firechunk.words.time_left`)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        Task,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.text import Text

    from firechunk.words import time_left

    class TimeLeftColumn(ProgressColumn):
        max_refresh = 0.5  # an estimate redrawn on every update would jitter

        def render(self, task: Task) -> Text:
            left = time_left(task.elapsed or 0.0, int(task.completed), int(task.total or 0))
            return Text(left, style="progress.remaining")

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeLeftColumn(),
        console=console(),
        transient=False,
    )
