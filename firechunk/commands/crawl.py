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
from firechunk.commands.settings_options import Without, with_settings
from firechunk.crawl import API_KEY_ENV, DEFAULT_API_URL
from firechunk.settings import CrawlSettings


def _progress(message: str) -> None:
    typer.echo(message, err=True)


@with_settings
def crawl(
    url: Annotated[str, typer.Argument(help="Site URL to crawl.")],
    crawl: Annotated[CrawlSettings, Without("site_url", "secret_block")] = CrawlSettings(),
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
) -> None:
    """Crawl URL with Firecrawl, or resume its unfinished job, and save the raw crawl.

    The API key is read from FIRECRAWL_API_KEY; a complete crawl replays with no key.
    """
    from firechunk.crawl import run_crawl

    crawl = crawl.model_copy(update={"site_url": url})
    check_url(url, "site URL")
    check_url(crawl.api_url or DEFAULT_API_URL, "Firecrawl API URL")
    check_data_dir(data_dir)
    outcome = run_crawl(
        crawl.target(),
        api_key=os.environ.get(API_KEY_ENV) or None,
        data_dir=data_dir,
        settings=crawl.client_options(),
        name=name,
        recrawl=recrawl,
        report=_progress,
    )
    typer.echo(str(outcome.crawl_file))
