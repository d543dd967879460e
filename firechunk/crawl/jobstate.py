"""Where a crawl keeps its files, and its job state file saved atomically under data/jobs/.

    data/jobs/<name>.json          the job state (schemas.job.CrawlJobState), never the key
    data/jobs/<name>.lock          held while a process works on the crawl
    data/raw/<crawl-id>/pages.jsonl  pages, appended batch by batch as they are downloaded
    data/raw/<crawl-id>/crawl.json   the whole crawl in Firecrawl's shape, once complete

<crawl-id> is Firecrawl's id of the job, so every new job gets its own raw folder.

Everything read back from disk is checked again before it is used: a job state file may
have been edited by hand, and its job id becomes a path. An id that is not the shape of a
Firecrawl id, or a raw folder that resolves outside data/raw, is refused (JobStateError).
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

from pydantic import ValidationError

from firechunk.atomic import write_json
from firechunk.crawl.errors import CrawlError, CrawlInUseError, JobStateError
from firechunk.layout import DataDir, RawCrawl
from firechunk.schemas.job import CrawlJobState, CrawlTarget, utc_now

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_safe_name(value: str, what: str) -> str:
    """Names become file and folder names: refuse anything that could leave its folder."""
    if not _SAFE_NAME.match(value):
        raise CrawlError(f"{what} {value!r} is not usable as a file name (letters, digits, . _ -)")
    return value


_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")


def is_job_id(value: str) -> bool:
    """The shape of a Firecrawl job id (a UUID): a single folder name, with no `.` or `/`."""
    return bool(_JOB_ID.match(value))


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
    """A crawl's files in `data_dir` (`firechunk.layout`), its raw folder checked to be one."""

    data_dir: Path

    @property
    def jobs_dir(self) -> Path:
        return DataDir(self.data_dir).jobs

    @property
    def raw_root(self) -> Path:
        return DataDir(self.data_dir).raw

    def state_file(self, name: str) -> Path:
        return DataDir(self.data_dir).job_state(name)

    def lock_file(self, name: str) -> Path:
        return DataDir(self.data_dir).job_lock(name)

    def raw_dir(self, job_id: str) -> Path:
        """data/raw/<job_id>, if that really is a folder right inside data/raw.

        Where data/raw itself lives is the user's choice; a job's folder that leads out of
        it (through `..`, an absolute path or a symlink) is refused before anything is read
        or written there.
        """
        folder = self.raw_root / job_id
        resolved = folder.resolve()
        if resolved.parent != self.raw_root.resolve():
            raise JobStateError(
                f"{folder} leads to {resolved}, outside {self.raw_root}; nothing was read or "
                f"written there. Delete it, or the job state in {self.jobs_dir} that names it, "
                "to start a new crawl"
            )
        return folder

    def pages_file(self, job_id: str) -> Path:
        return RawCrawl(self.raw_dir(job_id)).pages_jsonl

    def crawl_file(self, job_id: str) -> Path:
        return RawCrawl(self.raw_dir(job_id)).crawl_json


def load_state(path: Path) -> CrawlJobState | None:
    """The saved job state, None if there is none; a file that cannot be trusted is refused
    with a one-line JobStateError that names it."""
    if not path.is_file():
        return None
    try:
        state = CrawlJobState.model_validate_json(path.read_bytes())
    except ValidationError as error:
        problem = _first_problem(error)
        raise JobStateError(
            f"{path}: unreadable job state ({problem}); delete it to start a new crawl"
        ) from None
    if state.job_id is not None and not is_job_id(state.job_id):
        raise JobStateError(
            f"{path}: {state.job_id[:80]!r} is not a Firecrawl job id (letters, digits, _ "
            "and -); the file was edited or damaged: delete it to start a new crawl"
        )
    return state


def _first_problem(error: ValidationError) -> str:
    """Pydantic's first complaint on one line: where in the file, and what is wrong."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}" if where else first["msg"]


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
