"""The crawl stage: a Firecrawl crawl job that survives crashes, and its saved raw pages.

`run_crawl` starts or resumes a job and leaves `data/raw/<crawl-id>/crawl.json`; see
`firechunk.crawl.runner` for the steps and `firechunk.crawl.jobstate` for the files.

The names below are imported on first use: the Firecrawl SDK takes most of a second to
import, and what needs only `redact` or the default URL (every error line, `firechunk
--help`) must not pay for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from firechunk.crawl.errors import CrawlError
    from firechunk.crawl.retry import RetryPolicy
    from firechunk.crawl.runner import ClientOptions, CrawlOutcome, run_crawl

DEFAULT_API_URL = "https://api.firecrawl.dev"
API_KEY_ENV = "FIRECRAWL_API_KEY"  # where a run without Prefect Secret blocks finds the key

_HOMES = {
    "CrawlError": "firechunk.crawl.errors",
    "RetryPolicy": "firechunk.crawl.retry",
    "CrawlOutcome": "firechunk.crawl.runner",
    "ClientOptions": "firechunk.crawl.runner",
    "run_crawl": "firechunk.crawl.runner",
}

__all__ = [
    "API_KEY_ENV",
    "DEFAULT_API_URL",
    "CrawlError",
    "CrawlOutcome",
    "ClientOptions",
    "RetryPolicy",
    "run_crawl",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
