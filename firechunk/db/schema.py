"""The tables firechunk keeps in the database, created and migrated by the loader.

A database holds several *collections* (doc sets: a site's guides, its reference, another
product's docs), each loaded from its own data directory and owning its rows: a load
diffs, deletes and guards only within its collection, and two collections may hold the
same chunk.

`firechunk_chunks`: one row per chunk of each collection, keyed by (collection, chunk id);
the id is content-addressed (uuid5 of the page URL and the text). It holds the fields a
query filters or shows, the whole chunk metadata as JSONB, the breadcrumb as one line
(`heading`), and a generated `tsvector` (title weighted A, heading B, then the text, each
bounded so no row exceeds Postgres's tsvector limit; GIN index) that full-text search
ranks by BM25 (`firechunk.db.search`). `row_sha256` (the chunk's JSON row) and
`embedded_sha256` (what was embedded) tell the loader which rows changed and which need
embedding again.

`firechunk_vectors`: a chunk's embeddings (`vector(N)`, HNSW index, cosine), one per
window of the text the embedder reads whole (`Embedder.windows`): a chunk longer than
the model's window is still found by its last paragraph. Deleted with their chunk.

`firechunk_sync`: one row per collection: the run it holds and when that run started (a
load never replaces it with an older run unasked), when it was loaded, the embedding model
and dimensions, and the counts of that load. The loader diffs against what the chunks
table holds, not against this row, so a skipped night heals.

`firechunk_terms` and `firechunk_sizes`: what BM25 needs of the whole collection, kept as
the chunks change so a search does not count it: per lexeme of the full-text column, the
number of the collection's chunks holding it (its document frequency); per collection, the
number of chunks and the sum of their token counts (the mean length). Triggers on
`firechunk_chunks` keep them, once per statement, inside the statement's transaction: a
load's COPY, updates and deletes, a rename, a collection cleared for re-embedding, even a
hand edit. `TERMS_FROM_CHUNKS` and `SIZES_FROM_CHUNKS` compute them from scratch.

`firechunk_schema`: the schema version; `migrate` brings an older database up to date.
Version 2 turned version 1's `site` into the collection: its rows stay under their site;
version 3 added the term statistics, computed from the rows held.

The columns a load writes into `firechunk_chunks` are declared once, in `CHUNKS_COLUMNS`:
the chunk's fields marked `Stored` in `schemas/chunk.py` (their SQL type from their Python
type), then the loader's own. The migrations are what they were when each version was
made, never edited; a field newly marked `Stored` needs a migration that adds its column,
and `tests/test_database.py` holds the migrated table to `CHUNKS_COLUMNS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, get_args, get_origin

import psycopg

from firechunk.schemas.chunk import Stored, chunk_leaves

CHUNKS = "firechunk_chunks"
VECTORS = "firechunk_vectors"
SYNC = "firechunk_sync"
TERMS = "firechunk_terms"
SIZES = "firechunk_sizes"
SCHEMA_VERSION = 3
# The longest title and text the full-text column reads: a tsvector holds at most 1 MB.
FTS_TITLE_CHARS = 2_000
FTS_TEXT_CHARS = 200_000


@dataclass(frozen=True)
class Column:
    """A column of `firechunk_chunks` a load writes: its name and its type as COPY and
    the table spell it (`text`, `int4`, `text[]`, `uuid`, `jsonb`)."""

    name: str
    sql: str


# The SQL type of each Python type a stored chunk field holds (None aside: `_sql_type`).
_SQL_TYPES: dict[Any, str] = {str: "text", int: "int4", list[str]: "text[]"}


def _sql_type(annotation: Any) -> str:
    if get_origin(annotation) is not None and type(None) in get_args(annotation):
        (annotation,) = [arg for arg in get_args(annotation) if arg is not type(None)]
    return _SQL_TYPES[annotation]


def stored_columns() -> list[Column]:
    """The chunk's fields kept in columns of their own, in the chunk's field order."""
    columns = []
    for leaf in chunk_leaves():
        stored = leaf.marker(Stored)
        if stored is not None:
            columns.append(Column(stored.column, stored.sql or _sql_type(leaf.annotation)))
    return columns


# What the loader adds to a chunk's fields: its collection, its breadcrumb as one line
# (`heading`, which full-text search weighs), the whole metadata as JSONB, and the hashes
# that tell which rows changed and which need embedding again.
LOADER_COLUMNS = (
    Column("collection", "text"),
    Column("heading", "text"),
    Column("metadata", "jsonb"),
    Column("row_sha256", "text"),
    Column("embedded_sha256", "text"),
)
CHUNKS_COLUMNS: tuple[Column, ...] = (*stored_columns(), *LOADER_COLUMNS)


# The term statistics computed from scratch from the chunks held: what the migration fills
# the tables with, and what tests hold the kept ones to.
TERMS_FROM_CHUNKS = f"""select collection, lexeme, count(*) from {CHUNKS},
    unnest(tsvector_to_array(fts)) lexeme group by collection, lexeme"""
SIZES_FROM_CHUNKS = f"""select collection, count(*), coalesce(sum(token_count), 0) from {CHUNKS}
    group by collection"""
# The statistics of the chunks a statement inserted (`new_rows`) minus those of the chunks it
# deleted or replaced (`old_rows`), added to `firechunk_terms` and `firechunk_sizes`; rows
# brought to zero are dropped, so the tables hold exactly what the chunks do.
_COUNT_TERMS = f"""
create function firechunk_count_terms() returns trigger language plpgsql as $body$
begin
    create temporary table firechunk_changed (
        collection text, lexeme text, chunks bigint, tokens bigint
    ) on commit drop;
    if tg_op in ('INSERT', 'UPDATE') then
        insert into firechunk_changed
        select collection, unnest(tsvector_to_array(fts)), 1, 0 from new_rows
        union all select collection, null, 1, token_count from new_rows;
    end if;
    if tg_op in ('UPDATE', 'DELETE') then
        insert into firechunk_changed
        select collection, unnest(tsvector_to_array(fts)), -1, 0 from old_rows
        union all select collection, null, -1, -token_count from old_rows;
    end if;
    insert into {TERMS} as t (collection, lexeme, chunks)
    select collection, lexeme, sum(chunks) from firechunk_changed
    where lexeme is not null group by collection, lexeme having sum(chunks) <> 0
    on conflict (collection, lexeme) do update set chunks = t.chunks + excluded.chunks;
    insert into {SIZES} as s (collection, chunks, tokens)
    select collection, sum(chunks), sum(tokens) from firechunk_changed
    where lexeme is null group by collection
    on conflict (collection) do update
    set chunks = s.chunks + excluded.chunks, tokens = s.tokens + excluded.tokens;
    delete from {TERMS} t using (
        select distinct collection, lexeme from firechunk_changed where chunks < 0
    ) gone
    where t.collection = gone.collection and t.lexeme = gone.lexeme and t.chunks = 0;
    delete from {SIZES} where chunks = 0;
    drop table firechunk_changed;
    return null;
