"""The `firechunk` command line."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="firechunk",
    help="Crawl a documentation site with Firecrawl and turn it into retrieval-ready chunks.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def main() -> None:
    """firechunk: crawl, chunk, validate, publish."""
