"""The `firechunk` command line: each sub-command lives in `firechunk.commands`."""

from __future__ import annotations

import typer

from firechunk.commands.chunk import chunk
from firechunk.commands.crawl import crawl
from firechunk.commands.database import load, search
from firechunk.commands.rebuild import rebuild

app = typer.Typer(
    name="firechunk",
    help="Crawl a documentation site with Firecrawl and turn it into retrieval-ready chunks.",
    no_args_is_help=True,
    add_completion=False,
)
app.command()(crawl)
app.command()(chunk)
app.command()(rebuild)
app.command()(load)
app.command()(search)


if __name__ == "__main__":
    app()
