"""Errors the crawl stage reports to its caller, each with a message a person can act on."""

from __future__ import annotations


class CrawlError(RuntimeError):
    """A crawl could not go on; the message says why and what to do. Job state is kept."""


class MissingApiKeyError(CrawlError):
    """Starting or resuming a job needs a Firecrawl API key and none was given."""


class AccessRefusedError(CrawlError):
    """Firecrawl refused the key or the account (401, 402, 403): a rerun would send the same
    key for the same account, so a person must act (a valid key, credits)."""


class CrawlInUseError(CrawlError):
    """Another process is running the same crawl right now."""


class TargetMismatchError(CrawlError):
    """The saved job of this crawl name was started with other options."""


class StartOutcomeUnknownError(CrawlError):
    """The start call got no clear answer: Firecrawl may or may not have created a job."""


class JobNotFoundError(CrawlError):
    """Firecrawl no longer knows the job (404): its results expired or it never existed."""


class JobFailedError(CrawlError):
    """Firecrawl ended the job `failed` or `cancelled`; the pages saved so far are kept."""


class DownloadError(CrawlError):
    """The result pages are inconsistent (short count, empty page with a `next` link...)."""


class PollTimeoutError(CrawlError):
    """The job was still running when the wait limit ran out; a rerun resumes it."""


class JobStateError(CrawlError):
    """What a crawl left on disk cannot be trusted: a job state file that is damaged or was
    edited, or a raw folder that leads out of the data dir. Nothing is read or written there."""
