"""The published run a load takes: its chunks as the database stores them.

Only a published run is loaded (`latest` points at the last one): its `status.json` says
"passed" and it has the `manifest.json` publishing writes. A failed, superseded or
unfinished run never is, nor one that passed and was stopped before it was published.

The chunks come from the run's `chunks.json`, the fixed chunk structure, so the
database's `metadata` column holds what a reader of that file sees, with one exception:
text Postgres cannot take. A NUL character (which no text column or JSONB string accepts)
is dropped and an absurdly long string (a page title of 100,000 words) is cut at
`MAX_FIELD_CHARS`, so one odd page never stops a load; the chunker quarantines such
pages, and this is the last line of defence.

The run's collection is the one it was started as (its run.json, see
`firechunk.run.collection`): a load never puts a run under another collection's name. Naming
a collection chooses which doc set's `latest` is loaded.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from firechunk.layout import RUN_ID, DataDir, RunDir
from firechunk.run.collection import collection_of_urls, legacy_site, run_collection
from firechunk.run.history import run_started
from firechunk.schemas.chunk import Stored, chunk_leaves

# Longer strings (a title, a heading, a URL) are cut: no real one comes near, and Postgres
# indexes and full-text columns have limits. A chunk's text is bounded by the chunker.
MAX_FIELD_CHARS = 2_000


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
    def navigation(self) -> bool:
        """A chunk of an index page (bare link lists): not embedded, found by words only."""
        return self.metadata.get("kind") == "navigation"

    @property
    def heading(self) -> str:
        """The breadcrumb as one line: full-text search weighs it, the embedder reads it
        before the text."""
        return " › ".join(title for title in self.breadcrumb if title)

    @property
    def embedded_text(self) -> str:
        """What is embedded: the breadcrumb on a line of its own, then the text (windows of
        it, for an embedder that reads less than a chunk: `Embedder.windows`)."""
        return f"{self.heading}\n\n{self.text}" if self.heading else self.text

    @property
    def embedded_sha256(self) -> str:
        return hashlib.sha256(self.embedded_text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class PublishedRun:
    run_id: str
    run_dir: Path
    data_dir: Path
    collection: str
    started: datetime  # when the run was claimed: a load never goes back to an older run
    chunks: tuple[RunChunk, ...]
    # Version 1 of the schema kept a run under its scheme and host; the run's collection
    # takes those rows over rather than loading everything again.
    legacy_site: str | None = None

    def is_latest(self) -> bool:
        """Whether its collection's `latest` still points at this run."""
        return _latest_of(DataDir(self.data_dir), self.collection) == self.run_dir.resolve()


def published_run(
    data_dir: Path, run: str = "latest", collection: str | None = None
) -> PublishedRun:
    """The run `run` ("latest" or a run id) of `data_dir`, if it passed validation, with
    its collection. `collection` chooses the doc set: "latest" is then its `latest`, and a
    run id must be one of its runs; without it, "latest" is the data directory's."""
    run_dir = _run_dir(data_dir, run, collection)
    status = RunDir(run_dir).read_status()
    if status is None:
        raise RunNotLoadable(f"run {run_dir.name} has not finished (no status.json): not loaded")
    if status.status != "passed":
        raise RunNotLoadable(
            f"run {status.run_id} {status.status} validation or publishing: only a published "
            "run is loaded (firechunk load --run latest)"
        )
    if not _was_published(data_dir, run_dir):
        raise RunNotLoadable(
            f"run {status.run_id} passed validation but was never published (no "
            "manifest.json): only a published run is loaded (firechunk load --run latest)"
        )
    chunks = read_chunks(RunDir(run_dir).chunks_json)
    urls = [chunk.url for chunk in chunks]
    return PublishedRun(
        run_id=status.run_id,
        run_dir=run_dir,
        data_dir=Path(data_dir),
        collection=run_collection(run_dir) or collection_of_urls(urls),
        started=run_started(run_dir),
        chunks=chunks,
        legacy_site=legacy_site(urls),
    )


