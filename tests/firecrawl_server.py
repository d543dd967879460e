"""A local Firecrawl-compatible HTTP server for the crawl tests, with scripted faults.

It implements the crawl routes of API v1 and v2 the way firecrawl-py uses them:

    POST   /v{1,2}/crawl              start a job      -> {"success", "id", "url"}
    GET    /v{1,2}/crawl/{id}         status + first result page
    GET    /v{1,2}/crawl/{id}?skip=N  a later result page (the `next` link)
    DELETE /v{1,2}/crawl/{id}         cancel

A job answers `scraping` to its first `scraping_polls` status requests, then `completed`
(or `failed`), and serves its pages `page_size` at a time with `next` links. Requests must
carry `Authorization: Bearer <api_key>`.

Faults are queued per kind of request ("start", "status", "page", "cancel") and used up in
order: an HTTP status (429 comes with Retry-After), a delay (to trip the client's timeout)
or a dropped connection. An error answer can echo the request's Authorization header, key
and all, as a careless server or proxy does. A gate holds the n-th request of a kind until
the test releases it, so a test can kill the client at an exact point; a held request is
then answered 503. Everything is counted: start calls, requests, and which result pages
were served.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections import defaultdict, deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

_ROUTE = re.compile(r"^/(v1|v2)/crawl(?:/([^/]+))?$")


@dataclass(frozen=True)
class Fault:
    """One scripted misbehaviour, used by the next request of its kind."""

    status: int | None = None  # answer this HTTP status instead
    retry_after: str | None = None  # Retry-After header (429 gets "1" unless given)
    delay: float = 0.0  # sleep this long first (then answer normally, or with `status`)
    drop: bool = False  # close the connection without any answer
    echo_auth: bool = False  # the error body repeats the Authorization header and its key


@dataclass
class Gate:
    """Holds the `nth` request of `kind` (counted from 1) until `release` is set."""

    kind: str
    nth: int
    reached: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


@dataclass
class Job:
    id: str
    version: str
    body: dict[str, Any]
    pages: list[dict[str, Any]]
    scraping_polls: int
    fail: bool
    status_requests: int = 0
    cancelled: bool = False
    expired: bool = False

    def status(self) -> str:
        if self.cancelled:
            return "cancelled"
        if self.status_requests <= self.scraping_polls:
            return "scraping"
        return "failed" if self.fail else "completed"

    def results(self) -> list[dict[str, Any]]:
        """A failed job returns the pages it scraped before failing: the first half."""
        return self.pages[: len(self.pages) // 2] if self.fail else self.pages


@dataclass(frozen=True)
class Served:
    """A result page the server answered with pages."""

    job_id: str
    skip: int
    urls: tuple[str, ...]


class FakeFirecrawl:
    def __init__(
        self,
        pages: list[dict[str, Any]],
        *,
        api_key: str,
        page_size: int = 4,
        scraping_polls: int = 3,
        fail_jobs: bool = False,
    ) -> None:
        self.all_pages = pages
        self.api_key = api_key
        self.page_size = page_size
        self.scraping_polls = scraping_polls
        self.fail_jobs = fail_jobs
        self.lose_pages = 0  # results hold this many pages fewer than `total` says
        self.jobs: dict[str, Job] = {}
        self.start_bodies: list[dict[str, Any]] = []
        self.requests: list[tuple[float, str, str, int]] = []  # time, method, path, status
        self.served: list[Served] = []
        self.unauthorized = 0
        self._faults: dict[str, deque[Fault]] = defaultdict(deque)
        self._counts: dict[str, int] = defaultdict(int)
        self._gates: list[Gate] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    # -- test controls -------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_port}"

    @property
    def start_calls(self) -> int:
        """Jobs created: the number of start calls that cost credits."""
        return len(self.jobs)

    def add_faults(self, kind: str, *faults: Fault) -> None:
        with self._lock:
            self._faults[kind].extend(faults)

    def gate(self, kind: str, nth: int) -> Gate:
        gate = Gate(kind, nth)
        with self._lock:
            self._gates.append(gate)
        return gate

    def expire(self, job_id: str) -> None:
        with self._lock:
            self.jobs[job_id].expired = True

    def count(self, kind: str) -> int:
        with self._lock:
            return self._counts[kind]

    def release_all(self) -> None:
        for gate in self._gates:
            gate.release.set()

    def __enter__(self) -> FakeFirecrawl:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release_all()
        self._httpd.shutdown()
        self._httpd.server_close()

    # -- request handling (called from handler threads) ------------------------------------

    def handle(self, method: str, raw_path: str, headers: Any, body: bytes) -> _Answer:
        parts = urlsplit(raw_path)
        match = _ROUTE.match(parts.path)
        if not match:
            return _Answer(404, {"success": False, "error": "no such route"})
        if headers.get("Authorization") != f"Bearer {self.api_key}":
            with self._lock:
                self.unauthorized += 1
            return _Answer(401, {"success": False, "error": "Unauthorized: invalid token"})
        version, job_id = match.groups()
        skip = int(parse_qs(parts.query).get("skip", ["0"])[0])
        kind = _kind(method, job_id, skip)
        if kind is None:
            return _Answer(405, {"success": False, "error": "method not allowed"})

        with self._lock:
            self._counts[kind] += 1
            number = self._counts[kind]
            gate = next((g for g in self._gates if g.kind == kind and g.nth == number), None)
            fault = self._faults[kind].popleft() if self._faults[kind] else None
        if gate is not None:
            gate.reached.set()
            gate.release.wait(timeout=60)
            return _Answer(503, {"success": False, "error": "held by the test"})
        if fault is not None:
            if fault.drop:
                return _Answer(0, None)
            time.sleep(fault.delay)
            if fault.status is not None:
                headers_out = {}
                if fault.status == 429 or fault.retry_after:
                    headers_out["Retry-After"] = fault.retry_after or "1"
                error = {"success": False, "error": f"scripted {fault.status}"}
                if fault.echo_auth:
                    error.update(_echo(fault.status, headers.get("Authorization") or ""))
                return _Answer(fault.status, error, headers_out)

        if kind == "start":
            return self._start(version, json.loads(body or b"{}"))
        with self._lock:
            job = self.jobs.get(job_id or "")
        if job is None or job.expired or job.version != version:
            return _Answer(404, {"success": False, "error": "Job not found"})
        if kind == "cancel":
            job.cancelled = True
            return _Answer(200, {"success": True, "status": "cancelled"})
        return self._status(job, skip, count_poll=(kind == "status"))

    def _start(self, version: str, body: dict[str, Any]) -> _Answer:
        pages = _select(self.all_pages, body)
        job = Job(
            id=str(uuid.uuid4()),
            version=version,
            body=body,
            pages=pages,
            scraping_polls=self.scraping_polls,
            fail=self.fail_jobs,
        )
        with self._lock:
            self.jobs[job.id] = job
            self.start_bodies.append(body)
        url = f"{self.base_url}/{version}/crawl/{job.id}"
        return _Answer(200, {"success": True, "id": job.id, "url": url})

    def _status(self, job: Job, skip: int, count_poll: bool) -> _Answer:
        with self._lock:
            if count_poll:
                job.status_requests += 1
            status = job.status()
        total = len(job.pages)
        answer: dict[str, Any] = {
            "success": True,
            "status": status,
            "total": total,
            "creditsUsed": 0,
            "expiresAt": (datetime.now(UTC) + timedelta(hours=24)).isoformat(),
            "next": None,
            "data": [],
        }
        if status == "scraping":
            done = min(total, total * job.status_requests // (job.scraping_polls + 1))
            answer.update(completed=done, creditsUsed=done)
            return _Answer(200, answer)
        results = job.results()
        results = results[: len(results) - self.lose_pages]
        batch = results[skip : skip + self.page_size]
        answer.update(completed=len(job.results()), creditsUsed=len(job.results()), data=batch)
        if skip + self.page_size < len(results):
            answer["next"] = (
                f"{self.base_url}/{job.version}/crawl/{job.id}?skip={skip + self.page_size}"
            )
        if batch:
            urls = tuple(page["metadata"]["sourceURL"] for page in batch)
            with self._lock:
                self.served.append(Served(job.id, skip, urls))
        return _Answer(200, answer)


@dataclass(frozen=True)
class _Answer:
    status: int  # 0: drop the connection
    body: dict[str, Any] | None
    headers: dict[str, str] = field(default_factory=dict)


def _echo(status: int, authorization: str) -> dict[str, str]:
    """An error body that repeats the key in every form a server might: the header as sent,
    the bare token, and the token URL-encoded as in a query string."""
    token = authorization.removeprefix("Bearer ")
    return {
        "error": f"scripted {status}: rejected Authorization: {authorization}",
        "details": f"token {token} (as a query: ?key={quote(token, safe='')})",
    }


def _kind(method: str, job_id: str | None, skip: int) -> str | None:
    if method == "POST" and job_id is None:
        return "start"
    if method == "GET" and job_id is not None:
        return "page" if skip > 0 else "status"
    if method == "DELETE" and job_id is not None:
        return "cancel"
    return None


def _select(pages: list[dict[str, Any]], body: dict[str, Any]) -> list[dict[str, Any]]:
    """Firecrawl's includePaths/excludePaths: regexes searched in the URL path; then limit."""
    include = body.get("includePaths") or []
    exclude = body.get("excludePaths") or []
    chosen = []
    for page in pages:
        path = urlsplit(page["metadata"]["sourceURL"]).path
        if include and not any(re.search(p, path) for p in include):
            continue
        if any(re.search(p, path) for p in exclude):
            continue
        chosen.append(page)
    limit = body.get("limit")
    return chosen[:limit] if limit else chosen


def _handler_for(server: FakeFirecrawl) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            answer = server.handle(self.command, self.path, self.headers, body)
            with server._lock:
                server.requests.append((time.monotonic(), self.command, self.path, answer.status))
            if answer.status == 0:
                self.close_connection = True
                return
            payload = json.dumps(answer.body).encode()
            try:
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for key, value in answer.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        do_GET = do_POST = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

    return Handler
