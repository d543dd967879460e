"""firechunk: turn a documentation site crawled by Firecrawl into retrieval-ready chunks.

As a library (see README, "Use it as a library"): `chunk_markdown`, `chunk_crawl`,
`ChunkConfig`, the sizers, `load` and `search`, all from `firechunk.api`. They are
exported lazily (module `__getattr__`), so `import firechunk` (and `firechunk --version`)
loads none of the chunker, the run or the database until one of them is used.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what the lazy names are, for type checkers; nothing imported at run time
    from firechunk.api import (
        Chunk,
        ChunkConfig,
        ChunkedCrawl,
        HuggingFaceSizer,
        PageRejected,
        Sizer,
        TiktokenSizer,
        chunk_crawl,
        chunk_markdown,
        load,
        search,
    )

__version__ = "0.1.0"

__all__ = [
    "Chunk",
    "ChunkConfig",
    "ChunkedCrawl",
    "HuggingFaceSizer",
    "PageRejected",
    "Sizer",
    "TiktokenSizer",
    "__version__",
    "chunk_crawl",
    "chunk_markdown",
    "load",
    "search",
]


def __getattr__(name: str) -> object:
    """The public API's names, imported from `firechunk.api` on first use."""
    if name in __all__:
        from firechunk import api

        value = getattr(api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
