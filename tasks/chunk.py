"""Prefect tasks of the chunk stage: batches of pages on a parallel task runner, then assembly.

The work is `firechunk.pipeline`'s: `AliasPlan` picks the pages to chunk, `make_batches`
cuts them into batches of about equal size, `chunk_batch` chunks one batch, `assemble`
resolves aliases and duplicates and assigns ids. One task run per batch (not per page) keeps
Prefect's bookkeeping small next to the work; a progress artifact on the dashboard moves
as batches finish.

The rebuild flow chunks incrementally instead (`chunk_into_store`, the stages of
`firechunk.rebuild`): only pages the last good run has no outcome for are sent to the
runner, and the outcomes go to the run's store rather than into memory; the chunk flow
(`chunk_in_parallel`) keeps the whole run in memory and hands it over as one file.
"""

from __future__ import annotations

import time
from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import create_progress_artifact, update_progress_artifact
from prefect.cache_policies import NO_CACHE
from prefect.futures import as_completed
from prefect.task_runners import TaskRunner

from firechunk.assemble import assemble
from firechunk.atomic import write_json
from firechunk.chunker.page import ChunkerOptions
from firechunk.incremental import PackedOutcome, ReusePlan, chunk_pages
from firechunk.pipeline import ChunkList, InMemoryOutcomes
from firechunk.plan import AliasPlan, PageInput, characters, make_batches, page_inputs
from firechunk.rebuild import ChunkedRun, RunStart, chunk_stage
from firechunk.tokens import DEFAULT_ENCODING
from schemas.page import CrawlResult
from schemas.report import ChunkReport, ChunkRun
from tasks.runners import api_shared_with_workers

CHUNK_RUN_JSON = "chunk_run.json"
PROGRESS_KEY = "chunking-progress"


@task(name="chunk-pages", cache_policy=NO_CACHE)
def chunk_batch(
    batch: list[PageInput], encoding: str, options: ChunkerOptions
) -> list[PackedOutcome]:
    """Chunk one batch of pages in whichever worker the task runner picked."""
    return chunk_pages(batch, encoding, options)


@task(name="assemble-run", cache_policy=NO_CACHE)
def assemble_run(
    inputs: list[PageInput],
    plan: AliasPlan,
    outcomes: dict[int, PackedOutcome],
    encoding: str,
    started: float,
) -> ChunkRun:
    sink = ChunkList()
    assembled = assemble(
        inputs, plan, InMemoryOutcomes(outcomes), sink, encoding=encoding, started=started
    )
    run = ChunkRun(
        chunks=sink.chunks,
        pages=assembled.pages,
        quarantine=assembled.quarantine,
        report=assembled.report,
    )
    get_run_logger().info(run_summary(run.report))
    return run


def run_summary(report: ChunkReport) -> str:
    """One log line with the run's page and chunk counts."""
    return (
        f"{report.pages_in} pages in: {report.pages_chunked} chunked, "
        f"{report.pages_aliased} aliases, {report.pages_quarantined} quarantined -> "
        f"{report.chunks_out} chunks, {report.duplicate_chunks_dropped} duplicate chunks dropped"
    )


def chunk_in_parallel(
    crawl: CrawlResult,
    runner: TaskRunner,
    *,
    workers: int,
    encoding: str = DEFAULT_ENCODING,
) -> ChunkRun:
    """Chunk a whole crawl on `runner`, batch by batch; call it from inside a flow.

    Gives the same chunks as `firechunk.pipeline.chunk_crawl`: the same plan, batches and
    assembly, only the executor differs.
    """
    logger = get_run_logger()
    started = time.perf_counter()
    options = ChunkerOptions()
    inputs = page_inputs(crawl)
    plan = AliasPlan.from_inputs(inputs)
    batches = list(make_batches(plan.to_chunk, workers))
    total = len(plan.to_chunk)
    logger.info(
        "chunking %d pages (%d more are the same URL or markdown) in %d batches on %s",
        total,
        len(inputs) - total,
        len(batches),
        type(runner).__name__,
    )
    progress_id = create_progress_artifact(
        progress=0.0, key=PROGRESS_KEY, description=f"Pages chunked, of {total}"
    )
    outcomes: dict[int, PackedOutcome] = {}
    with api_shared_with_workers(), runner:
        futures = [
            runner.submit(chunk_batch, {"batch": batch, "encoding": encoding, "options": options})
            for batch in batches
        ]
        for future in as_completed(futures):
            outcomes.update((outcome.index, outcome) for outcome in future.result())
            update_progress_artifact(progress_id, progress=100.0 * len(outcomes) / max(1, total))
            logger.info("chunked %d/%d pages", len(outcomes), total)
    return assemble_run(inputs, plan, outcomes, encoding, started)


