"""The crawl stage alone: start, resume or replay a Firecrawl crawl; returns its crawl.json."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.names import SUPABASE_DOCS, site_and_date
from schemas.job import ApiVersion, CrawlTarget
from tasks.crawl import DEFAULT_SECRET_BLOCK, crawl_site


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
    """Crawl `site_url` into `data_dir/raw/<crawl-id>/crawl.json`, the chunk flow's input."""
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
