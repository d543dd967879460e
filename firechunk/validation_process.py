"""Validation in a helper process that imports Great Expectations while the run is written.

Importing GX costs 3.5-4.5 s of CPU on this project's 2-core machine (more than running
the suites over a 5,000-page run), and a nightly rebuild runs in a fresh process (a
deployment's flow run, `firechunk rebuild`), so it pays that import on every run. In the
flow's own process the import came after the writing, on one core, while the other core
was idle: profiled on the 1 %-changed 5,000-page rebuild, it was 6 s of a 20 s flow run.

`ValidationProcess` starts a helper process that imports GX at once, while this process
writes the run, and then runs `firechunk.validation.validate_tables` there: the same
function, the same suite files and outputs; only the process differs. A process that has
imported GX already (a test session, a bench running several rebuilds) validates in
itself, because a helper would only import GX a second time.

The helper is spawned (a fresh interpreter), not forked: the flow's process runs threads
and event loops, which a forked child must not inherit, and multiprocessing's fork server
belongs to the chunking workers (`tasks.runners`), whose preloads it must keep.
"""

from __future__ import annotations

import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from firechunk.validation import validate_tables
from schemas.validation import ValidationOutcome

if TYPE_CHECKING:
    import pandas as pd


class ValidationProcess:
    """Validates a run's tables in a helper process started (and importing GX) at once.

    Use it as a context manager around the writing and the validation; the helper ends
    after one validation, or when the block ends.
    """

    def __init__(self, helper: bool | None = None) -> None:
        """`helper` None: a helper process only if this process has not imported GX."""
        if helper is None:
            helper = "great_expectations" not in sys.modules
        self._helper: ProcessPoolExecutor | None = None
        if helper:
            self._helper = ProcessPoolExecutor(
                max_workers=1, mp_context=multiprocessing.get_context("spawn")
            )
            self._helper.submit(_import_great_expectations)

    @property
    def in_helper(self) -> bool:
        """Whether validation runs in the helper process (False: in this one)."""
        return self._helper is not None

    def validate_tables(
        self, tables: dict[str, pd.DataFrame], run_dir: Path, **options: Any
    ) -> ValidationOutcome:
        """`firechunk.validation.validate_tables`, in the helper if there is one."""
        if self._helper is None:
            return validate_tables(tables, run_dir, **options)
        try:
            return self._helper.submit(validate_tables, tables, run_dir, **options).result()
        finally:
            self.close()

    def close(self) -> None:
        """End the helper; one still importing GX exits when that is done."""
        if self._helper is not None:
            self._helper.shutdown(wait=False, cancel_futures=True)
            self._helper = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _import_great_expectations() -> None:
    import great_expectations  # noqa: F401  (the import is the point)
