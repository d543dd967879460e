"""The page cache: each page's chunker outcome, kept in the run's SQLite file and reused.

Most pages do not change from one night to the next. Chunking is the expensive part of a
rebuild, and it is a pure function of one page: its markdown, its title, its chrome lines,
the chunker options, the token encoding and the chunker's code. So every run keeps, in
`<run-dir>/rebuild_state.sqlite`, each chunked page's outcome (`firechunk.run.outcomes`)
under a key made of exactly those inputs (`outcome_key`). The next run copies the outcomes
under its keys from the cache of the last good run (the one `data/latest` points at) and
chunks only the pages it did not find there.

Why outcomes and not final chunks: aliases (same page under several URLs), the run-wide
dropping of repeated chunks, chunk ids and overlap links depend on all pages together, so
they are decided again on every run (`firechunk.run.assemble`). An incremental rebuild
gives exactly what a full rebuild of the same crawl gives: same ids, texts, overlaps, order.

The key includes `chunker_version()`, a hash of every module that shapes a stored outcome
(`firechunk/chunker/`, token counting, the worker that adds overlaps, recounts and heading
lines and packs the outcome, its time budget), of the fields an outcome is stored with, and
of the tiktoken and mistletoe releases: changing any of them makes every key new, so
outcomes made by other code are never reused and nobody has to remember to bump a version
number. Editing the rest of the run side (assembly, the report, validation) keeps every key.

Each outcome is stored with the sha256 of its payload, and only outcomes whose payload
still has that hash are copied forward: a cache edited or damaged on disk costs a re-chunk
of the pages concerned, never a wrong chunk. A cache that cannot be read at all (not
SQLite, an older layout) reuses nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Iterable
from dataclasses import fields
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path

import tiktoken

from firechunk.chunker.page import ChunkerOptions
from firechunk.run.outcomes import PackedOutcome, StoredDraft, StoredOutcome
from firechunk.run.plan import PageInput, PlannedPage

_PACKAGE = Path(__file__).resolve().parent.parent  # firechunk/


def _versioned_sources(package: Path) -> list[Path]:
    """The modules of `package` whose code decides a stored outcome: every module the
    worker (`outcomes.chunk_pages`) runs, but `run/plan.py`, whose `PageInput` only carries
    the page's inputs, and `settings.py`, whose defaults reach the worker as the options and
    encoding: `outcome_key` hashes those by value. A test walks the worker's imports and
    checks that each is here."""
    return sorted((package / "chunker").glob("*.py")) + [
        package / "tokens.py",  # token counting
        package / "run" / "outcomes.py",  # the worker: overlaps, recounts, heading lines
        package / "run" / "budget.py",  # the time budget: a page over it is kept as a timeout
    ]


_VERSIONED_SOURCES = _versioned_sources(_PACKAGE)


@lru_cache(maxsize=1)
def chunker_version() -> str:
    """A hash of the code that decides an outcome, the fields it is stored with, and the
    tiktoken and mistletoe releases (`code_version` of this package)."""
    return code_version(_PACKAGE)


def code_version(package: Path) -> str:
    """`chunker_version` of the sources of `package` (a copy of `firechunk/`)."""
    digest = hashlib.sha256(f"tiktoken {tiktoken.__version__}\n".encode())
    digest.update(f"mistletoe {version('mistletoe')}\n".encode())
    stored = [f.name for kind in (StoredOutcome, StoredDraft) for f in fields(kind)]
    digest.update(f"{stored}\n".encode())
    for path in _versioned_sources(package):
        digest.update(f"{path.relative_to(package).as_posix()}\n".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def outcome_key(page: PageInput, raw_hash: str, encoding: str, options: ChunkerOptions) -> str:
    """Everything `chunk_page` reads: the markdown (by its hash), the title, the page's
    chrome lines, whether it was served at many URLs, the options, the encoding, and the
    code (`chunker_version`)."""
    chrome = sorted(page.chrome)
    parts = [chunker_version(), encoding, repr(options), page.title, raw_hash, page.many_urls]
    parts += chrome
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()


class PageCache:
    """One run's SQLite file: its plan, every chunked page's outcome, its chunk rows.

    Tables: `meta` (code version, encoding, what the chunk stage counted), `pages` (the
    plan: one `PlannedPage` per crawled page, and the outcome key of each page chunked),
    `outcomes` (key -> zlib-compressed JSON of a `StoredOutcome`, its sha256, and the
    page's content hash the alias planning reads), `chunk_rows` (each chunk id of the run
    -> sha256 of its line in chunks.json, what `firechunk.run.changes` compares).

    The chunk stage builds a new cache under a temporary name and `close` renames it into
    place, so a run directory holds a whole cache or none. The write stage opens it again
    (`open`) to read the plan and outcomes and add the chunk rows; an open cache answers
    `Outcomes` (`content_hash`, `get`) by page index.
    """

    def __init__(self, path: Path, db: sqlite3.Connection, building: Path | None) -> None:
        self.path, self._db, self._building = Path(path), db, building
        self._keys: dict[int, str] = {}
        self._hashes: dict[str, str | None] = {}

    @classmethod
    def create(cls, path: Path, *, encoding: str) -> PageCache:
        building = Path(path).with_name(f".{Path(path).name}.tmp")
        building.unlink(missing_ok=True)
        db = _connect(building.resolve().as_uri())
        db.executescript(_SCHEMA)
        db.executemany(
            "INSERT INTO meta VALUES (?, ?)",
            [("chunker_version", chunker_version()), ("encoding", encoding)],
        )
        return cls(path, db, building)

    @classmethod
    def open(cls, path: Path) -> PageCache:
        """A finished cache, to read its plan and outcomes and add the run's chunk rows."""
        cache = cls(path, _connect(f"{Path(path).resolve().as_uri()}?mode=rw"), None)
        cache._keys = dict(cache._db.execute("SELECT idx, key FROM pages WHERE key IS NOT NULL"))
        cache._hashes = dict(cache._db.execute("SELECT key, content_hash FROM outcomes"))
        return cache

    # -- written by the chunk stage

    def copy_from(self, other: Path, keys: Iterable[str]) -> set[str]:
        """Copy the outcomes under `keys` whose payload still has its hash from the cache at
        `other`; the keys copied (none if that cache cannot be read)."""
        self._db.execute("CREATE TEMP TABLE wanted (key TEXT PRIMARY KEY)")
        self._db.executemany("INSERT OR IGNORE INTO wanted VALUES (?)", ((k,) for k in keys))
        try:
            self._db.execute("ATTACH DATABASE ? AS other", (_read_only(other),))
        except sqlite3.Error:
            return set()
        try:
            self._db.execute(
                "INSERT OR REPLACE INTO outcomes SELECT o.key, o.content_hash, o.payload_sha, "
                "o.payload FROM other.outcomes o JOIN wanted w ON o.key = w.key "
                "WHERE sha256(o.payload) = o.payload_sha"
            )
        except sqlite3.Error:  # not a cache, or one of another layout
            return set()
        finally:
            self._db.commit()
            self._db.execute("DETACH DATABASE other")
        return {key for (key,) in self._db.execute("SELECT key FROM outcomes")}

    def put(self, key: str, outcome: PackedOutcome) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO outcomes VALUES (?, ?, ?, ?)",
            (key, outcome.content_hash, _sha256(outcome.payload), outcome.payload),
        )

    def put_plan(self, pages: list[PlannedPage], keys: dict[int, str]) -> None:
        self._db.executemany(
            "INSERT INTO pages VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                (
                    p.index,
                    p.url,
                    p.title,
                    p.canonical,
                    p.raw_hash,
                    p.chunked_as,
                    p.markdown_chars,
                    keys.get(p.index),
                )
                for p in pages
            ),
        )

    def set_meta(self, name: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (name, value))

    # -- read by the write stage

    def plan(self) -> list[PlannedPage]:
        rows = self._db.execute(
            "SELECT idx, url, title, canonical, raw_hash, chunked_as, markdown_chars "
            "FROM pages ORDER BY idx"
        )
        return [PlannedPage(*row) for row in rows]

    def meta(self, name: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return None if row is None else row[0]

    def content_hash(self, index: int) -> str | None:
        """The cleaned-content hash of the page chunked at `index`; None: quarantined."""
        return self._hashes[self._keys[index]]

    def get(self, index: int) -> StoredOutcome:
        """The outcome of the page chunked at `index`, checked against its hash."""
        key = self._keys[index]
        row = self._db.execute(
            "SELECT payload, payload_sha FROM outcomes WHERE key = ?", (key,)
        ).fetchone()
        if row is None or _sha256(row[0]) != row[1]:
            raise CacheDamaged(f"{self.path}: the outcome of page {index} is missing or damaged")
        return StoredOutcome.from_payload(index, row[0])

    def clear_chunk_rows(self) -> None:
        """Forget the chunk rows: a retried write stage adds them again."""
        self._db.execute("DELETE FROM chunk_rows")

    def add_chunk_rows(self, rows: Iterable[tuple[str, str]]) -> None:
        """Chunk id -> digest of its chunks.json line, in run order, as the rows are
        written (`read_chunk_rows` reads them back): held in a dict until the end, their
        strings alone were 10 MiB at 20,000 pages."""
        self._db.executemany("INSERT INTO chunk_rows VALUES (?, ?)", rows)

    def close(self) -> None:
        """Commit, close, and (for a new cache) move it into place."""
        self._db.commit()
        self._db.close()
        if self._building is not None:
            with open(self._building, "rb") as handle:
                os.fsync(handle.fileno())
            os.replace(self._building, self.path)
            self._building = None

    def discard(self) -> None:
        """Close without keeping a cache that is being built (the run failed)."""
        self._db.close()
        if self._building is not None:
            self._building.unlink(missing_ok=True)


class CacheDamaged(RuntimeError):
    """An outcome of this run's own cache no longer matches its hash."""


def read_chunk_rows(path: Path) -> dict[str, str]:
    """The chunk rows of a finished run's cache, read only: chunk id -> sha256 of its
    chunks.json line, in the run's chunk order."""
    db = _connect(_read_only(path))
    try:
        return dict(db.execute("SELECT chunk_id, row_sha FROM chunk_rows ORDER BY rowid"))
    finally:
        db.close()


def _sha256(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


def _connect(uri: str) -> sqlite3.Connection:
    db = sqlite3.connect(uri, uri=True)
    db.create_function("sha256", 1, _sha256, deterministic=True)
    return db


def _read_only(path: Path) -> str:
    return f"{Path(path).resolve().as_uri()}?mode=ro"


_SCHEMA = """
PRAGMA journal_mode = OFF;
PRAGMA synchronous = OFF;
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE pages (
    idx INTEGER PRIMARY KEY, url TEXT, title TEXT, canonical TEXT, raw_hash TEXT,
    chunked_as INTEGER, markdown_chars INTEGER, key TEXT
);
CREATE TABLE outcomes (
    key TEXT PRIMARY KEY, content_hash TEXT, payload_sha TEXT NOT NULL, payload BLOB NOT NULL
);
CREATE TABLE chunk_rows (chunk_id TEXT NOT NULL, row_sha TEXT NOT NULL);
"""
