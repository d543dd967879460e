"""Make the database hold exactly one published run in its collection, in one transaction.

The loader never trusts that the database holds the previous run: it reads the chunk ids
(and row hashes) the collection holds and diffs them against the run, so a skipped night,
a failed load or a hand edit heals on the next load. In one transaction, which reads them
again under the collection's advisory lock:

- rows the run does not have are deleted, and the chunks the collection lacks inserted,
  embedded first (ids are content-addressed: a new id is new text or a new page);
- rows whose id is held but whose row changed (overlap, index, labels) are updated, and
  embedded again only if what is embedded (breadcrumb and text) changed;
- the collection's sync row records the run, when it started, the model and the counts.

Only the run's collection is read, diffed, guarded and changed: other collections (other
doc sets) are never touched, and may hold the same chunks.

Chunks are embedded before that transaction opens, so it stays short. A crash or kill
anywhere before the commit leaves the database at the run it held; a second load of the
same run finds nothing to change. Refused, with nothing changed (`LoadGuards` says what
the operator allows):

- a run older than the one the collection holds (a stale load racing a fresh one), unless
  `force_older`; with `only_if_latest`, a run its data directory no longer calls `latest`;
- a load that shrinks the collection by more than `max_shrink`, counted net (chunks
  deleted minus chunks added, the rule publishing uses: an edit replaces chunks, it does
  not lose them), unless `allow_shrink`.

A new embedding model or dimensions re-embeds the collection, said before it starts.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from firechunk.activity import doing
from firechunk.db.runs import PublishedRun, RunChunk
from firechunk.db.schema import (
    CHUNKS,
    CHUNKS_COLUMNS,
    SYNC,
    VECTORS,
    Column,
    column_dimensions,
    has_tables,
    migrate,
    set_dimensions,
)
from firechunk.embedders import Embedder
from firechunk.settings import MAX_SHRINK
from firechunk.words import counted

# The schema's lock (creating and migrating tables), then one per collection: loads of
# different collections run side by side, two loads of one collection one after the other.
_SCHEMA_LOCK = "select pg_advisory_xact_lock(hashtext('firechunk load'))"
COLLECTION_LOCK = "select pg_advisory_xact_lock(hashtext('firechunk load'), hashtext(%s))"
_COLUMNS = ", ".join(column.name for column in CHUNKS_COLUMNS)
_TYPES = [column.sql for column in CHUNKS_COLUMNS]
_VECTOR_COLUMNS = "collection, chunk_id, window_index, embedding"
_VECTOR_TYPES = ["text", "uuid", "int2", "vector"]


class LoadRefused(RuntimeError):
    """The load would do something the operator must confirm; nothing was changed."""


class LoadSuperseded(LoadRefused):
    """A newer run is (or is about to be) loaded: this one would take the database back."""


@dataclass(frozen=True)
class LoadResult:
    collection: str
    run_id: str
    previous_run_id: str | None
    model: str
    dimensions: int
    chunks: int
    inserted: int
    updated: int
    deleted: int
    embedded: int
    reembedded_all: bool
    seconds: float

    @property
    def changed(self) -> bool:
        return bool(self.inserted or self.updated or self.deleted)


@dataclass(frozen=True)
class _Plan:
    insert: list[RunChunk]
    update: list[RunChunk]
    delete: list[str]
    reembed: set[str]  # ids of updated rows whose embedded text changed


@dataclass(frozen=True)
class LoadGuards:
    """What the operator lets a load do that it refuses by default (see the module doc):
    shrink its collection by more than `max_shrink` (`allow_shrink`), or take it back to
    an older run (`force_older`). One value, so a load and its preview refuse alike."""

    allow_shrink: bool = False
    max_shrink: float = MAX_SHRINK
    force_older: bool = False


def load_run(
    conn: psycopg.Connection,
    run: PublishedRun,
    embedder: Embedder,
    *,
    guards: LoadGuards = LoadGuards(),
    only_if_latest: bool = False,
    say: Callable[[str], None] = print,
    progress: Callable[[int, int], None] | None = None,
) -> LoadResult:
    """Load `run` into its collection of the database `conn` (autocommit) points at; see
    the module doc.

    Embedding, the bulk of a first load (minutes), happens outside any transaction: an
    open one would sit idle that long, which servers end (`idle_in_transaction_session_
    timeout`) and which holds back vacuum. Every check and the diff are then made again
    inside the transaction that applies them, and anything that changed meanwhile is
    embedded there.
    """
    started = time.perf_counter()
    with doing("load", "reading the database", lambda: "the database is as it was"):
        dimensions = embedder_dimensions(embedder)
        guard = _Guard(run, guards, only_if_latest)
        with conn.transaction():
            conn.execute(_SCHEMA_LOCK)
            migrate(conn, dimensions)
            _adopt_legacy_site(conn, run, say)
        previous = _sync_row(conn, run.collection)
        guard.check_order(previous)
        reembed_all = _model_changed(previous, embedder.model, dimensions)
        if reembed_all:
            assert previous is not None
            say(
                f"The embedding model changed ({previous[1]}, {previous[2]} dimensions -> "
                f"{embedder.model}, {dimensions}): all {len(run.chunks)} chunks of "
                f"{run.collection} will be embedded again."
            )
        held = _held(conn, run.collection)
        plan = _plan({} if reembed_all else held, run.chunks)
        guard.check_shrink(_plan(held, run.chunks), held)
        to_embed = _to_embed(plan)
    kept = _holds(run.collection, previous)
    with doing("load", "embedding", kept):
        if to_embed:
            say(f"Embedding {len(to_embed)} chunks with {embedder.model}.")
        vectors = _embed(embedder, to_embed, progress)
        if to_embed:  # a long chunk is read as several windows: progress counts those
            windows = sum(len(each) for each in vectors.values())
            say(f"{counted(len(to_embed), 'chunk')} embedded ({counted(windows, 'window')}).")
    with doing("load", "applying the changes", kept), conn.transaction():
        conn.execute(COLLECTION_LOCK, [run.collection])
        guard.check_order(_sync_row(conn, run.collection))
        if reembed_all:
            _clear_collection(conn, run.collection, dimensions)
        held = _held(conn, run.collection)
        plan = _plan(held, run.chunks)
        guard.check_shrink(plan, held)
        late = [chunk for chunk in _to_embed(plan) if chunk.chunk_id not in vectors]
        vectors |= _embed(embedder, late, None)  # what changed while embedding
        _apply(conn, run.collection, plan, vectors)
        result = LoadResult(
            collection=run.collection,
            run_id=run.run_id,
            previous_run_id=previous[0] if previous else None,
            model=embedder.model,
            dimensions=dimensions,
            chunks=len(run.chunks),
            inserted=len(plan.insert),
            updated=len(plan.update),
            deleted=len(plan.delete),
            embedded=len(to_embed) + len(late),
            reembedded_all=reembed_all,
            seconds=round(time.perf_counter() - started, 3),
        )
        if result.changed or previous is None or previous[0] != run.run_id:
            _record(conn, result, run)
        guard.check_latest()
    return result


@dataclass(frozen=True)
class LoadPreview:
    """What a load of a run would do (`preview_load`), with nothing changed."""

    collection: str
    run_id: str
    model: str
    inserted: int
    updated: int
    deleted: int
    to_embed: int  # chunks
    windows: int  # texts the embedder reads for them
    seconds: float  # about how long embedding them takes, at the pace of a sample
    refused: str | None  # why the load would be refused; None: it would go ahead


PREVIEW_SAMPLE = 32  # windows embedded to measure the embedder's pace


def preview_load(
    conn: psycopg.Connection,
    run: PublishedRun,
    embedder: Embedder,
    *,
    guards: LoadGuards = LoadGuards(),
) -> LoadPreview:
    """What `load_run` would insert, update, delete and embed, and about how long the
    embedding takes (a first load runs for minutes to hours): the diff is the load's own,
    the pace is a sample's. Reads the database only; embeds the sample and no more."""
    guard = _Guard(run, guards, only_if_latest=False)
    previous = _sync_row(conn, run.collection) if has_tables(conn) else None
    held = _held(conn, run.collection) if previous is not None else {}
    refused = None
    try:
        guard.check_order(previous)
        guard.check_shrink(_plan(held, run.chunks), held)
    except LoadRefused as why:
        refused = str(why)
    reembed_all = _model_changed(previous, embedder.model, embedder_dimensions(embedder))
    plan = _plan({} if reembed_all else held, run.chunks)
    to_embed = _to_embed(plan)
    texts = [text for each in _windows(embedder, to_embed) for text in each]
    return LoadPreview(
        collection=run.collection,
        run_id=run.run_id,
        model=embedder.model,
        inserted=len(plan.insert),
        updated=len(plan.update),
        deleted=len(plan.delete),
        to_embed=len(to_embed),
        windows=len(texts),
        seconds=_pace(embedder, texts[:PREVIEW_SAMPLE]) * len(texts),
        refused=refused,
    )


