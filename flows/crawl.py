"""The crawl stage alone: start, resume or replay a Firecrawl crawl; returns its crawl.json."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from firechunk.flows.names import SUPABASE_DOCS, site_and_date
from firechunk.schemas.job import ApiVersion, CrawlTarget
from firechunk.tasks.crawl import DEFAULT_SECRET_BLOCK, crawl_site


@flow(name="crawl", flow_run_name=site_and_date)
def crawl(
    site_url: str = SUPABASE_DOCS,
    include_paths: list[str] | None = None,
    exclude_paths: list[str] | None = None,
    limit: int | None = None,
    api_version: ApiVersion = "v2",
    api_url: str | None = None,
    data_dir: Path = Path("data"),
    name: str | None = None,
    recrawl: bool = False,
    secret_block: str = DEFAULT_SECRET_BLOCK,
    poll_interval: float = 2.0,
) -> Path:
    """Crawl `site_url` into `data_dir/raw/<crawl-id>/crawl.json`, the chunk flow's input.

    Rerun while the Firecrawl job is unfinished, it resumes the same job (no credits paid
    twice); rerun once the crawl is downloaded, it replays it from disk.

    Args:
        site_url: The documentation site Firecrawl crawls.
        include_paths: Only URL paths matching one of these regexes are crawled.
        exclude_paths: URL paths matching one of these regexes are not crawled.
        limit: At most this many pages are crawled, which bounds the Firecrawl credits a
            run spends; empty for no limit.
        api_version: The Firecrawl API version, "v2" or "v1".
        api_url: The Firecrawl API base URL; empty for https://api.firecrawl.dev.
        data_dir: The data root: the job goes to jobs/, the pages to raw/<crawl-id>/.
        name: The crawl's name (its job file, data_dir/jobs/<name>.json); empty for one
            made of the site and a hash of the options.
        recrawl: Start a new Firecrawl job even if this crawl's job is unfinished or done.
        secret_block: The Prefect Secret block holding the Firecrawl API key; without
            it, FIRECRAWL_API_KEY in the worker's environment.
        poll_interval: Seconds between the first progress polls (they back off to 30 s).

    Returns:
        The path of the crawl.json.
    """
    target = CrawlTarget(
        url=site_url,
        include_paths=include_paths or [],
        exclude_paths=exclude_paths or [],
        limit=limit,
    )
    outcome = crawl_site(
        target,
        data_dir=data_dir,
        api_version=api_version,
        api_url=api_url,
        poll_interval=poll_interval,
        name=name,
        recrawl=recrawl,
        secret_block=secret_block,
    )
    return outcome.crawl_file
