"""The `firechunk` command line: each sub-command lives in `firechunk.commands`."""

from __future__ import annotations

from importlib.metadata import version
from typing import Annotated

import typer

from firechunk.commands.chunk import chunk
from firechunk.commands.crawl import crawl
from firechunk.commands.database import load, search
from firechunk.commands.rebuild import rebuild
from firechunk.commands.runs import runs


def _version(value: bool) -> None:
    if value:
        typer.echo(f"firechunk {version('firechunk')}")
        raise typer.Exit()


app = typer.Typer(
    name="firechunk",
    help="Crawl a documentation site with Firecrawl and turn it into retrieval-ready chunks.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def main(
    show_version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Crawl a documentation site with Firecrawl and turn it into retrieval-ready chunks."""


app.command()(crawl)
app.command()(chunk)
app.command()(rebuild)
app.command()(load)
app.command()(search)
app.command()(runs)


if __name__ == "__main__":
    app()
