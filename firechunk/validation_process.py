"""Validation in a helper process that imports Great Expectations while the run is written.

Importing GX costs 3.5-4.5 s of CPU on this project's 2-core machine (more than running
the suites over a 5,000-page run), and a nightly rebuild runs in a fresh process (a
deployment's flow run, `firechunk rebuild`), so it pays that import on every run. In the
flow's own process the import came after the writing, on one core, while the other core
was idle: profiled on the 1 %-changed 5,000-page rebuild, it was 6 s of a 20 s flow run.

`ValidationProcess` starts a helper process that imports GX at once, while this process
chunks and writes the run (the rebuild flow makes it as the run starts), and then runs
`firechunk.validation.validate_tables` there: the same function, the same suite files and
outputs; only the process differs. The helper is started once per process and kept, like
the chunking workers' fork server, so a process that runs several rebuilds (a bench, a
test session) imports GX once, not once per run.
A small run (`HELPER_MIN_PAGES`), or one in a process that has imported GX itself,
validates in its own process: there a helper would cost more than it saves.

The helper is spawned (a fresh interpreter), not forked: the flow's process runs threads
and event loops, which a forked child must not inherit, and multiprocessing's fork server
belongs to the chunking workers (`tasks.runners`), whose preloads it must keep. Spawning
would import the parent's main module again in the helper (as `__mp_main__`): for a
deployment's flow run that is `prefect.engine`, for `firechunk rebuild` the CLI, and the
helper needs neither. So the helper is started with the main module hidden
(`_main_module_hidden`). In a process whose main module imports `prefect.engine`, the
helper was ready in a median 3.9 s against 5.7 s (8 interleaved pairs, 1.1 s saved in the
median pair). A run whose writing is shorter than the helper's imports waits for the rest.
"""

from __future__ import annotations

import multiprocessing
import sys
import types
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from firechunk.validation import validate_tables
from schemas.validation import ValidationOutcome

if TYPE_CHECKING:
    import pandas as pd

# A smaller run validates in its own process. Measured on the 2-core machine: a helper is
# ready 5.5-6.6 s after it starts (pandas, GX and the parent's main module imported in a
# fresh interpreter), while GX alone imports in 2.9-3.6 s in a process that has Prefect
# loaded; writing a run takes about 0.7 ms of CPU per page. So the helper only pays off
# when the writing lasts longer than that difference, from a few thousand pages.
HELPER_MIN_PAGES = 3000

_helper: ProcessPoolExecutor | None = None  # this process's helper, once started


class ValidationProcess:
    """Where a run's tables are validated: the helper process, or this one.

    Make it as the writing of the run begins (`for_run`): that starts the helper if the run
    needs one and this process has none yet, and the helper imports GX while the run is
    written.
    """

    def __init__(self, helper: bool) -> None:
        self.in_helper = helper
        if helper:
            _start_helper()

    @classmethod
    def for_run(cls, pages: int, reuse: Path | None) -> ValidationProcess:
        """The helper if one is running already (its imports are paid), or if the run has
        `HELPER_MIN_PAGES` pages or more, reuses the outcomes of an earlier run (`reuse`,
        its store) and this process has not imported GX itself.

        Made as the run starts. A run that reuses pages is mostly writing, done in this
        process on one core: the helper imports GX on the other. A full rebuild chunks on
        every core, so a helper beside the workers would not save time, and it costs a
        process's memory when memory peaks (a 5,000-page rebuild's process tree went from
        1.4 to 1.65 GB): that run imports GX itself, after the chunking.
        """
        large = pages >= HELPER_MIN_PAGES and reuse is not None
        return cls(
            helper=_helper is not None or (large and "great_expectations" not in sys.modules)
        )

    def validate_tables(
        self, tables: dict[str, pd.DataFrame], run_dir: Path, **options: Any
    ) -> ValidationOutcome:
        """`firechunk.validation.validate_tables`, in the helper or in this process."""
        if not self.in_helper:
            return validate_tables(tables, run_dir, **options)
        global _helper
        try:
            return _start_helper().submit(validate_tables, tables, run_dir, **options).result()
        except BrokenProcessPool:
            _helper = None  # it died (killed, out of memory): the next run starts another
            raise


def _start_helper() -> ProcessPoolExecutor:
    global _helper
    if _helper is None:
        _helper = ProcessPoolExecutor(
            max_workers=1, mp_context=multiprocessing.get_context("spawn")
        )
        with _main_module_hidden():
            _helper.submit(_import_great_expectations)  # the helper process starts here
    return _helper


@contextmanager
def _main_module_hidden() -> Iterator[None]:
    """While a spawned process starts, a main module with no spec and no file, which
    multiprocessing then does not import in the child. The helper runs functions of this
    package only, so it needs nothing from the parent's main module. The swap lasts as long
    as starting the process takes."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def _import_great_expectations() -> None:
    import great_expectations  # noqa: F401  (the import is the point)
