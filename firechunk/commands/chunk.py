"""`firechunk chunk`: chunk a crawl file (Firecrawl's result shape) into a run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from firechunk.atomic import write_json, write_jsonl
from firechunk.crawlfile import CrawlFileError, read_crawl
from firechunk.pipeline import chunk_crawl
from firechunk.tokens import DEFAULT_ENCODING
from schemas.report import ChunkRun

console = Console(stderr=True)


def chunk(
    crawl_file: Annotated[
        Path, typer.Argument(help="Crawl result JSON (Firecrawl's crawl shape).")
    ],
    out: Annotated[Path, typer.Option(help="Directory for the chunks, quarantine and report.")],
    workers: Annotated[int, typer.Option(min=1, help="Worker processes for chunking.")] = 2,
    encoding: Annotated[str, typer.Option(help="tiktoken encoding that counts tokens.")] = (
        DEFAULT_ENCODING
    ),
) -> None:
    """Chunk every page of CRAWL_FILE and write the chunks, the quarantine and a report."""
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
    write_run_files(run, out)
    _summary(run, out)


def write_run_files(run: ChunkRun, out: Path) -> None:
    """The three files of a chunking run, each written atomically."""
    write_json(out / "chunks.json", [chunk.to_json() for chunk in run.chunks])
    write_jsonl(out / "quarantine.jsonl", (record.model_dump() for record in run.quarantine))
    write_json(out / "report.json", run.report.model_dump(mode="json"))


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


def _summary(run: ChunkRun, out: Path) -> None:
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
    console.print(f"outputs in {out}/")
