"""Bounded retries of Firecrawl calls with tenacity: which errors to retry, and how long to wait.

firecrawl-py retries almost nothing itself (only 502, and v2 timeouts), ignores Retry-After
and gives up on 429, 500, 503 and 504. The crawl client is built with `max_retries=1` so
this module is the only retry policy: exponential backoff with jitter, never shorter than
the server's Retry-After, and a fixed number of attempts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import requests
import tenacity
from urllib3.exceptions import NewConnectionError

from firechunk.crawl.failures import (
    NETWORK_KINDS,
    failure_kind,
    is_dns_failure,
    os_reason,
    what_failed,
    where,
)
from firechunk.crawl.redact import redact

TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
# The key or the account refused: no retry, here or by a rerun, gets past these.
ACCESS_REFUSED_STATUS = frozenset({401, 402, 403})


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try one call. Defaults suit the real API; tests shrink the waits."""

    attempts: int = 6
    initial_wait: float = 1.0
    max_wait: float = 30.0
    jitter: float = 1.0
    max_retry_after: float = 300.0  # a longer Retry-After is cut to this, to stay bounded


def status_of(error: BaseException) -> int | None:
    """The HTTP status behind a client error: firecrawl-py v2 and v1 both attach the response."""
    status = getattr(error, "status_code", None)
    if isinstance(status, int):
        return status
    response = getattr(error, "response", None)
    return getattr(response, "status_code", None)


def retry_after_seconds(error: BaseException) -> float | None:
    """Seconds the server asked us to wait (Retry-After as seconds or HTTP date), if any."""
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None) or {}
    value = headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def is_transient(error: BaseException) -> bool:
    """Worth another try for a read: rate limits, server errors, timeouts, broken connections.

    Not a failed DNS lookup: the system resolver has already retried the query (resolv.conf
    `attempts`, `timeout`) before it gave up, so what is left is a wrong host name or no
    network, which a minute of backoff does not fix; saying so at once does. A nightly
    flow still gets the crawl task's own retries (30 s, 120 s), which resume the job.
    """
    if is_dns_failure(error):
        return False
    if isinstance(error, requests.Timeout | requests.ConnectionError):
        return True
    return status_of(error) in TRANSIENT_STATUS


def never_reached_firecrawl(error: BaseException) -> bool:
    """Safe to resend a start call: the request was refused or rate-limited, so no job exists.

    A 500, a 504 or a read timeout may come after Firecrawl created the job; resending then
    could pay for the crawl twice, so those are not retried (see StartOutcomeUnknownError).
    """
    if status_of(error) in {429, 503}:
        return True
    if isinstance(error, requests.ConnectTimeout):
        return True
    if isinstance(error, requests.ConnectionError):
        reason = getattr(error.args[0], "reason", None) if error.args else None
        return isinstance(reason, NewConnectionError)
    return False


def worth_resending_start(error: BaseException) -> bool:
    """A start call is resent only when no job can exist and another try can succeed."""
    return never_reached_firecrawl(error) and not is_dns_failure(error)


def describe(error: BaseException, secret: str | None, timeout: float | None = None) -> str:
    """A one-line account of a failed call, for reports, the job state and error messages:
    what failed (DNS, a refused connection, a timeout, an HTTP status) and the client's
    exception type, never requests' "Max retries exceeded" wrapping of it.

    This is where a server's or the HTTP client's text enters firechunk, so it is redacted
    here, before it is cut short (a cut could leave part of the key, no longer recognised).
    """
    status = status_of(error)
    kind = failure_kind(error, status)
    text = _first_line(redact(str(error), secret))
    if kind in NETWORK_KINDS:
        words = what_failed(kind, where(error), timeout)
        detail = (os_reason(error) or text[:120]) if kind == "connection" else ""
        name = type(error).__name__
        return redact(f"{words} ({name}: {detail})" if detail else f"{words} ({name})", secret)
    label = f"HTTP {status}" if status else type(error).__name__
    return f"{label}: {text[:200]}" if text else label


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0].rstrip(" .") if lines else ""


class _WaitBackoffOrRetryAfter(tenacity.wait.wait_base):
    """Exponential backoff with jitter, but never shorter than the server's Retry-After."""

    def __init__(self, policy: RetryPolicy) -> None:
        self._policy = policy
        self._backoff = tenacity.wait_exponential_jitter(
            multiplier=policy.initial_wait, max=policy.max_wait, jitter=policy.jitter
        )

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        backoff = self._backoff(retry_state)
        error = retry_state.outcome.exception() if retry_state.outcome else None
        asked = retry_after_seconds(error) if error else None
        if asked is None:
            return backoff
        return max(backoff, min(asked, self._policy.max_retry_after))


def retrying(
    policy: RetryPolicy,
    should_retry: Callable[[BaseException], bool],
    on_retry: Callable[[str], None],
    what: str,
    secret: str | None,
) -> tenacity.Retrying:
    """A tenacity Retrying for one kind of call; the last error is re-raised unchanged.

    `secret` (the API key) is only redacted from the retry reports."""

    def before_sleep(state: tenacity.RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        on_retry(
            f"{what} failed ({describe(error, secret) if error else 'no answer'}); "
            f"attempt {state.attempt_number + 1}/{policy.attempts} in {wait:.1f} s"
        )

    return tenacity.Retrying(
        stop=tenacity.stop_after_attempt(policy.attempts),
        wait=_WaitBackoffOrRetryAfter(policy),
        retry=tenacity.retry_if_exception(should_retry),
        before_sleep=before_sleep,
        reraise=True,
    )