def _pace(embedder: Embedder, sample: list[str]) -> float:
    """Seconds per text of embedding `sample` (after one text, so a model's loading is
    not counted); 0 for no sample."""
    if not sample:
        return 0.0
    embedder.embed(sample[:1])
    started = time.perf_counter()
    embedder.embed(sample)
    return (time.perf_counter() - started) / len(sample)


def _model_changed(previous: tuple | None, model: str, dimensions: int) -> bool:
    """Whether the collection was embedded with another model or size (its sync row,
    `previous`): then every chunk is embedded again."""
    return previous is not None and previous[1:3] != (model, dimensions)


def _holds(collection: str, previous: tuple | None) -> Callable[[], str]:
    """What the database holds after a load stopped before its commit: what it held."""
    if previous is None:
        return lambda: f"nothing was committed: {collection} holds no run yet"
    return lambda: f"nothing was committed: the database still holds run {previous[0]}"


@dataclass(frozen=True)
class _Guard:
    """The checks a load passes before any work and again, under the collection's lock,
    just before it commits."""

    run: PublishedRun
    guards: LoadGuards
    only_if_latest: bool

    def check_order(self, held: tuple | None) -> None:
        """A run older than the one the collection holds is refused unless forced."""
        if held is None or held[0] == self.run.run_id or self.guards.force_older:
            return
        held_started = held[3]
        if held_started is None or held_started <= self.run.started:
            return
        raise LoadSuperseded(
            f"{self.run.collection} holds run {held[0]} (started {_when(held_started)}), "
            f"newer than run {self.run.run_id} (started {_when(self.run.started)}); nothing "
            "was changed. To go back to the older run on purpose, load it with --force-older."
        )

    def check_latest(self) -> None:
        """With `only_if_latest`, the run must still be its data directory's `latest`."""
        if self.only_if_latest and not self.run.is_latest():
            raise LoadSuperseded(
                f"run {self.run.run_id} is no longer the latest run of {self.run.data_dir} "
                "(a newer one was published while it loaded); nothing was changed. Load "
                "latest to bring the database up to date."
            )

    def check_shrink(self, plan: _Plan, held: dict) -> None:
        """Net shrink: chunks deleted minus chunks added, against what the collection holds."""
        lost = len(plan.delete) - len(plan.insert)
        max_shrink = self.guards.max_shrink
        if self.guards.allow_shrink or not held or lost <= max_shrink * len(held):
            return
        raise LoadRefused(
            f"this load would shrink {self.run.collection} by {lost} of its {len(held)} "
            f"chunks ({lost / len(held):.0%}: {len(plan.delete)} deleted, "
            f"{len(plan.insert)} added), more than {max_shrink:.0%}; nothing was "
            "changed. If the site really shrank, load again with --allow-shrink."
        )


