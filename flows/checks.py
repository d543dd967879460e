"""What the `rebuild` flow checks before any stage starts, so a night that cannot run says
so at once, in one line, instead of after a task run, its retries and a traceback: a
Firecrawl key where the crawl will look for one, a well-formed API URL, and a data
directory it can write. Each failure is the error the command line would raise."""

from __future__ import annotations

from firechunk.commands.checks import check_data_dir, check_url
from firechunk.crawl import API_KEY_ENV, DEFAULT_API_URL
from firechunk.crawl.errors import MissingApiKeyError
from firechunk.pipeline import Request, Secrets


def check_before_start(request: Request, secrets: Secrets) -> None:
    """Raise the first problem of `request` found without starting anything."""
    check_data_dir(request.data_dir)
    if request.replay is not None:
        return
    crawl = request.crawl
    check_url(crawl.api_url or DEFAULT_API_URL, "Firecrawl API URL")
    check_url(crawl.site_url, "site URL")
    from firechunk.crawl.runner import needs_api_key

    if not needs_api_key(crawl.target(), request.data_dir):
        return
    key, _ = secrets(crawl.secret_block, API_KEY_ENV)
    if key is None:
        raise MissingApiKeyError(
            f"no Firecrawl API key: neither the Prefect Secret block {crawl.secret_block!r} "
            f"nor ${API_KEY_ENV} holds one; create the block (`firechunk` deployments read "
            "it first) or set the variable on the worker"
        )
