"""The published run a load takes: its chunks as the database stores them.

Only a run whose `status.json` says "passed" is loaded (`latest` points at the last one);
a failed, superseded or unfinished run never is. The chunks come from the run's
`chunks.json`, the fixed chunk structure, so the database's `metadata` column holds what a
reader of that file sees.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import orjson

from firechunk.publish import LATEST, RUN_ID, RUNS_DIR, read_status
from firechunk.run.write import CHUNKS_JSON


class RunNotLoadable(ValueError):
    """The run asked for cannot be loaded; the message says why and what to do."""


@dataclass(frozen=True)
class RunChunk:
    """One chunk as a database row, less its embedding."""

    chunk_id: str
    url: str
    title: str
    h1: str | None
    h2: str | None
    breadcrumb: tuple[str, ...]
    text: str
    token_count: int
    chunk_index: int
    overlap_text: str
    metadata: dict  # the chunk's `metadata`, as in chunks.json
    row_sha256: str  # of the whole chunk row: any field changed, the row is updated

    @property
    def embedded_text(self) -> str:
        """What is embedded: the breadcrumb on a line of its own, then the text."""
        heading = " › ".join(title for title in self.breadcrumb if title)
        return f"{heading}\n\n{self.text}" if heading else self.text

    @property
    def embedded_sha256(self) -> str:
        return hashlib.sha256(self.embedded_text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class PublishedRun:
    run_id: str
    run_dir: Path
    site: str
    chunks: tuple[RunChunk, ...]


def published_run(data_dir: Path, run: str = "latest", site: str | None = None) -> PublishedRun:
    """The run `run` ("latest" or a run id) of `data_dir`, if it passed validation."""
    run_dir = _run_dir(data_dir, run)
    status = read_status(run_dir)
    if status is None:
        raise RunNotLoadable(f"run {run_dir.name} has not finished (no status.json): not loaded")
    if status.status != "passed":
        raise RunNotLoadable(
            f"run {status.run_id} {status.status} validation or publishing: only a published "
            "run is loaded (firechunk load --run latest)"
        )
    chunks = read_chunks(run_dir / CHUNKS_JSON)
    return PublishedRun(status.run_id, run_dir, site or site_of(c.url for c in chunks), chunks)


def _run_dir(data_dir: Path, run: str) -> Path:
    if run == LATEST:
        link = data_dir / LATEST
        if not link.exists():
            raise RunNotLoadable(f"{link}: no published run yet (run `firechunk rebuild` first)")
        return link.resolve()
    if not RUN_ID.fullmatch(run):
        raise RunNotLoadable(f"run id {run!r}: use letters, digits, '.', '_' and '-' only")
    run_dir = data_dir / RUNS_DIR / run
    if not run_dir.is_dir():
        raise RunNotLoadable(f"no run {run!r} in {data_dir / RUNS_DIR}")
    return run_dir


def read_chunks(path: Path) -> tuple[RunChunk, ...]:
    try:
        rows = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as error:
        raise RunNotLoadable(f"{path}: cannot be read ({error})") from None
    return tuple(_chunk(row) for row in rows)


def _chunk(row: dict) -> RunChunk:
    meta, data = row["metadata"], row["data"]
    return RunChunk(
        chunk_id=row["chunk_id"],
        url=meta["sourceUrl"],
        title=meta["page_title"],
        h1=data["headers"].get("h1"),
        h2=data["headers"].get("h2"),
        breadcrumb=tuple(meta.get("breadcrumb", [])),
        text=data["text"],
        token_count=meta["token_count"],
        chunk_index=meta["chunk_index"],
        overlap_text=data.get("overlap_text", {}).get("text", ""),
        metadata=meta,
        row_sha256=hashlib.sha256(orjson.dumps(row, option=orjson.OPT_SORT_KEYS)).hexdigest(),
    )


def site_of(urls) -> str:
    """The site a run is of, by default: the scheme and host most of its chunks cite."""
    hosts = Counter(f"{parts.scheme}://{parts.netloc}" for parts in map(urlsplit, urls))
    return hosts.most_common(1)[0][0] if hosts else "unknown"
