"""Make the database hold exactly one published run, in one transaction.

The loader never trusts that the database holds the previous run: it reads the chunk ids
(and row hashes) the database holds for the site and diffs them against the run, so a
skipped night, a failed load or a hand edit heals on the next load. In one transaction,
which reads them again:

- rows the run does not have are deleted, and the chunks the database lacks inserted,
  embedded first (ids are content-addressed: a new id is new text or a new page);
- rows whose id is held but whose row changed (overlap, index, labels) are updated, and
  embedded again only if what is embedded (breadcrumb and text) changed;
- the site's sync row records the run, the model and the counts.

Chunks are embedded before that transaction opens, so it stays short. A crash or kill
anywhere before the commit leaves the database at the run it held; a second load of the
same run finds nothing to change. Loads are serialised by an advisory lock. A load that
would delete more than `max_shrink` of the held rows stops before any work unless
`allow_shrink`; a new embedding model or dimensions re-embeds everything, said before it
starts.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from firechunk.db.runs import PublishedRun, RunChunk
from firechunk.db.schema import CHUNKS, SYNC, column_dimensions, migrate, set_dimensions
from firechunk.embedders import Embedder

DEFAULT_MAX_SHRINK = 0.2
_LOCK = "select pg_advisory_xact_lock(hashtext('firechunk load'))"
_COLUMNS = (
    "chunk_id, site, url, title, h1, h2, breadcrumb, text, token_count, chunk_index, "
    "overlap_text, metadata, row_sha256, embedded_sha256, embedding"
)
_TYPES = [
    "uuid", "text", "text", "text", "text", "text", "text[]", "text", "int4", "int4",
    "text", "jsonb", "text", "text", "vector",
]  # fmt: skip


class LoadRefused(RuntimeError):
    """The load would do something the operator must confirm; nothing was changed."""


@dataclass(frozen=True)
class LoadResult:
    site: str
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


def load_run(
    conn: psycopg.Connection,
    run: PublishedRun,
    embedder: Embedder,
    *,
    allow_shrink: bool = False,
    max_shrink: float = DEFAULT_MAX_SHRINK,
    say: Callable[[str], None] = print,
    progress: Callable[[int, int], None] | None = None,
) -> LoadResult:
    """Load `run` into the database `conn` (autocommit) points at; see the module doc.

    Embedding, the bulk of a first load (minutes), happens outside any transaction: an
    open one would sit idle that long, which servers end (`idle_in_transaction_session_
    timeout`) and which holds back vacuum. The diff is then made again inside the
    transaction that applies it, and anything that changed meanwhile is embedded there.
    """
    started = time.perf_counter()
    dimensions = embedder_dimensions(embedder)
    with conn.transaction():
        conn.execute(_LOCK)
        migrate(conn, dimensions)
    previous = _sync_row(conn, run.site)
    reembed_all = previous is not None and previous[1:] != (embedder.model, dimensions)
    if reembed_all:
        say(
            f"The embedding model changed ({previous[1]}, {previous[2]} dimensions -> "
            f"{embedder.model}, {dimensions}): all {len(run.chunks)} chunks of "
            f"{run.site} will be embedded again."
        )
    held = _held(conn, run.site)
    plan = _plan({} if reembed_all else held, run.chunks)
    _check_shrink(_plan(held, run.chunks), held, max_shrink, allow_shrink)
    to_embed = _to_embed(plan)
    if to_embed:
        say(f"Embedding {len(to_embed)} chunks with {embedder.model}.")
    vectors = dict(_embed(embedder, to_embed, progress))
    with conn.transaction():
        conn.execute(_LOCK)
        if reembed_all:
            _clear_site(conn, run.site, dimensions)
        held = _held(conn, run.site)
        plan = _plan(held, run.chunks)
        _check_shrink(plan, held, max_shrink, allow_shrink)
        late = [chunk for chunk in _to_embed(plan) if chunk.chunk_id not in vectors]
        vectors.update(_embed(embedder, late, None))  # what changed while embedding
        _apply(conn, run.site, plan, vectors)
        result = LoadResult(
            site=run.site,
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
            _record(conn, result)
    return result


def _to_embed(plan: _Plan) -> list[RunChunk]:
    """New ids, and held ones whose embedded text (breadcrumb and text) changed."""
    return [*plan.insert, *(chunk for chunk in plan.update if chunk.chunk_id in plan.reembed)]


def embedder_dimensions(embedder: Embedder) -> int:
    """The embedder's dimensions; one that learns them from its first answer is asked once."""
    if not embedder.dimensions:
        embedder.embed(["firechunk"])
    return int(embedder.dimensions)


def _sync_row(conn: psycopg.Connection, site: str) -> tuple[str, str, int] | None:
    return conn.execute(
        f"select run_id, model, dimensions from {SYNC} where site = %s", [site]
    ).fetchone()


def _clear_site(conn: psycopg.Connection, site: str, dimensions: int) -> None:
    """Drop the site's rows (they are all embedded again); give the column the new
    dimensions when they differ, which only a table without other sites' rows can take."""
    conn.execute(f"delete from {CHUNKS} where site = %s", [site])
    if column_dimensions(conn) == dimensions:
        return
    other = conn.execute(f"select site from {CHUNKS} limit 1").fetchone()
    if other:
        raise LoadRefused(
            f"the database also holds site {other[0]} embedded with "
            f"{column_dimensions(conn)} dimensions; load this site with the same model, "
            "or into another database"
        )
    set_dimensions(conn, dimensions)


