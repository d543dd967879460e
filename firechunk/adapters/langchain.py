"""firechunk as a LangChain text splitter and document transformer (extra `langchain`).

`FirechunkSplitter().split_documents(docs)` (or `transform_documents`) chunks each document
as one page with `firechunk.chunk_markdown`, its URL and title from its metadata: the same
chunks, ids and overlaps as `firechunk chunk`. A document loaded from a file (`source` a
path) is chunked too, its ids from its text. With `whole_crawl=True` the documents are one
crawl (`firechunk.chunk_crawl`): site chrome removed, aliases and repeated chunks dropped,
pages without a URL left out (with a `DocumentNotChunked` warning).

A chunk keeps its document's metadata and adds:
- one key per heading level above it, "Header 1", "Header 2", ..., as
  `MarkdownHeaderTextSplitter` names them, and `breadcrumb` ("Auth > Login");
- `url`, `title`, `chunk_id` (also the document's id), `chunk_index`, `token_count`;
- `prev_chunk_id` and `overlap_text`: the previous chunk's last heading and sentence,
  firechunk's overlap, kept beside the text rather than repeated in it;
- with `add_start_index=True`, `start_index`: where the chunk starts in its document's text
  (`firechunk.adapters.positions`: the chunk is cleaned markdown, so not a verbatim slice).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langchain_core.documents import Document
from langchain_text_splitters import TextSplitter

from firechunk import ChunkConfig
from firechunk.adapters import Cut, breadcrumb_text, config_for, cut_documents, header_keys


class FirechunkSplitter(TextSplitter):
    """A `TextSplitter` whose chunks are firechunk's, sized by `config` in its tokens.

    `chunk_size`, as LangChain's splitters take it, is firechunk's hard limit in tokens
    (the soft and minimum limits follow it down); give it or `config`, not both.
    `chunk_overlap` is accepted as LangChain checks it, but firechunk's overlap is its own:
    the previous chunk's last heading and sentence, in `overlap_text`, not in the text."""

    def __init__(
        self,
        config: ChunkConfig | None = None,
        *,
        whole_crawl: bool = False,
        chunk_size: int | None = None,
        chunk_overlap: int = 0,
        **kwargs: Any,
    ) -> None:
        self.config = config_for(config, chunk_size)
        super().__init__(chunk_size=self.config.hard_tokens, chunk_overlap=chunk_overlap, **kwargs)
        self.whole_crawl = whole_crawl

    def split_text(self, text: str) -> list[str]:
        return [cut.chunk.data.text for cut in cut_documents([(text, {})], self.config, False)]

    def create_documents(
        self, texts: list[str], metadatas: list[dict[Any, Any]] | None = None
    ) -> list[Document]:
        """Each text as a page, its chunks with their ids and metadata (as `split_documents`)."""
        metadatas = metadatas or [{} for _ in texts]
        docs = [Document(text, metadata=meta) for text, meta in zip(texts, metadatas, strict=True)]
        return self.split_documents(docs)

    def split_documents(self, documents: Iterable[Document]) -> list[Document]:
        documents = list(documents)
        given = [(doc.page_content, doc.metadata) for doc in documents]
        cuts = cut_documents(given, self.config, self.whole_crawl)
        return [self._document(cut, documents[cut.document].metadata) for cut in cuts]

    def _document(self, cut: Cut, metadata: dict) -> Document:
        """A chunk as a LangChain document, after its source document's `metadata`."""
        chunk = cut.chunk
        meta, overlap = chunk.metadata, chunk.data.overlap_text
        added: dict[str, Any] = {
            **header_keys(cut.header_levels),
            "url": meta.source_url,
            "title": meta.page_title,
            "breadcrumb": breadcrumb_text(meta.breadcrumb),
            "chunk_id": chunk.chunk_id,
            "chunk_index": meta.chunk_index,
            "token_count": meta.token_count,
            "prev_chunk_id": overlap.prev_chunk_id,
            "overlap_text": overlap.text,
        }
        if self._add_start_index:
            added["start_index"] = cut.span.start
        return Document(
            id=chunk.chunk_id, page_content=chunk.data.text, metadata={**metadata, **added}
        )
