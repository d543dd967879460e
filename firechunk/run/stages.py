"""The stages that turn a crawl into a run directory, each reading what the one before wrote.

    start     claim data/runs/<run-id>/ (or an --out directory), note its collection (the
              doc set, declared or derived from the crawl target: `firechunk.run.collection`)
              and its baseline (the run the collection's latest points at) in its run.json
    chunk     plan the pages (canonical URLs, aliases), key them, copy the outcomes the
              baseline's page cache has, chunk the rest on an executor, keep it all in the
              run's page cache (`firechunk.run.cache`)
    write     one pass in crawl order over the cache (`firechunk.run.assemble`): the chunk
              files, pages, quarantine, report, the validation tables, changes.json
    validate  every suite in expectations/ over the tables, the verdict in status.json;
              pages that failed page-level expectations, when few enough, are set aside
              (`pages_to_set_aside_of`, `firechunk.validate.set_aside`): the pipeline
              writes and validates the run again without them
    publish   the collection's latest, then data/latest -> the run, only if it passed
              (`firechunk.publish`)

A stage takes the run's `RunStart` (small, and saved in the run directory, so a stage can
run in another task, process or day) and hands on only small summaries. Their order, and
which a run needs, is `firechunk.pipeline`'s.

Safety: the baseline is only ever the run the collection's `latest` points at (never a run
of another doc set), and `latest` only moves to a run that passed validation. A run that
fails (validation, or an error on the way) is kept, marked failed, and neither becomes
`latest` nor the next run's baseline. A full rebuild
(`full=True`) chunks every page again, but its change set is still relative to the last
good run: that is what the vector database holds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from firechunk.activity import doing, stop_if_interrupted
from firechunk.atomic import write_json
from firechunk.chunker.page import ChunkerOptions
from firechunk.chunker.split import Limits
from firechunk.crawlfile import CrawlReader
from firechunk.layout import DataDir, RunDir
from firechunk.publish import (
    adopt_latest,
    claim_run_dir,
    describe_latest,
    failure_recorded,
    interrupt_recorded,
    last_good_run,
    publish_if_passed,
    record_verdict,
    refuse,
)
from firechunk.retention import hold_run_lock
from firechunk.run.assemble import NOTHING_ASIDE, Aside, assemble
from firechunk.run.baseline import damage_warning, find_baseline, rows_of_pages
from firechunk.run.cache import PageCache, outcome_key, read_chunk_rows
from firechunk.run.changes import change_set, read_changes, write_changes
from firechunk.run.collection import declared, run_collection
from firechunk.run.executors import Executor, in_process, results_of
from firechunk.run.manifest import write_manifest
from firechunk.run.plan import make_batches, page_inputs, plan_crawl
from firechunk.run.shrink import shrink_problem
from firechunk.run.write import RunFileWriter, read_report, write_page_files
from firechunk.schemas.changes import ChangeSet
from firechunk.schemas.job import CrawlTarget
from firechunk.schemas.publish import PublishResult, RunStatus
from firechunk.schemas.report import ChunkReport, PageRecord
from firechunk.schemas.validation import ValidationOutcome
from firechunk.settings import DEFAULT_WORKERS, INLINE_CHARS, MAX_SHRINK, RunSettings
from firechunk.validate.facts import ChunkFacts
from firechunk.validate.set_aside import SetAside, pages_to_set_aside
from firechunk.validate.suites import SUITES_DIR, record_outcome, validate_tables
from firechunk.validate.tables import TableBuilder, TableFiles, write_tables

Progress = Callable[[int, int], None]  # (pages chunked so far, pages to chunk)


class RunStart(BaseModel, frozen=True):
    """A run's identity, collection and baseline, saved as its run.json when the run is
    claimed. Its settings hold its collection, declared or derived as it started."""

    run_id: str
    run_dir: Path
    data_dir: Path | None  # None: an --out run, never published
    baseline_id: str | None = None
    baseline_dir: Path | None = None
    baseline_damaged: tuple[str, ...] = ()  # its files changed since it was published
    settings: RunSettings = RunSettings()

    @property
    def collection(self) -> str:
        """The doc set the run belongs to; for a run started before runs recorded one, what
        its report named."""
        return self.settings.collection or run_collection(self.run_dir) or "unknown"

    @property
    def reuse_from(self) -> Path | None:
        """The baseline's page cache, unless a full rebuild was asked for or the baseline's
        files are not the ones published (`firechunk.run.baseline`)."""
        if self.settings.full or self.baseline_dir is None or self.baseline_damaged:
            return None
        return RunDir(self.baseline_dir).state_file

    @classmethod
    def load(cls, run_dir: Path) -> RunStart:
        path = RunDir(run_dir).run_json
        if not path.is_file():
            raise FileNotFoundError(f"{path}: not a run directory (no {path.name})")
        return cls.model_validate_json(path.read_bytes())


class Chunked(BaseModel, frozen=True):
    """What the chunk stage did."""

    pages_in: int
    pages_to_chunk: int  # the others are the same URL or markdown as one of these
    pages_reused: int
    pages_chunked: int
    in_this_process: bool  # too little left to chunk to be worth starting workers


class Written(BaseModel, frozen=True):
    """What the write stage did: the run's report, and where its change set is. The change
    set itself stays in changes.json: it names every chunk and page a first run adds, and a
    stage's result lives as long as the flow run (Prefect keeps each task's result)."""

    report: ChunkReport
    run_dir: Path

    def changes(self) -> ChangeSet:
        """The run's change set (changes.json)."""
        return read_changes(self.run_dir)


