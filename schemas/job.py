"""The state of one crawl job, saved under `data/jobs/` so that a rerun resumes it.

A crawl costs credits and takes minutes; the state file is what lets a process that died
pick the job up again instead of paying for a new one. It never holds the API key.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field

from firechunk.schemas.api_version import ApiVersion

# Our own progress through a job, in order; `failed` and `expired` end it too.
#   starting     the start call is sent and not answered yet (a job may exist)
#   polling      the job runs at Firecrawl; we wait for it to end
#   downloading  the job ended; its result pages are being saved, from `cursor` on
#   downloaded   every result page is saved; the checks and crawl.json remain
#   done         crawl.json is written; a rerun replays it with no network
JobStatus = Literal["starting", "polling", "downloading", "downloaded", "done", "failed", "expired"]


def utc_now() -> datetime:
    return datetime.now(UTC)


class CrawlTarget(BaseModel):
    """What to crawl: the options that define the crawl and are sent to Firecrawl."""

    url: str
    include_paths: list[str] = Field(default_factory=list)
    exclude_paths: list[str] = Field(default_factory=list)
    limit: int | None = Field(default=None, ge=1)


class CrawlJobState(BaseModel):
    """One Firecrawl crawl job as firechunk knows it."""

    name: str = Field(description="The crawl's name: the state file is data/jobs/<name>.json.")
    api_version: ApiVersion
    api_url: str
    target: CrawlTarget
    job_id: str | None = Field(
        default=None, description="Firecrawl's crawl id; None while the start call is unanswered."
    )
    status: JobStatus = "starting"
    firecrawl_status: str | None = Field(
        default=None, description="The last status Firecrawl reported (scraping, completed...)."
    )
    started_at: datetime = Field(default_factory=utc_now)
    updated_at: datetime = Field(default_factory=utc_now)
    completed: int = Field(default=0, description="Pages Firecrawl has scraped so far.")
    total: int = Field(default=0, description="Pages Firecrawl reports for the whole job.")
    credits_used: int = 0
    pages_saved: int = Field(default=0, description="Pages appended to pages.jsonl so far.")
    saved_bytes: int = Field(
        default=0, description="Size of pages.jsonl that holds exactly `pages_saved` pages."
    )
    cursor: str | None = Field(
        default=None,
        description="The `next` URL of the result page to download next; None = the first page.",
    )
    error: str | None = None