def _when(moment) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def _adopt_legacy_site(conn: psycopg.Connection, run: PublishedRun, say) -> None:
    """Rows a version-1 database kept under the run's scheme and host become the run's
    collection, once, instead of being embedded again into a new one."""
    legacy = run.legacy_site
    if legacy is None or legacy == run.collection:
        return
    if _sync_row(conn, run.collection) is not None or _sync_row(conn, legacy) is None:
        return
    conn.execute(
        f"update {CHUNKS} set collection = %s where collection = %s", [run.collection, legacy]
    )
    conn.execute(
        f"update {SYNC} set collection = %s where collection = %s", [run.collection, legacy]
    )
    say(f"The rows held under {legacy} are now collection {run.collection}.")


def _to_embed(plan: _Plan) -> list[RunChunk]:
    """New ids, and held ones whose embedded text (breadcrumb and text) changed."""
    return [*plan.insert, *(chunk for chunk in plan.update if chunk.chunk_id in plan.reembed)]


def embedder_dimensions(embedder: Embedder) -> int:
    """The embedder's dimensions; one that learns them from its first answer is asked once."""
    if not embedder.dimensions:
        embedder.embed(["firechunk"])
    return int(embedder.dimensions)


def _sync_row(conn: psycopg.Connection, collection: str) -> tuple | None:
    """(run id, model, dimensions, run started) of what the collection holds."""
    return conn.execute(
        f"select run_id, model, dimensions, run_started from {SYNC} where collection = %s",
        [collection],
    ).fetchone()


