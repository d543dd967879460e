"""The few Firecrawl calls a crawl needs, the same way for API v1 and v2, on firecrawl-py.

Only three calls: start a job, read one status/result page, cancel. Result pages are read
one at a time and never through the client's auto-pagination, which logs and swallows an
error on a later page and returns truncated data as if complete. The blocking `crawl()`
is never used: a 500 while it waits aborts it and leaves the job running unseen.

v1 jobs are started (and cancelled) with the v1 client, but their status pages are read with
the v2 client's single-page reader, `get_crawl_status_page`, which fetches any status URL on
the API origin: v1's own `check_crawl_status` follows `next` by itself once the job
completed (with the same swallowed errors) and sends its requests with no timeout. Both
versions answer the status route with the same JSON shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from firecrawl import Firecrawl
from firecrawl.v2.types import CrawlJob, Document, DocumentMetadata, PaginationConfig

from firechunk.crawl.errors import CrawlError
from firechunk.schemas.job import ApiVersion, CrawlTarget


@dataclass(frozen=True)
class StatusPage:
    """One answer of the status route: the job's progress and one page of its results."""

    status: str
    completed: int
    total: int
    credits_used: int
    next: str | None
    pages: list[dict[str, Any]]


class CrawlApi(Protocol):
    version: ApiVersion

    def start(self, target: CrawlTarget) -> str: ...
    def first_page(self, job_id: str) -> StatusPage: ...
    def next_page(self, next_url: str) -> StatusPage: ...
    def cancel(self, job_id: str) -> None: ...


def make_api(version: ApiVersion, api_key: str, api_url: str, request_timeout: float) -> CrawlApi:
    """The client for `version`. `max_retries=1`: firechunk.crawl.retry is the only retry policy."""
    client = Firecrawl(api_key=api_key, api_url=api_url, timeout=request_timeout, max_retries=1)
    return V2Api(client) if version == "v2" else V1Api(client)


class V2Api:
    version: ApiVersion = "v2"

    def __init__(self, client: Firecrawl) -> None:
        self._client = client

    def start(self, target: CrawlTarget) -> str:
        response = self._client.start_crawl(
            target.url,
            include_paths=target.include_paths or None,
            exclude_paths=target.exclude_paths or None,
            limit=target.limit,
        )
        return response.id

    def first_page(self, job_id: str) -> StatusPage:
        job = self._client.get_crawl_status(
            job_id, pagination_config=PaginationConfig(auto_paginate=False)
        )
        return _status_page(job)

    def next_page(self, next_url: str) -> StatusPage:
        return _status_page(self._client.get_crawl_status_page(next_url))

    def cancel(self, job_id: str) -> None:
        self._client.cancel_crawl(job_id)


class V1Api:
    version: ApiVersion = "v1"

    def __init__(self, client: Firecrawl) -> None:
        self._client = client

    def start(self, target: CrawlTarget) -> str:
        response = self._client.v1.async_crawl_url(
            target.url,
            include_paths=target.include_paths or None,
            exclude_paths=target.exclude_paths or None,
            limit=target.limit,
        )
        if not response.success or not response.id:
            raise CrawlError(f"Firecrawl v1 did not start the crawl: {response.error}")
        return response.id

    def first_page(self, job_id: str) -> StatusPage:
        return self.next_page(f"/v1/crawl/{job_id}")

    def next_page(self, next_url: str) -> StatusPage:
        return _status_page(self._client.get_crawl_status_page(next_url))

    def cancel(self, job_id: str) -> None:
        self._client.v1.cancel_crawl(job_id)


def _status_page(job: CrawlJob) -> StatusPage:
    return StatusPage(
        status=job.status,
        completed=job.completed,
        total=job.total,
        credits_used=job.credits_used,
        next=job.next,
        pages=[firecrawl_page(document) for document in job.data],
    )


# firecrawl-py renames Firecrawl's camelCase keys to snake_case when it parses a page; the
# raw files keep Firecrawl's own shape, so the renaming is undone. Metadata keys that are
# not fields of DocumentMetadata were never renamed and are kept as they are.
_DOCUMENT_FIELDS = frozenset(Document.model_fields)
_METADATA_FIELDS = frozenset(DocumentMetadata.model_fields)
_SPECIAL_CAMEL = {"source_url": "sourceURL"}


def _camel(name: str) -> str:
    if name in _SPECIAL_CAMEL:
        return _SPECIAL_CAMEL[name]
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def firecrawl_page(document: Document) -> dict[str, Any]:
    """A page as Firecrawl sent it (camelCase keys), from firecrawl-py's parsed Document."""
    page: dict[str, Any] = {}
    for key, value in document.model_dump(exclude_none=True).items():
        if key == "metadata":
            continue
        page[_camel(key) if key in _DOCUMENT_FIELDS else key] = value
    page["metadata"] = {
        (_camel(key) if key in _METADATA_FIELDS else key): value
        for key, value in document.metadata_dict.items()
    }
    return page