def start_run(
    data_dir: Path,
    run_id: str | None = None,
    settings: RunSettings = RunSettings(),
    *,
    source: Path | CrawlTarget | None = None,
) -> RunStart:
    """Name the run's collection (the settings', else the one `source`, the crawl file or
    the crawl's target, names: `firechunk.run.collection.declared`), find that collection's
    baseline, then claim the run's directory (it is never the baseline)."""
    data_dir = Path(data_dir).resolve()  # GX needs absolute paths
    settings = declared(settings, source)
    assert settings.collection is not None, "declared() names the collection, or raises"
    adopt_latest(data_dir)
    baseline = find_baseline(data_dir, settings.collection)
    run_id, run_dir = claim_run_dir(DataDir(data_dir).runs, run_id)
    hold_run_lock(run_dir)  # for as long as this process lives: the run is running
    start = RunStart(
        run_id=run_id,
        run_dir=run_dir,
        data_dir=data_dir,
        baseline_id=baseline.run_id if baseline else None,
        baseline_dir=baseline.run_dir if baseline else None,
        baseline_damaged=baseline.damaged if baseline else (),
        settings=settings,
    )
    write_json(RunDir(run_dir).run_json, start.model_dump(mode="json"))
    return start


def start_out_run(
    out_dir: Path,
    settings: RunSettings = RunSettings(),
    *,
    source: Path | CrawlTarget | None = None,
) -> RunStart:
    """A run written to `out_dir` (new or empty), with no baseline, never published."""
    settings = declared(settings, source)
    out_dir = Path(out_dir).resolve()
    if out_dir.exists() and any(out_dir.iterdir()):
        raise FileExistsError(f"{out_dir} is not empty: write the run to a new directory")
    out_dir.mkdir(parents=True, exist_ok=True)
    start = RunStart(
        run_id=out_dir.name,
        run_dir=out_dir,
        data_dir=None,
        settings=settings,
    )
    write_json(RunDir(out_dir).run_json, start.model_dump(mode="json"))
    return start


def chunker_options(settings: RunSettings) -> ChunkerOptions:
    """The chunker's options for a run: its token limits (the page cache's key covers them)."""
    limits = Limits(
        soft=settings.soft_tokens, hard=settings.hard_tokens, min_tokens=settings.min_tokens
    )
    return ChunkerOptions(limits=limits)


