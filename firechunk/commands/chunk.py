"""`firechunk chunk`: the run's stages in this process, on a crawl file, without Prefect."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from firechunk.commands.checks import DATA_DIR_HINT, check_writable_dir
from firechunk.commands.exits import CommandError, Destination, ExitCode, writing_into
from firechunk.commands.options import DataDir, RunId
from firechunk.commands.settings_options import Without, with_settings
from firechunk.settings import RunSettings
from firechunk.words import counted, pages_phrase

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from firechunk.run.stages import Written

# Its one entry in the run's seconds.json: this command does every stage in one go.
CHUNK_STAGES = "chunk + write + validate + publish"


@with_settings
def chunk(
    crawl_file: Annotated[
        Path, typer.Argument(help="Crawl result JSON (Firecrawl's crawl shape).")
    ],
    data_dir: DataDir = Path("data"),
    out: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Write the run to this new directory instead: validated, never "
            "published, nothing reused.",
        ),
    ] = None,
    run_id: RunId = None,
    run: Annotated[RunSettings, Without("task_runner", "dask_address", "keep_runs")] = (
        RunSettings()
    ),
) -> None:
    """Chunk every page of CRAWL_FILE, validate the chunks, and publish them as the latest
    run of their collection (and data/latest).

    The collection (doc set) is --collection, else the host and path the pages share. Pages
    the collection's last good run chunked are reused. A run that fails validation is kept in
    data/runs/ marked failed, data/latest is left as it was, and the command exits with
    status 1; a bad crawl file or data directory exits 2 before a run starts.
    """
    import time

    from firechunk.crawlfile import read_crawl
    from firechunk.publish import format_outcome, format_result
    from firechunk.run.executors import process_pool
    from firechunk.run.history import record_seconds
    from firechunk.run.stages import DEFAULT_WORKERS, run_here, start_out_run, start_run

    # A bad file, or a place the run cannot be written, is refused before a run starts.
    pages = len(read_crawl(crawl_file, allow_partial=run.allow_partial).data)
    if out is None:
        destination = Destination(data_dir, "data directory", DATA_DIR_HINT)
    else:
        destination = Destination(out, "--out directory", "choose another --out")
    check_writable_dir(destination.path, destination.what, destination.hint)
    started = time.perf_counter()
    # A disk that fills up (or turns read-only) while the run is written is said as such.
    with writing_into(destination):
        try:
            if out is None:
                start = start_run(data_dir, run_id, run, source=crawl_file)
            else:
                start = start_out_run(out, run, source=crawl_file)
        except (FileExistsError, ValueError) as error:
            raise CommandError(str(error)) from None
        with _chunking_bar(pages) as progress:
            written, outcome, result = run_here(
                start, crawl_file, process_pool(run.workers or DEFAULT_WORKERS), progress=progress
            )
        if out is None:  # a run of the data directory: `firechunk runs` shows its seconds
            record_seconds(start.run_dir, {CHUNK_STAGES: time.perf_counter() - started})
    _summary(written, start.run_dir)
    if result is None:
        _console().print(format_outcome(outcome, start.run_dir))
    else:
        _console().print(format_result(result))
    if not (outcome.success and (result is None or result.published)):
        raise typer.Exit(code=ExitCode.FAILED)


@functools.cache
def _console() -> Console:
    """stderr, long paths kept whole in logs; made on first use, so `--help` needs no rich."""
    from rich.console import Console

    return Console(stderr=True, soft_wrap=True)


def _progress() -> Progress:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_console(),
        transient=False,
    )


@contextlib.contextmanager
def _chunking_bar(crawled: int) -> Iterator[Callable[[int, int], None]]:
    """A progress callback whose bar shows from the first batch chunked and stops with the
    last: a run that reuses every page shows none (the summary says what was reused), and
    validation's time is not counted as chunking."""
    bar = _progress()
    task = None
    running = False

    def advance(done: int, total: int) -> None:
        nonlocal task, running
        if task is None:
            bar.start()
            task = bar.add_task(f"chunking pages ({crawled} crawled)", total=total)
            running = True
        bar.update(task, completed=done)
        if done >= total:
            stop()

    def stop() -> None:
        """Once: rich's stop prints a line of its own on a terminal-less stderr."""
        nonlocal running
        if running:
            bar.stop()
            running = False

    try:
        yield advance
    finally:
        stop()


def _summary(written: Written, run_dir: Path) -> None:
    from firechunk.run.write import read_quarantine

    report, changes = written.report, written.changes
    _console().print(
        f"{counted(report.pages_in, 'page')} in: {report.pages_chunked} chunked, "
        f"{counted(report.pages_aliased, 'alias', 'aliases')}, "
        f"{report.pages_quarantined} quarantined -> {counted(report.chunks_out, 'chunk')} "
        f"(median {report.chunk_tokens.p50} tokens, max {report.chunk_tokens.p100}), "
        f"{counted(report.duplicate_chunks_dropped, 'duplicate chunk')} dropped, "
        f"{report.seconds:.2f} s"
    )
    pages = pages_phrase(
        changes.pages_reused, changes.pages_rechunked, changes.baseline, changes.full
    )
    _console().print(pages)
    for record in read_quarantine(run_dir):
        _console().print(
            f"[yellow]quarantined[/yellow] {record.url}: {record.reason} {record.detail}"
        )
