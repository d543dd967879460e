"""The pipeline, declared once: crawl -> prune -> start -> chunk -> write -> validate ->
publish (-> prune again) -> load (`STAGES`).

Every way of running firechunk runs `run_pipeline`: `firechunk chunk` and `firechunk
rebuild` in this process, and the Prefect `rebuild` flow (the deployments) with each stage
a task. Two things differ between them, and both are passed in:

- `StageCall`: how a stage is called. Here, a plain call (`call_here`); in the flow, a
  Prefect task run (`firechunk.tasks.stages.as_task`) with the stage's retries and timeout.
- `Listener`: who hears what each stage did. The command prints lines and a progress bar;
  the flow turns the same events into dashboard artifacts (`firechunk.tasks.dashboard`).

What a run does is decided by its `Request` alone: a saved crawl (`replay`) skips the
crawl, an `out` directory is written but never published, pruned or loaded, and
`database.load` adds the load. The stages themselves live where their work is
(`firechunk.run.stages`, `firechunk.crawl`, `firechunk.db.load`); each takes the run's
small `RunStart` and hands on a small summary, so a stage can run in a task, a process or
on another day.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, Protocol, TypeVar, get_args

from firechunk.crawl import API_KEY_ENV
from firechunk.retention import prune_raw_crawls, prune_runs
from firechunk.run.executors import executor_for
from firechunk.run.history import record_seconds
from firechunk.run.stages import (
    Chunked,
    RunNotStarted,
    RunStart,
    Written,
    chunk_stage,
    pages_to_set_aside_of,
    publish_stage,
    start_out_run,
    start_run,
    validate_stage,
    write_stage,
)
from firechunk.schemas.publish import PublishResult
from firechunk.schemas.validation import ValidationOutcome
from firechunk.settings import CrawlSettings, DatabaseSettings, RunSettings
from firechunk.validate.suites import SUITES_DIR

if TYPE_CHECKING:
    from firechunk.db.load import LoadResult

# The stages, in the order a run goes through them: the one declaration of both.
StageName = Literal["crawl", "prune", "start", "chunk", "write", "validate", "publish", "load"]
STAGES: tuple[StageName, ...] = get_args(StageName)

OPENAI_KEY_BLOCK = "openai-api-key"

P = ParamSpec("P")
T = TypeVar("T")


class StageCall(Protocol):
    """Calls stage `name`'s function with the arguments; returns what it returned."""

    def __call__(
        self, name: StageName, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> T: ...


def call_here(name: StageName, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """A stage as a plain call in this process."""
    return function(*args, **kwargs)


# A secret's value and where it came from, from a Secret block's name or an environment
# variable's: the flow reads Prefect Secret blocks, a run here the environment only.
Secrets = Callable[[str | None, str], tuple[str | None, str]]


def from_environment(block: str | None, env: str) -> tuple[str | None, str]:
    """The variable `env`'s value (a run here has no Prefect API to hold Secret blocks)."""
    value = os.environ.get(env) or None
    return value, (f"${env}" if value else "nowhere")


class Listener:
    """What each stage did, as it happens. Every method does nothing here: a listener
    overrides what it shows."""

    def stage_started(self, stage: StageName, request: Request) -> None:
        """`stage` is about to run."""

    def stage_finished(self, stage: StageName, result: Any, seconds: float) -> None:
        """`stage` returned `result` after `seconds`."""

    def progress(self, stage: StageName, done: int, total: int) -> None:
        """How far `stage` has got: pages chunked of those not reused, windows embedded."""

    def say(self, message: str) -> None:
        """A line worth a log entry: the crawl's progress, the load's steps."""

    def ended(self, request: Request, night: Night, error: BaseException | None) -> None:
        """The run ended: `night` holds what it got to; `error` is why it stopped early
        (not for an interrupt: a night being stopped is not reported)."""


@dataclass(frozen=True)
class Request:
    """What to build: the settings, and where the pages come from and the run goes."""

    run: RunSettings = RunSettings()
    crawl: CrawlSettings = CrawlSettings()
    database: DatabaseSettings = DatabaseSettings()
    replay: Path | None = None  # a saved crawl.json: no crawl, no network
    data_dir: Path = Path("data")
    run_id: str | None = None
    out: Path | None = None  # written here instead of data_dir/runs/, never published
    suites_dir: Path = SUITES_DIR  # the expectation suites the run is validated with


@dataclass
class Night:
    """What a run got to, stage by stage; `seconds` per stage, and their `total`."""

    crawl_file: Path | None = None
    removed: list[str] = field(default_factory=list)
    start: RunStart | None = None
    chunked: Chunked | None = None
    written: Written | None = None
    outcome: ValidationOutcome | None = None
    result: PublishResult | None = None
    loaded: LoadResult | None = None
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def run_id(self) -> str | None:
        return self.start.run_id if self.start else None


def run_pipeline(
    request: Request,
    *,
    call: StageCall = call_here,
    listener: Listener | None = None,
    secrets: Secrets = from_environment,
) -> Night:
    """Run every stage `request` asks for, in `STAGES` order; what each got to.

    The run's seconds per stage are kept in its run directory (`firechunk runs`, the
    trend). An error stops the run where it happened (the stage marks the run failed);
    the listener hears of it before it is raised."""
    listener = listener or Listener()
    night = Night()
    stage = _Stages(request, call, listener, night)
    try:
        night.crawl_file = request.replay or stage("crawl", crawl, request, secrets, listener)
        if request.out is None:
            night.removed = stage("prune", prune, request, night.crawl_file, listener)
        night.start = stage("start", start, request, night.crawl_file)
        night.chunked = stage("chunk", chunk, night.start, night.crawl_file, listener)
        night.written = stage("write", write_stage, night.start)
        night.outcome = stage("validate", validate_stage, night.start, request.suites_dir)
        aside = pages_to_set_aside_of(night.start, night.outcome)
        if aside:  # a bad page costs that page: written again without it, validated again
            night.written = stage("write", write_stage, night.start, aside)
            night.outcome = stage(
                "validate", validate_stage, night.start, request.suites_dir, aside
            )
        if request.out is None:
            night.result = stage("publish", publish_stage, night.start, night.outcome)
            if night.result.published:  # the run it replaced may now be one too many
                night.removed += stage("prune", prune, request, night.crawl_file, listener)
        if night.start.data_dir is not None:
            night.seconds["total"] = record_seconds(night.start.run_dir, night.seconds)
        if request.database.load and night.result is not None and night.result.published:
            night.loaded = stage("load", load, request, night.result.run_id, secrets, listener)
    except Exception as error:
        listener.ended(request, night, error)
        raise
    listener.ended(request, night, None)
    return night


@dataclass(frozen=True)
class _Stages:
    """Calls one stage through `call`, timed, with the listener told before and after."""

    request: Request
    call: StageCall
    listener: Listener
    night: Night

    def __call__(
        self, name: StageName, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        self.listener.stage_started(name, self.request)
        started = time.perf_counter()
        result = self.call(name, function, *args, **kwargs)
        seconds = time.perf_counter() - started
        self.night.seconds[name] = self.night.seconds.get(name, 0.0) + seconds
        self.listener.stage_finished(name, result, seconds)
        return result


def crawl(request: Request, secrets: Secrets, listener: Listener) -> Path:
    """Start, resume or replay the Firecrawl crawl of `request.crawl`: its crawl.json.
    The key is read here and handed to the crawl only: it is never a parameter of a stage
    (the Prefect API records those) and never logged."""
    from firechunk.crawl import run_crawl

    settings = request.crawl
    api_key, source = secrets(settings.secret_block, API_KEY_ENV)
    listener.say(f"Firecrawl API key from {source}")
    outcome = run_crawl(
        settings.target(),
        api_key=api_key,
        data_dir=request.data_dir,
        settings=settings.client_options(),
        report=listener.say,
    )
    listener.say(f"crawl {outcome.name}: {outcome.pages} pages in {outcome.crawl_file}")
    return outcome.crawl_file


def prune(request: Request, crawl_file: Path, listener: Listener) -> list[str]:
    """Ended runs and raw crawls beyond the `keep_runs` newest,
    never `crawl_file`'s (`firechunk.retention`); 0 keeps every run. Failed nights must not
    fill the disk, so this runs as every run starts, and again once one is published. A
    removal that fails is said, not raised: the next run tries again."""
    keep, data_dir = request.run.keep_runs, request.data_dir
    try:
        removed = prune_runs(data_dir, keep) + prune_raw_crawls(data_dir, keep, spare=crawl_file)
    except OSError as error:
        listener.say(f"could not remove old runs from {data_dir}: {error}")
        return []
    if removed:
        listener.say(f"removed {len(removed)} old run(s) and raw crawl(s), keeping the "
                     f"{keep} newest: {', '.join(removed)}")  # fmt: skip
    return removed


def start(request: Request, crawl_file: Path) -> RunStart:
    """Claim the run's directory: data_dir/runs/<run-id>/, or `out`."""
    try:
        if request.out is not None:
            return start_out_run(request.out, request.run, source=crawl_file)
        return start_run(request.data_dir, request.run_id, request.run, source=crawl_file)
    except (FileExistsError, ValueError) as error:
        raise RunNotStarted(str(error)) from None


def chunk(start: RunStart, crawl_file: Path, listener: Listener) -> Chunked:
    """The chunk stage on the executor the run's settings name (processes, or Dask)."""

    def progress(done: int, total: int) -> None:
        listener.progress("chunk", done, total)

    return chunk_stage(start, crawl_file, executor_for(start.settings), progress=progress)


def load(request: Request, run_id: str, secrets: Secrets, listener: Listener) -> LoadResult | None:
    """Make the run's collection in the database hold exactly run `run_id`; None when a
    newer run was published meanwhile (that run's own load brings it in)."""
    from firechunk.db.connect import DB_URL_ENV, connection
    from firechunk.db.failures import redact
    from firechunk.db.load import LoadGuards, LoadSuperseded, load_run
    from firechunk.db.runs import published_run
    from firechunk.embedders import OPENAI_KEY_ENV, make_embedder

    database = request.database
    url, source = secrets(database.db_secret_block, DB_URL_ENV)
    where = f"the database from {source}" if url else "the embedded Postgres"
    listener.say(f"loading run {run_id} into {where}")
    options: dict[str, object] = {}
    if database.embedder == "openai":
        key, _ = secrets(OPENAI_KEY_BLOCK, OPENAI_KEY_ENV)
        options = database.embedder_options(api_key=key)
    embedder = make_embedder(database.embedder, **options)
    if request.run.task_runner == "dask" and database.embedder == "local":
        from firechunk.cluster_embedder import ClusterEmbedder
        from firechunk.run.executors import workers_of

        embedder = ClusterEmbedder(embedder, request.run.dask_address, workers_of(request.run))
    run = published_run(request.data_dir, run_id)
    try:
        with connection(url, request.data_dir) as conn:
            return load_run(
                conn,
                run,
                embedder,
                guards=LoadGuards(allow_shrink=request.run.allow_shrink),
                only_if_latest=True,
                say=lambda message: listener.say(redact(message)),
                progress=lambda done, total: listener.progress("load", done, total),
            )
    except LoadSuperseded as newer:
        listener.say(f"not loaded: {newer}")
        return None