def _clear_collection(conn: psycopg.Connection, collection: str, dimensions: int) -> None:
    """Drop the collection's rows (they are all embedded again); give the column the new
    dimensions when they differ, which only a table without other collections can take."""
    conn.execute(f"delete from {CHUNKS} where collection = %s", [collection])
    if column_dimensions(conn) == dimensions:
        return
    other = conn.execute(f"select collection from {CHUNKS} limit 1").fetchone()
    if other:
        raise LoadRefused(
            f"the database also holds collection {other[0]} embedded with "
            f"{column_dimensions(conn)} dimensions; load this one with the same model, "
            "or into another database"
        )
    set_dimensions(conn, dimensions)


def _held(conn: psycopg.Connection, collection: str) -> dict[str, tuple[str, str]]:
    """Chunk id -> (row hash, embedded-text hash) of every row the collection holds."""
    rows = conn.execute(
        f"select chunk_id::text, row_sha256, embedded_sha256 from {CHUNKS} where collection = %s",
        [collection],
    )
    return {chunk_id: (row, embedded) for chunk_id, row, embedded in rows}


def _plan(held: dict[str, tuple[str, str]], chunks: Sequence[RunChunk]) -> _Plan:
    wanted = {chunk.chunk_id for chunk in chunks}
    insert = [c for c in chunks if c.chunk_id not in held]
    update = [c for c in chunks if c.chunk_id in held and held[c.chunk_id][0] != c.row_sha256]
    reembed = {c.chunk_id for c in update if held[c.chunk_id][1] != c.embedded_sha256}
    delete = sorted(chunk_id for chunk_id in held if chunk_id not in wanted)
    return _Plan(insert, update, delete, reembed)


def _embed(
    embedder: Embedder, chunks: list[RunChunk], progress: Callable[[int, int], None] | None
) -> dict[str, np.ndarray]:
    """Each chunk's vectors, one row per window the embedder reads it as (none for a
    chunk of a navigation page: search finds it by its words only);
    `progress(done, total)` in windows, after each batch."""
    windows = _windows(embedder, chunks)
    texts = [text for each in windows for text in each]
    if not texts:
        return {}
    report = (lambda done: progress(done, len(texts))) if progress else None
    vectors = embedder.embed(texts, report)
    ends = np.cumsum([len(each) for each in windows])
    return {
        chunk.chunk_id: vectors[end - len(each) : end]
        for chunk, each, end in zip(chunks, windows, ends, strict=True)
    }


def _windows(embedder: Embedder, chunks: list[RunChunk]) -> list[list[str]]:
    """The texts the embedder reads for each chunk; none for a chunk of a navigation page
    (search finds it by its words only)."""
    return [
        [] if chunk.navigation else embedder.windows(chunk.heading, chunk.text) for chunk in chunks
    ]


