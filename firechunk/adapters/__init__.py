"""firechunk's chunks in the shapes of other frameworks, each an optional extra:
`firechunk.adapters.langchain` (pip extra `langchain`) and `firechunk.adapters.llamaindex`
(extra `llamaindex`). Both are thin: they call `firechunk.chunk_markdown` and
`firechunk.chunk_crawl` and carry each chunk's URL, title, breadcrumb and id along."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from firechunk import Chunk, ChunkConfig, PageRejected, chunk_markdown

log = logging.getLogger(__name__)

# Where a page's URL is in a document's metadata: Firecrawl's loaders keep its `sourceURL`
# (and `url`); LangChain's other loaders name it `source`.
URL_KEYS = ("sourceURL", "url", "source")


def url_of(metadata: Mapping[str, Any]) -> str | None:
    """The page URL a document's metadata gives, if any. A `source` that is a file path (as
    LangChain's TextLoader and DirectoryLoader give) is no URL: the page is chunked without
    one, its ids from its text alone, and the path stays in the chunk's metadata."""
    values = (str(metadata[key]) for key in URL_KEYS if metadata.get(key))
    return next((value for value in values if value.startswith(("http://", "https://"))), None)


def page_chunks(text: str, metadata: Mapping[str, Any], config: ChunkConfig) -> list[Chunk]:
    """The chunks of a document that is one page, named by its metadata's URL and title;
    none for a page firechunk would quarantine (empty, binary, only headings), as a
    splitter gives none for an empty text."""
    url = url_of(metadata)
    try:
        return chunk_markdown(text, url=url, title=metadata.get("title"), config=config)
    except PageRejected as rejected:
        if text.strip():
            log.warning("%s: not chunked: %s", url or "a document", rejected)
        return []


def breadcrumb_text(breadcrumb: list[str]) -> str:
    """A breadcrumb as one string ("Auth > Login with Apple"): vector stores keep flat
    metadata (strings and numbers), and it reads well in a prompt."""
    return " > ".join(breadcrumb)
