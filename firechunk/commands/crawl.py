"""`firechunk crawl`: start or resume a Firecrawl crawl job and save its pages.

Progress goes to stderr; the path of the finished crawl file goes to stdout, so that
`firechunk chunk "$(firechunk crawl URL)"` works. A crawl or network error exits 3
(`firechunk.commands.exits`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from firechunk.commands.checks import check_data_dir, check_url
from firechunk.crawl import DEFAULT_API_URL
from firechunk.schemas.api_version import ApiVersion

API_KEY_ENV = "FIRECRAWL_API_KEY"
TUNING = "Tuning"


def _progress(message: str) -> None:
    typer.echo(message, err=True)


def crawl(
    url: Annotated[str, typer.Argument(help="Site URL to crawl.")],
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
        str,
        typer.Option(
            envvar="FIRECRAWL_API_URL",
            metavar="URL",
            help="Firecrawl API base URL (e.g. a self-hosted one).",
        ),
    ] = DEFAULT_API_URL,
    name: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="Name of the crawl: its job state is DATA_DIR/jobs/NAME.json (default: the "
            "URL's host and path and a hash of the options).",
        ),
    ] = None,
    recrawl: Annotated[
        bool, typer.Option("--recrawl", help="Start a new job even if this crawl already has one.")
    ] = False,
    data_dir: Annotated[
        Path,
        typer.Option(
            envvar="FIRECHUNK_DATA_DIR",
            metavar="DIR",
            help="Data root: job states go to jobs/, crawls to raw/.",
        ),
    ] = Path("data"),
    poll_interval: Annotated[
        float,
        typer.Option(
            min=0.0, metavar="SECONDS", rich_help_panel=TUNING, help="First wait between polls."
        ),
    ] = 2.0,
    max_poll_interval: Annotated[
        float,
        typer.Option(
            min=0.0, metavar="SECONDS", rich_help_panel=TUNING, help="Longest wait between polls."
        ),
    ] = 30.0,
    max_wait: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            metavar="SECONDS",
            rich_help_panel=TUNING,
            help="Stop waiting for a running job after this many seconds (a rerun resumes it).",
        ),
    ] = None,
    request_timeout: Annotated[
        float,
        typer.Option(
            min=0.001, metavar="SECONDS", rich_help_panel=TUNING, help="Seconds per request."
        ),
    ] = 60.0,
    retries: Annotated[
        int,
        typer.Option(
            min=1, metavar="N", rich_help_panel=TUNING, help="Attempts per Firecrawl call."
        ),
    ] = 6,
    retry_wait: Annotated[
        float,
        typer.Option(
            min=0.0,
            metavar="SECONDS",
            rich_help_panel=TUNING,
            help="First backoff between attempts; it doubles up to 30 s, plus jitter.",
        ),
    ] = 1.0,
) -> None:
    """Crawl URL with Firecrawl, or resume its unfinished job, and save the raw crawl.

    The API key is read from FIRECRAWL_API_KEY; a complete crawl replays with no key.
    """
    from firechunk.crawl import ClientOptions, RetryPolicy, run_crawl
    from firechunk.schemas.job import CrawlTarget

    check_url(url, "site URL")
    check_url(api_url, "Firecrawl API URL")
    check_data_dir(data_dir)
    settings = ClientOptions(
        api_version=api,
        api_url=api_url,
        poll_interval=poll_interval,
        max_poll_interval=max(max_poll_interval, poll_interval),
        max_wait=max_wait,
        request_timeout=request_timeout,
        retry=RetryPolicy(
            attempts=retries,
            initial_wait=retry_wait,
            max_wait=max(30.0, retry_wait),
            jitter=min(1.0, retry_wait),
        ),
    )
    target = CrawlTarget(
        url=url, include_paths=include or [], exclude_paths=exclude or [], limit=limit
    )
    outcome = run_crawl(
        target,
        api_key=os.environ.get(API_KEY_ENV) or None,
        data_dir=data_dir,
        settings=settings,
        name=name,
        recrawl=recrawl,
        report=_progress,
    )
    typer.echo(str(outcome.crawl_file))
