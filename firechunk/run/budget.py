"""A time budget per page: a page that takes too long costs that page, not the night.

The chunker is pure Python, so a timer signal interrupts it between bytecodes: SIGALRM in
the process's main thread, which is where every worker of the process pool and the CLI's
in-process chunking run. Elsewhere (a thread of a Dask worker) there is no budget: signals
reach only the main thread.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class PageTimeout(BaseException):
    """The page used up its time budget. A BaseException, so that no `except Exception`
    inside the chunker takes it for a failure of its own."""


@contextmanager
def time_budget(seconds: float) -> Iterator[None]:
    """Raise `PageTimeout` in the `with` block once `seconds` have passed (0: no budget)."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise PageTimeout(f"over its time budget of {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