# A nightly run that reuses pages and has fewer characters than this left to chunk chunks
# them in the flow's own process: 2 MB is a few seconds of chunking, about what starting
# worker processes (or connecting to a cluster) costs before they chunk anything.
INLINE_CHARS = 2_000_000


def chunk_into_store(
    start: RunStart,
    crawl: CrawlResult,
    runner: TaskRunner,
    *,
    workers: int,
    encoding: str = DEFAULT_ENCODING,
) -> ChunkedRun:
    """Chunk the pages the baseline has no outcome for on `runner`; call it inside a flow.

    The runner (a process pool, a Dask cluster) is only started when there is enough to
    chunk: a rebuild of an unchanged crawl starts none, and a run that reuses most pages
    and has little left (`INLINE_CHARS`) chunks it in one task run here.
    """
    logger = get_run_logger()
    options = ChunkerOptions()

    def on_runner(batches: list[list[PageInput]], reuse: ReusePlan):
        pages = [page for batch in batches for page in batch]
        progress_id = create_progress_artifact(
            progress=0.0 if pages else 100.0,
            key=PROGRESS_KEY,
            description=f"Pages chunked, of {len(pages)}",
        )
        if not pages:
            return
        if reuse.pages_reused and characters(pages) < INLINE_CHARS:
            logger.info("chunking %d pages in this process (too few to start workers)", len(pages))
            yield chunk_batch(pages, encoding, options)
            update_progress_artifact(progress_id, progress=100.0)
            return
        logger.info(
            "chunking %d pages in %d batches on %s", len(pages), len(batches), type(runner).__name__
        )
        done = 0
        with api_shared_with_workers(), runner:
            futures = [
                runner.submit(
                    chunk_batch,
                    {"batch": batch, "encoding": encoding, "options": options},
                )
                for batch in batches
            ]
            for future in as_completed(futures):
                outcomes = future.result()
                done += len(outcomes)
                update_progress_artifact(progress_id, progress=100.0 * done / len(pages))
                logger.info("chunked %d/%d pages", done, len(pages))
                yield outcomes

    chunked = chunk_stage(
        start, crawl, on_runner, workers=workers, encoding=encoding, options=options
    )
    reuse = chunked.reuse
    logger.info(
        "%d pages in, %d to chunk (%d more are the same URL or markdown): %d reused from %s, "
        "%d chunked",
        len(chunked.inputs),
        len(reuse.keys),
        len(chunked.inputs) - len(reuse.keys),
        reuse.pages_reused,
        f"run {start.baseline[0]}" if start.baseline and not start.full else "no run",
        len(reuse.fresh),
    )
    return chunked


@task(name="save-chunk-run", cache_policy=NO_CACHE)
def save_chunk_run(run: ChunkRun, out_dir: Path) -> Path:
    """The chunk stage's hand-off to the validate stage: the whole run as one JSON file."""
    return write_json(Path(out_dir) / CHUNK_RUN_JSON, run.model_dump(mode="json"), indent=None)


@task(name="load-chunk-run", cache_policy=NO_CACHE)
def load_chunk_run(path: Path) -> ChunkRun:
    path = Path(path)
    if path.is_dir():
        path = path / CHUNK_RUN_JSON
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no chunk run here (the chunk flow writes one)")
    return ChunkRun.model_validate_json(path.read_bytes())