def chunk_stage(
    start: RunStart,
    crawl_file: Path,
    executor: Executor,
    *,
    options: ChunkerOptions | None = None,
    progress: Progress | None = None,
) -> Chunked:
    """Plan the crawl, reuse what the baseline has, chunk the rest with `executor` on the
    settings' `workers` (None: `DEFAULT_WORKERS`, or this process for little work); the plan
    and every outcome end up in the run's page cache. `options`: default, the settings'.

    The crawl file is read a page at a time, three times, so that what is held does not
    grow with the crawl: to plan it (`plan_crawl`: small facts of each page and the counts
    of its lines), to key the pages to chunk (a key covers each page's chrome lines, known
    only once the whole crawl is counted), then to hand the pages the baseline does not
    have to the executor, a few batches at a time."""
    settings = start.settings
    options = options or chunker_options(settings)
    workers = settings.workers
    started = time.time()
    with _stage(start, "chunking"):
        crawl = CrawlReader(crawl_file, allow_partial=settings.allow_partial)
        plan = plan_crawl(crawl)
        keys = {
            page.index: outcome_key(
                page, plan.pages[page.index].raw_hash, settings.encoding, options
            )
            for page in page_inputs(crawl, plan, plan.to_chunk)
        }
        cache = PageCache.create(RunDir(start.run_dir).state_file, encoding=settings.encoding)
        try:
            reused = cache.copy_from(start.reuse_from, keys.values()) if start.reuse_from else set()
            fresh = [index for index in plan.to_chunk if keys[index] not in reused]
            fresh_chars = plan.characters(fresh)
            inline = fresh_chars < INLINE_CHARS and (bool(reused) or workers is None)
            if inline:
                executor, workers = in_process, 1
            workers = workers or DEFAULT_WORKERS
            done = 0
            batches = make_batches(page_inputs(crawl, plan, fresh), workers, fresh_chars)
            with results_of(executor, batches, settings.encoding, options) as results:
                for outcomes in results:
                    for outcome in outcomes:
                        cache.put(keys[outcome.index], outcome)
                    done += len(outcomes)
                    stop_if_interrupted()
                    if progress:
                        progress(done, len(fresh))
            cache.put_plan(plan.pages, keys)
            for name, value in (("started", started), ("pages_chunked", len(fresh))):
                cache.set_meta(name, str(value))
        except BaseException:
            cache.discard()
            raise
        cache.close()
    return Chunked(
        pages_in=len(plan.pages),
        pages_to_chunk=len(plan.to_chunk),
        pages_reused=len(plan.to_chunk) - len(fresh),
        pages_chunked=len(fresh),
        in_this_process=inline,
    )


def write_stage(start: RunStart, set_aside: Mapping[str, tuple[str, ...]] | None = None) -> Written:
    """Assemble the run from its page cache and write every file of it, changes.json last.

    `set_aside`: pages (canonical URL -> the expectations they failed) to quarantine, with
    the baseline's chunks for them in place of theirs (`validate_stage`)."""
    run_dir = start.run_dir
    _check_baseline_kept(start)
    with _stage(start, "writing the run"):
        aside = _aside(start, set_aside) if set_aside else NOTHING_ASIDE
        report, pages_chunked, to_chunk = _assemble_files(start, aside)
        changes = change_set(
            start.run_id,
            start.collection,
            read_chunk_rows(RunDir(run_dir).state_file),
            RunDir(run_dir).pages_parquet,
            baseline=(
                (start.baseline_id, start.baseline_dir)
                if start.baseline_id and start.baseline_dir
                else None
            ),
            full=start.settings.full,
            baseline_damaged=start.baseline_damaged,
            pages_rechunked=pages_chunked,
            pages_reused=to_chunk - pages_chunked,
        )
        write_changes(run_dir, changes)
    return Written(report=report, run_dir=run_dir)


