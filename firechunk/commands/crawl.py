"""`firechunk crawl`: start or resume a Firecrawl crawl job and save its pages."""

from __future__ import annotations

import typer


def crawl(url: str = typer.Argument(..., help="Site URL to crawl.")) -> None:
    """Crawl URL with Firecrawl (not built yet: issue 3)."""
    raise typer.Exit(code=2)