def _run_dir(data_dir: Path, run: str, collection: str | None) -> Path:
    """The directory of `run`: the one `latest` (the collection's, when given) points at
    when it is named after the link."""
    data = DataDir(data_dir)
    if run == data.latest.name:
        latest = _latest_of(data, collection)
        if latest is None:
            named = f"collection {collection}" if collection else str(data.latest)
            raise RunNotLoadable(f"{named}: no published run yet (run `firechunk rebuild` first)")
        return latest
    if not RUN_ID.fullmatch(run):
        raise RunNotLoadable(f"run id {run!r}: use letters, digits, '.', '_' and '-' only")
    run_dir = data.run(run).path
    if not run_dir.is_dir():
        raise RunNotLoadable(f"no run {run!r} in {data.runs}")
    if collection is not None and run_collection(run_dir) != collection:
        raise RunNotLoadable(
            f"run {run} is of collection {run_collection(run_dir)}, not {collection}"
        )
    return run_dir


def _was_published(data_dir: Path, run_dir: Path) -> bool:
    """Publishing writes the run's manifest.json, then points its collection's `latest` at
    it: a run that passed validation without a manifest was stopped (killed) before it was
    published. A run a `latest` points at was published whatever it holds (one published
    before runs had manifests)."""
    published = DataDir(data_dir).published_runs()
    return RunDir(run_dir).manifest_json.exists() or run_dir.resolve() in published


def _latest_of(data: DataDir, collection: str | None) -> Path | None:
    """The run directory the collection's `latest` points at (the data directory's `latest`
    for no collection); None when there is none. In a data directory from before
    collections (no `collections/` yet: `firechunk.publish.adopt_latest`), its `latest` is
    the latest of its run's collection."""
    if collection is None or not data.collections.exists():
        latest = data.latest_run()
        if collection is not None and latest and run_collection(latest) not in (collection, None):
            latest = None
    else:
        latest = data.latest_run(collection)
    return latest if latest is not None and latest.is_dir() else None


def read_chunks(path: Path) -> tuple[RunChunk, ...]:
    try:
        rows = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as error:
        raise RunNotLoadable(f"{path}: cannot be read ({error})") from None
    return tuple(_chunk(row) for row in rows)


def _chunk(row: dict) -> RunChunk:
    """The row's fields the database keeps in columns (`Stored` in `schemas.chunk`), each
    under its column's name, made storable; its metadata; the hash of the whole row."""
    stored: dict[str, Any] = {
        marker.column: _stored(marker, leaf.value_in(row)) for marker, leaf in _STORED
    }
    return RunChunk(
        **stored,
        metadata=_storable(row["metadata"]),
        row_sha256=hashlib.sha256(orjson.dumps(row, option=orjson.OPT_SORT_KEYS)).hexdigest(),
    )


_STORED = [(marker, leaf) for leaf in chunk_leaves() if (marker := leaf.marker(Stored))]


def _stored(stored: Stored, value: object) -> object:
    """A value as Postgres takes it: text without NUL (and cut by `field_text` unless kept
    whole), a list of strings as a tuple of them, anything else as it is."""
    if isinstance(value, str):
        return without_nul(value) if stored.whole else field_text(value)
    if isinstance(value, list):
        return tuple(field_text(item) for item in value)
    return value


def without_nul(text: str) -> str:
    return text.replace("\x00", "")


def field_text(text: str) -> str:
    """A title, heading or URL as Postgres takes it: no NUL, at most `MAX_FIELD_CHARS`."""
    return without_nul(text)[:MAX_FIELD_CHARS]


def _storable(value):
    """JSON with every string cleaned for JSONB (no NUL; bounded, but for the text itself)."""
    if isinstance(value, str):
        return field_text(value)
    if isinstance(value, list):
        return [_storable(item) for item in value]
    if isinstance(value, dict):
        return {without_nul(key): _storable(item) for key, item in value.items()}
    return value
