"""The tables firechunk keeps in the database, created and migrated by the loader.

`firechunk_chunks`: one row per chunk of the loaded runs, keyed by chunk id (content-
addressed: uuid5 of the page URL and the text), with the fields a query filters or shows,
the whole chunk metadata as JSONB, the embedding (`vector(N)`, HNSW index, cosine) and a
generated `tsvector` (title weighted above text; GIN index) for full-text search.
`row_sha256` (the chunk's JSON row) and `embedded_sha256` (what was embedded) tell the
loader which rows changed and which need embedding again.

`firechunk_sync`: one row per site: the run the database holds, when it was loaded, the
embedding model and dimensions, and the counts of that load. The loader diffs against
what the chunks table holds, not against this row, so a skipped night heals.

`firechunk_schema`: the schema version; `migrate` brings an older database up to date.
"""

from __future__ import annotations

import psycopg

CHUNKS = "firechunk_chunks"
SYNC = "firechunk_sync"
SCHEMA_VERSION = 1

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
}


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
        [CHUNKS, "embedding"],
    ).fetchone()
    return int(row[0])


def set_dimensions(conn: psycopg.Connection, dimensions: int) -> None:
    """Give the embedding column new dimensions; only an empty chunks table can take them."""
    conn.execute(f"drop index if exists {CHUNKS}_embedding")
    conn.execute(f"alter table {CHUNKS} alter column embedding type vector({int(dimensions)})")
    conn.execute(
        f"create index {CHUNKS}_embedding on {CHUNKS} using hnsw (embedding vector_cosine_ops)"
    )
