"""Where a crawl keeps its files, and its job state file saved atomically under data/jobs/.

    data/jobs/<name>.json          the job state (schemas.job.CrawlJobState), never the key
    data/jobs/<name>.lock          held while a process works on the crawl
    data/raw/<crawl-id>/pages.jsonl  pages, appended batch by batch as they are downloaded
    data/raw/<crawl-id>/crawl.json   the whole crawl in Firecrawl's shape, once complete

<crawl-id> is Firecrawl's id of the job, so every new job gets its own raw folder.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from firechunk.atomic import write_json
from firechunk.crawl.errors import CrawlError, CrawlInUseError
from schemas.job import CrawlJobState, CrawlTarget, utc_now

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_safe_name(value: str, what: str) -> str:
    """Names become file and folder names: refuse anything that could leave its folder."""
    if not _SAFE_NAME.match(value):
        raise CrawlError(f"{what} {value!r} is not usable as a file name (letters, digits, . _ -)")
    return value


def default_name(target: CrawlTarget) -> str:
    """A readable name for a crawl, unique to its options: host and path, then a short hash."""
    parts = urlsplit(target.url)
    slug = re.sub(r"[^A-Za-z0-9]+", "-", f"{parts.netloc}{parts.path}").strip("-").lower()
    digest = hashlib.sha256(
        json.dumps(target.model_dump(mode="json"), sort_keys=True).encode()
    ).hexdigest()[:8]
    return f"{slug[:80] or 'crawl'}-{digest}"


@dataclass(frozen=True)
class CrawlPaths:
    data_dir: Path

    @property
    def jobs_dir(self) -> Path:
        return self.data_dir / "jobs"

    @property
    def raw_root(self) -> Path:
        return self.data_dir / "raw"

    def state_file(self, name: str) -> Path:
        return self.jobs_dir / f"{name}.json"

    def lock_file(self, name: str) -> Path:
        return self.jobs_dir / f"{name}.lock"

    def raw_dir(self, job_id: str) -> Path:
        return self.raw_root / job_id

    def pages_file(self, job_id: str) -> Path:
        return self.raw_dir(job_id) / "pages.jsonl"

    def crawl_file(self, job_id: str) -> Path:
        return self.raw_dir(job_id) / "crawl.json"


def load_state(path: Path) -> CrawlJobState | None:
    if not path.is_file():
        return None
    try:
        return CrawlJobState.model_validate_json(path.read_bytes())
    except ValueError as error:
        raise CrawlError(
            f"{path}: unreadable job state ({error}); move it away to start over"
        ) from error


def save_state(path: Path, state: CrawlJobState) -> None:
    """Write the state atomically: a crash leaves the previous state or the new one, whole."""
    state.updated_at = utc_now()
    write_json(path, state.model_dump(mode="json"))


@contextmanager
def crawl_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on one crawl; the OS releases it when the process dies."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CrawlInUseError(
                f"another process is working on this crawl (lock {path} is held)"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
