"""The pipeline's stages as Prefect task runs: `as_task`, the flow's `StageCall`.

Each stage (`firechunk.pipeline.STAGES`) becomes a task run named for it, so the dashboard
shows where a night spent its time and where it failed. What Prefect adds is declared here
and nowhere else: the crawl's retries and time limit. A retry resumes the same Firecrawl
job from its state file (no new credits), so only errors a rerun can get past are retried:
a short download, a network error that outlasted the per-call retries. A missing key, a
key or account Firecrawl refuses, a failed or expired job, an unclear start call or a job
state that cannot be trusted need a person, so they fail at once; so does a job still
running after `max_wait`, whose wait is spent: the run ends (the queue moves on) and the
next night resumes the job.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar, cast

from prefect import Task, task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import TaskRun
from prefect.states import Completed, Failed, State

from firechunk.crawl.errors import (
    AccessRefusedError,
    CrawlError,
    JobFailedError,
    JobNotFoundError,
    JobStateError,
    MissingApiKeyError,
    PollTimeoutError,
    StartOutcomeUnknownError,
    TargetMismatchError,
)
from firechunk.pipeline import Request, StageCall, StageName
from firechunk.publish import short_reason
from firechunk.schemas.publish import PublishResult
from firechunk.schemas.validation import ValidationOutcome

P = ParamSpec("P")
T = TypeVar("T")

# Errors a retry cannot fix now: it would only repeat the same message, or the same wait.
NOT_RETRIED = (
    MissingApiKeyError,
    PollTimeoutError,
    AccessRefusedError,
    TargetMismatchError,
    StartOutcomeUnknownError,
    JobNotFoundError,
    JobFailedError,
    JobStateError,
)
CRAWL_RETRY_DELAYS = [30, 120]  # seconds before the first and the second retry
# Past `max_wait` the crawl stops polling by itself; the task's timeout, an hour later, ends
# a crawl stuck anywhere else (a download that never finishes), with the job kept.
DOWNLOAD_TIME = 3600


def crawl_worth_retrying(task: Task[..., Any], task_run: TaskRun, state: State[Any]) -> bool:
    error = state.result(raise_on_failure=False)
    return isinstance(error, CrawlError) and not isinstance(error, NOT_RETRIED)


def crawl_time_limit(max_wait: float | None) -> float | None:
    """The crawl task's timeout for a job allowed to run `max_wait` seconds."""
    return None if max_wait is None else max_wait + DOWNLOAD_TIME


def task_options(stage: StageName, request: Request) -> dict[str, Any]:
    """The Prefect task options of `stage`: its name, no result caching (every stage
    reads and writes files), and the crawl's retries and time limit."""
    options: dict[str, Any] = {"name": stage, "cache_policy": NO_CACHE}
    if stage == "crawl":
        options.update(
            retries=len(CRAWL_RETRY_DELAYS),
            retry_delay_seconds=CRAWL_RETRY_DELAYS,
            retry_condition_fn=crawl_worth_retrying,
            timeout_seconds=crawl_time_limit(request.crawl.max_wait),
        )
    return options


def as_task(request: Request) -> StageCall:
    """The `StageCall` that runs each stage of `request` as a task run of the flow. A stage
    that raised raises here; one whose result says the run stops (`verdict`) ends in a
    state that says so, and its result goes on to the pipeline all the same."""

    def call(name: StageName, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        stage_task = task(_with_verdict(function), **task_options(name, request))
        state = stage_task(*args, return_state=True, **kwargs)
        result = state.result(raise_on_failure=False)
        if isinstance(result, BaseException):
            raise result
        return cast(T, result.value if isinstance(result, Kept) else result)

    return call


@dataclass(frozen=True)
class Kept:
    """A stage's result carried by the state its verdict ends in. Prefect logs a failed
    task's state with its data's repr: the class name is enough there, not every
    expectation's outcome."""

    value: object

    def __repr__(self) -> str:
        return f"<{type(self.value).__name__}>"


def verdict(result: object) -> State[Any] | None:
    """The task run's state for a stage result that stops the run: a failed validation is
    Failed (the dashboard shows where the night failed); a publish the shrink guard
    refused, or one another run overtook, is the guard working: Completed, named for it,
    with no traceback. None for a result that lets the run go on."""
    if isinstance(result, ValidationOutcome) and not result.success:
        failed = result.evaluated_expectations - result.successful_expectations
        return Failed(message=f"{failed} expectation(s) failed", data=Kept(result))
    if isinstance(result, PublishResult) and not result.published:
        name = "Not published"
        if result.refused is not None:
            name = "Refused"
        elif result.superseded_by is not None:
            name = "Superseded"
        return Completed(name=name, message=short_reason(result), data=Kept(result))
    return None


def _with_verdict(function: Callable[P, T]) -> Callable[P, T | State[Any]]:
    @functools.wraps(function)
    def stage(*args: P.args, **kwargs: P.kwargs) -> T | State[Any]:
        result = function(*args, **kwargs)
        return verdict(result) or result

    return stage
