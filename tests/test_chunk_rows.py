"""A page's chunk rows: the dropping rule, ids and overlap links both ways of running use."""

from __future__ import annotations

import uuid

from firechunk.chunker.page import DraftChunk, content_hash
from firechunk.run.rows import CHUNK_NAMESPACE, chunk_id, page_chunks
from firechunk.schemas.chunk import Chunk

URL = "https://example.com/docs/page"


def draft(text: str, overlap: str = "") -> DraftChunk:
    return DraftChunk(
        text=text,
        tokens=len(text.split()),
        h1="Page",
        h2=None,
        breadcrumb=["Page"],
        sections=[["Page"]],
        source_lines=(1, 2),
        overlap=overlap,
    )


def rows_of(drafts: list[DraftChunk], seen: dict[str, str] | None = None):
    hashes = [content_hash(d.text) for d in drafts]
    repeats, chunks = page_chunks(
        URL, "Title", drafts, hashes, ["https://example.com/alias"], seen or {}
    )
    return repeats, [chunk.to_json() for chunk in chunks]


def test_rows_are_the_chunk_model_s_json_with_uuid5_ids():
    drafts = [draft("First part.", overlap="part."), draft("Second part.")]

    repeats, rows = rows_of(drafts)

    assert repeats == [None, None]
    assert [Chunk.model_validate(row).to_json() for row in rows] == rows
    assert rows[0]["chunk_id"] == str(uuid.uuid5(CHUNK_NAMESPACE, f"{URL}\nFirst part."))
    assert [row["metadata"]["chunk_index"] for row in rows] == [0, 1]
    assert rows[1]["data"]["overlap_text"] == {
        "prev_chunk_id": rows[0]["chunk_id"],
        "text": "part.",
    }
    assert rows[0]["data"]["overlap_text"] == {"prev_chunk_id": None, "text": ""}


def test_a_repeat_on_the_same_page_is_dropped_and_the_next_chunk_links_past_it():
    drafts = [draft("Intro text.", overlap="text."), draft("Intro\n  text."), draft("Body.")]

    repeats, rows = rows_of(drafts)

    kept_id = chunk_id(URL, "Intro text.")
    assert repeats == [None, kept_id, None]  # normalised text: white space does not matter
    assert [row["data"]["text"] for row in rows] == ["Intro text.", "Body."]
    assert rows[1]["metadata"]["chunk_index"] == 1
    assert rows[1]["data"]["overlap_text"] == {"prev_chunk_id": kept_id, "text": "text."}


def test_a_repeat_of_an_earlier_page_points_at_that_page_s_chunk():
    seen = {content_hash("Shared section."): "id-on-an-earlier-page"}

    repeats, rows = rows_of([draft("Shared section."), draft("Own text.")], seen)

    assert repeats == ["id-on-an-earlier-page", None]
    assert [row["data"]["text"] for row in rows] == ["Own text."]
    assert rows[0]["data"]["overlap_text"]["prev_chunk_id"] is None
    assert seen == {content_hash("Shared section."): "id-on-an-earlier-page"}  # not changed
