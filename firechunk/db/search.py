"""Hybrid search over a loaded collection: BM25 over the chunks' words and vector
similarity over their windows, fused by weighted reciprocal rank.

- Words: Okapi BM25 (`K1`, `B`) computed in Postgres from the full-text column: a term's
  document frequency and the collection's size and mean length from the statistics the
  tables keep (`firechunk_terms`, `firechunk_sizes`), not counted per question; its
  frequency in a chunk from the tsvector's positions (title, breadcrumb and text; English
  stemming, stop words dropped), the chunk's length in tokens against the mean. Any word of
  the question may match (OR): a question is not a conjunction of its words, and IDF ranks
  the rare ones up. Scoring costs a read of every chunk scored, so the chunks scored are
  those holding the question's rarest terms, as many terms as fit in `POSTINGS` chunks;
  when even the rarest term is in more, those holding both of the two rarest. A chunk
  holding only common words scores low anyway, and the cost stays about flat as the
  collection grows. Every term of the question counts in the score of a chunk scored.
- Vectors: the nearest windows (`firechunk_vectors`), each chunk scored by its best
  window, so a long chunk is found by any of its paragraphs.
- Fusion: each side's rank r adds weight / (`RRF_K` + r). On the tuning half of
  bench/questions.jsonl the words weighing 1.5 to the vectors' 1 was best whatever the
  constant (MRR@10 0.862 to 0.863 for constants 20 to 100), so the constant stays at the
  RRF paper's 60 (`bench/search_quality.py`; held-half figures in bench/README.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import psycopg

from firechunk.db.schema import CHUNKS, SIZES, SYNC, TERMS, VECTORS, has_tables
from firechunk.embedders import Embedder

K1 = 1.2
B = 0.75
RRF_K = 60
VECTOR_WEIGHT = 1.0
TEXT_WEIGHT = 1.5
CANDIDATES = 50  # chunks taken from each side before fusing
POSTINGS = 2_000  # chunks the text side scores, about: see the module doc
WINDOWS_PER_CHUNK = 4  # nearest windows read per candidate chunk


@dataclass(frozen=True)
class Hit:
    rank: int
    score: float
    chunk_id: str
    url: str
    title: str
    breadcrumb: tuple[str, ...]
    text: str
    by_vector: int | None  # the chunk's rank on each side, None when that side missed it
    by_text: int | None


# The text side: the question's terms, their IDF, and the `candidates` best chunks by BM25.
TEXT_SIDE = f"""
terms as (
    select distinct lexeme from unnest(to_tsvector('english', %(question)s))
    where position(chr(92) in lexeme) = 0
), stats as (
    select chunks::float8 as n, greatest(tokens::float8 / chunks, 1) as avgdl
    from {SIZES} where collection = %(collection)s
), idf as (
    select t.lexeme, d.chunks as df, ln(1 + (s.n - d.chunks + 0.5) / (d.chunks + 0.5)) as idf
    from terms t cross join stats s
    join {TERMS} d on d.collection = %(collection)s and d.lexeme = t.lexeme
), running as (
    select lexeme, df, row_number() over (order by df, lexeme) as rarest,
        sum(df) over (order by df, lexeme) as postings
    from idf
), any_term as (
    select case when min(df) <= %(postings)s
        then string_agg(quote_literal(lexeme), ' | ') filter (where postings <= %(postings)s)
        else string_agg(quote_literal(lexeme), ' & ') filter (where rarest <= 2)
    end::tsquery as query from running
), lexical as (
    select chunk_id, row_number() over (order by score desc, chunk_id) as rank from (
        select c.chunk_id, sum(
            i.idf * p.tf * (%(k1)s + 1)
            / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * c.token_count / s.avgdl))
        ) as score
        from {CHUNKS} c cross join any_term a cross join stats s
        cross join lateral (
            select lexeme, cardinality(positions)::float8 as tf from unnest(c.fts)
        ) p
        join idf i on i.lexeme = p.lexeme
        where c.collection = %(collection)s and c.fts @@ a.query
        group by c.chunk_id
        order by score desc limit %(candidates)s
    ) scored
)
"""
# The vector side: the `candidates` chunks whose best window is nearest the question.
VECTOR_SIDE = f"""
semantic as (
    select chunk_id, row_number() over (order by distance, chunk_id) as rank from (
        select chunk_id, min(distance) as distance from (
            select chunk_id, embedding <=> %(vector)s as distance from {VECTORS}
            where collection = %(collection)s
            order by embedding <=> %(vector)s limit %(windows)s
        ) nearest
        group by chunk_id order by distance limit %(candidates)s
    ) best
)
"""
QUERY = f"""
with {TEXT_SIDE}, {VECTOR_SIDE}, fused as (
    select chunk_id, s.rank as by_vector, l.rank as by_text,
        coalesce(%(vector_weight)s / (%(k)s + s.rank), 0)
        + coalesce(%(text_weight)s / (%(k)s + l.rank), 0) as score
    from semantic s full outer join lexical l using (chunk_id)
)
select c.chunk_id::text, c.url, c.title, c.breadcrumb, c.text, f.by_vector, f.by_text,
    f.score
