"""`firechunk chunk`: chunk a crawl file (Firecrawl's result shape) into a run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from firechunk.crawlfile import CrawlFileError, read_crawl
from firechunk.pipeline import chunk_crawl
from firechunk.tokens import DEFAULT_ENCODING
from schemas.report import ChunkRun

console = Console(stderr=True, soft_wrap=True)  # long paths stay whole in logs


def chunk(
    crawl_file: Annotated[
        Path, typer.Argument(help="Crawl result JSON (Firecrawl's crawl shape).")
    ],
    data_dir: Annotated[
        Path,
        typer.Option(envvar="FIRECHUNK_DATA_DIR", help="Data root: runs go to runs/<run-id>/."),
    ] = Path("data"),
    out: Annotated[
        Path | None,
        typer.Option(help="Write the run here instead, validated but never published."),
    ] = None,
    workers: Annotated[int, typer.Option(min=1, help="Worker processes for chunking.")] = 2,
    encoding: Annotated[str, typer.Option(help="tiktoken encoding that counts tokens.")] = (
        DEFAULT_ENCODING
    ),
) -> None:
    """Chunk every page of CRAWL_FILE, validate the chunks, and publish them as data/latest.

    A run that fails validation is kept in data/runs/ marked failed, data/latest is left
    as it was, and the command exits with status 1.
    """
    try:
        crawl = read_crawl(crawl_file)
    except CrawlFileError as error:
        console.print(f"[red]error:[/red] {error}")
        raise typer.Exit(code=2) from error
    with _progress() as bar:
        task = bar.add_task("chunking pages", total=len(crawl.data))
        run = chunk_crawl(
            crawl, workers=workers, encoding=encoding, progress=lambda n: bar.advance(task, n)
        )
        bar.update(task, completed=len(crawl.data))
    _summary(run)
    console.print("validating with Great Expectations…")
    from firechunk.publish import (  # slow: imports GX
        build_and_publish,
        build_and_validate,
        format_outcome,
        format_result,
    )

    if out is None:
        result = build_and_publish(run, data_dir)
        console.print(format_result(result))
        passed = result.published
    else:
        outcome = build_and_validate(run, out, out.name)
        console.print(format_outcome(outcome, out))
        passed = outcome.success
    if not passed:
        raise typer.Exit(code=1)


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


def _summary(run: ChunkRun) -> None:
    report = run.report
    console.print(
        f"{report.pages_in} pages in: {report.pages_chunked} chunked, "
        f"{report.pages_aliased} aliases, "
        f"{report.pages_quarantined} quarantined -> {report.chunks_out} chunks "
        f"(median {report.chunk_tokens.p50} tokens, max {report.chunk_tokens.p100}), "
        f"{report.duplicate_chunks_dropped} duplicate chunks dropped, {report.seconds:.2f} s"
    )
    for record in run.quarantine:
        console.print(f"[yellow]quarantined[/yellow] {record.url}: {record.reason} {record.detail}")
