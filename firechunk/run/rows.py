"""A chunked page's rows: which of its drafts are kept, their ids, and each kept chunk's JSON.

`firechunk.run.assemble` builds every run's rows with these. A row is the chunk's JSON object
exactly as `schemas.chunk.Chunk.to_json()` gives it: the model makes it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from firechunk.chunker.page import DraftChunk
from firechunk.schemas.chunk import AlsoOn, Chunk, ChunkData, ChunkMetadata, Headers, Overlap
from firechunk.schemas.report import DuplicateChunk

# Fixed forever: changing it would change every chunk id.
CHUNK_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/firechunk/chunk-id")


def chunk_id(url: str, text: str) -> str:
    """uuid5 of the page's canonical URL and the chunk's text: the same input, the same id."""
    return str(uuid.uuid5(CHUNK_NAMESPACE, f"{url}\n{text}"))


def repeats_of(
    text_hashes: list[str], seen: dict[str, str], id_of: Callable[[int], str]
) -> tuple[list[str | None], list[str]]:
    """The run's dropping rule for one page's drafts: a draft repeats a chunk kept before it
    if its text hash is in `seen` (earlier pages: text hash -> chunk id) or is an earlier
    kept draft's of the same page. Return, per draft, the id of the chunk it repeats (None:
    kept), and the ids of the kept drafts, `id_of(position)` for each."""
    own: dict[str, str] = {}
    repeats: list[str | None] = []
    for position, text_hash in enumerate(text_hashes):
        earlier = seen.get(text_hash) or own.get(text_hash)
        if earlier is None:
            own[text_hash] = id_of(position)
        repeats.append(earlier)
    return repeats, list(own.values())


def page_chunks(
    url: str,
    title: str,
    drafts: Sequence[DraftChunk],
    text_hashes: list[str],
    aliases: list[str],
    seen: dict[str, str],
    *,
    cited: list[str] | None = None,
    also_on: dict[str, list[dict[str, Any]]] | None = None,
) -> tuple[list[str | None], list[Chunk]]:
    """The chunks of a page's kept drafts, in order, and per draft what it repeats
    (`repeats_of`). `url` is the page's canonical URL; `seen` is not changed. `cited` is
    the URL each draft cites (`firechunk.run.citations`, default `url`); `also_on` gives,
    by text hash, the other pages whose copy of a draft's text is dropped."""
    repeats, kept_ids = repeats_of(
        text_hashes, seen, lambda position: chunk_id(url, drafts[position].text)
    )
    cited = cited or [url] * len(drafts)
    kept = [
        (draft, cited[position], (also_on or {}).get(text_hashes[position], []))
        for position, (draft, earlier) in enumerate(zip(drafts, repeats, strict=True))
        if earlier is None
    ]
    chunks = []
    for index, (kept_id, (draft, source_url, also)) in enumerate(zip(kept_ids, kept, strict=True)):
        others = [other for other in dict.fromkeys([url, *aliases]) if other != source_url]
        previous = (kept_ids[index - 1], kept[index - 1][0]) if index else None
        chunks.append(
            chunk_model(kept_id, draft, source_url, title, index, others, previous, also_on=also)
        )
    return repeats, chunks


def duplicates_of(url: str, repeats: list[str | None], tokens: list[int]) -> list[DuplicateChunk]:
    """The report's entries for a page's dropped drafts (`repeats`, from `page_chunks`);
    `tokens` are the drafts' token counts."""
    return [
        DuplicateChunk(
            source_url=url,
            chunk_index=position,
            duplicate_of=earlier,
            token_count=tokens[position],
        )
        for position, earlier in enumerate(repeats)
        if earlier is not None
    ]


def chunk_model(
    row_id: str,
    draft: DraftChunk,
    url: str,
    title: str,
    index: int,
    aliases: list[str],
    previous: tuple[str, DraftChunk] | None,
    *,
    also_on: Sequence[dict[str, Any]] = (),
) -> Chunk:
    """The chunk (`schemas.chunk.Chunk`); `previous` is the kept chunk before it on its
    page (its id and draft), whose overlap text this chunk carries; `url` is the URL it
    cites."""
    return Chunk(
        chunk_id=row_id,
        metadata=ChunkMetadata(
            token_count=draft.tokens,
            source_url=url,
            page_title=title,
            breadcrumb=list(draft.breadcrumb),
            chunk_index=index,
            source_lines=draft.source_lines,
            aliases=list(aliases),
            sections=[list(path) for path in draft.sections],
            also_on=[AlsoOn.model_validate(entry) for entry in also_on],
            kind=draft.kind,
        ),
        data=ChunkData(
            headers=Headers(h1=draft.h1, h2=draft.h2),
            text=draft.text,
            overlap_text=Overlap(
                prev_chunk_id=previous[0] if previous else None,
                text=previous[1].overlap if previous else "",
            ),
        ),
    )
