"""The stages of an incremental rebuild, with the executor of the chunking left open.

    start    claim data/runs/<run-id>/, find the baseline (the run data/latest points at)
    chunk    plan aliases, key every page, copy the outcomes the baseline has into the
             run's store, chunk the other pages batch by batch (`map_batches`), store them;
             write each page's rows as soon as it and every page before it has its outcome
    write    the rows were written in crawl order as outcomes came in (`firechunk.streaming`);
             finish the run's files, then `changes.json` against the baseline
    publish  validate with the suites, publish as data/latest only if every one passed

The Prefect flow (`flows/rebuild.py`) runs these stages as tasks and maps the batches on
its task runner; `rebuild_here` runs them in this process (tests, small crawls). A full
rebuild (`full=True`) chunks every page again, but its change set is still relative to the
last good run: that is what the vector database holds.

Safety: the baseline is only ever the run `latest` points at, and `latest` only moves to a
run that passed validation. A run that fails (validation, or an error on the way) is kept,
marked failed, and neither becomes `latest` nor the next run's baseline; its outcome store
is simply never read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from firechunk.changes import change_set, write_changes
from firechunk.chunker.page import ChunkerOptions
from firechunk.emissions import BaselineRows
from firechunk.incremental import (
    STATE_FILE,
    OutcomeStore,
    PackedOutcome,
    ReusePlan,
    chunk_for_store,
    plan_reuse,
)
from firechunk.pipeline import AliasPlan, PageInput, make_batches, page_inputs
from firechunk.publish import (
    RUNS_DIR,
    claim_run_dir,
    failure_recorded,
    last_good_run,
    publish_if_passed,
    validate_written_run,
)
from firechunk.streaming import RunWriter, WrittenRun
from firechunk.tokens import DEFAULT_ENCODING
from firechunk.validation_process import ValidationProcess
from firechunk.validation_tables import tables_from_facts
from schemas.changes import ChangeSet
from schemas.page import CrawlResult
from schemas.publish import PublishResult

# Chunk these batches (the pages the reuse plan left to chunk) and yield each batch's
# outcomes, in any order.
MapBatches = Callable[[list[list[PageInput]], ReusePlan], Iterable[list[PackedOutcome]]]


@dataclass(frozen=True)
class RunStart:
    data_dir: Path
    run_id: str
    run_dir: Path
    baseline: tuple[str, Path] | None  # (run id, run dir) of the last good run
    full: bool

    @property
    def baseline_state(self) -> Path | None:
        """The baseline's outcome store, unless a full rebuild was asked for."""
        if self.full or self.baseline is None:
            return None
        return self.baseline[1] / STATE_FILE


@dataclass
class ChunkedRun:
    """The chunk stage's hand-over: the plan, the run's store holding every outcome, and
    the writer that has written the run's rows as far as the outcomes allowed."""

    start: RunStart
    inputs: list[PageInput]
    plan: AliasPlan
    reuse: ReusePlan
    store: OutcomeStore
    writer: RunWriter
    encoding: str


def start_run(data_dir: Path, run_id: str | None = None, *, full: bool = False) -> RunStart:
    """Find the baseline first, then claim the run's directory (it is never the baseline)."""
    data_dir = Path(data_dir).resolve()  # GX needs absolute paths
    baseline = last_good_run(data_dir)
    run_id, run_dir = claim_run_dir(data_dir / RUNS_DIR, run_id)
    return RunStart(data_dir, run_id, run_dir, baseline, full)


