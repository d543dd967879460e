"""`firechunk load`, `search` and `collections`: the vector database from the command line.

Each takes the database from `--db`, else FIRECHUNK_DB_URL, else the embedded Postgres
under the data directory, and the embedder from `--embedder` (local by default). Errors
are one line without a traceback (`firechunk.commands.exits`); exit status 1 for a refused
load, 2 for bad input, 3 when the database or the embedding service fails.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from firechunk.commands.checks import check_writable_dir
from firechunk.commands.exits import CommandError
from firechunk.commands.options import AsJson, DataDir, json_text
from firechunk.commands.settings_options import Without, with_settings
from firechunk.settings import MAX_SHRINK, DatabaseSettings

if TYPE_CHECKING:
    from rich.console import Console

    from firechunk.db.search import Hit

DEFAULT_DATA_DIR = Path("data")
DEMO_DATA_DIR = Path("data/demo")  # where `make demo` loads the sample crawl

DbUrl = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="URL",
        help="Postgres URL, with pgvector (default: FIRECHUNK_DB_URL, else a Postgres "
        "firechunk runs itself under DATA_DIR/postgres).",
        show_default=False,
    ),
]
SearchedCollection = Annotated[
    str | None,
    typer.Option(
        "--collection",
        metavar="NAME",
        help="The collection to search (default: the only one the database holds; "
        "`firechunk collections` lists them).",
        show_default=False,
    ),
]
LoadedCollection = Annotated[
    str | None,
    typer.Option(
        "--collection",
        metavar="NAME",
        help="The doc set whose latest run is loaded, or that --run must be a run of "
        "(default: the data directory's latest run, whichever its collection). A run loads "
        "into its own collection.",
        show_default=False,
    ),
]


# What the load and search commands take of the database settings.
_EMBEDDER = ("load", "db_secret_block")


@with_settings
def load(
    data_dir: DataDir = Path("data"),
    db: DbUrl = None,
    run: Annotated[
        str,
        typer.Option(metavar="RUN", help="'latest' or the id of a published run."),
    ] = "latest",
    collection: LoadedCollection = None,
    database: Annotated[DatabaseSettings, Without(*_EMBEDDER)] = DatabaseSettings(),
    allow_shrink: Annotated[
        bool,
        typer.Option(
            "--allow-shrink", help="Load even if the collection shrinks by more than --max-shrink."
        ),
    ] = False,
    max_shrink: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            metavar="SHARE",
            help="Largest net share of the collection's rows a load may remove (deleted "
            "minus added).",
        ),
    ] = MAX_SHRINK,
    force_older: Annotated[
        bool,
        typer.Option("--force-older", help="Load a run older than the one the collection holds."),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Say what the load would insert, update, delete and embed, and about how "
            "long the embedding takes; change nothing.",
        ),
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Make a collection of the database hold exactly one published run: diff, embed what
    is new, apply in one transaction. A second load of the same run changes nothing."""
    from firechunk.db.load import LoadGuards, load_run, preview_load
    from firechunk.db.runs import published_run

    chosen = published_run(data_dir, run, collection)
    built = _embedder(database)
    guards = LoadGuards(allow_shrink=allow_shrink, max_shrink=max_shrink, force_older=force_older)
    if dry_run:
        with _connection(db, data_dir) as conn:
            preview = preview_load(conn, chosen, built, guards=guards)
        typer.echo(json_text(dataclasses.asdict(preview)) if as_json else describe_preview(preview))
        return
    with _connection(db, data_dir) as conn, _progress_bar() as progress:
        result = load_run(
            conn,
            chosen,
            built,
            guards=guards,
            only_if_latest=run == "latest",
            say=_console().print,
            progress=progress,
        )
    if as_json:
        typer.echo(json_text({**dataclasses.asdict(result), "changed": result.changed}))
        return
    _console().print(describe(result))


