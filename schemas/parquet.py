"""Arrow schemas of the Parquet outputs of a run (`chunks.parquet`, `pages.parquet`).

Both files are zstd-compressed and written with these explicit schemas, so a reader never
depends on type inference.

`chunks.parquet` mirrors the fixed chunk JSON (issue 2) with nested structs: one row per
chunk, the same keys as `chunks.json`, so reading a row back gives exactly the chunk's JSON
object (`pyarrow.parquet.read_table(...).to_pylist() == json.load(chunks.json)`), but for
the keys of `OMITTED_WHEN_NULL`: a chunk's JSON leaves them out rather than say null, and
Parquet, whose rows all have every column, says null.

| column                          | Arrow type                | meaning                        |
|---------------------------------|---------------------------|--------------------------------|
| chunk_id                        | string                    | UUIDv5 of canonical URL + text |
| metadata.token_count            | int32                     | exact token count of data.text |
| metadata.sourceUrl              | string                    | page the chunk came from       |
| metadata.page_title             | string                    |                                |
| metadata.breadcrumb             | list<string>              | the section holding the chunk  |
| metadata.chunk_index            | int32                     | position in its page, from 0   |
| metadata.source_lines           | fixed_size_list<int32>[2] | first, last line in the page   |
| metadata.aliases                | list<string>              | other URLs of the same page    |
| metadata.sections               | list<list<string>>        | heading path of each section   |
| metadata.also_on                | list<struct<url, breadcrumb>> | pages whose copy was dropped |
| metadata.kind                   | string, nullable          | "navigation", null for content |
| data.headers.h1 / .h2           | string, nullable          | H1 / H2 at the first line      |
| data.text                       | string                    | the chunk's text               |
| data.overlap_text.prev_chunk_id | string, nullable          | previous chunk, same page      |
| data.overlap_text.text          | string                    | context carried over from it   |

`pages.parquet`: one row per crawled URL (a `schemas.report.PageRecord`), flat columns:

| column                | Arrow type                          | meaning                       |
|-----------------------|-------------------------------------|-------------------------------|
| url                   | string                              | URL as crawled                |
| canonical_url         | string                              | after canonicalisation        |
| page_title            | string                              |                               |
| status                | string                              | chunked / alias / quarantined |
| alias_of              | string, nullable                    | chunked URL, for an alias     |
| aliases               | list<string>                        | other URLs of the same page   |
| raw_hash              | string                              | sha256 of markdown as crawled |
| content_hash          | string                              | sha256 after clean-up         |
| tokens_before_cleanup | int32                               |                               |
| tokens_after_cleanup  | int32                               |                               |
| chunk_count           | int32                               | chunks kept for the page      |
| chunk_tokens          | int32                               | sum of their token counts     |
| headings              | list<struct<level, text, line>>     | every H1/H2 of the page       |
| quarantine_reason     | string, nullable                    |                               |

`headings` items: level int8, text string, line int32 (1-based line in the crawled page).

A field added to `Chunk` or `PageRecord` must be added here too: `firechunk.run.write` refuses
to write rows whose keys differ from these schemas rather than drop a field silently.
"""

from __future__ import annotations

import pyarrow as pa

_TEXT_LIST = pa.list_(pa.string())

# Nullable columns whose key a chunk's JSON leaves out when null (`schemas.chunk`): the
# JSON of a content chunk stays as it was before the field existed.
OMITTED_WHEN_NULL = frozenset({"metadata.kind"})

CHUNKS_SCHEMA = pa.schema(
    [
        pa.field("chunk_id", pa.string(), nullable=False),
        pa.field(
            "metadata",
            pa.struct(
                [
                    pa.field("token_count", pa.int32(), nullable=False),
                    pa.field("sourceUrl", pa.string(), nullable=False),
                    pa.field("page_title", pa.string(), nullable=False),
                    pa.field("breadcrumb", _TEXT_LIST, nullable=False),
                    pa.field("chunk_index", pa.int32(), nullable=False),
                    pa.field("source_lines", pa.list_(pa.int32(), 2), nullable=False),
                    pa.field("aliases", _TEXT_LIST, nullable=False),
                    pa.field("sections", pa.list_(_TEXT_LIST), nullable=False),
                    pa.field(
                        "also_on",
                        pa.list_(
                            pa.struct(
                                [
                                    pa.field("url", pa.string(), nullable=False),
                                    pa.field("breadcrumb", _TEXT_LIST, nullable=False),
                                ]
                            )
                        ),
                        nullable=False,
                    ),
                    pa.field("kind", pa.string()),
                ]
            ),
            nullable=False,
        ),
        pa.field(
            "data",
            pa.struct(
                [
                    pa.field(
                        "headers",
                        pa.struct([pa.field("h1", pa.string()), pa.field("h2", pa.string())]),
                        nullable=False,
                    ),
                    pa.field("text", pa.string(), nullable=False),
                    pa.field(
                        "overlap_text",
                        pa.struct(
                            [
                                pa.field("prev_chunk_id", pa.string()),
                                pa.field("text", pa.string(), nullable=False),
                            ]
                        ),
                        nullable=False,
                    ),
                ]
            ),
            nullable=False,
        ),
    ]
)

PAGES_SCHEMA = pa.schema(
    [
        pa.field("url", pa.string(), nullable=False),
        pa.field("canonical_url", pa.string(), nullable=False),
        pa.field("page_title", pa.string(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("alias_of", pa.string()),
        pa.field("aliases", _TEXT_LIST, nullable=False),
        pa.field("raw_hash", pa.string(), nullable=False),
        pa.field("content_hash", pa.string(), nullable=False),
        pa.field("tokens_before_cleanup", pa.int32(), nullable=False),
        pa.field("tokens_after_cleanup", pa.int32(), nullable=False),
        pa.field("chunk_count", pa.int32(), nullable=False),
        pa.field("chunk_tokens", pa.int32(), nullable=False),
        pa.field(
            "headings",
            pa.list_(
                pa.struct(
                    [
                        pa.field("level", pa.int8(), nullable=False),
                        pa.field("text", pa.string(), nullable=False),
                        pa.field("line", pa.int32(), nullable=False),
                    ]
                )
            ),
            nullable=False,
        ),
        pa.field("quarantine_reason", pa.string()),
    ]
)
