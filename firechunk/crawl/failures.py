"""What failed on the way to Firecrawl, told apart so the message can say it and what to do.

requests (what firecrawl-py uses) wraps the socket error three deep (ConnectionError ->
urllib3 MaxRetryError -> NewConnectionError -> socket.gaierror), and says only "Max retries
exceeded" on top; httpx wraps it in httpcore's errors. The kind is found by walking the
whole chain of causes. urllib3's NewConnectionError subclasses its ConnectTimeoutError, so
a DNS failure or a refused connection is looked for before a timeout.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Literal
from urllib.parse import urlsplit

import requests
from urllib3.exceptions import NameResolutionError, NewConnectionError
from urllib3.exceptions import TimeoutError as Urllib3Timeout

FailureKind = Literal["dns", "refused", "timeout", "connection", "http", "other"]
NETWORK_KINDS = frozenset({"dns", "refused", "timeout", "connection"})


def failure_kind(error: BaseException, status: int | None = None) -> FailureKind:
    """The kind of a failed call; `status` is its HTTP status when it got an answer."""
    if status is not None:
        return "http"
    chain = list(_causes(error))
    if any(isinstance(e, socket.gaierror | NameResolutionError) for e in chain):
        return "dns"
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return "refused"
    if any(_is_timeout(e) for e in chain):
        return "timeout"
    if any(isinstance(e, requests.ConnectionError | ConnectionError) for e in chain):
        return "connection"
    if any(_is_httpx(e, "TransportError") for e in chain):
        return "connection"
    return "other"


def is_dns_failure(error: BaseException) -> bool:
    return failure_kind(error) == "dns"


def where(error: BaseException) -> str | None:
    """host:port the failed request went to (never user or password), when it is known."""
    for link in _causes(error):
        request = getattr(link, "request", None)
        url = getattr(request, "url", None)
        if url:
            return _host_port(str(url))
        pool = getattr(link, "pool", None)
        host, port = getattr(pool, "host", None), getattr(pool, "port", None)
        if host:
            return f"{host}:{port}" if port else str(host)
    return None


def os_reason(error: BaseException) -> str | None:
    """The operating system's words for the deepest socket error ("Network is unreachable")."""
    reasons = [e.strerror for e in _causes(error) if isinstance(e, OSError) and e.strerror]
    return reasons[-1] if reasons else None


def what_failed(kind: FailureKind, host: str | None, timeout: float | None = None) -> str:
    """The failure in words, without the client's own text: "DNS lookup of X failed"."""
    target = host or "the Firecrawl API"
    if kind == "dns":
        return f"DNS lookup of {(host or target).rsplit(':', 1)[0]} failed"
    if kind == "refused":
        return f"connection to {target} refused"
    if kind == "timeout":
        within = f" within {timeout:g} s" if timeout else " in time"
        return f"no answer from {target}{within}"
    if kind == "connection":
        return f"connection to {target} failed"
    return "the call failed"


def advice(kind: FailureKind, status: int | None) -> str:
    """What the person running the crawl can do about a failure of this kind."""
    if kind == "dns":
        return (
            "check the host in the Firecrawl API URL (--api-url, FIRECRAWL_API_URL) and "
            "this machine's network"
        )
    if kind == "refused":
        return (
            "nothing listens there: check the API URL's host and port, or start the "
            "self-hosted Firecrawl"
        )
    if kind == "timeout":
        return (
            "the server may be overloaded or a firewall drops the traffic; "
            "--request-timeout sets the wait"
        )
    if kind == "connection":
        return "the connection broke: check the network and the API URL"
    if kind == "http":
        return _status_advice(status)
    return ""


def _status_advice(status: int | None) -> str:
    if status in (401, 403):
        return "check the Firecrawl API key"
    if status == 402:
        return "the Firecrawl account has no credits left"
    if status == 404:
        return "check the API URL (--api-url) and the API version (--api)"
    if status == 429:
        return "Firecrawl is rate-limiting this key: try again later"
    if status is not None and status >= 500:
        return "Firecrawl's server failed: try again later"
    return ""


def _causes(error: BaseException) -> Iterator[BaseException]:
    """`error` and everything it wraps: causes, contexts, urllib3's `reason`, exceptions
    held in `args` (requests puts MaxRetryError there)."""
    seen: set[int] = set()
    todo: list[BaseException] = [error]
    while todo and len(seen) < 64:
        link = todo.pop(0)
        if id(link) in seen:
            continue
        seen.add(id(link))
        yield link
        wrapped = [link.__cause__, link.__context__, getattr(link, "reason", None)]
        wrapped += [arg for arg in getattr(link, "args", ()) if isinstance(arg, BaseException)]
        todo += [w for w in wrapped if isinstance(w, BaseException)]


def _is_timeout(error: BaseException) -> bool:
    if isinstance(error, requests.Timeout | TimeoutError | socket.timeout):
        return True
    if isinstance(error, Urllib3Timeout) and not isinstance(error, NewConnectionError):
        return True
    return _is_httpx(error, "TimeoutException")


def _is_httpx(error: BaseException, name: str) -> bool:
    """An httpx error of class `name`, checked by name: httpx is not a dependency of the
    crawl client, only of the Prefect side."""
    return any(
        cls.__module__.startswith("httpx") and cls.__name__ == name for cls in type(error).__mro__
    )


def _host_port(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host:
        return None
    return f"{host}:{port}" if port else host
