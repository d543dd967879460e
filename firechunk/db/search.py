"""Hybrid search over a loaded site: vector similarity and Postgres full-text search,
fused by reciprocal rank (each list's rank r adds 1 / (60 + r), the constant of the
original RRF paper), so a chunk found by both ranks above one found by either alone.

The full-text side uses `websearch_to_tsquery` (quoted phrases, `or`, `-word`), so a
question typed as is works; its stop words are dropped by Postgres.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from firechunk.db.schema import CHUNKS
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
    from {CHUNKS} where site = %(site)s
    order by embedding <=> %(vector)s limit %(candidates)s
), lexical as (
    select chunk_id, row_number() over (order by ts_rank_cd(fts, query) desc) as rank
    from {CHUNKS}, websearch_to_tsquery('english', %(question)s) as query
    where site = %(site)s and fts @@ query
    order by ts_rank_cd(fts, query) desc limit %(candidates)s
)
select c.chunk_id::text, c.url, c.breadcrumb, c.text, s.rank, l.rank,
    coalesce(1.0 / (%(k)s + s.rank), 0) + coalesce(1.0 / (%(k)s + l.rank), 0) as score
from semantic s full outer join lexical l using (chunk_id)
join {CHUNKS} c using (chunk_id)
order by score desc, c.chunk_id limit %(limit)s
"""


def search(
    conn: psycopg.Connection, site: str, question: str, embedder: Embedder, k: int = 5
) -> list[Hit]:
    """The `k` best chunks of `site` for `question`."""
    vector = embedder.embed([question])[0]
    conn.execute(f"set hnsw.ef_search = {max(40, CANDIDATES)}")
    rows = conn.execute(
        _QUERY,
        {
            "vector": vector,
            "site": site,
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


def loaded_sites(conn: psycopg.Connection) -> list[tuple[str, str, str, int]]:
    """(site, run id, model, dimensions) of each loaded site; empty before the first load."""
    exists = conn.execute("select to_regclass('firechunk_sync')").fetchone()[0]
    if exists is None:
        return []
    return conn.execute(
        "select site, run_id, model, dimensions from firechunk_sync order by site"
    ).fetchall()
