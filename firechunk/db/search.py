"""Hybrid search over a loaded collection: vector similarity and Postgres full-text search,
fused by reciprocal rank (each list's rank r adds 1 / (60 + r), the constant of the
original RRF paper), so a chunk found by both ranks above one found by either alone.

The full-text side uses `websearch_to_tsquery` (quoted phrases, `or`, `-word`), so a
question typed as is works; its stop words are dropped by Postgres.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import psycopg

from firechunk.db.schema import CHUNKS, SYNC
from firechunk.embedders import Embedder

RRF_K = 60
CANDIDATES = 50  # taken from each side before fusing


@dataclass(frozen=True)
class Hit:
    rank: int
    score: float
    chunk_id: str
    url: str
    breadcrumb: tuple[str, ...]
    text: str
    by_vector: int | None  # the chunk's rank on each side, None when that side missed it
    by_text: int | None


_QUERY = f"""
with semantic as (
    select chunk_id, row_number() over (order by embedding <=> %(vector)s) as rank
    from {CHUNKS} where collection = %(collection)s
    order by embedding <=> %(vector)s limit %(candidates)s
), lexical as (
    select chunk_id, row_number() over (order by ts_rank_cd(fts, query) desc) as rank
    from {CHUNKS}, websearch_to_tsquery('english', %(question)s) as query
    where collection = %(collection)s and fts @@ query
    order by ts_rank_cd(fts, query) desc limit %(candidates)s
), fused as (
    select chunk_id, s.rank as by_vector, l.rank as by_text,
        coalesce(1.0 / (%(k)s + s.rank), 0) + coalesce(1.0 / (%(k)s + l.rank), 0) as score
    from semantic s full outer join lexical l using (chunk_id)
)
select c.chunk_id::text, c.url, c.breadcrumb, c.text, f.by_vector, f.by_text, f.score
from fused f join {CHUNKS} c on c.collection = %(collection)s and c.chunk_id = f.chunk_id
order by f.score desc, c.chunk_id limit %(limit)s
"""


def search(
    conn: psycopg.Connection, collection: str, question: str, embedder: Embedder, k: int = 5
) -> list[Hit]:
    """The `k` best chunks of `collection` for `question`."""
    vector = embedder.embed([question])[0]
    conn.execute(f"set hnsw.ef_search = {max(40, CANDIDATES)}")
    rows = conn.execute(
        _QUERY,
        {
            "vector": vector,
            "collection": collection,
            "question": question,
            "candidates": CANDIDATES,
            "k": RRF_K,
            "limit": k,
        },
    ).fetchall()
    return [
        Hit(n, float(score), chunk_id, url, tuple(breadcrumb), text, by_vector, by_text)
        for n, (chunk_id, url, breadcrumb, text, by_vector, by_text, score) in enumerate(
            rows, start=1
        )
    ]


@dataclass(frozen=True)
class Collection:
    """A collection as its sync row describes it."""

    name: str
    run_id: str
    loaded_at: datetime
    chunks: int
    model: str
    dimensions: int


def loaded_collections(conn: psycopg.Connection) -> list[Collection]:
    """Every loaded collection, by name; empty before the first load."""
    if conn.execute("select to_regclass(%s)", [SYNC]).fetchone()[0] is None:
        return []
    rows = conn.execute(
        f"select collection, run_id, loaded_at, chunks, model, dimensions from {SYNC} "
        "order by collection"
    ).fetchall()
    return [Collection(*row) for row in rows]
