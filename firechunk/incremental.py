"""Incremental rebuilds: each page's chunker outcome is kept with the run, and reused.

Most pages do not change from one night to the next. Chunking is the expensive part of a
rebuild, and it is a pure function of one page: its markdown, its title, the chunker
options, the token encoding and the chunker's code. So every run keeps, in
`<run-dir>/rebuild_state.sqlite`, each chunked page's *outcome* (its draft chunks before
the run-wide assembly, or why it was quarantined) under a key made of exactly those inputs
(`outcome_key`). The next run looks each page's key up in the store of the last good run
(the one `data/latest` points at, `find_baseline`) and chunks only the pages it does not
find there.

Why outcomes and not final chunks: aliases (same page under several URLs), the run-wide
dropping of repeated chunks, chunk ids and overlap links depend on all pages together, so
they are decided again on every run (`firechunk.assemble`). An incremental rebuild
gives exactly what a full rebuild of the same crawl gives: same
ids, texts, overlaps, order.

The key includes `chunker_version()`, a hash of the chunker package's source, of token
counting, of the fields an outcome is stored with, and of tiktoken's version: changing any
of them makes every key new, so outcomes made by other code are never reused and nobody
has to remember to bump a version number. Editing the run side (assembly, the report,
validation) keeps every key: the next night re-chunks nothing for it.

Besides the chunker's drafts, an outcome holds values derived from each draft's text
alone, computed in the worker that chunked the page and reused with it: the token recount
and text hash the validation suites check, the heading lines in the text, and the overlap
text the draft gives the chunk after it. They are the same functions a full in-memory run
uses (`firechunk.chunker.headings`, `firechunk.chunker.overlap`), applied to the same text.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path

import orjson
import tiktoken

from firechunk.chunker.headings import heading_lines
from firechunk.chunker.overlap import overlap_after
from firechunk.chunker.page import (
    ChunkerOptions,
    DraftChunk,
    PageChunks,
    PageRejected,
    chunk_page,
    content_hash,
)
from firechunk.plan import AliasPlan, PageInput
from firechunk.tokens import TokenCounter

STATE_FILE = "rebuild_state.sqlite"
_PACKAGE = Path(__file__).resolve().parent
# The code whose behaviour decides an outcome; see chunker_version().
_VERSIONED_SOURCES = sorted((_PACKAGE / "chunker").glob("*.py")) + [_PACKAGE / "tokens.py"]


@lru_cache(maxsize=1)
def chunker_version() -> str:
    """A hash of the chunker's code, the fields an outcome is stored with, and the
    tiktoken release."""
    digest = hashlib.sha256(f"tiktoken {tiktoken.__version__}\n".encode())
    stored = [f.name for kind in (StoredOutcome, StoredDraft) for f in fields(kind)]
    digest.update(f"{stored}\n".encode())
    for path in _VERSIONED_SOURCES:
        digest.update(f"{path.name}\n".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def outcome_key(page: PageInput, raw_hash: str, encoding: str, options: ChunkerOptions) -> str:
    """Everything `chunk_page` reads: the markdown (by its hash), the title, the page's
    chrome lines, the options, the encoding, and the code (`chunker_version`)."""
    chrome = sorted(page.chrome)
    parts = [chunker_version(), encoding, repr(options), page.title, raw_hash, *chrome]
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()


@dataclass(kw_only=True)
class StoredDraft(DraftChunk):
    """A draft chunk as the chunker made it, with what its text alone tells."""

    recount: int  # TokenCounter.count(text): what the suites compare `tokens` with
    text_hash: str  # content_hash(text): what the suites check, and the key of repeats
    heading_lines: list[str]  # validation_tables.heading_lines, sorted


@dataclass
class StoredOutcome:
    """One page's outcome: its drafts and page figures, or why it was quarantined."""

    index: int  # the page's position in the crawl it was chunked from (not stored)
    reason: str | None = None
    detail: str = ""
    content_hash: str = ""
    drafts: list[StoredDraft] = field(default_factory=list)
    headings: list[tuple[int, str, int]] = field(default_factory=list)
    tokens_before: int = 0
    tokens_after: int = 0
    removed_tokens: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def chunked(self) -> bool:
        return self.reason is None

    def to_payload(self) -> bytes:
        """zlib-compressed JSON (orjson: thousands of pages are read back on every run)."""
        return zlib.compress(orjson.dumps(self), 1)

    def packed(self) -> PackedOutcome:
        return PackedOutcome(
            self.index, self.content_hash if self.chunked else None, self.to_payload()
        )

    @classmethod
    def from_payload(cls, index: int, payload: bytes) -> StoredOutcome:
        """The outcome stored as `payload`, for the page at `index` of this run's crawl."""
        data = orjson.loads(zlib.decompress(payload))
        data["index"] = index
        data["drafts"] = [
            StoredDraft(**{**d, "source_lines": tuple(d["source_lines"])}) for d in data["drafts"]
        ]
        data["headings"] = [tuple(h) for h in data["headings"]]
        return cls(**data)


