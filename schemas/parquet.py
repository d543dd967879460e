"""Arrow schemas of the Parquet outputs of a run (`chunks.parquet`, `pages.parquet`).

Both files are zstd-compressed and written with these explicit schemas, so a reader never
depends on type inference.

`chunks.parquet` mirrors the fixed chunk JSON (issue 2) with nested structs: one row per
chunk, the same keys as `chunks.json`, so reading a row back gives exactly the chunk's JSON
object (`pyarrow.parquet.read_table(...).to_pylist() == json.load(chunks.json)`), but for
the keys of `OMITTED_WHEN_NULL`: a chunk's JSON leaves them out rather than say null, and
Parquet, whose rows all have every column, says null.

Its schema is derived from the models of `schemas/chunk.py`, never written here: a nested
model is a struct, `str` a string, `int` an int32, `list[X]` a list, `tuple[X, X]` a
fixed-size list of 2, a `Literal` of strings a string, and a field that may be None a
nullable column (every other column is not nullable). For example `metadata.source_lines`
(`tuple[int, int]`) is `fixed_size_list<int32>[2]`, `metadata.also_on` (`list[AlsoOn]`)
`list<struct<url: string, breadcrumb: list<string>>>`, `data.headers.h1` a nullable string.

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

A field added to `PageRecord` must be added here too: `firechunk.run.write` refuses to write
rows whose keys differ from these schemas rather than drop a field silently.
"""

from __future__ import annotations

from types import UnionType
from typing import Any, Final, Literal, Union, get_args, get_origin

import pyarrow as pa
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from firechunk.schemas.chunk import Chunk, OmittedWhenNull, chunk_leaves

_TEXT_LIST = pa.list_(pa.string())

# The Arrow type of each Python type a chunk field holds (`arrow_type`).
_ARROW_TYPES: dict[Any, pa.DataType] = {str: pa.string(), int: pa.int32()}


def arrow_type(annotation: Any) -> pa.DataType:
    """The Arrow type of a field of Python type `annotation`, None aside (`arrow_field`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return pa.struct(model_fields(annotation))
    if annotation in _ARROW_TYPES:
        return _ARROW_TYPES[annotation]
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is list:
        return pa.list_(arrow_type(args[0]))
    if origin is tuple and len(set(args)) == 1:
        return pa.list_(arrow_type(args[0]), len(args))
    if origin is Literal and all(isinstance(value, str) for value in args):
        return pa.string()
    if origin in (Union, UnionType) and type(None) in args:
        (kept,) = [arg for arg in args if arg is not type(None)]
        return arrow_type(kept)
    raise TypeError(f"no Arrow type for {annotation!r}: add it to schemas/parquet.py")


def model_fields(model: type[BaseModel]) -> list[pa.Field]:
    """One Arrow field per field of `model`, by its JSON key, nullable when it may be None."""
    return [
        pa.field(field.alias or name, arrow_type(field.annotation), nullable=_may_be_none(field))
        for name, field in model.model_fields.items()
    ]


def _may_be_none(field: FieldInfo) -> bool:
    return get_origin(field.annotation) in (Union, UnionType) and type(None) in get_args(
        field.annotation
    )


CHUNKS_SCHEMA = pa.schema(model_fields(Chunk))

# How every Parquet file of a run is written, the validation tables too. Rows per row
# group: a writer holds a group's encoded pages until the group ends, so small groups keep
# writing flat (the 98,000-row headers table of a 20,000-page run took +23 MiB in one
# group, +8 in groups of 2,000).
PARQUET_COMPRESSION: Final = "zstd"
ROWS_PER_GROUP = 2000

# Nullable columns whose key a chunk's JSON leaves out when null (`OmittedWhenNull` in
# `schemas.chunk`): the JSON of a content chunk stays as it was before the field existed.
OMITTED_WHEN_NULL = frozenset(
    ".".join(leaf.path) for leaf in chunk_leaves() if leaf.marker(OmittedWhenNull)
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
