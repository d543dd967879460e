"""Prefect tasks of the crawl stage: crawl (or resume) with Firecrawl, and load a saved crawl.

The crawl itself is `firechunk.crawl.run_crawl`; what Prefect adds is task retries. A retry
resumes the same Firecrawl job from its state file (no new credits), so only errors that a
rerun can get past are retried: a short download, a network error that outlasted the
per-call retries. A missing key, a key or account Firecrawl refuses (401, 402, 403), a
failed or expired job, an unclear start call or a job state that cannot be trusted need a
person, so they fail at once; so does a job still running after `max_wait`, whose wait is
spent: the run ends (the queue moves on) and the next one resumes the job.

The API key is looked up inside the task and handed to `run_crawl` only: it is never a task
or flow parameter (parameters are recorded by the Prefect API) and never logged.
"""

from __future__ import annotations

from pathlib import Path

from prefect import Task, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import TaskRun
from prefect.states import State

from firechunk.crawl import ClientOptions, CrawlOutcome, run_crawl
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
from firechunk.schemas.job import ApiVersion, CrawlTarget
from firechunk.tasks.secrets import secret_or_env

API_KEY_ENV = "FIRECRAWL_API_KEY"
DEFAULT_SECRET_BLOCK = "firecrawl-api-key"

# Errors a retry cannot fix now: it would only repeat the same message, or the same wait.
_NOT_RETRIED = (
    MissingApiKeyError,
    PollTimeoutError,
    AccessRefusedError,
    TargetMismatchError,
    StartOutcomeUnknownError,
    JobNotFoundError,
    JobFailedError,
    JobStateError,
)


def firecrawl_api_key(secret_block: str | None = DEFAULT_SECRET_BLOCK) -> tuple[str | None, str]:
    """The key and where it came from: the Secret block if it exists, else the environment."""
    key, source = secret_or_env(secret_block, API_KEY_ENV)
    return key, (source if key else "nowhere (a complete crawl replays without one)")


def _worth_retrying(task: Task, task_run: TaskRun, state: State) -> bool:
    error = state.result(raise_on_failure=False)
    return isinstance(error, CrawlError) and not isinstance(error, _NOT_RETRIED)


@task(
    name="crawl-site",
    retries=2,
    retry_delay_seconds=[30, 120],
    retry_condition_fn=_worth_retrying,
    cache_policy=NO_CACHE,
)
def crawl_site(
    target: CrawlTarget,
    *,
    data_dir: Path,
    api_version: ApiVersion = "v2",
    api_url: str | None = None,
    poll_interval: float = 2.0,
    max_wait: float | None = None,
    name: str | None = None,
    recrawl: bool = False,
    secret_block: str | None = DEFAULT_SECRET_BLOCK,
) -> CrawlOutcome:
    """Start, resume or replay the crawl of `target`; its crawl.json is the stage's output."""
    logger = get_run_logger()
    api_key, source = firecrawl_api_key(secret_block)
    logger.info("Firecrawl API key from %s", source)
    settings = ClientOptions(
        api_version=api_version,
        poll_interval=poll_interval,
        max_poll_interval=max(30.0, poll_interval),
        max_wait=max_wait,
        **({"api_url": api_url} if api_url else {}),
    )
    outcome = run_crawl(
        target,
        api_key=api_key,
        data_dir=data_dir,
        settings=settings,
        name=name,
        recrawl=recrawl,
        report=logger.info,
    )
    logger.info("crawl %s: %d pages in %s", outcome.name, outcome.pages, outcome.crawl_file)
    return outcome
