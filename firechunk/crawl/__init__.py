"""The crawl stage: a Firecrawl crawl job that survives crashes, and its saved raw pages.

`run_crawl` starts or resumes a job and leaves `data/raw/<crawl-id>/crawl.json`; see
`firechunk.crawl.runner` for the steps and `firechunk.crawl.jobstate` for the files.
"""

from firechunk.crawl.errors import CrawlError
from firechunk.crawl.retry import RetryPolicy
from firechunk.crawl.runner import CrawlOutcome, CrawlSettings, run_crawl

__all__ = ["CrawlError", "CrawlOutcome", "CrawlSettings", "RetryPolicy", "run_crawl"]