@with_settings
def search(
    question: Annotated[str, typer.Argument(help="What to look for, as you would ask it.")],
    data_dir: DataDir = Path("data"),
    db: DbUrl = None,
    k: Annotated[
        int,
        typer.Option("--top", "-k", min=1, max=100, metavar="N", help="How many chunks to show."),
    ] = 5,
    min_score: Annotated[
        float,
        typer.Option(
            "--min-score",
            min=0.0,
            max=1.0,
            metavar="FRACTION",
            help="Show only chunks scoring at least FRACTION of the best one's score: relative "
            "to the best hit, so 1 keeps the best (and any tied with it), 0 every one of --top.",
        ),
    ] = 0.0,
    collection: SearchedCollection = None,
    database: Annotated[DatabaseSettings, Without(*_EMBEDDER)] = DatabaseSettings(),
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="One JSON object a line: rank, chunk_id, score (fused), match (percent of "
            "the best hit's score), url, title, breadcrumb, text, snippet.",
        ),
    ] = False,
) -> None:
    """Hybrid search (BM25 and vectors, fused by reciprocal rank) over a loaded
    collection. The hits in rank order: rank, how well it matches as a percentage of the
    best hit, breadcrumb, URL, and the words around the sentence that best matches the
    question."""
    from concurrent.futures import ThreadPoolExecutor

    from firechunk.db.search import above
    from firechunk.db.search import search as run_search
    from firechunk.embedders import make_embedder

    _check_text(question)
    _check_loaded(db, data_dir)
    # The model loads while the database starts: each takes a few tenths of a second.
    with ThreadPoolExecutor(max_workers=1) as pool:
        building = pool.submit(make_embedder, database.embedder, **database.embedder_options())
        with _connection(db, data_dir, create=False) as conn:
            built = building.result()
            chosen = _loaded_collection(conn, collection, built, _nothing_loaded(db, data_dir))
            hits = above(run_search(conn, chosen, question, built, k), min_score)
    if not hits and not as_json:
        _console().print(f"no chunk of {chosen} matches")
    if as_json:
        for hit in hits:
            typer.echo(_hit_json(hit, question, _match(hit, hits)))
        return
    if hits:
        typer.echo(hit_lines(hits, question))


def _hit_json(hit: Hit, question: str, match: int) -> str:
    import orjson

    from firechunk.db.snippet import snippet

    fields = ("rank", "chunk_id", "score", "url", "title", "breadcrumb", "text")
    found = {name: getattr(hit, name) for name in fields}
    return orjson.dumps({**found, "match": match, "snippet": snippet(hit.text, question)}).decode()


def _match(hit: Hit, hits: list[Hit]) -> int:
    """The hit's fused score as a percentage of the best hit's: a fused score (0.0410)
    means nothing to a reader; how close it comes to the best does (`--min-score` cuts by
    the same share)."""
    best = max(other.score for other in hits)
    return round(100 * hit.score / best) if best > 0 else 0


def hit_lines(hits: list[Hit], question: str) -> str:
    """Each hit in rank order: rank, match and breadcrumb; its URL; the words around its
    sentence that best matches the question (`firechunk.db.snippet`), a blank line apart."""
    from firechunk.db.snippet import snippet

    blocks = []
    for hit in sorted(hits, key=lambda hit: hit.rank):
        crumb = " › ".join(hit.breadcrumb) or hit.title
        blocks.append(
            f"{hit.rank}. {_match(hit, hits)}%  {crumb}\n   {hit.url}\n"
            f"   {snippet(hit.text, question)}"
        )
    return "\n\n".join(blocks)


def collections(
    data_dir: DataDir = Path("data"), db: DbUrl = None, as_json: AsJson = False
) -> None:
    """List what the database holds: each collection, its run, when it was loaded, its
    chunks, and the embedding model and dimensions (`--json`: a list of them, empty when
    nothing is loaded)."""
    from firechunk.db import embedded
    from firechunk.db.connect import database_url
    from firechunk.db.search import loaded_collections

    if as_json and database_url(db) is None and not embedded.exists(data_dir):
        typer.echo(json_text([]))
        return
    _check_loaded(db, data_dir)
    with _connection(db, data_dir, create=False) as conn:
        held = loaded_collections(conn)
    if as_json:
        typer.echo(json_text(held))
        return
    if not held:
        typer.echo(_nothing_loaded(db, data_dir))
        return
    width = max(len("collection"), *(len(c.name) for c in held))
    typer.echo(f"{'collection':<{width}}  {'run':<26} {'loaded (UTC)':<16} {'chunks':>7}  model")
    for c in held:
        typer.echo(
            f"{c.name:<{width}}  {c.run_id:<26} {c.loaded_at:%Y-%m-%d %H:%M} {c.chunks:>7}  "
            f"{c.model} ({c.dimensions} dimensions)"
        )


def describe(result) -> str:
    """One line of what a load did."""
    from firechunk.words import counted

    if not result.changed:
        return (
            f"{result.collection}: the database already holds run {result.run_id} "
            f"({counted(result.chunks, 'chunk')}); nothing changed, nothing embedded."
        )
    return (
        f"{result.collection}: loaded run {result.run_id} ({counted(result.chunks, 'chunk')}): "
        f"{result.inserted} inserted, {result.updated} updated, {result.deleted} deleted, "
        f"{result.embedded} embedded, in {result.seconds:.1f} s."
    )


