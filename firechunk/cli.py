"""The `firechunk` command line: each sub-command lives in `firechunk.commands`.

Every sub-command is registered through `handled`, so each one exits with the codes
`firechunk.commands.exits` documents and shows a known failure as one line.
"""

from __future__ import annotations

from typing import Annotated

import typer

from firechunk.commands.automations import automations
from firechunk.commands.chunk import chunk
from firechunk.commands.crawl import crawl
from firechunk.commands.database import collections, load, search
from firechunk.commands.exits import EXIT_CODES_HELP, handled, set_debug
from firechunk.commands.help import Command, Group
from firechunk.commands.rebuild import rebuild
from firechunk.commands.rename import rename_collection
from firechunk.commands.runs import runs


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"firechunk {version('firechunk')}")
        raise typer.Exit()


app = typer.Typer(
    name="firechunk",
    help="Crawl a documentation site with Firecrawl and turn it into retrieval-ready chunks.",
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=True,
    cls=Group,
)


@app.callback()
def main(
    show_version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option("--debug", help="Show the traceback of an error, not just its one line."),
    ] = False,
) -> None:
    """Crawl a documentation site with Firecrawl and turn it into retrieval-ready chunks."""
    set_debug(debug)


for command in (crawl, chunk, rebuild, load, search, collections, runs, automations):
    app.command(cls=Command, epilog=EXIT_CODES_HELP)(handled(command))
app.command("rename-collection", cls=Command, epilog=EXIT_CODES_HELP)(handled(rename_collection))


if __name__ == "__main__":
    app()
