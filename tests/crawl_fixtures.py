"""Shared pieces of the crawl tests: pages to serve, fast settings, running the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from firechunk.crawl import ClientOptions, RetryPolicy
from firechunk.schemas.job import CrawlJobState

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_CRAWL = ROOT / "data" / "sample" / "crawl.json"

# A canary API key: the tests search every output for it.
CANARY_KEY = "fc-canary-7f3e9a1d5b2c4e6f8a0b"

FAST_RETRY = RetryPolicy(attempts=4, initial_wait=0.01, max_wait=0.05, jitter=0.01)

# The CLI options that make a subprocess crawl quick.
FAST_CLI = [
    "--poll-interval",
    "0.02",
    "--max-poll-interval",
    "0.05",
    "--retry-wait",
    "0.01",
    "--retries",
    "4",
    "--request-timeout",
    "5",
]


def served_pages() -> list[dict[str, Any]]:
    """The pages the test server crawls: the bundled sample crawl, or 12 generated pages."""
    if SAMPLE_CRAWL.is_file():
        pages = json.loads(SAMPLE_CRAWL.read_text(encoding="utf-8"))["data"]
        if len(pages) >= 6 and all(page["metadata"].get("sourceURL") for page in pages):
            return pages
    return [
        {
            "markdown": f"# Page {i}\n\nSome text about topic {i}.\n",
            "metadata": {
                "title": f"Page {i}",
                "sourceURL": f"https://docs.example.com/guides/page-{i}",
                "url": f"https://docs.example.com/guides/page-{i}",
                "statusCode": 200,
                "ogTitle": f"Page {i}",
                "og:title": f"Page {i}",
            },
        }
        for i in range(12)
    ]


def page_size_for(pages: list[dict[str, Any]]) -> int:
    """Small enough that the results span at least three result pages."""
    return max(1, len(pages) // 3)


def fast_settings(api_url: str, version: str = "v2", **changes: Any) -> ClientOptions:
    values: dict[str, Any] = dict(
        api_version=version,
        api_url=api_url,
        poll_interval=0.01,
        max_poll_interval=0.02,
        request_timeout=5.0,
        retry=FAST_RETRY,
    )
    values.update(changes)
    return ClientOptions(**values)


def cli_command(*args: str) -> list[str]:
    """`firechunk crawl ...` run by the test's own interpreter."""
    return [sys.executable, "-c", "from firechunk.cli import app; app()", "crawl", *args]


def cli_env(data_dir: Path, api_key: str | None = CANARY_KEY) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FIRECRAWL_")}
    env["FIRECHUNK_DATA_DIR"] = str(data_dir)
    env["FIRECRAWL_LOGGING_LEVEL"] = "DEBUG"  # let firecrawl-py log all it wants
    if api_key is not None:
        env["FIRECRAWL_API_KEY"] = api_key
    return env


def run_cli(data_dir: Path, *args: str, api_key: str | None = CANARY_KEY, timeout: float = 60):
    return subprocess.run(
        cli_command(*args),
        env=cli_env(data_dir, api_key),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_cli(data_dir: Path, *args: str, api_key: str | None = CANARY_KEY) -> subprocess.Popen:
    return subprocess.Popen(
        cli_command(*args),
        env=cli_env(data_dir, api_key),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_state(data_dir: Path, name: str) -> CrawlJobState:
    path = data_dir / "jobs" / f"{name}.json"
    return CrawlJobState.model_validate_json(path.read_bytes())


def read_pages(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def urls_of(pages: list[dict[str, Any]]) -> list[str]:
    return [page["metadata"]["sourceURL"] for page in pages]
