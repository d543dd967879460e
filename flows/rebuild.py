"""The nightly rebuild: the pipeline (`firechunk.pipeline`), each stage a task run, on the
dashboard.

Deployed twice by `prefect.yaml`: `supabase-nightly` on a schedule and `manual-rebuild` for
runs started by hand; `firechunk rebuild` runs it when a Prefect API is configured. The
rebuild is incremental (`firechunk.run.cache`): pages whose outcome the last good run kept
are not chunked again, and `changes.json` says which chunk ids to upsert and delete.
`run.full` chunks every page.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow
from prefect.states import Failed, State

from firechunk.flows.checks import check_before_start
from firechunk.flows.logs import expected, quiet_expected_tracebacks
from firechunk.flows.names import site_and_date
from firechunk.pipeline import Request, run_pipeline
from firechunk.publish import RunNotPublished, format_result, short_reason
from firechunk.schemas.publish import PublishResult
from firechunk.settings import CrawlSettings, DatabaseSettings, RunSettings
from firechunk.tasks.dashboard import Dashboard
from firechunk.tasks.secrets import secret_or_env
from firechunk.tasks.stages import as_task

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
    after the dashboard has the report. A night that cannot start (no Firecrawl key, a bad
    URL, a data directory it cannot write) fails before any task runs; an expected failure
    (a crawl error, a refusal) ends the flow run Failed with its message, no traceback.
    Every night that started ends with what the database holds on the dashboard
    (`rebuild-database`), loaded or not; every night's first card is its verdict.

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
    quiet_expected_tracebacks()
    request = Request(
        run=run, crawl=crawl, database=database, replay=replay, data_dir=data_dir, run_id=run_id
    )
    dashboard = Dashboard()
    try:
        check_before_start(request, secret_or_env)
    except Exception as error:
        dashboard.not_started(request, error)
        return Failed(message=str(error), data=error)
    try:
        night = run_pipeline(
            request, call=as_task(request), listener=dashboard, secrets=secret_or_env
        )
    except Exception as error:
        if not expected(error):
            raise
        # Returned, not raised: the dashboard has said it (its verdict card, one line).
        return Failed(message=str(error), data=error)
    result = night.result
    assert result is not None, "a run of a data directory is always published or refused"
    if result.published:
        return result
    # Returned, not raised: no traceback is logged for a guard that did its job. A caller
    # of the flow (`firechunk rebuild`) raises the state's `RunNotPublished`.
    return Failed(
        message=f"Run {result.run_id} not published: {short_reason(result)}",
        data=RunNotPublished(format_result(result), result),
    )