def _apply(
    conn: psycopg.Connection, collection: str, plan: _Plan, vectors: dict[str, np.ndarray]
) -> None:
    """Deletes (their vectors go with them), inserts, updates; then the vectors of every
    chunk embedded by this load, the old ones of a re-embedded chunk replaced."""
    reembedded = sorted(plan.reembed)
    with conn.cursor() as cursor:
        if reembedded:
            cursor.execute(
                f"delete from {VECTORS} where collection = %s and chunk_id = any(%s::uuid[])",
                [collection, reembedded],
            )
        if plan.delete:
            cursor.execute(
                f"delete from {CHUNKS} where collection = %s and chunk_id = any(%s::uuid[])",
                [collection, plan.delete],
            )
        if plan.insert:
            with cursor.copy(f"copy {CHUNKS} ({_COLUMNS}) from stdin (format binary)") as copy:
                copy.set_types(_TYPES)
                for chunk in plan.insert:
                    copy.write_row(_row(collection, chunk))
        if plan.update:
            params = [_update_params(collection, chunk) for chunk in plan.update]
            cursor.executemany(_UPDATE, params)
        embedded = [chunk.chunk_id for chunk in plan.insert] + reembedded
        if embedded:
            copy_sql = f"copy {VECTORS} ({_VECTOR_COLUMNS}) from stdin (format binary)"
            with cursor.copy(copy_sql) as copy:
                copy.set_types(_VECTOR_TYPES)
                for chunk_id in embedded:
                    for window, vector in enumerate(vectors[chunk_id]):
                        copy.write_row((collection, uuid.UUID(chunk_id), window, vector))


def _row(collection: str, chunk: RunChunk) -> tuple:
    """The chunk's values in the order of `CHUNKS_COLUMNS`, as psycopg writes them."""
    return tuple(_value(column, collection, chunk) for column in CHUNKS_COLUMNS)


def _value(column: Column, collection: str, chunk: RunChunk) -> object:
    """A column's value: the collection's name, else the `RunChunk` attribute of its name."""
    value = collection if column.name == "collection" else getattr(chunk, column.name)
    adapt = _ADAPT.get(column.sql)
    return adapt(value) if adapt else value


# How psycopg is handed a value of these SQL types (binary COPY needs the exact type).
_ADAPT: dict[str, Callable[[Any], object]] = {"uuid": uuid.UUID, "text[]": list, "jsonb": Jsonb}
# An update finds a row by its key and never rewrites its text: the id is made from it.
_KEY = ("collection", "chunk_id")
_UPDATED = [column for column in CHUNKS_COLUMNS if column.name not in (*_KEY, "text")]
_KEY_COLUMNS = [column for column in CHUNKS_COLUMNS if column.name in _KEY]
_UPDATE = (
    f"update {CHUNKS} set "
    + ", ".join(f"{column.name} = %({column.name})s" for column in _UPDATED)
    + " where collection = %(collection)s and chunk_id = %(chunk_id)s"
)


def _update_params(collection: str, chunk: RunChunk) -> dict:
    return {column.name: _value(column, collection, chunk) for column in (*_KEY_COLUMNS, *_UPDATED)}


def _record(conn: psycopg.Connection, result: LoadResult, run: PublishedRun) -> None:
    conn.execute(
        f"""insert into {SYNC} (collection, run_id, run_started, loaded_at, model, dimensions,
            chunks, inserted, updated, deleted, embedded, seconds)
        values (%s, %s, %s, now(), %s, %s, %s, %s, %s, %s, %s, %s)
        on conflict (collection) do update set run_id = excluded.run_id,
            run_started = excluded.run_started, loaded_at = excluded.loaded_at,
            model = excluded.model,
            dimensions = excluded.dimensions, chunks = excluded.chunks,
            inserted = excluded.inserted, updated = excluded.updated,
            deleted = excluded.deleted, embedded = excluded.embedded,
            seconds = excluded.seconds""",
        [
            result.collection, result.run_id, run.started, result.model, result.dimensions,
            result.chunks,
            result.inserted, result.updated, result.deleted, result.embedded, result.seconds,
        ],
    )  # fmt: skip
