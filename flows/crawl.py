"""The crawl stage alone: start, resume or replay a Firecrawl crawl; returns its crawl.json."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from firechunk.flows.names import site_and_date
from firechunk.settings import CrawlSettings
from firechunk.tasks.crawl import crawl_site

# Past `max_wait` the crawl stops polling by itself; the Prefect timeout, an hour later,
# ends a crawl stuck anywhere else (a download that never finishes), with the job kept.
DOWNLOAD_TIME = 3600


def time_limit(max_wait: float | None) -> float | None:
    """The crawl task's Prefect timeout for a job allowed to run `max_wait` seconds."""
    return None if max_wait is None else max_wait + DOWNLOAD_TIME


@flow(name="crawl", flow_run_name=site_and_date)
def crawl(
    crawl: CrawlSettings = CrawlSettings(),
    data_dir: Path = Path("data"),
    name: str | None = None,
    recrawl: bool = False,
    poll_interval: float = 2.0,
) -> Path:
    """Crawl the site into `data_dir/raw/<crawl-id>/crawl.json`, the chunk flow's input.

    Rerun while the Firecrawl job is unfinished, it resumes the same job (no credits paid
    twice); rerun once the crawl is downloaded, it replays it from disk.

    Args:
        crawl: What Firecrawl crawls: the site, the paths, the page limit, the API and its
            key's Secret block.
        data_dir: The data root: the job goes to jobs/, the pages to raw/<crawl-id>/.
        name: The crawl's name (its job file, data_dir/jobs/<name>.json); empty for one
            made of the site and a hash of the options.
        recrawl: Start a new Firecrawl job even if this crawl's job is unfinished or done.
        poll_interval: Seconds between the first progress polls (they back off to 30 s).

    Returns:
        The path of the crawl.json.
    """
    outcome = crawl_site.with_options(timeout_seconds=time_limit(crawl.max_wait))(
        crawl.target(),
        data_dir=data_dir,
        api_version=crawl.api_version,
        api_url=crawl.api_url,
        poll_interval=poll_interval,
        max_wait=crawl.max_wait,
        name=name,
        recrawl=recrawl,
        secret_block=crawl.secret_block,
    )
    return outcome.crawl_file