def _assemble_files(start: RunStart, aside: Aside) -> tuple[ChunkReport, int, int]:
    """Write the chunk files, pages, quarantine, report and validation tables, and the
    chunk rows' digests to the page cache; return the report, the pages chunked and the
    pages to chunk. Rows and page records go to their files, their digests to the cache
    and the facts the tables need to the tables' builder, page by page as the run is
    assembled (`_RunFiles`)."""
    run_dir = start.run_dir
    cache = PageCache.open(RunDir(run_dir).state_file)
    try:
        pages = cache.plan()
        started = float(cache.meta("started") or time.time())
        pages_chunked = int(cache.meta("pages_chunked") or 0)
        cache.clear_chunk_rows()
        with RunFileWriter(run_dir) as writer:
            sink = _RunFiles(writer, cache, TableBuilder())
            assembled = assemble(
                pages, cache, sink, encoding=start.settings.encoding, started=started, aside=aside
            )
    finally:
        cache.close()
    report = assembled.report
    if start.baseline_damaged:
        report.warnings.insert(0, damage_warning(str(start.baseline_id), start.baseline_damaged))
    report.collection = start.collection
    write_page_files(run_dir, assembled.quarantine, report)
    sink.tables.add_duplicates(report.duplicates)
    write_tables(run_dir, sink.tables.tables())
    to_chunk = sum(page.chunked_as == page.index for page in pages)
    return report, pages_chunked, to_chunk


@dataclass(frozen=True)
class _RunFiles:
    """A written run's sink (`firechunk.run.assemble.RunSink`): rows and records to the
    run's files, each row's digest to the page cache, the facts the suites check to the
    tables' builder."""

    files: RunFileWriter
    cache: PageCache
    tables: TableBuilder

    def add_rows(self, rows: list[dict[str, Any]], facts: list[ChunkFacts]) -> None:
        self.tables.add_chunks(facts)
        digests = self.files.add_rows(rows)
        self.cache.add_chunk_rows(zip([chunk.chunk_id for chunk in facts], digests, strict=True))

    def add_page(self, record: PageRecord) -> None:
        self.tables.add_page(record)
        self.files.add_page(record)


def _aside(start: RunStart, set_aside: Mapping[str, tuple[str, ...]]) -> Aside:
    """The pages to set aside, with the baseline's rows for them when its files are the
    ones published (a damaged baseline carries nothing forward)."""
    usable = None if start.baseline_damaged else start.baseline_dir
    return Aside(
        pages=dict(set_aside),
        rows=rows_of_pages(usable, set(set_aside)) if usable is not None else {},
        carried_from=start.baseline_id if usable is not None else None,
    )


class RunNotStarted(RuntimeError):
    """The run's directory could not be claimed: the run id is taken, the --out directory
    is not empty, or the settings name no collection. Nothing was written."""


class RunSuperseded(RuntimeError):
    """The run's baseline was removed while it ran (another run was published and pruned
    it): its change set cannot be computed. Marked superseded; the next run compares with
    the new `latest`."""


def _check_baseline_kept(start: RunStart) -> None:
    if start.baseline_dir is None or start.baseline_dir.is_dir():
        return
    current = last_good_run(start.data_dir, start.collection) if start.data_dir else None
    moved = f"; latest is now run {current[0]}" if current else ""
    why = f"its baseline, run {start.baseline_id}, was removed while it ran{moved}"
    RunDir(start.run_dir).write_status(
        RunStatus(run_id=start.run_id, status="superseded", error=why)
    )
    raise RunSuperseded(f"run {start.run_id} was not written: {why}. Rebuild again.")