end
$body$"""
_TERM_TRIGGERS = [
    f"""create trigger {CHUNKS}_{event}_terms after {event} on {CHUNKS}
    referencing {transition} for each statement execute function firechunk_count_terms()"""
    for event, transition in (
        ("insert", "new table as new_rows"),
        ("update", "old table as old_rows new table as new_rows"),
        ("delete", "old table as old_rows"),
    )
]

_MIGRATIONS: dict[int, list[str]] = {
    1: [
        f"""create table {SYNC} (
            site text primary key,
            run_id text not null,
            loaded_at timestamptz not null,
            model text not null,
            dimensions integer not null,
            chunks integer not null,
            inserted integer not null,
            updated integer not null,
            deleted integer not null,
            embedded integer not null,
            seconds double precision not null
        )""",
        f"""create table {CHUNKS} (
            chunk_id uuid primary key,
            site text not null,
            url text not null,
            title text not null,
            h1 text,
            h2 text,
            breadcrumb text[] not null,
            text text not null,
            token_count integer not null,
            chunk_index integer not null,
            overlap_text text not null,
            metadata jsonb not null,
            row_sha256 text not null,
            embedded_sha256 text not null,
            embedding vector({{dimensions}}) not null,
            fts tsvector generated always as (
                setweight(to_tsvector('english', title), 'A') || to_tsvector('english', text)
            ) stored
        )""",
        f"create index {CHUNKS}_site on {CHUNKS} (site)",
        f"create index {CHUNKS}_embedding on {CHUNKS} using hnsw (embedding vector_cosine_ops)",
        f"create index {CHUNKS}_fts on {CHUNKS} using gin (fts)",
    ],
    2: [
        f"alter table {CHUNKS} rename column site to collection",
        f"alter table {CHUNKS} drop constraint {CHUNKS}_pkey",
        f"alter table {CHUNKS} add primary key (collection, chunk_id)",
        f"drop index {CHUNKS}_site",
        f"alter table {CHUNKS} add column heading text not null default ''",
        f"alter table {CHUNKS} drop column fts",
        f"""alter table {CHUNKS} add column fts tsvector generated always as (
            setweight(to_tsvector('english', left(title, {FTS_TITLE_CHARS})), 'A')
            || setweight(to_tsvector('english', left(heading, {FTS_TITLE_CHARS})), 'B')
            || to_tsvector('english', left(text, {FTS_TEXT_CHARS}))
        ) stored""",
        f"create index {CHUNKS}_fts on {CHUNKS} using gin (fts)",
        f"""create table {VECTORS} (
            collection text not null,
            chunk_id uuid not null,
            window_index smallint not null,
            embedding vector({{dimensions}}) not null,
            primary key (collection, chunk_id, window_index),
            foreign key (collection, chunk_id) references {CHUNKS}
                on delete cascade on update cascade
        )""",
        f"insert into {VECTORS} select collection, chunk_id, 0, embedding from {CHUNKS}",
        f"alter table {CHUNKS} drop column embedding",
        f"create index {VECTORS}_embedding on {VECTORS} using hnsw (embedding vector_cosine_ops)",
        f"alter table {SYNC} rename column site to collection",
        f"alter table {SYNC} add column run_started timestamptz",
    ],
    3: [
        f"""create table {TERMS} (
            collection text not null,
            lexeme text not null,
            chunks integer not null,
            primary key (collection, lexeme)
        )""",
        f"""create table {SIZES} (
            collection text primary key,
            chunks bigint not null,
            tokens bigint not null
        )""",
        f"insert into {TERMS} {TERMS_FROM_CHUNKS}",
        f"insert into {SIZES} {SIZES_FROM_CHUNKS}",
        _COUNT_TERMS,
        *_TERM_TRIGGERS,
    ],
}


def has_tables(conn: psycopg.Connection) -> bool:
    """Whether the database has firechunk's tables: none before the first load."""
    row = conn.execute("select to_regclass(%s)", [SYNC]).fetchone()
    return row is not None and row[0] is not None