@dataclass(frozen=True)
class PackedOutcome:
    """A page's outcome as the store keeps it: what the alias planning reads (the content
    hash, None for a quarantined page) and the payload (`StoredOutcome.to_payload`)."""

    index: int  # the page's position in the crawl it was chunked from
    content_hash: str | None
    payload: bytes


def chunk_pages(
    batch: list[PageInput], encoding: str, options: ChunkerOptions
) -> list[PackedOutcome]:
    """Chunk a batch of pages, add what each draft's text tells, pack each outcome; a page
    that fails becomes an outcome with a reason, and costs that page only.

    Runs in a worker: the recounts, overlaps and packing are the bulk of the work after
    chunking itself, and done here they are done in parallel, once per page text.
    """
    counter = TokenCounter(encoding)
    return [_outcome(page, counter, options).packed() for page in batch]


def _outcome(page: PageInput, counter: TokenCounter, options: ChunkerOptions) -> StoredOutcome:
    try:
        chunks = chunk_page(page.markdown, page.title, counter.count, options, page.chrome)
    except PageRejected as rejected:
        return StoredOutcome(page.index, reason=rejected.reason, detail=rejected.detail)
    except Exception as error:  # a parser bug must not sink the run
        detail = f"{type(error).__name__}: {error}"
        return StoredOutcome(page.index, reason="parse-error", detail=detail)
    return _stored(page.index, chunks, counter, options.limits.overlap)


def _stored(index: int, page: PageChunks, counter: TokenCounter, overlap: int) -> StoredOutcome:
    for draft in page.chunks[:-1]:
        draft.overlap = overlap_after(draft.text, draft.breadcrumb, counter, overlap)
    return StoredOutcome(
        index=index,
        content_hash=page.content_hash,
        drafts=[_stored_draft(draft, counter) for draft in page.chunks],
        headings=list(page.headings),
        tokens_before=page.tokens_before,
        tokens_after=page.tokens_after,
        removed_tokens=dict(page.removed_tokens),
        warnings=list(page.warnings),
    )


def _stored_draft(draft: DraftChunk, counter: TokenCounter) -> StoredDraft:
    """The draft as it is, with what its text tells added."""
    return StoredDraft(
        **vars(draft),
        recount=counter.count(draft.text),
        text_hash=content_hash(draft.text),
        heading_lines=sorted(heading_lines(draft.text)),
    )


