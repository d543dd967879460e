"""What `firechunk rebuild` settles before a run starts: the Firecrawl key (asked of the
Prefect API's Secret block when the run is on Prefect), and how much of Prefect's own
error output reaches the terminal: a known failure is said in one line by the command,
not inside Prefect's tracebacks of the task and the flow.
"""

from __future__ import annotations

import logging

from firechunk.commands.exits import CommandError, ExitCode, classify
from firechunk.commands.interrupts import quiet
from firechunk.crawl import API_KEY_ENV


def missing_key(secret_block: str, on_prefect: bool = True) -> CommandError:
    where = (
        f"create the Prefect Secret block {secret_block!r} (what the deployments read first) "
        f"or set {API_KEY_ENV}"
        if on_prefect
        else f"set {API_KEY_ENV} (or run --prefect with the Prefect Secret block {secret_block!r})"
    )
    return CommandError(
        f"no Firecrawl API key: {where}; a saved crawl rebuilds without one (--replay CRAWL.json)",
        ExitCode.BAD_INPUT,
    )


def check_secret_block(secret_block: str) -> None:
    """Refuse the run at once when the configured Prefect API's Secret block holds no key
    either (asked briefly). With no API configured, Prefect's temporary one would start
    with no blocks: no key. When the server will not say, the crawl task asks."""
    from prefect.settings import get_current_settings

    api_url = get_current_settings().api.url
    found = _block_on_server(str(api_url), secret_block) if api_url else False
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
