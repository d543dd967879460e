"""The nightly rebuild: crawl (or replay) -> chunk -> write -> validate -> publish -> prune
(-> load into Postgres + pgvector).

Deployed twice by `prefect.yaml`: `supabase-nightly` on a schedule and `manual-rebuild` for
runs started by hand; `firechunk rebuild` runs it locally. The same stages split in two
are the stage flows (`flows/chunk.py`, then `flows/validate_publish.py`), and
`firechunk chunk` runs them without Prefect.

The rebuild is incremental (`firechunk.run.cache`): pages whose outcome the last good run
kept are not chunked again, and `changes.json` says which chunk ids to upsert and delete.
`run.full` chunks every page.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow
from prefect.states import State

from firechunk.flows.crawl import crawl as crawl_flow
from firechunk.flows.names import site_and_date
from firechunk.run.collection import declared
from firechunk.run.history import record_seconds
from firechunk.run.write import read_report
from firechunk.schemas.publish import PublishResult
from firechunk.settings import CrawlSettings, DatabaseSettings, RunSettings
from firechunk.tasks.artifacts import report_to_dashboard, timed
from firechunk.tasks.chunk import chunk_on_runner
from firechunk.tasks.database import database_reported
from firechunk.tasks.load import load_database
from firechunk.tasks.run import not_published, prune_old_runs, start, validated_and_published, write

# A rebuild that is stuck without failing (a connection that never answers, a worker that
# never returns) ends TimedOut after this: the failure alert goes out and the deployment's
# one slot is free again well before the next night is due, instead of holding every later
# night in its queue. Generous, since a first load of a large site embeds for hours.
RUN_TIME_LIMIT = 20 * 3600


@flow(name="rebuild", flow_run_name=site_and_date, timeout_seconds=RUN_TIME_LIMIT)
def rebuild(
    crawl: CrawlSettings = CrawlSettings(),
    run: RunSettings = RunSettings(),
    database: DatabaseSettings = DatabaseSettings(),
    replay: Path | None = None,
    data_dir: Path = Path("data"),
    run_id: str | None = None,
) -> PublishResult | State:
    """Rebuild the chunks of the crawled site, or of the saved crawl `replay` (no network).

    The run belongs to the collection `run.collection` (empty: the crawl's target, or the
    replay's pages, names it). It is written to `data_dir/runs/<run-id>/` and becomes its
    collection's latest (and `data_dir/latest`) only if it passed validation (and the
    shrink guard); a run not published fails the flow run, with the reason as its message,
    after the dashboard has the report. Pages the last good run of its collection chunked
    are reused unless `run.full`. Every night ends with what the database holds on the
    dashboard (`rebuild-database`), loaded or not. Its seconds per stage and their
    total (the whole run) are kept in the run directory's seconds.json.

    Args:
        crawl: What Firecrawl crawls: the site, the paths, the page limit, the API and its
            key's Secret block (not used with `replay`).
        run: How the run is chunked, validated, published and pruned.
        database: Whether and how the published run goes into Postgres + pgvector.
        replay: A saved crawl.json to rebuild from instead of crawling: no network, no key.
        data_dir: The data root: runs/, raw/, jobs/, the latest link and the embedded
            database live under it.
        run_id: The run directory's name (letters, digits, '.', '_', '-'), which must be
            new; empty for the UTC start time and a random suffix.

    Returns:
        The run's id, directory and validation verdict, and whether it was published.
    """
    # The night's doc set, named before anything runs: the crawl's target, or the replay's.
    source = crawl.target() if replay is None else replay
    run = declared(run, source)
    with database_reported(data_dir, database, run.collection) as night:
        seconds: dict[str, float] = {}
        if replay is None:
            with timed(seconds, "crawl"):
                replay = crawl_flow(crawl=crawl, data_dir=data_dir)
        # Every run, published or not, before it takes space: failed nights must not fill the disk.
        removed = prune_old_runs(data_dir, run.keep_runs, replay)
        started = start(data_dir, run_id, run, source)
        night.run_id = started.run_id
        with timed(seconds, "chunk"):
            chunk_on_runner(started, replay)
        with timed(seconds, "write"):
            write(started)
        with timed(seconds, "validate + publish"):
            result = validated_and_published(started)
        # The whole run, kept with it: the trend and `firechunk runs` show this total too.
        seconds["total"] = record_seconds(started.run_dir, seconds)
        if not result.published:  # the dashboard gets the report, then the flow run fails
            report_to_dashboard(read_report(started.run_dir), seconds, result, trend=False)
            return not_published(result)
        removed += prune_old_runs(data_dir, run.keep_runs, replay)
        report_to_dashboard(read_report(started.run_dir), seconds, result, removed, trend=False)
        if database.load:
            load_database(data_dir, result.run_id, database, allow_shrink=run.allow_shrink)
        return result
