"""firechunk as a LangChain text splitter and document transformer (extra `langchain`).

`FirechunkSplitter().split_documents(docs)` (or `transform_documents`) chunks each document
as one page with `firechunk.chunk_markdown`, its URL and title from its metadata: the same
chunks, ids and overlaps as `firechunk chunk`. A chunk keeps its document's metadata and
adds `url`, `title`, `breadcrumb`, `chunk_id`, `chunk_index`, `token_count`, `prev_chunk_id`
and `overlap_text` (the previous chunk's last heading and sentence, not in the text). With
`whole_crawl=True` the documents are one crawl (`firechunk.chunk_crawl`): site chrome
removed, aliases and repeated chunks dropped, pages without a URL quarantined.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langchain_core.documents import Document
from langchain_text_splitters import TextSplitter

from firechunk import Chunk, ChunkConfig, chunk_crawl
from firechunk.adapters import breadcrumb_text, page_chunks, url_of


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
        if config is not None and chunk_size is not None:
            raise ValueError("give chunk_size or config, not both (config.hard_tokens is it)")
        self.config = config or (
            ChunkConfig(hard_tokens=chunk_size) if chunk_size is not None else ChunkConfig()
        )
        super().__init__(chunk_size=self.config.hard_tokens, chunk_overlap=chunk_overlap, **kwargs)
        self.whole_crawl = whole_crawl

    def split_text(self, text: str) -> list[str]:
        return [chunk.data.text for chunk in page_chunks(text, {}, self.config)]

    def create_documents(
        self, texts: list[str], metadatas: list[dict[Any, Any]] | None = None
    ) -> list[Document]:
        """Each text as a page, its chunks with their ids and metadata (as `split_documents`)."""
        metadatas = metadatas or [{} for _ in texts]
        docs = [Document(text, metadata=meta) for text, meta in zip(texts, metadatas, strict=True)]
        return self.split_documents(docs)

    def split_documents(self, documents: Iterable[Document]) -> list[Document]:
        documents = list(documents)
        if self.whole_crawl:
            pages = [
                {"markdown": doc.page_content, "metadata": {**doc.metadata, "sourceURL": url}}
                for doc in documents
                for url in [url_of(doc.metadata)]
            ]
            return [document(chunk) for chunk in chunk_crawl(pages, config=self.config).chunks]
        return [
            document(chunk, doc.metadata)
            for doc in documents
            for chunk in page_chunks(doc.page_content, doc.metadata, self.config)
        ]


def document(chunk: Chunk, metadata: dict | None = None) -> Document:
    """A chunk as a LangChain document, after its page's `metadata`."""
    meta, overlap = chunk.metadata, chunk.data.overlap_text
    added = {
        "url": meta.source_url,
        "title": meta.page_title,
        "breadcrumb": breadcrumb_text(meta.breadcrumb),
        "chunk_id": chunk.chunk_id,
        "chunk_index": meta.chunk_index,
        "token_count": meta.token_count,
        "prev_chunk_id": overlap.prev_chunk_id,
        "overlap_text": overlap.text,
    }
    return Document(
        id=chunk.chunk_id, page_content=chunk.data.text, metadata={**(metadata or {}), **added}
    )
