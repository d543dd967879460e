"""The vector database: a published run loaded into Postgres + pgvector, and searched.

- `connect`: which database (`--db`, `FIRECHUNK_DB_URL`, else one embedded under the data
  directory) and a connection to it, its password never printed;
- `schema`: the chunks and sync tables, created and migrated by the loader;
- `runs`: the published run to load, read from its `chunks.json`;
- `load`: make the database hold exactly that run, in one transaction;
- `search`: hybrid search (vectors and full-text, fused by reciprocal rank).
"""
