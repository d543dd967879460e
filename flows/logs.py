"""A flow run's log says an expected outcome once, in its own words: no traceback.

A night refused by the shrink guard, one that failed validation or found no Firecrawl key
ends in a Failed state whose message says why, after one ERROR line of firechunk's own.
Prefect adds tracebacks of its own to such a night: a task that raised logs its
exception's, and in a deployment's process the engine raises the flow's Failed state once
more and logs it as "Engine execution exited with unexpected exception", some 40 lines.
This filter, on Prefect's flow-run and task-run loggers, keeps those records' lines but
drops the traceback of a failure firechunk knows (and the "NoneType: None" Prefect
appends to a failed state's line) (`firechunk.commands.exits.classify`),
and drops the engine's record of one altogether: the state's message already says it. A
bug's traceback is kept whole.
"""

from __future__ import annotations

import logging

from firechunk.commands.exits import ExitCode, classify

# Prefect's own loggers of flow runs and task runs (their records reach the dashboard).
RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")
ENGINE_EXIT = "Engine execution exited with unexpected exception"


def expected(error: BaseException) -> bool:
    """A failure a person acts on from its message (a refusal, a missing key, a crawl
    error), not a bug."""
    known = classify(error)
    return known is not None and known[0] != ExitCode.INTERNAL


class NoExpectedTracebacks(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if error is None:  # a failed state logged with no exception: "NoneType: None"
            record.exc_info = None
            return True
        if not expected(error):
            return True
        if record.getMessage() == ENGINE_EXIT:
            return False
        record.exc_info, record.exc_text = None, None
        return True


def quiet_expected_tracebacks() -> None:
    """Put the filter on Prefect's run loggers, once per process."""
    for name in RUN_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(known, NoExpectedTracebacks) for known in logger.filters):
            logger.addFilter(NoExpectedTracebacks())
