"""The chunk stage on a Prefect task runner: one task run per batch of pages.

`firechunk.run.stages.chunk_stage` plans the crawl, reuses what the baseline has and hands
the batches left to an executor; here the executor submits each batch as a `chunk-pages`
task run to the flow's chosen runner (a process pool or a Dask cluster, `tasks.runners`).
One task run per batch (not per page) keeps Prefect's bookkeeping small next to the work;
a progress artifact on the dashboard moves as batches finish. The runner is only started
when there is something to chunk: a night that reuses every page starts none.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator
from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import create_progress_artifact, update_progress_artifact
from prefect.cache_policies import NO_CACHE
from prefect.futures import PrefectFuture
from prefect.task_runners import TaskRunner

from firechunk.chunker.page import ChunkerOptions
from firechunk.run.executors import Executor
from firechunk.run.outcomes import PackedOutcome, chunk_pages
from firechunk.run.plan import PageInput
from firechunk.run.stages import Chunked, RunStart, chunk_stage
from firechunk.tasks.runners import ChunkingStalled, api_shared_with_workers, make_task_runner
from firechunk.words import counted, reuse_phrase

PROGRESS_KEY = "chunking-progress"


@task(name="chunk-pages", cache_policy=NO_CACHE)
def chunk_batch(
    batch: list[PageInput], encoding: str, options: ChunkerOptions
) -> list[PackedOutcome]:
    """Chunk one batch of pages in whichever worker the task runner picked."""
    return chunk_pages(batch, encoding, options)


def as_finished(futures: list[PrefectFuture], timeout: float) -> Iterator[PrefectFuture]:
    """`futures` as each finishes; `ChunkingStalled` when none has for `timeout` seconds.

    A batch is seconds of work, so a long silence means the batches are lost, not slow: a
    worker killed, a Dask cluster gone, or Prefect's process pool losing track of its work
    when its API restarts mid-run (seen on 3 of 5 restarts). Without a limit the flow run
    would wait for ever, Running, holding the deployment's one slot against every later
    night; with it, the run fails, the alert goes out and the queue moves on.
    """
    finished: queue.Queue[PrefectFuture] = queue.Queue()
    for future in futures:
        future.add_done_callback(finished.put)
    for done in range(len(futures)):
        try:
            yield finished.get(timeout=timeout)
        except queue.Empty:
            raise ChunkingStalled(
                f"no batch of pages came back in {timeout:g} s ({done} of {len(futures)} "
                "done): the task runner lost them; the run is stopped (run.batch_timeout)"
            ) from None


def on_task_runner(runner: TaskRunner, batch_timeout: float) -> Executor:
    """The executor that submits each batch to `runner` as a `chunk-pages` task run."""

    def run(
        batches: list[list[PageInput]], encoding: str, options: ChunkerOptions
    ) -> Iterator[list[PackedOutcome]]:
        if not batches:
            return
        get_run_logger().info("%d batches on %s", len(batches), type(runner).__name__)
        with api_shared_with_workers(), runner:
            parameters = [{"batch": b, "encoding": encoding, "options": options} for b in batches]
            futures = [runner.submit(chunk_batch, p) for p in parameters]
            for future in as_finished(futures, batch_timeout):
                yield future.result()

    return run


def chunk_on_runner(start: RunStart, crawl_file: Path) -> Chunked:
    """The chunk stage, its batches on the task runner the run's settings name; call it
    inside a flow."""
    logger = get_run_logger()
    progress_id = create_progress_artifact(
        progress=0.0, key=PROGRESS_KEY, description="Pages chunked (of those not reused)"
    )

    def progress(done: int, total: int) -> None:
        update_progress_artifact(progress_id, progress=100.0 * done / max(1, total))
        logger.info("chunked %d/%d pages", done, total)

    runner = make_task_runner(start.settings)
    executor = on_task_runner(runner, start.settings.batch_timeout)
    chunked = chunk_stage(start, crawl_file, executor, progress=progress)
    update_progress_artifact(progress_id, progress=100.0)
    reuse = reuse_phrase(
        chunked.pages_reused, chunked.pages_chunked, start.baseline_id, start.settings.full
    )
    repeats = chunked.pages_in - chunked.pages_to_chunk
    logger.info(
        "%s in: %s%s%s",  # 13 pages in: 10 reused from run X, 1 chunked, 2 the same URL or ...
        counted(chunked.pages_in, "page"),
        reuse,
        " in this process (too few to start workers)" if chunked.in_this_process else "",
        f", {repeats} the same URL or markdown as another page" if repeats else "",
    )
    return chunked