def migrate(conn: psycopg.Connection, dimensions: int) -> None:
    """Create the tables, or bring them to `SCHEMA_VERSION`; inside the caller's
    transaction, so a failed migration leaves the database as it was."""
    conn.execute("create table if not exists firechunk_schema (version integer not null)")
    row = conn.execute("select max(version) from firechunk_schema").fetchone()
    version = row[0] if row and row[0] is not None else 0
    for step in range(version + 1, SCHEMA_VERSION + 1):
        for statement in _MIGRATIONS[step]:
            conn.execute(statement.replace("{dimensions}", str(int(dimensions))))
        conn.execute("insert into firechunk_schema (version) values (%s)", [step])


def column_dimensions(conn: psycopg.Connection) -> int:
    """The dimensions of the embedding column (pgvector keeps them as the type modifier)."""
    row = conn.execute(
        "select atttypmod from pg_attribute where attrelid = %s::regclass and attname = %s",
        [VECTORS, "embedding"],
    ).fetchone()
    if row is None:
        raise LookupError(f"{VECTORS} has no embedding column")
    return int(row[0])


def set_dimensions(conn: psycopg.Connection, dimensions: int) -> None:
    """Give the embedding column new dimensions; only an empty vectors table can take them."""
    conn.execute(f"drop index if exists {VECTORS}_embedding")
    conn.execute(f"alter table {VECTORS} alter column embedding type vector({int(dimensions)})")
    conn.execute(
        f"create index {VECTORS}_embedding on {VECTORS} using hnsw (embedding vector_cosine_ops)"
    )