def validate_stage(
    start: RunStart,
    suites_dir: Path = SUITES_DIR,
    set_aside: Mapping[str, tuple[str, ...]] | None = None,
) -> ValidationOutcome:
    """Run every suite over the run's tables; record the verdict in its status.json.

    `set_aside`: the pages the run was written again without (`pages_to_set_aside_of`),
    whose records join the outcome; a failure no page can be set aside for says why."""
    with _stage(start, "validating"):
        outcome = _validate(start, suites_dir)
        if set_aside:
            aside = read_report(start.run_dir).pages_set_aside
            outcome = outcome.model_copy(update={"pages_set_aside": aside})
            record_outcome(start.run_dir, outcome, start.run_id)
        elif refused := _set_aside(start, outcome).refused:
            outcome = outcome.model_copy(update={"set_aside_refused": refused})
            record_outcome(start.run_dir, outcome, start.run_id)
    record_verdict(start.run_dir, start.run_id, outcome)
    return outcome


def pages_to_set_aside_of(
    start: RunStart, outcome: ValidationOutcome
) -> dict[str, tuple[str, ...]]:
    """When only page-level expectations failed, on at most `max_failed_pages` of the
    pages: those pages (canonical URL -> the expectations they failed), to be set aside
    (quarantined, the baseline's chunks for them kept) with the run written and validated
    again. One bad page costs that page, not the night. Empty otherwise."""
    return {} if outcome.success else dict(_set_aside(start, outcome).pages)


def _set_aside(start: RunStart, outcome: ValidationOutcome) -> SetAside:
    pages = TableFiles(start.run_dir)["pages"]
    return pages_to_set_aside(outcome, pages, start.settings.max_failed_pages)


def _validate(start: RunStart, suites_dir: Path) -> ValidationOutcome:
    started = time.perf_counter()
    return validate_tables(
        TableFiles(start.run_dir),
        start.run_dir,
        suites_dir=suites_dir,
        run_id=start.run_id,
        started=started,
        settings=start.settings,
    )


def publish_stage(start: RunStart, outcome: ValidationOutcome) -> PublishResult:
    """Point the collection's latest (and data/latest) at the run if it passed, does not
    shrink too much against its baseline (`firechunk.run.shrink`) and the baseline is still
    the collection's `latest`."""
    data_dir = start.data_dir
    if data_dir is None:
        raise ValueError(f"run {start.run_id} was written with --out: it cannot be published")
    with _interruptible(start, "publishing"):
        if outcome.success and start.baseline_dir is not None and not start.settings.allow_shrink:
            same = _same_limits(start.settings, start.baseline_dir)
            problem = shrink_problem(
                start.run_dir, start.baseline_dir, MAX_SHRINK, count_chunks=same
            )
            if problem is not None:
                return refuse(
                    data_dir,
                    start.run_id,
                    start.run_dir,
                    outcome,
                    problem,
                    collection=start.collection,
                )
        if outcome.success:
            write_manifest(start.run_dir)
        return publish_if_passed(
            data_dir,
            start.run_id,
            start.run_dir,
            outcome,
            collection=start.collection,
            baseline_id=start.baseline_id,
        )


def _same_limits(settings: RunSettings, baseline_dir: Path) -> bool:
    """Whether the baseline was chunked to the same token limits and encoding as this run
    (its run.json; a baseline that has none is taken to have the defaults)."""
    try:
        before = RunStart.load(baseline_dir).settings
    except (OSError, ValueError):
        return True
    limits = ("encoding", "soft_tokens", "hard_tokens", "min_tokens")
    return all(getattr(before, name) == getattr(settings, name) for name in limits)


@contextmanager
def _stage(start: RunStart, what: str) -> Iterator[None]:
    """A stage that writes the run: an error marks it failed, an interrupt interrupted."""
    with _interruptible(start, what), failure_recorded(start.run_dir, start.run_id):
        yield


@contextmanager
def _interruptible(start: RunStart, what: str) -> Iterator[None]:
    """An interrupt (Ctrl-C, SIGTERM) here marks the run interrupted, and the line the
    command ends with says the run stopped while doing `what` and where `latest` is."""
    with (
        doing(f"run {start.run_id}", what, lambda: describe_latest(start.data_dir, start.run_id)),
        interrupt_recorded(start.data_dir, start.run_dir, start.run_id, what),
    ):
        yield
        stop_if_interrupted()
