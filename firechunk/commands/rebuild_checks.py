"""What `firechunk rebuild` settles before Prefect runs anything: the Firecrawl key, and
how much of Prefect's own error output reaches the terminal.

Without these, a missing key surfaced only from inside the crawl task, after the temporary
API had started, wrapped in Prefect's tracebacks of the task and of both flows: hundreds of
lines around one sentence that named the environment variable but not the Secret block
the deployments read first.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from firechunk.commands.exits import CommandError, ExitCode, classify
from firechunk.crawl.runner import needs_api_key
from schemas.job import CrawlTarget

API_KEY_ENV = "FIRECRAWL_API_KEY"
_SQLITE = "sqlite+aiosqlite:///"


def key_is_missing(target: CrawlTarget, data_dir: Path) -> bool:
    """Whether the crawl needs a key the environment does not hold (the Secret block is
    still to be asked, see `check_secret_block`)."""
    return not os.environ.get(API_KEY_ENV) and needs_api_key(target, data_dir)


def missing_key(secret_block: str) -> CommandError:
    return CommandError(
        f"no Firecrawl API key: create the Prefect Secret block {secret_block!r} (what the "
        f"deployments read first) or set {API_KEY_ENV}; a saved crawl rebuilds without "
        "one (--replay CRAWL.json)",
        ExitCode.BAD_INPUT,
    )


def blocks_may_exist() -> bool:
    """Whether Prefect could hold a Secret block at all. With no API configured, the
    temporary API serves the database under PREFECT_HOME: when that file does not exist
    yet, no block exists, and the answer needs no API start-up (20 s on a fresh home)."""
    from prefect.settings import get_current_settings

    settings = get_current_settings()
    if settings.api.url:
        return True
    url = settings.server.database.connection_url
    url = url.get_secret_value() if url is not None else ""
    if not url.startswith(_SQLITE):
        return True
    database = url.removeprefix(_SQLITE).split("?", 1)[0]
    return database not in ("", ":memory:") and Path(database).exists()


def check_secret_block(secret_block: str) -> None:
    """Refuse the run when the Secret block holds no key either; needs the Prefect API."""
    from tasks.crawl import firecrawl_api_key

    key, _ = firecrawl_api_key(secret_block)
    if not key:
        raise missing_key(secret_block)


class _NoKnownTracebacks(logging.Filter):
    """Drops from the terminal Prefect's records that carry the traceback of a failure
    `firechunk.commands.exits` knows (a crawl error, a refused publish...): the command
    says it in one line once the flow returns. The records still reach the Prefect API,
    so the dashboard keeps the traceback; a bug's traceback still shows."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return error is None or classify(error) is None


def quiet_known_tracebacks() -> None:
    """Put the filter on Prefect's console handler (once, however often a test invokes
    the command in one process). Call after Prefect is imported: it sets up its logging
    then, and later set-ups only update it."""
    for handler in logging.getLogger().handlers:
        if handler.get_name() == "console" and not any(
            isinstance(f, _NoKnownTracebacks) for f in handler.filters
        ):
            handler.addFilter(_NoKnownTracebacks())
