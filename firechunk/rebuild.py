"""The stages of an incremental rebuild, with the executor of the chunking left open.

    start    claim data/runs/<run-id>/, find the baseline (the run data/latest points at)
    chunk    plan aliases, key every page, copy the outcomes the baseline has into the
             run's store, chunk the other pages batch by batch (`map_batches`), store them
    write    one pass in crawl order over the stored outcomes (`firechunk.assemble`),
             writing the run's files as it goes, then `changes.json` against the baseline
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

from firechunk.assemble import Assembled, assemble
from firechunk.atomic import write_json
from firechunk.changes import change_set, write_changes
from firechunk.chunker.page import ChunkerOptions
from firechunk.incremental import (
    STATE_FILE,
    OutcomeStore,
    PackedOutcome,
    ReusePlan,
    StoredOutcome,
    chunk_pages,
    plan_reuse,
)
from firechunk.outputs import REPORT_JSON, ChunkFileWriter, write_page_files
from firechunk.plan import AliasPlan, PageInput, make_batches, page_inputs
from firechunk.publish import (
    RUNS_DIR,
    claim_run_dir,
    failure_recorded,
    last_good_run,
    publish_if_passed,
    validate_written_run,
)
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


@dataclass(frozen=True)
class ChunkedRun:
    """The chunk stage's hand-over: the plan, and every page's outcome in the run's store
    (`<run-dir>/rebuild_state.sqlite`, closed)."""

    start: RunStart
    inputs: list[PageInput]
    plan: AliasPlan
    reuse: ReusePlan
    encoding: str
    started: float


@dataclass
class WrittenRun:
    """What the written run's validation, change set and dashboard need."""

    run_dir: Path
    assembled: Assembled

    @property
    def report(self):
        return self.assembled.report


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
    """Reuse what the baseline has, chunk the rest; every outcome ends up in the run's store."""
    started = time.perf_counter()
    options = options or ChunkerOptions()
    with failure_recorded(start.run_dir, start.run_id):
        inputs = page_inputs(crawl)
        plan = AliasPlan.from_inputs(inputs)
        reuse = plan_reuse(plan, encoding, options, start.baseline_state)
        store = OutcomeStore.create(start.run_dir / STATE_FILE, encoding=encoding)
        try:
            if reuse.reused:
                store.copy_from(start.baseline_state, reuse.reused)
            batches = list(make_batches(reuse.fresh, workers)) if reuse.fresh else []
            for outcomes in map_batches(batches, reuse):
                for outcome in outcomes:
                    store.put(reuse.keys[outcome.index], outcome)
        except BaseException:
            store.discard()
            raise
        store.close()
    return ChunkedRun(start, inputs, plan, reuse, encoding, started)


class StoredOutcomes:
    """The outcomes in a run's store, by the index of the page chunked (`Outcomes`)."""

    def __init__(self, store: OutcomeStore, keys: dict[int, str]) -> None:
        self._store, self._keys = store, keys
        self._hashes = store.content_hashes()

    def content_hash(self, index: int) -> str | None:
        return self._hashes[self._keys[index]]

    def get(self, index: int) -> StoredOutcome:
        return self._store.get(self._keys[index], index)


def write_stage(chunked: ChunkedRun) -> tuple[WrittenRun, ChangeSet]:
    """Assemble the run from its store and write its files, then `changes.json`."""
    start = chunked.start
    with failure_recorded(start.run_dir, start.run_id):
        store = OutcomeStore.reopen(start.run_dir / STATE_FILE)
        try:
            with ChunkFileWriter(start.run_dir) as writer:
                assembled = assemble(
                    chunked.inputs,
                    chunked.plan,
                    StoredOutcomes(store, chunked.reuse.keys),
                    writer,
                    encoding=chunked.encoding,
                    started=chunked.started,
                )
            store.put_chunk_rows(assembled.row_digests.items())
        finally:
            store.close()
        write_page_files(start.run_dir, assembled.pages, assembled.quarantine)
        write_json(start.run_dir / REPORT_JSON, assembled.report.model_dump(mode="json"))
        changes = change_set(
            start.run_id,
            assembled.row_digests,
            assembled.pages,
            baseline=start.baseline,
            full=start.full,
            pages_rechunked=len(chunked.reuse.fresh),
            pages_reused=chunked.reuse.pages_reused,
        )
        write_changes(start.run_dir, changes)
    return WrittenRun(start.run_dir, assembled), changes


def publish_stage(
    start: RunStart, written: WrittenRun, validator: ValidationProcess | None = None
) -> PublishResult:
    """Validate the written run (in `validator`'s helper process if given); publish it as
    `latest` only if every expectation passed."""
    started = time.perf_counter()
    with failure_recorded(start.run_dir, start.run_id):
        assembled = written.assembled
        tables = tables_from_facts(assembled.facts, assembled.pages, assembled.report.duplicates)
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
        return (chunk_pages(batch, encoding, options) for batch in batches)

    return map_here
