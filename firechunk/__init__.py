"""firechunk: turn a documentation site crawled by Firecrawl into retrieval-ready chunks."""

__version__ = "0.1.0"