def chunk_stage(
    start: RunStart,
    crawl: CrawlResult,
    map_batches: MapBatches,
    *,
    workers: int,
    encoding: str = DEFAULT_ENCODING,
    options: ChunkerOptions | None = None,
) -> ChunkedRun:
    """Reuse what the baseline has, chunk the rest; every outcome ends up in the run's store.

    The run's rows are written as the outcomes come in (`RunWriter`), so in a process that
    waits for its chunking workers the writing is done while they chunk; the rows of a page
    the baseline wrote the same way are copied from its files (`firechunk.emissions`).
    """
    started = time.perf_counter()
    options = options or ChunkerOptions()
    with failure_recorded(start.run_dir, start.run_id):
        inputs = page_inputs(crawl)
        plan = AliasPlan.from_inputs(inputs)
        reuse = plan_reuse(plan, encoding, options, start.baseline_state)
        store = OutcomeStore.create(start.run_dir / STATE_FILE, encoding=encoding)
        writer = None
        try:
            if reuse.reused:
                store.copy_from(start.baseline_state, reuse.reused)
            writer = RunWriter(
                inputs,
                plan,
                reuse.keys,
                store,
                start.run_dir,
                encoding=encoding,
                started=started,
                baseline=_baseline_rows(start),
            )
            writer.add(store.content_hashes())
            batches = list(make_batches(reuse.fresh, workers)) if reuse.fresh else []
            for outcomes in map_batches(batches, reuse):
                for outcome in outcomes:
                    store.put(reuse.keys[outcome.index], outcome)
                writer.add({reuse.keys[o.index]: o.content_hash for o in outcomes})
        except BaseException:
            if writer is not None:
                writer.abandon()
            store.discard()
            raise
    return ChunkedRun(start, inputs, plan, reuse, store, writer, encoding)


def _baseline_rows(start: RunStart) -> BaselineRows | None:
    """The baseline's chunk files and page emissions, unless this is a full rebuild."""
    if start.baseline_state is None:
        return None
    return BaselineRows.open(start.baseline[1])


def write_stage(chunked: ChunkedRun) -> tuple[WrittenRun, ChangeSet]:
    """Finish the run's files, write `changes.json`; close the run's store."""
    start = chunked.start
    with failure_recorded(start.run_dir, start.run_id):
        try:
            written = chunked.writer.finish()
        except BaseException:
            chunked.store.discard()
            raise
        chunked.store.close()
        changes = change_set(
            start.run_id,
            written.chunk_rows,
            written.pages,
            baseline=start.baseline,
            full=start.full,
            pages_rechunked=len(chunked.reuse.fresh),
            pages_reused=chunked.reuse.pages_reused,
            pages_copied=written.pages_copied,
        )
        write_changes(start.run_dir, changes)
    return written, changes


def publish_stage(
    start: RunStart, written: WrittenRun, validator: ValidationProcess | None = None
) -> PublishResult:
    """Validate the written run (in `validator`'s helper process if given); publish it as
    `latest` only if every expectation passed."""
    started = time.perf_counter()
    with failure_recorded(start.run_dir, start.run_id):
        tables = tables_from_facts(written.facts, written.pages, written.report.duplicates)
    outcome = validate_written_run(
        tables, start.run_dir, start.run_id, started=started, validator=validator
    )
    baseline_id = start.baseline[0] if start.baseline else None
    return publish_if_passed(
        start.data_dir, start.run_id, start.run_dir, outcome, baseline_id=baseline_id
    )


def rebuild_here(
    crawl: CrawlResult,
    data_dir: Path,
    run_id: str | None = None,
    *,
    full: bool = False,
    encoding: str = DEFAULT_ENCODING,
    options: ChunkerOptions | None = None,
) -> tuple[PublishResult, ChangeSet]:
    """Every stage in this process, batches one after another."""
    options = options or ChunkerOptions()
    start = start_run(data_dir, run_id, full=full)
    chunked = chunk_stage(
        start,
        crawl,
        in_this_process(encoding, options),
        workers=1,
        encoding=encoding,
        options=options,
    )
    written, changes = write_stage(chunked)
    return publish_stage(start, written), changes


def in_this_process(
    encoding: str = DEFAULT_ENCODING, options: ChunkerOptions | None = None
) -> MapBatches:
    """The `MapBatches` that chunks the batches one after another, in this process."""
    options = options or ChunkerOptions()

    def map_here(
        batches: list[list[PageInput]], _reuse: ReusePlan
    ) -> Iterable[list[PackedOutcome]]:
        return (chunk_for_store(batch, encoding, options) for batch in batches)

    return map_here