def describe_preview(preview) -> str:
    """What a load would do, in two lines (`load --dry-run`)."""
    from firechunk.words import about, counted

    would = (
        f"{preview.collection}: loading run {preview.run_id} would insert {preview.inserted}, "
        f"update {preview.updated} and delete {preview.deleted} chunks, and embed "
        f"{counted(preview.to_embed, 'chunk')} ({counted(preview.windows, 'window')}) with "
        f"{preview.model}: {about(preview.seconds)} at this "
        "machine's pace; nothing was changed."
    )
    return would + (f"\nIt would be refused: {preview.refused}" if preview.refused else "")


def _embedder(database: DatabaseSettings):
    from firechunk.embedders import make_embedder

    return make_embedder(database.embedder, **database.embedder_options())


def _loaded_collection(conn, collection: str | None, embedder, nothing_loaded: str) -> str:
    from firechunk.db.search import CollectionNotLoaded, chosen_collection

    try:
        return chosen_collection(conn, collection, embedder)
    except CollectionNotLoaded as error:
        raise _UserError(str(error) if error.held else nothing_loaded) from None


def _check_text(question: str) -> None:
    """A question with no words has no answer: every chunk would rank alike, and the hits
    shown would be arbitrary. A question the shell passed in another encoding than UTF-8
    arrives with its bytes escaped; say so rather than send the database text it cannot
    read."""
    if not question.strip():
        raise _UserError(
            "the question is empty: ask what you are looking for, e.g. "
            'firechunk search "how are failed messages retried"'
        )
    try:
        question.encode("utf-8")
    except UnicodeEncodeError:
        raise _UserError(
            "the question is not valid UTF-8 (is the terminal's encoding UTF-8?)"
        ) from None


def _check_loaded(db: str | None, data_dir: Path) -> None:
    """A reader finds no embedded database under `data_dir`: nothing was loaded there, and
    nothing is started to learn it."""
    from firechunk.db import embedded
    from firechunk.db.connect import database_url

    if database_url(db) is None and not embedded.exists(data_dir):
        raise _UserError(_nothing_loaded(db, data_dir))


def _nothing_loaded(db: str | None, data_dir: Path) -> str:
    """What to do when the database read holds no run: load one into it, or, when `make
    demo` left its database in data/demo and another data directory was read (the
    default, data), read that one."""
    from firechunk.db import embedded
    from firechunk.db.connect import database_url
    from firechunk.db.failures import redact

    url = database_url(db)
    if url is not None:
        load = "firechunk load --db URL" if db else "firechunk load"
        return f"the database at {redact(url)} holds no loaded run yet: run `{load}` first"
    load = "firechunk load" + ("" if data_dir == DEFAULT_DATA_DIR else f" --data-dir {data_dir}")
    message = f"nothing has been loaded into the database in {data_dir}/ yet: run `{load}` first"
    if embedded.exists(DEMO_DATA_DIR) and data_dir.resolve() != DEMO_DATA_DIR.resolve():
        message += f", or add --data-dir {DEMO_DATA_DIR} for the one `make demo` loaded"
    return message


class _UserError(CommandError):
    """Something the person running the command can fix; printed as one line, exit 2."""


def _connection(db: str | None, data_dir: Path, create: bool = True):
    """`firechunk.db.connect.connection` to `--db` (or FIRECHUNK_DB_URL), else to the
    embedded database under `data_dir`, which must be writable: even a search starts the
    server there, and records itself as one of its users."""
    from firechunk.db.connect import connection, database_url
    from firechunk.layout import DataDir

    url = database_url(db)
    if url is None:
        check_writable_dir(
            DataDir(data_dir).postgres,
            "embedded database directory",
            "make it writable, or give another database with --db or FIRECHUNK_DB_URL",
        )
    return connection(url, data_dir, create)


def _console() -> Console:
    """The commands' stderr console (`firechunk.commands.console`)."""
    from firechunk.commands.console import console

    return console()


@contextlib.contextmanager
def _progress_bar() -> Iterator:
    """A progress callback for embedding: a bar shown from the first batch on, with the
    time left at the pace so far (a first load takes minutes)."""
    from firechunk.commands.console import progress_bar

    bar = progress_bar()
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
        if task is not None:  # rich's stop prints a line of its own on a terminal-less stderr
            bar.stop()
