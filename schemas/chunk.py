"""The chunk: the unit loaded into the vector database, and the one declaration of its row.

The JSON structure is fixed by the user (issue 2): keys may be added under `metadata`,
never removed or renamed. `Chunk.model_dump(by_alias=True)` produces exactly that shape.

Every other form of a chunk row is derived from these models: the Arrow schema of
`chunks.parquet` from the fields' types (`firechunk.schemas.parquet`), the columns of the
database table from the fields marked `Stored` (`firechunk.db.schema`), and the chunk
columns the expectation suites check from the fields marked `Checked`
(`firechunk.validate.tables`). A field added here reaches all of them (a new `Stored`
one also needs a migration that adds its column, `firechunk.db.schema`); `chunk_leaves`
walks the models for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)


@dataclass(frozen=True)
class Stored:
    """A field the database keeps in a column of its own of `firechunk_chunks`, named
    `column`; `sql`: its type when the field's Python type does not say it (a UUID kept
    in a str); `whole`: a text the chunker bounds, stored whole (any other string is cut
    at the loader's limit, `firechunk.db.runs.MAX_FIELD_CHARS`)."""

    column: str
    sql: str | None = None
    whole: bool = False


@dataclass(frozen=True)
class Checked:
    """A field the chunks suite reads as a column of its table, under its JSON key."""


@dataclass(frozen=True)
class OmittedWhenNull:
    """A field whose key the JSON leaves out when it is None, so rows made before the
    field existed keep their bytes (Parquet, whose rows all have every column, says null)."""


Marker = TypeVar("Marker", Stored, Checked, OmittedWhenNull)


class Headers(BaseModel):
    """The H1 and H2 in force at the chunk's first content line (clean text, no markdown)."""

    h1: Annotated[str | None, Stored("h1"), Checked()] = None
    h2: Annotated[str | None, Stored("h2"), Checked()] = None


class Overlap(BaseModel):
    """Context carried over from the previous chunk of the same page (not part of `text`)."""

    prev_chunk_id: str | None = None
    text: Annotated[str, Stored("overlap_text", whole=True)] = ""


class ChunkData(BaseModel):
    headers: Headers
    text: Annotated[str, Stored("text", whole=True)]
    overlap_text: Overlap = Field(default_factory=Overlap)


class AlsoOn(BaseModel):
    """Another page that holds this chunk's text (its copy was dropped as a repeat)."""

    url: str
    breadcrumb: list[str] = Field(default_factory=list)


class ChunkMetadata(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    token_count: Annotated[int, Stored("token_count"), Checked()]
    source_url: Annotated[str, Stored("url"), Checked()] = Field(alias="sourceUrl")
    page_title: Annotated[str, Stored("title"), Checked()]
    breadcrumb: Annotated[list[str], Stored("breadcrumb")] = Field(
        default_factory=list,
        description="The section that holds the whole chunk: the heading in force at its "
        "first line, or the common parent of the sections it holds.",
    )
    chunk_index: Annotated[int, Stored("chunk_index"), Checked()] = Field(
        description="Position of the chunk within its page, from 0."
    )
    source_lines: tuple[int, int] = Field(
        description="First and last line (1-based, inclusive) of the page markdown it came from."
    )
    aliases: list[str] = Field(
        default_factory=list, description="Other URLs that returned the same page."
    )
    sections: list[list[str]] = Field(
        default_factory=list,
        description="The heading path of every section the chunk holds text of, in order.",
    )
    also_on: list[AlsoOn] = Field(
        default_factory=list,
        description="Other pages whose copy of this text was dropped as a repeat.",
    )
    kind: Annotated[Literal["navigation"] | None, OmittedWhenNull()] = Field(
        default=None,
        description='"navigation": a link list of an index page, for search by words only, '
        "not embedded. Absent (never null) on content chunks, so their JSON is as it was.",
    )

    @model_serializer(mode="wrap")
    def _without_absent_optional(self, handler: SerializerFunctionWrapHandler) -> dict:
        """A field marked `OmittedWhenNull` has no key at all when it is None."""
        data = handler(self)
        for key in _omitted_keys(type(self)):
            if data.get(key, "") is None:
                del data[key]
        return data


class Chunk(BaseModel):
    chunk_id: Annotated[str, Stored("chunk_id", sql="uuid"), Checked()]
    metadata: ChunkMetadata
    data: ChunkData

    def to_json(self) -> dict:
        return self.model_dump(by_alias=True, mode="json")


@dataclass(frozen=True)
class Leaf:
    """A field of the chunk that holds a value, not an object of its own: where it is in
    the JSON row (`path`, its keys from the top), its attribute name, its Python type
    (`annotation`, e.g. `list[str]`, `int | None`), its markers (`Stored`, ...) and its
    default (None for a required field)."""

    path: tuple[str, ...]
    name: str
    annotation: Any
    markers: tuple[object, ...]
    default: Any = None

    @property
    def key(self) -> str:
        """Its key in the JSON row (a field's alias, else its name)."""
        return self.path[-1]

    def marker(self, kind: type[Marker]) -> Marker | None:
        """Its marker of type `kind`, or None."""
        return next((marker for marker in self.markers if isinstance(marker, kind)), None)

    def value_in(self, row: dict) -> Any:
        """Its value in a chunk's JSON row; its default where the row leaves it out."""
        value: Any = row
        for key in self.path:
            if not isinstance(value, dict) or key not in value:
                return self.default
            value = value[key]
        return value


def chunk_leaves(model: type[BaseModel] = Chunk, prefix: tuple[str, ...] = ()) -> list[Leaf]:
    """Every value field of `model`, nested models walked in field order (a list of models,
    `also_on`, is one value: the leaf's type says what it holds)."""
    leaves: list[Leaf] = []
    for name, field in model.model_fields.items():
        path = (*prefix, field.alias or name)
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            leaves.extend(chunk_leaves(field.annotation, path))
        else:
            default = None if field.is_required() else field.get_default(call_default_factory=True)
            leaves.append(Leaf(path, name, field.annotation, tuple(field.metadata), default))
    return leaves


@cache
def _omitted_keys(model: type[BaseModel]) -> tuple[str, ...]:
    return tuple(
        field.alias or name
        for name, field in model.model_fields.items()
        if any(isinstance(marker, OmittedWhenNull) for marker in field.metadata)
    )
