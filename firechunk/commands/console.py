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
    the time left at the pace so far (a first load's embedding takes minutes to hours)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console(),
        transient=False,
    )
