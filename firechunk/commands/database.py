"""`firechunk load` and `firechunk search`: the vector database from the command line.

Both take the database from `--db`, else FIRECHUNK_DB_URL, else the embedded Postgres
under the data directory, and the embedder from `--embedder` (local by default). Errors
are one line without a traceback (`firechunk.commands.exits`); exit status 1 for a refused
load, 2 for bad input, 3 when the database or the embedding service fails.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console

from firechunk.commands.exits import CommandError

console = Console(stderr=True, soft_wrap=True)

DataDir = Annotated[
    Path, typer.Option(envvar="FIRECHUNK_DATA_DIR", help="Data root (latest/, runs/).")
]
DbUrl = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Postgres URL (with pgvector); default: FIRECHUNK_DB_URL, else a Postgres "
        "firechunk runs itself under DATA_DIR/postgres.",
        show_default=False,
    ),
]
Site = Annotated[
    str | None,
    typer.Option(help="Name the site's rows go under (default: the run's scheme and host)."),
]
EmbedderName = Annotated[
    Literal["local", "openai"],
    typer.Option(
        "--embedder",
        help="local: all-MiniLM-L6-v2 (int8 ONNX) on this machine; openai: an "
        "OpenAI-compatible API (key from OPENAI_API_KEY).",
    ),
]
Model = Annotated[str | None, typer.Option(help="Model name for --embedder openai.")]
Dimensions = Annotated[int | None, typer.Option(min=1, help="Dimensions for --embedder openai.")]
BaseUrl = Annotated[
    str | None, typer.Option(help="API base URL for --embedder openai (default OpenAI's).")
]


def load(
    data_dir: DataDir = Path("data"),
    db: DbUrl = None,
    run: Annotated[
        str, typer.Option(help="'latest' or the id of a run that passed validation.")
    ] = "latest",
    site: Site = None,
    embedder: EmbedderName = "local",
    model: Model = None,
    dimensions: Dimensions = None,
    base_url: BaseUrl = None,
    allow_shrink: Annotated[
        bool,
        typer.Option("--allow-shrink", help="Load even if it deletes more than --max-shrink."),
    ] = False,
    max_shrink: Annotated[
        float,
        typer.Option(min=0.0, max=1.0, help="Largest share of held rows a load may delete."),
    ] = 0.2,
) -> None:
    """Make the database hold exactly one published run: diff, embed what is new, apply in
    one transaction. A second load of the same run changes nothing."""
    from firechunk.db.load import load_run
    from firechunk.db.runs import published_run

    chosen = published_run(data_dir, run, site)
    built = _embedder(embedder, model, dimensions, base_url)
    with _connection(db, data_dir) as conn, _progress_bar() as progress:
        result = load_run(
            conn,
            chosen,
            built,
            allow_shrink=allow_shrink,
            max_shrink=max_shrink,
            say=console.print,
            progress=progress,
        )
    console.print(describe(result))


def search(
    question: Annotated[str, typer.Argument(help="What to look for, as you would ask it.")],
    data_dir: DataDir = Path("data"),
    db: DbUrl = None,
    k: Annotated[int, typer.Option("-k", min=1, max=100, help="How many chunks.")] = 5,
    site: Site = None,
    embedder: EmbedderName = "local",
    model: Model = None,
    dimensions: Dimensions = None,
    base_url: BaseUrl = None,
) -> None:
    """Hybrid search (vectors and full-text, fused by reciprocal rank) over a loaded site."""
    from firechunk.db.search import search as run_search

    built = _embedder(embedder, model, dimensions, base_url)
    with _connection(db, data_dir) as conn:
        chosen = _loaded_site(conn, site, built)
        hits = run_search(conn, chosen, question, built, k)
    if not hits:
        console.print(f"no chunk of {chosen} matches")
    for hit in hits:
        crumb = " › ".join(hit.breadcrumb) or "(page top)"
        snippet = " ".join(hit.text.split())[:160]
        typer.echo(f"{hit.rank}. {hit.url}\n   {crumb}\n   {snippet}")


def describe(result) -> str:
    """One line of what a load did."""
    if not result.changed:
        return (
            f"{result.site}: the database already holds run {result.run_id} "
            f"({result.chunks} chunks); nothing changed, nothing embedded."
        )
    return (
        f"{result.site}: loaded run {result.run_id} ({result.chunks} chunks): "
        f"{result.inserted} inserted, {result.updated} updated, {result.deleted} deleted, "
        f"{result.embedded} embedded, in {result.seconds:.1f} s."
    )


def _embedder(name: str, model: str | None, dimensions: int | None, base_url: str | None):
    from firechunk.embedders import make_embedder

    if name == "local":
        if model or dimensions or base_url:
            raise typer.BadParameter("--model, --dimensions and --base-url need --embedder openai")
        return make_embedder("local")
    if not model:
        raise typer.BadParameter("--embedder openai needs --model")
    options = {"model": model, "dimensions": dimensions}
    if base_url:
        options["base_url"] = base_url
    return make_embedder("openai", **options)


def _loaded_site(conn, site: str | None, embedder) -> str:
    from firechunk.db.search import loaded_sites

    sites = loaded_sites(conn)
    if not sites:
        raise _UserError("the database holds no loaded run yet: run `firechunk load` first")
    if site is None and len(sites) > 1:
        names = ", ".join(name for name, *_ in sites)
        raise _UserError(f"the database holds several sites ({names}): choose one with --site")
    match = next((row for row in sites if site in (None, row[0])), None)
    if match is None:
        raise _UserError(f"site {site!r} is not loaded; loaded: {', '.join(s for s, *_ in sites)}")
    name, _, model, dims = match
    if (model, dims) != (embedder.model, embedder.dimensions):
        raise _UserError(
            f"{name} was embedded with {model} ({dims} dimensions); search with the same "
            "--embedder and --model"
        )
    return name


class _UserError(CommandError):
    """Something the person running the command can fix; printed as one line, exit 2."""


@contextlib.contextmanager
def _connection(db: str | None, data_dir: Path) -> Iterator:
    from firechunk.db.connect import connect, database_url

    with connect(database_url(db), data_dir) as conn:
        conn.autocommit = True
        yield conn


@contextlib.contextmanager
def _progress_bar() -> Iterator:
    """A progress callback for embedding: a bar shown from the first batch on."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    bar = Progress(
        "embedding", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    )
    task = None

    def advance(done: int, total: int) -> None:
        nonlocal task
        if task is None:
            bar.start()
            task = bar.add_task("embedding", total=total)
        bar.update(task, completed=done)

    try:
        yield advance
    finally:
        bar.stop()
