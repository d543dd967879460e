"""`firechunk chunk`: the pipeline (`firechunk.pipeline`) in this process on a saved crawl,
without Prefect: chunk, write, validate, publish."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from firechunk.commands.checks import DATA_DIR_HINT, check_writable_dir
from firechunk.commands.exits import Destination, ExitCode, writing_into
from firechunk.commands.options import DataDir, RunId
from firechunk.commands.settings_options import with_settings
from firechunk.settings import RunSettings
from firechunk.words import counted, pages_phrase

if TYPE_CHECKING:
    from firechunk.run.stages import Written


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
    run: RunSettings = RunSettings(),
) -> None:
    """Chunk every page of CRAWL_FILE, validate the chunks, and publish them as the latest
    run of their collection (and data/latest).

    The collection (doc set) is --collection, else the host and path the pages share. Pages
    the collection's last good run chunked are reused. A run that fails validation is kept in
    data/runs/ marked failed, data/latest is left as it was, and the command exits with
    status 1; a bad crawl file or data directory exits 2 before a run starts.
    """
    from firechunk.commands.console import console
    from firechunk.commands.terminal import Terminal
    from firechunk.crawlfile import check_crawl
    from firechunk.pipeline import Request, run_pipeline
    from firechunk.publish import format_outcome, format_result

    # A bad file, or a place the run cannot be written, is refused before a run starts.
    pages = check_crawl(crawl_file, allow_partial=run.allow_partial)
    if out is None:
        destination = Destination(data_dir, "data directory", DATA_DIR_HINT)
    else:
        destination = Destination(out, "--out directory", "choose another --out")
    check_writable_dir(destination.path, destination.what, destination.hint)
    request = Request(run=run, replay=crawl_file, data_dir=data_dir, run_id=run_id, out=out)
    # A disk that fills up (or turns read-only) while the run is written is said as such.
    with writing_into(destination):
        night = run_pipeline(request, listener=Terminal(pages))
    assert night.start is not None and night.written is not None and night.outcome is not None
    summary(night.written, night.start.run_dir)
    outcome, result = night.outcome, night.result
    if result is None:
        console().print(format_outcome(outcome, night.start.run_dir))
    else:
        console().print(format_result(result))
    if not (outcome.success and (result is None or result.published)):
        raise typer.Exit(code=ExitCode.FAILED)


def summary(written: Written, run_dir: Path) -> None:
    from firechunk.commands.console import console
    from firechunk.run.write import read_quarantine

    report, changes = written.report, written.changes()
    console().print(
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
    console().print(pages)
    for record in read_quarantine(run_dir):
        console().print(
            f"[yellow]quarantined[/yellow] {record.url}: {record.reason} {record.detail}"
        )