class OutcomeStore:
    """The outcomes and published chunk rows of one run, in one SQLite file.

    Tables: `outcomes` (key -> zlib-compressed JSON of a StoredOutcome, and its content
    hash for the alias planning), `chunk_rows` (each chunk id of the run -> sha256 of its
    line in chunks.json, what `firechunk.changes` compares), `meta` (the code version and
    encoding the outcomes were made with).

    A new store is built under a temporary name and renamed into place by `close`, so a
    run directory holds a whole store or none.
    """

    def __init__(self, path: Path, *, create: bool = False) -> None:
        self.path = Path(path)
        self._building = self.path.with_name(f".{self.path.name}.tmp") if create else None
        if create:
            self._building.unlink(missing_ok=True)
            self._db = _connect(self._building.resolve().as_uri())
            self._db.executescript(_SCHEMA)
        else:
            self._db = _connect(_read_only(self.path))

    @classmethod
    def create(cls, path: Path, *, encoding: str) -> OutcomeStore:
        store = cls(path, create=True)
        store._db.executemany(
            "INSERT INTO meta VALUES (?, ?)",
            [("chunker_version", chunker_version()), ("encoding", encoding)],
        )
        return store

    def put(self, key: str, outcome: PackedOutcome) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO outcomes VALUES (?, ?, ?)",
            (key, outcome.content_hash, outcome.payload),
        )

    def get(self, key: str, index: int) -> StoredOutcome:
        row = self._db.execute("SELECT payload FROM outcomes WHERE key = ?", (key,)).fetchone()
        if row is None:
            raise KeyError(f"{self.path}: no outcome under key {key}")
        return StoredOutcome.from_payload(index, row[0])

    def keys(self) -> set[str]:
        return {key for (key,) in self._db.execute("SELECT key FROM outcomes")}

    def content_hashes(self) -> dict[str, str | None]:
        """Key -> content hash of every outcome (None: the page was quarantined)."""
        return dict(self._db.execute("SELECT key, content_hash FROM outcomes"))

    def copy_from(self, other: Path, keys: Iterable[str]) -> int:
        """Copy the outcomes under `keys` from the store at `other`; return how many."""
        self._db.execute("CREATE TEMP TABLE wanted (key TEXT PRIMARY KEY)")
        self._db.executemany("INSERT OR IGNORE INTO wanted VALUES (?)", ((k,) for k in keys))
        self._db.execute("ATTACH DATABASE ? AS other", (_read_only(other),))
        cursor = self._db.execute(
            "INSERT OR REPLACE INTO outcomes SELECT o.* FROM other.outcomes o "
            "JOIN wanted w ON o.key = w.key"
        )
        self._db.commit()
        self._db.execute("DETACH DATABASE other")
        self._db.execute("DROP TABLE wanted")
        return cursor.rowcount

    def meta(self, name: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return None if row is None else row[0]

    def set_meta(self, name: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (name, value))

    def put_chunk_rows(self, rows: Iterable[tuple[str, str]]) -> None:
        self._db.executemany("INSERT INTO chunk_rows VALUES (?, ?)", rows)

    def chunk_rows(self) -> dict[str, str]:
        """Chunk id -> sha256 of its chunks.json line, in the run's chunk order."""
        return dict(self._db.execute("SELECT chunk_id, row_sha FROM chunk_rows ORDER BY rowid"))

    def close(self) -> None:
        """Commit, close, and (for a new store) move it into place."""
        self._db.commit()
        self._db.close()
        if self._building is not None:
            with open(self._building, "rb") as handle:
                os.fsync(handle.fileno())
            os.replace(self._building, self.path)
            self._building = None

    @classmethod
    def reopen(cls, path: Path) -> OutcomeStore:
        """A finished store, opened to add to it (the run's chunk rows, once written)."""
        store = cls(path)
        store._db.close()
        store._db = _connect(f"{Path(path).resolve().as_uri()}?mode=rw")
        return store

    def discard(self) -> None:
        """Close without keeping a store that is being built (the run failed)."""
        self._db.close()
        if self._building is not None:
            self._building.unlink(missing_ok=True)


def _connect(uri: str) -> sqlite3.Connection:
    # A store is handed from the chunk task to the write task, which Prefect may run on
    # another thread; the two never use it at the same time.
    return sqlite3.connect(uri, uri=True, check_same_thread=False)


def _read_only(path: Path) -> str:
    return f"{Path(path).resolve().as_uri()}?mode=ro"


_SCHEMA = """
PRAGMA journal_mode = OFF;
PRAGMA synchronous = OFF;
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE outcomes (key TEXT PRIMARY KEY, content_hash TEXT, payload BLOB NOT NULL);
CREATE TABLE chunk_rows (chunk_id TEXT NOT NULL, row_sha TEXT NOT NULL);
"""


@dataclass
class ReusePlan:
    """Which pages the chunker must run on, and which outcomes the baseline already has."""

    keys: dict[int, str]  # page index -> outcome key, for every page of plan.to_chunk
    reused: set[str]  # keys found in the baseline's store
    fresh: list[PageInput]  # pages to chunk, in crawl order

    @property
    def pages_reused(self) -> int:
        return len(self.keys) - len(self.fresh)


def plan_reuse(
    plan: AliasPlan, encoding: str, options: ChunkerOptions, baseline_state: Path | None
) -> ReusePlan:
    """Key every page to chunk, and find the keys the baseline's store holds.

    `baseline_state` None (no good run yet, or a full rebuild asked for) reuses nothing.
    """
    keys = {
        page.index: outcome_key(page, plan.raw_hash[page.index], encoding, options)
        for page in plan.to_chunk
    }
    reused: set[str] = set()
    if baseline_state is not None and Path(baseline_state).is_file():
        baseline = OutcomeStore(baseline_state)
        try:
            reused = baseline.keys() & set(keys.values())
        finally:
            baseline.close()
    fresh = [page for page in plan.to_chunk if keys[page.index] not in reused]
    return ReusePlan(keys, reused, fresh)