def _held(conn: psycopg.Connection, site: str) -> dict[str, tuple[str, str]]:
    """Chunk id -> (row hash, embedded-text hash) of every row the database holds."""
    rows = conn.execute(
        f"select chunk_id::text, row_sha256, embedded_sha256 from {CHUNKS} where site = %s",
        [site],
    )
    return {chunk_id: (row, embedded) for chunk_id, row, embedded in rows}


def _plan(held: dict[str, tuple[str, str]], chunks: Sequence[RunChunk]) -> _Plan:
    wanted = {chunk.chunk_id for chunk in chunks}
    insert = [c for c in chunks if c.chunk_id not in held]
    update = [c for c in chunks if c.chunk_id in held and held[c.chunk_id][0] != c.row_sha256]
    reembed = {c.chunk_id for c in update if held[c.chunk_id][1] != c.embedded_sha256}
    delete = sorted(chunk_id for chunk_id in held if chunk_id not in wanted)
    return _Plan(insert, update, delete, reembed)


def _check_shrink(plan: _Plan, held: dict, max_shrink: float, allow_shrink: bool) -> None:
    if allow_shrink or not held or len(plan.delete) <= max_shrink * len(held):
        return
    raise LoadRefused(
        f"this load would delete {len(plan.delete)} of the {len(held)} chunks the database "
        f"holds ({len(plan.delete) / len(held):.0%}, more than {max_shrink:.0%}); nothing was "
        "changed. If the site really shrank, load again with --allow-shrink."
    )


def _embed(
    embedder: Embedder, chunks: list[RunChunk], progress: Callable[[int, int], None] | None
) -> list[tuple[str, np.ndarray]]:
    """Each chunk's vector; `progress(done, total)` after each batch."""
    if not chunks:
        return []
    report = (lambda done: progress(done, len(chunks))) if progress else None
    vectors = embedder.embed([chunk.embedded_text for chunk in chunks], report)
    return [(chunk.chunk_id, vector) for chunk, vector in zip(chunks, vectors, strict=True)]


def _apply(
    conn: psycopg.Connection, site: str, plan: _Plan, vectors: dict[str, np.ndarray]
) -> None:
    with conn.cursor() as cursor:
        if plan.delete:
            cursor.execute(f"delete from {CHUNKS} where chunk_id = any(%s::uuid[])", [plan.delete])
        if plan.insert:
            with cursor.copy(f"copy {CHUNKS} ({_COLUMNS}) from stdin (format binary)") as copy:
                copy.set_types(_TYPES)
                for chunk in plan.insert:
                    copy.write_row(_row(site, chunk, vectors[chunk.chunk_id]))
        if plan.update:
            cursor.executemany(_UPDATE, [_update_params(c, vectors) for c in plan.update])


def _row(site: str, chunk: RunChunk, vector: np.ndarray) -> tuple:
    return (
        uuid.UUID(chunk.chunk_id), site, chunk.url, chunk.title, chunk.h1, chunk.h2,
        list(chunk.breadcrumb), chunk.text, chunk.token_count, chunk.chunk_index,
        chunk.overlap_text, Jsonb(chunk.metadata), chunk.row_sha256, chunk.embedded_sha256,
        vector,
    )  # fmt: skip


_UPDATE = f"""update {CHUNKS} set
    url = %(url)s, title = %(title)s, h1 = %(h1)s, h2 = %(h2)s, breadcrumb = %(breadcrumb)s,
    token_count = %(token_count)s, chunk_index = %(chunk_index)s,
    overlap_text = %(overlap_text)s, metadata = %(metadata)s, row_sha256 = %(row_sha256)s,
    embedded_sha256 = %(embedded_sha256)s, embedding = coalesce(%(embedding)s::vector, embedding)
    where chunk_id = %(chunk_id)s"""


def _update_params(chunk: RunChunk, vectors: dict[str, np.ndarray]) -> dict:
    return {
        "chunk_id": chunk.chunk_id,
        "url": chunk.url,
        "title": chunk.title,
        "h1": chunk.h1,
        "h2": chunk.h2,
        "breadcrumb": list(chunk.breadcrumb),
        "token_count": chunk.token_count,
        "chunk_index": chunk.chunk_index,
        "overlap_text": chunk.overlap_text,
        "metadata": Jsonb(chunk.metadata),
        "row_sha256": chunk.row_sha256,
        "embedded_sha256": chunk.embedded_sha256,
        "embedding": vectors.get(chunk.chunk_id),
    }


def _record(conn: psycopg.Connection, result: LoadResult) -> None:
    conn.execute(
        f"""insert into {SYNC} (site, run_id, loaded_at, model, dimensions, chunks, inserted,
            updated, deleted, embedded, seconds)
        values (%s, %s, now(), %s, %s, %s, %s, %s, %s, %s, %s)
        on conflict (site) do update set run_id = excluded.run_id,
            loaded_at = excluded.loaded_at, model = excluded.model,
            dimensions = excluded.dimensions, chunks = excluded.chunks,
            inserted = excluded.inserted, updated = excluded.updated,
            deleted = excluded.deleted, embedded = excluded.embedded,
            seconds = excluded.seconds""",
        [
            result.site, result.run_id, result.model, result.dimensions, result.chunks,
            result.inserted, result.updated, result.deleted, result.embedded, result.seconds,
        ],
    )  # fmt: skip