from fused f join {CHUNKS} c on c.collection = %(collection)s and c.chunk_id = f.chunk_id
order by f.score desc, c.chunk_id limit %(limit)s
"""


@dataclass(frozen=True)
class Fusion:
    """How the two sides are weighed; the defaults are the tuned ones."""

    rrf_k: float = RRF_K
    vector_weight: float = VECTOR_WEIGHT
    text_weight: float = TEXT_WEIGHT


def search(
    conn: psycopg.Connection,
    collection: str,
    question: str,
    embedder: Embedder,
    k: int = 5,
    fusion: Fusion = Fusion(),
) -> list[Hit]:
    """The `k` best chunks of `collection` for `question`."""
    vector = embedder.embed([question])[0]
    set_vector_options(conn)
    rows = conn.execute(QUERY, query_params(collection, question, vector, k, fusion)).fetchall()
    return [
        Hit(n, float(score), chunk_id, url, title, tuple(crumb), text, by_vector, by_text)
        for n, (chunk_id, url, title, crumb, text, by_vector, by_text, score) in enumerate(
            rows, start=1
        )
    ]


def set_vector_options(conn: psycopg.Connection) -> None:
    """Let the HNSW scan read enough windows for `CANDIDATES` chunks, and go on reading
    when the collection filter drops some (other collections' windows)."""
    conn.execute(f"set hnsw.ef_search = {CANDIDATES * WINDOWS_PER_CHUNK}")
    conn.execute("set hnsw.iterative_scan = relaxed_order")


def query_params(
    collection: str, question: str, vector: object, k: int, fusion: Fusion = Fusion()
) -> dict[str, object]:
    """The parameters of the search query, and of either side's on its own."""
    return {
        "vector": vector,
        "collection": collection,
        "question": question,
        "candidates": CANDIDATES,
        "postings": POSTINGS,
        "windows": CANDIDATES * WINDOWS_PER_CHUNK,
        "k1": K1,
        "b": B,
        "k": fusion.rrf_k,
        "vector_weight": fusion.vector_weight,
        "text_weight": fusion.text_weight,
        "limit": k,
    }


def above(hits: list[Hit], fraction: float) -> list[Hit]:
    """The hits whose fused score is at least `fraction` of the best one's (0 keeps all,
    1 only the best, or those tied with it): a fused score means nothing on its own, so
    the cutoff is relative."""
    if not hits or fraction <= 0:
        return list(hits)
    floor = fraction * max(hit.score for hit in hits)
    return [hit for hit in hits if hit.score >= floor]


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
    if not has_tables(conn):
        return []
    rows = conn.execute(
        f"select collection, run_id, loaded_at, chunks, model, dimensions from {SYNC} "
        "order by collection"
    ).fetchall()
    return [Collection(*row) for row in rows]


class CollectionNotLoaded(LookupError):
    """No collection, or not the one asked for, or several and none named, is loaded;
    `held` names those that are."""

    def __init__(self, message: str, held: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.held = held


def chosen_collection(conn: psycopg.Connection, collection: str | None, embedder: Embedder) -> str:
    """The collection a search reads: `collection`, else the only one loaded. Refused when
    it was embedded with another model than `embedder`'s: its vectors would not compare."""
    held = loaded_collections(conn)
    if not held:
        raise CollectionNotLoaded("the database holds no loaded run yet: load one first")
    loaded = tuple(c.name for c in held)
    names = ", ".join(loaded)
    if collection is None and len(held) > 1:
        raise CollectionNotLoaded(
            f"the database holds several collections ({names}): choose one (--collection)",
            loaded,
        )
    match = next((c for c in held if collection in (None, c.name)), None)
    if match is None:
        raise CollectionNotLoaded(
            f"collection {collection!r} is not loaded; loaded: {names}", loaded
        )
    if (match.model, match.dimensions) != (embedder.model, embedder.dimensions):
        raise CollectionNotLoaded(
            f"{match.name} was embedded with {match.model} ({match.dimensions} dimensions); "
            "search with the same embedder and model (--embedder, --model)",
            loaded,
        )
    return match.name
