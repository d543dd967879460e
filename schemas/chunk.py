"""The chunk: the unit loaded into the vector database.

The JSON structure is fixed by the user (issue 2): keys may be added under `metadata`,
never removed or renamed. `Chunk.model_dump(by_alias=True)` produces exactly that shape.
"""

from __future__ import annotations

from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)


class Headers(BaseModel):
    """The H1 and H2 in force at the chunk's first content line (clean text, no markdown)."""

    h1: str | None = None
    h2: str | None = None


class Overlap(BaseModel):
    """Context carried over from the previous chunk of the same page (not part of `text`)."""

    prev_chunk_id: str | None = None
    text: str = ""


class ChunkData(BaseModel):
    headers: Headers
    text: str
    overlap_text: Overlap = Field(default_factory=Overlap)


class AlsoOn(BaseModel):
    """Another page that holds this chunk's text (its copy was dropped as a repeat)."""

    url: str
    breadcrumb: list[str] = Field(default_factory=list)


class ChunkMetadata(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    token_count: int
    source_url: str = Field(alias="sourceUrl")
    page_title: str
    breadcrumb: list[str] = Field(
        default_factory=list,
        description="The section that holds the whole chunk: the heading in force at its "
        "first line, or the common parent of the sections it holds.",
    )
    chunk_index: int = Field(description="Position of the chunk within its page, from 0.")
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
    kind: Literal["navigation"] | None = Field(
        default=None,
        description='"navigation": a link list of an index page, for search by words only, '
        "not embedded. Absent (never null) on content chunks, so their JSON is as it was.",
    )

    @model_serializer(mode="wrap")
    def _without_absent_kind(self, handler: SerializerFunctionWrapHandler) -> dict:
        """A content chunk's metadata has no `kind` key at all."""
        data = handler(self)
        if data.get("kind") is None:
            data.pop("kind", None)
        return data


class Chunk(BaseModel):
    chunk_id: str
    metadata: ChunkMetadata
    data: ChunkData

    def to_json(self) -> dict:
        return self.model_dump(by_alias=True, mode="json")
