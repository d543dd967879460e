"""firechunk's chunks in the shapes of other frameworks, each an optional extra:
`firechunk.adapters.langchain` (pip extra `langchain`) and `firechunk.adapters.llamaindex`
(extra `llamaindex`). Both are thin: they call `firechunk.chunk_markdown` (a document is a
page) or `firechunk.chunk_crawl` (`whole_crawl=True`: the documents are one crawl), and
turn each chunk into the framework's object with what this module gives it: the chunk's
document, its offsets in that document's text and its headings by level
(`firechunk.adapters.positions`).

A document firechunk will not chunk (binary, HTML, only headings; an empty one gives no
chunks, as in any splitter) is not dropped in silence: it raises a `DocumentNotChunked`
warning, Python's way of saying "skipped, and why" that both frameworks use.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from firechunk import Chunk, ChunkConfig, PageRejected, chunk_crawl, chunk_markdown
from firechunk.adapters.positions import SourcePage, Span
from firechunk.urls import canonical_url

# Where a page's URL is in a document's metadata: Firecrawl's loaders keep its `sourceURL`
# (and `url`); LangChain's other loaders name it `source`.
URL_KEYS = ("sourceURL", "url", "source")


class DocumentNotChunked(UserWarning):
    """A document gave no chunks though it has text (the message says which, and why)."""


@dataclass(frozen=True)
class Cut:
    """A chunk, the document it was cut from (its index in the list given) and where."""

    chunk: Chunk
    document: int
    span: Span
    header_levels: Mapping[int, str]


def config_for(config: ChunkConfig | None, chunk_size: int | None) -> ChunkConfig:
    """The chunker's settings from a framework's `chunk_size` (firechunk's hard limit, the
    soft and minimum limits follow it down) or a whole `ChunkConfig`; not both."""
    if config is not None and chunk_size is not None:
        raise ValueError("give chunk_size or config, not both (config.hard_tokens is it)")
    if config is not None:
        return config
    return ChunkConfig(hard_tokens=chunk_size) if chunk_size is not None else ChunkConfig()


def url_of(metadata: Mapping[str, Any]) -> str | None:
    """The page URL a document's metadata gives, if any. A `source` that is a file path (as
    LangChain's TextLoader and DirectoryLoader give) is no URL: the page is chunked without
    one, its ids from its text alone, and the path stays in the chunk's metadata."""
    values = (str(metadata[key]) for key in URL_KEYS if metadata.get(key))
    return next((value for value in values if value.startswith(("http://", "https://"))), None)


def cut_documents(
    documents: Sequence[tuple[str, Mapping[str, Any]]], config: ChunkConfig, whole_crawl: bool
) -> list[Cut]:
    """The chunks of `documents` (text and metadata each), in order, with their places."""
    sources = [SourcePage(text) for text, _ in documents]
    chunked = _crawl_chunks(documents, config) if whole_crawl else _page_chunks(documents, config)
    cuts: list[Cut] = []
    previous: dict[int, int] = {}  # document -> the last chunk's start in it
    for index, chunk in chunked:
        source = sources[index]
        span = source.span(chunk, after=previous.get(index, -1) + 1)
        previous[index] = span.start
        cuts.append(Cut(chunk, index, span, source.header_levels(chunk)))
    return cuts


def _page_chunks(
    documents: Sequence[tuple[str, Mapping[str, Any]]], config: ChunkConfig
) -> Iterator[tuple[int, Chunk]]:
    """Each document chunked as a page of its own."""
    for index, (text, metadata) in enumerate(documents):
        url = url_of(metadata)
        try:
            chunks = chunk_markdown(text, url=url, title=metadata.get("title"), config=config)
        except PageRejected as rejected:
            if text.strip():
                _warn_not_chunked(_name(metadata, index), str(rejected))
            continue
        yield from ((index, chunk) for chunk in chunks)


def _crawl_chunks(
    documents: Sequence[tuple[str, Mapping[str, Any]]], config: ChunkConfig
) -> Iterator[tuple[int, Chunk]]:
    """The documents chunked as one crawl; each chunk goes back to its page's document."""
    pages = [
        {"markdown": text, "metadata": {**metadata, "sourceURL": url_of(metadata)}}
        for text, metadata in documents
    ]
    run = chunk_crawl(pages, config=config)
    by_url = {
        canonical_url(url): index
        for index, (_, metadata) in enumerate(documents)
        if (url := url_of(metadata))
    }
    for record in run.quarantine:
        index = by_url.get(record.url)
        if index is None or documents[index][0].strip():  # an empty one gives none anyway
            _warn_not_chunked(record.url or "a document without a URL", record.reason)
    for chunk in run.chunks:
        yield by_url[chunk.metadata.source_url], chunk


def _name(metadata: Mapping[str, Any], index: int) -> str:
    """How a warning names a document: its URL or path, else its place in the list."""
    return next((str(metadata[key]) for key in URL_KEYS if metadata.get(key)), f"#{index}")


def _warn_not_chunked(name: str, why: str) -> None:
    warnings.warn(f"{name}: not chunked: {why}", DocumentNotChunked, stacklevel=5)


def breadcrumb_text(breadcrumb: list[str]) -> str:
    """A breadcrumb as one string ("Auth > Login with Apple"): vector stores keep flat
    metadata (strings and numbers), and it reads well in a prompt."""
    return " > ".join(breadcrumb)


def header_keys(levels: Mapping[int, str]) -> dict[str, str]:
    """The headings by level as `MarkdownHeaderTextSplitter` names its keys in LangChain's
    documentation ("Header 1", "Header 2", ...)."""
    return {f"Header {level}": title for level, title in sorted(levels.items())}


def header_path(breadcrumb: list[str]) -> str:
    """The headings above the chunk's section as LlamaIndex's `MarkdownNodeParser` writes
    them: "/Auth/Login/" ("/" for a section at the top), its own heading left out."""
    return "/" + "".join(f"{title}/" for title in breadcrumb[:-1])
