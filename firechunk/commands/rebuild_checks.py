"""What `firechunk rebuild` settles before Prefect runs anything: the Firecrawl key, and
how much of Prefect's own error output reaches the terminal.

Without these, a missing key surfaced only from inside the crawl task, after the temporary
API had started, wrapped in Prefect's tracebacks of the task and of both flows: hundreds of
lines around one sentence that named the environment variable but not the Secret block
the deployments read first.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from firechunk.commands.exits import CommandError, ExitCode, classify
from firechunk.commands.interrupts import quiet
from firechunk.crawl.runner import needs_api_key
from firechunk.schemas.job import CrawlTarget

if TYPE_CHECKING:
    from prefect.settings import Settings

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


def check_secret_block(secret_block: str) -> None:
    """Refuse the run at once when the Secret block holds no key either, asked without
    starting any server: with no PREFECT_API_URL, the database the temporary API would
    serve is read directly; with one, that server is asked, briefly. When neither can
    tell (another database, a schema this code does not know), the crawl task asks."""
    from prefect.settings import get_current_settings

    settings = get_current_settings()
    if settings.api.url:
        found = _block_on_server(str(settings.api.url), secret_block)
    else:
        found = _block_in_local_database(settings, secret_block)
    if found is False:
        raise missing_key(secret_block)


SERVER_TIMEOUT = 5.0  # seconds the configured Prefect API gets to say whether the block exists


def _block_on_server(api_url: str, secret_block: str) -> bool | None:
    """Whether the Prefect API at `api_url` holds the Secret block, with a value; None
    when it will not say (an HTTP error other than 404). A server that does not answer in
    time is a failure of its own: the flow could not run either."""
    import httpx
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound
    from prefect.settings import PREFECT_CLIENT_MAX_RETRIES, temporary_settings

    try:
        with (
            temporary_settings({PREFECT_CLIENT_MAX_RETRIES: 0}),
            get_client(httpx_settings={"timeout": SERVER_TIMEOUT}, sync_client=True) as client,
        ):
            document = client.read_block_document_by_name(secret_block, block_type_slug="secret")
    except ObjectNotFound:
        return False
    except httpx.HTTPStatusError:
        return None
    except httpx.TransportError as error:
        raise CommandError(
            f"no Firecrawl API key in {API_KEY_ENV}, and no answer from the Prefect API at "
            f"{api_url} ({type(error).__name__}, waited up to {SERVER_TIMEOUT:g} s) on "
            f"whether the Secret block {secret_block!r} holds one: start that server, or "
            f"set {API_KEY_ENV}",
            ExitCode.NETWORK,
        ) from None
    return bool(document.data.get("value"))


def _block_in_local_database(settings: Settings, secret_block: str) -> bool | None:
    """Whether the database the temporary API would serve (under PREFECT_HOME) holds the
    Secret block, read directly: no file, no block. None when that cannot be told (not a
    SQLite file, or one this query does not fit). Values are stored encrypted, so a block
    counts as holding a key."""
    url = settings.server.database.connection_url
    url = url.get_secret_value() if url is not None else ""
    if not url.startswith(_SQLITE):
        return None
    database = url.removeprefix(_SQLITE).split("?", 1)[0]
    if database in ("", ":memory:") or not Path(database).is_file():
        return False
    try:
        with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
            row = db.execute(_SECRET_BLOCK_QUERY, (secret_block,)).fetchone()
    except sqlite3.Error:
        return None
    return row is not None


_SECRET_BLOCK_QUERY = (
    "select 1 from block_document d join block_type t on t.id = d.block_type_id "
    "where t.slug = 'secret' and d.name = ? and not d.is_anonymous limit 1"
)


class _NoKnownTracebacks(logging.Filter):
    """Drops from the terminal Prefect's records that carry the traceback of a failure
    `firechunk.commands.exits` knows (a crawl error, a refused publish...): the command
    says it in one line once the flow returns. Once Ctrl-C or SIGTERM came, it drops them
    all (the crashed task and flow runs, the temporary API stopping): the command's line
    says what was kept. The records still reach the Prefect API, so the dashboard keeps
    them; a bug's traceback still shows."""

    def filter(self, record: logging.LogRecord) -> bool:
        if quiet():
            return False
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
