"""The nightly rebuild: crawl (or replay) -> chunk -> write -> validate -> publish -> prune
(-> load into Postgres + pgvector).

Deployed twice by `prefect.yaml`: `supabase-nightly` on a schedule and `manual-rebuild` for
runs started by hand; `firechunk rebuild` runs it locally. The same stages split in two
are the stage flows (`flows/chunk.py`, then `flows/validate_publish.py`), and
`firechunk chunk` runs them without Prefect.

The rebuild is incremental (`firechunk.run.cache`): pages whose outcome the last good run
kept are not chunked again, and `changes.json` says which chunk ids to upsert and delete.
`full=True` chunks every page.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow
from prefect.states import State

from firechunk.flows.crawl import crawl as crawl_flow
from firechunk.flows.names import SUPABASE_DOCS, site_and_date
from firechunk.retention import check_keep
from firechunk.run.history import record_seconds
from firechunk.run.write import read_report
from firechunk.schemas.job import ApiVersion
from firechunk.schemas.publish import PublishResult
from firechunk.tasks.artifacts import report_to_dashboard, timed
from firechunk.tasks.chunk import chunk_on_runner
from firechunk.tasks.crawl import DEFAULT_SECRET_BLOCK
from firechunk.tasks.database import database_reported
from firechunk.tasks.load import DB_SECRET_BLOCK, EmbedderName, load_database
from firechunk.tasks.run import not_published, prune_old_runs, start, validated_and_published, write
from firechunk.tasks.runners import TaskRunnerKind, make_task_runner
from firechunk.validate.set_aside import DEFAULT_MAX_FAILED_PAGES


@flow(name="rebuild", flow_run_name=site_and_date)
def rebuild(
    site_url: str = SUPABASE_DOCS,
    include_paths: list[str] | None = None,
    exclude_paths: list[str] | None = None,
    limit: int | None = None,
    api_version: ApiVersion = "v2",
    api_url: str | None = None,
    replay: Path | None = None,
    task_runner: TaskRunnerKind = "process",
    dask_address: str | None = None,
    workers: int | None = None,
    data_dir: Path = Path("data"),
    secret_block: str = DEFAULT_SECRET_BLOCK,
    run_id: str | None = None,
    full: bool = False,
    keep_runs: int = 14,
    load: bool = False,
    collection: str | None = None,
    embedder: EmbedderName = "local",
    embedding_model: str | None = None,
    embedding_dimensions: int | None = None,
    embedding_base_url: str | None = None,
    allow_shrink: bool = False,
    db_secret_block: str = DB_SECRET_BLOCK,
    allow_partial: bool = False,
    max_failed_pages: float = DEFAULT_MAX_FAILED_PAGES,
) -> PublishResult | State:
    """Rebuild the chunks of `site_url`, or of the saved crawl `replay` (no network).

    The run is written to `data_dir/runs/<run-id>/` and becomes `data_dir/latest` only if
    it passed validation (and the shrink guard); a run not published fails the flow run,
    with the reason as its message, after the dashboard has the report. Pages the last good
    run chunked are reused unless `full`. Every night ends with what the database holds on
    the dashboard (`rebuild-database`), loaded or not. Its seconds per stage and their total
    (the whole run) are kept in the run directory's seconds.json.

    Args:
        site_url: The documentation site Firecrawl crawls (ignored with `replay`).
        include_paths: Only URL paths matching one of these regexes are crawled.
        exclude_paths: URL paths matching one of these regexes are not crawled.
        limit: At most this many pages are crawled, which bounds the Firecrawl credits a
            run spends; empty for no limit.
        api_version: The Firecrawl API version, "v2" or "v1".
        api_url: The Firecrawl API base URL; empty for https://api.firecrawl.dev.
        replay: A saved crawl.json to rebuild from instead of crawling: no network, no key.
        task_runner: Where pages are chunked: "process" (processes on the worker's machine)
            or "dask" (a Dask cluster).
        dask_address: The Dask scheduler to chunk on (tcp://host:8786); empty for a local
            cluster of `workers` processes.
        workers: How many processes chunk pages side by side; empty for 2, or none (the
            flow's own process) when under 2 MB of pages is left to chunk.
        data_dir: The data root: runs/, raw/, jobs/ and the latest link live under it.
        secret_block: The Prefect Secret block holding the Firecrawl API key; without
            it, FIRECRAWL_API_KEY in the worker's environment.
        run_id: The run directory's name (letters, digits, '.', '_', '-'), which must be
            new; empty for the UTC start time and a random suffix.
        full: Chunk every page again, reusing nothing from the last good run.
        keep_runs: How many finished runs and raw crawls are kept, the newest; older ones
            are removed as a run starts and once it is published (0 keeps them all).
        load: Load the published run into Postgres + pgvector afterwards.
        embedder: How chunks are embedded for the database: "local" (MiniLM on the CPU)
            or "openai" (any OpenAI-compatible API; key from the Secret block
            openai-api-key, else OPENAI_API_KEY).
        embedding_model: The model the "openai" embedder asks for.
        embedding_dimensions: The vector size asked of the "openai" embedder; empty for the
            model's own.
        embedding_base_url: The OpenAI-compatible API's base URL; empty for OpenAI's.
        collection: The database collection (doc set) to load into; empty for the one the
            run names, its host and path.
        allow_shrink: Publish a run that drops over 20 % of the last good run's pages or
            chunks, and load one that shrinks its collection by over 20 % (net).
        db_secret_block: The Prefect Secret block holding the database URL; without it,
            FIRECHUNK_DB_URL, else an embedded Postgres under `data_dir`.
        allow_partial: Rebuild from a replayed crawl whose status is not "completed".
        max_failed_pages: The largest share of pages (0.01: 1 %) that may fail page-level
            expectations and be set aside (quarantined, their last good chunks kept) while
            the run still publishes.

    Returns:
        The run's id, directory and validation verdict, and whether it was published.
    """
    check_keep(keep_runs)  # before any work: a typo must not cost a crawl
    with database_reported(data_dir, collection, load, db_secret_block) as night:
        seconds: dict[str, float] = {}
        if replay is None:
            with timed(seconds, "crawl"):
                replay = crawl_flow(
                    site_url=site_url,
                    include_paths=include_paths,
                    exclude_paths=exclude_paths,
                    limit=limit,
                    api_version=api_version,
                    api_url=api_url,
                    data_dir=data_dir,
                    secret_block=secret_block,
                )
        # Every run, published or not, before it takes space: failed nights must not fill the disk.
        removed = prune_old_runs(data_dir, keep_runs, replay)
        run = start(data_dir, run_id, full, allow_shrink, allow_partial, max_failed_pages)
        night.run_id = run.run_id
        with timed(seconds, "chunk"):
            chunk_on_runner(
                run, replay, make_task_runner(task_runner, workers, dask_address), workers
            )
        with timed(seconds, "write"):
            write(run)
        with timed(seconds, "validate + publish"):
            result = validated_and_published(run)
        # The whole run, kept with it: the trend and `firechunk runs` show this total too.
        seconds["total"] = record_seconds(run.run_dir, seconds)
        if not result.published:  # the dashboard gets the report, then the flow run fails
            report_to_dashboard(read_report(run.run_dir), seconds, result, trend=False)
            return not_published(result)
        removed += prune_old_runs(data_dir, keep_runs, replay)
        report_to_dashboard(read_report(run.run_dir), seconds, result, removed, trend=False)
        if load:
            load_database(
                data_dir,
                result.run_id,
                embedder,
                embedding_model,
                embedding_dimensions,
                embedding_base_url,
                allow_shrink,
                collection=collection,
                db_secret_block=db_secret_block,
            )
        return result
