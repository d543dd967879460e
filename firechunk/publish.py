"""Publish a validated run: only a run that passed validation becomes `latest`.

Every run, passed or failed, keeps its directory under `runs/` and its `status.json`. A
run that passed becomes its collection's `latest` (`collections/<name>/latest`, the
baseline of that doc set's next run) and then the data directory's `latest` (the last run
published, of any collection: the run of a data directory that holds one doc set). Each is
a relative symlink (`firechunk.layout`) switched with one `os.replace` of a new symlink
over the old one, so a reader following it sees the previous good run or the new good
run, never a mix, and a failed run never touches either.

A data directory from before collections (a `latest`, no `collections/`) is adopted as a
run starts: its `latest` becomes its run's collection's (`adopt_latest`).
"""

from __future__ import annotations

import fcntl
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from firechunk.activity import is_interrupt
from firechunk.layout import DataDir, RunDir
from firechunk.run.baseline import read_marker
from firechunk.run.collection import collection_of_urls, run_collection
from firechunk.schemas.publish import PublishResult, RunStatus
from firechunk.schemas.validation import ExpectationOutcome, ValidationOutcome
from firechunk.settings import check_run_id

SHRINK_GUARD = "publish/shrink_guard"  # in status.json's failed_expectations: `refuse`d


class RunNotPublished(RuntimeError):
    """The run failed validation, the shrink guard refused it, or `latest` moved to another
    run while it ran: it is kept in runs/, marked failed or superseded, and was not
    published. The command says `format_result` in one line and exits 1."""

    def __init__(self, message: str, result: PublishResult | None = None) -> None:
        super().__init__(message)
        self.result = result


@contextmanager
def failure_recorded(run_dir: Path, run_id: str) -> Iterator[None]:
    """Mark the run failed, with the error, if the `with` block raises; then re-raise."""
    try:
        yield
    except Exception as error:
        if not is_interrupt(error):  # an interrupt's own marking is `interrupt_recorded`'s
            RunDir(run_dir).write_status(
                RunStatus(run_id=run_id, status="failed", error=repr(error))
            )
        raise


@contextmanager
def interrupt_recorded(
    data_dir: Path | None, run_dir: Path, run_id: str, what: str
) -> Iterator[None]:
    """Mark the run interrupted if Ctrl-C or SIGTERM stops the `with` block (`what` it was
    doing); then re-raise. Marked here, as the interrupt passes, so a flow run a Prefect
    worker cancels is marked as well as a command a person stops."""
    try:
        yield
    except BaseException as error:
        if is_interrupt(error):
            mark_interrupted(data_dir, run_dir, run_id, what)
        raise


def mark_interrupted(data_dir: Path | None, run_dir: Path, run_id: str, what: str = "") -> bool:
    """Give a run an interrupt stopped the status `interrupted`, unless it had ended first:
    a verdict written, other than a pass not yet published (the interrupt came while it
    was being published). A run written with --out (`data_dir` None) ends at its verdict.
    Whether it was marked."""
    try:
        status = RunDir(run_dir).read_status()
    except (OSError, ValueError):
        status = None  # a status.json cut short by the interrupt: it ended nothing
    published = data_dir is None or Path(run_dir).resolve() in DataDir(data_dir).published_runs()
    if status is not None and not (status.status == "passed" and not published):
        return False
    error = f"interrupted while {what}" if what else "interrupted"
    RunDir(run_dir).write_status(RunStatus(run_id=run_id, status="interrupted", error=error))
    return True


def describe_latest(data_dir: Path | None, run_id: str) -> str:
    """What the run's collection's `latest` is, after the run `run_id` was interrupted:
    said in the one line the command ends with."""
    if data_dir is None:
        return "nothing published (--out)"
    data = DataDir(data_dir)
    collection = run_collection(data.run(run_id).path)
    current_dir = data.latest_run(collection) if collection else data.latest_run()
    if current_dir is None:
        return "latest unchanged (no run published yet)"
    current = current_dir.name
    if current == run_id:
        return f"latest -> run {run_id} (published before the interrupt)"
    return f"latest unchanged (run {current})"


def record_verdict(run_dir: Path, run_id: str, outcome: ValidationOutcome) -> Path:
    return RunDir(run_dir).write_status(
        RunStatus(
            run_id=run_id,
            status="passed" if outcome.success else "failed",
            evaluated_expectations=outcome.evaluated_expectations,
            failed_expectations=[f"{item.suite}/{item.name}" for item in outcome.failed],
        ),
    )


# `publish_if_passed`'s default: publish over whatever run `latest` points at.
ANY_BASELINE = object()


def publish_if_passed(
    data_dir: Path,
    run_id: str,
    run_dir: Path,
    outcome: ValidationOutcome,
    *,
    collection: str,
    baseline_id: str | None | object = ANY_BASELINE,
) -> PublishResult:
    """Switch the collection's `latest`, then the data directory's, to the run only if its
    validation passed.

    A rebuild's `changes.json` is relative to the run its collection's `latest` pointed at
    when it started (`baseline_id`, None for no run). If another run of the collection was
    published meanwhile (a manual rebuild beside the nightly one), publishing this one
    would hand the database a change set for a state it no longer has: the run is kept,
    marked superseded, not published. Runs of other collections never stand in its way.
    Check and switch happen under one lock, so two runs finishing together cannot both
    pass the check.
    """
    superseded_by = None
    if outcome.success:
        with publish_lock(data_dir):
            current = last_good_run(data_dir, collection)
            current_id = current[0] if current else None
            if baseline_id is not ANY_BASELINE and current_id != baseline_id:
                superseded_by = current_id
            else:
                switch_latest(data_dir, run_dir, collection)
    if superseded_by is not None:
        RunDir(run_dir).write_status(
            RunStatus(
                run_id=run_id,
                status="superseded",
                evaluated_expectations=outcome.evaluated_expectations,
                error=f"latest moved to run {superseded_by} while this run ran "
                f"(its changes are relative to run {baseline_id})",
            ),
        )
    return PublishResult(
        run_id=run_id,
        run_dir=run_dir,
        published=outcome.success and superseded_by is None,
        latest=DataDir(data_dir).collection_latest(collection),
        validation=outcome,
        superseded_by=superseded_by,
    )


def refuse(
    data_dir: Path,
    run_id: str,
    run_dir: Path,
    outcome: ValidationOutcome,
    why: str,
    *,
    collection: str,
) -> PublishResult:
    """Keep a run that passed validation out of `latest` for `why` (the shrink guard):
    marked failed, with the reason, so it is neither published nor anyone's baseline."""
    RunDir(run_dir).write_status(
        RunStatus(
            run_id=run_id,
            status="failed",
            evaluated_expectations=outcome.evaluated_expectations,
            failed_expectations=[SHRINK_GUARD],
            error=why,
        ),
    )
    return PublishResult(
        run_id=run_id,
        run_dir=run_dir,
        published=False,
        latest=DataDir(data_dir).collection_latest(collection),
        validation=outcome,
        refused=why,
    )


@contextmanager
def publish_lock(data_dir: Path) -> Iterator[None]:
    """An exclusive lock on publishing into `data_dir`; the OS drops it if the process dies."""
    lock = DataDir(data_dir).publish_lock
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # held for a few milliseconds: wait for it
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def last_good_run(data_dir: Path, collection: str | None = None) -> tuple[str, Path] | None:
    """The run the `latest` of `collection` (None: of the data directory) points at (id,
    directory), if it is there and passed.

    `latest` only ever points at a run that passed; the status is read again so that a
    run directory someone edited by hand is not trusted as the baseline of the next run.
    """
    run_dir = DataDir(data_dir).latest_run(collection)
    if run_dir is None:
        return None
    status = RunDir(run_dir).read_status()
    if status is None or status.status != "passed":
        return None
    return status.run_id, run_dir


def new_run_id(now: datetime | None = None) -> str:
    """A UTC timestamp that sorts in time order, plus a random suffix for uniqueness."""
    now = now or datetime.now(UTC)
    return f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def claim_run_dir(runs_dir: Path, run_id: str | None = None) -> tuple[str, Path]:
    """Create the run's directory; creating it is what makes the id ours (never reused).
    A run starts here, so the links a killed publication left go first."""
    remove_stray_links(runs_dir.parent)
    runs_dir.mkdir(parents=True, exist_ok=True)
    if run_id is not None:
        check_run_id(run_id)
        run_dir = runs_dir / run_id
        try:
            run_dir.mkdir()
        except FileExistsError:
            raise FileExistsError(f"run {run_id!r} already exists in {runs_dir}") from None
        return run_id, run_dir
    while True:
        run_id = new_run_id()
        try:
            (runs_dir / run_id).mkdir()
        except FileExistsError:
            continue  # same second and same suffix: draw again
        return run_id, runs_dir / run_id


def switch_latest(data_dir: Path, run_dir: Path, collection: str) -> Path:
    """Point the collection's `latest`, then `data_dir/latest`, at `run_dir`, each
    atomically (a relative symlink, replaced); the collection's link is returned."""
    data = DataDir(data_dir)
    for link in (data.collection_latest(collection), data.latest):
        if link.exists() and not link.is_symlink():
            raise FileExistsError(f"{link} exists and is not a symlink; move it away to publish")
    own = switch_collection_latest(data_dir, run_dir, collection)
    _switch(data.latest, run_dir)
    return own


def switch_collection_latest(data_dir: Path, run_dir: Path, collection: str) -> Path:
    """Point the collection's `latest` alone at `run_dir`, atomically; under the publish
    lock, which the caller holds."""
    return _switch(DataDir(data_dir).collection_latest(collection), run_dir)


def _switch(link: Path, run_dir: Path) -> Path:
    link.parent.mkdir(parents=True, exist_ok=True)
    temporary = DataDir.new_link(link, secrets.token_hex(4))
    os.symlink(os.path.relpath(run_dir, link.parent), temporary)
    try:
        os.replace(temporary, link)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return link


def adopt_latest(data_dir: Path) -> str | None:
    """A data directory from before collections (a `latest` and no `collections/`): its
    `latest` becomes the `latest` of its run's collection, which it returns. Once: from
    then on the data directory has `collections/`. A damaged `latest` is a BaselineError
    (`firechunk.run.baseline`), never a silent start without a baseline."""
    data = DataDir(data_dir)
    if data.collections.exists() or not os.path.lexists(data.latest):
        return None
    with publish_lock(data_dir):
        if data.collections.exists():
            return None  # adopted by another run meanwhile
        current = read_marker(data.latest)
        if current is None:
            return None
        collection = run_collection(current.run_dir) or _named_by_pages(current.run_dir)
        _switch(data.collection_latest(collection), current.run_dir)
    return collection


def _named_by_pages(run_dir: Path) -> str:
    """The collection of a run written before runs named one: its pages' shared path."""
    import polars as pl

    urls = pl.read_parquet(RunDir(run_dir).pages_parquet, columns=["url"])["url"].to_list()
    return collection_of_urls(urls)


def remove_stray_links(data_dir: Path) -> list[Path]:
    """Remove the new `latest` links a publication killed between making one and renaming
    it over `latest` left in `data_dir`. Under the publish lock, which every publication
    holds while its link exists, so never one about to be renamed."""
    if not DataDir(data_dir).new_latest_links():
        return []  # the usual case: no lock taken, no lock file made
    with publish_lock(data_dir):
        stray = [path for path in DataDir(data_dir).new_latest_links() if path.is_symlink()]
        for path in stray:
            path.unlink(missing_ok=True)
    return stray


def format_result(result: PublishResult) -> str:
    """The message the CLI prints: what was published, or which expectations failed."""
    outcome = result.validation
    if result.published:
        return "\n".join(
            [
                f"Run {result.run_id} published as {result.latest} ({_checked(outcome)}).",
                *_set_aside(outcome),
            ]
        )
    if result.refused is not None:
        return f"Run {result.run_id} passed ({_checked(outcome)}) but {result.refused}"
    if result.superseded_by is not None:
        return (
            f"Run {result.run_id} passed ({_checked(outcome)}) but was NOT published: "
            f"{result.latest} moved to run {result.superseded_by} while it ran, and its "
            f"changes.json is relative to the run before. It is kept, marked superseded, in "
            f"{result.run_dir}. Rebuild again to get changes relative to the current run."
        )
    return "\n".join(
        [
            f"Run {result.run_id} FAILED validation ({_checked(outcome)}); "
            f"{result.latest} left unchanged.",
            f"The run is kept, marked failed, in {result.run_dir}.",
            *_failures(outcome, result.run_dir),
        ]
    )


def short_reason(result: PublishResult) -> str | None:
    """Why the run was not published, in a few words (a table cell, a state's message);
    None if it was. `format_result` says it in full."""
    if result.published:
        return None
    if result.refused is not None:
        return "refused by the shrink guard"
    if result.superseded_by is not None:
        return f"superseded by run {result.superseded_by}"
    outcome = result.validation
    failed = outcome.evaluated_expectations - outcome.successful_expectations
    return f"failed validation ({failed} of {outcome.evaluated_expectations} expectations)"


def format_outcome(outcome: ValidationOutcome, run_dir: Path) -> str:
    """The message for a run validated but not published (`firechunk chunk --out`)."""
    if outcome.success:
        return "\n".join([f"{_checked(outcome)}; outputs in {run_dir}/", *_set_aside(outcome)])
    return "\n".join(
        [
            f"FAILED validation ({_checked(outcome)}); outputs kept, marked failed, in {run_dir}/",
            *_failures(outcome, run_dir),
        ]
    )


def _checked(outcome: ValidationOutcome) -> str:
    return (
        f"{outcome.successful_expectations}/{outcome.evaluated_expectations} expectations "
        f"passed in {outcome.seconds:.1f} s"
    )


def _set_aside(outcome: ValidationOutcome) -> list[str]:
    """One line per page set aside by validation: what it failed, what was kept of it."""
    if not outcome.pages_set_aside:
        return []
    lines = [
        f"{len(outcome.pages_set_aside)} page(s) failed page-level expectations and were "
        "quarantined (max_failed_pages):"
    ]
    for page in outcome.pages_set_aside:
        kept = (
            f"its {page.chunks_carried} chunks of run {page.carried_from} kept"
            if page.chunks_carried
            else "no earlier chunks to keep"
        )
        lines.append(f"  - {page.url}: {', '.join(page.expectations)}; {kept}")
    return lines


def _failures(outcome: ValidationOutcome, run_dir: Path) -> list[str]:
    """One line per failed expectation, with counts and examples, and where the details are."""
    lines = [*_set_aside(outcome), *(_describe_failure(item) for item in outcome.failed)]
    if outcome.set_aside_refused:
        lines.append(f"  Not set aside page by page: {outcome.set_aside_refused}.")
    lines.append(f"Details: {RunDir(run_dir).report_html}")
    return lines


def _describe_failure(item: ExpectationOutcome) -> str:
    where = f" ({item.column})" if item.column else ""
    if item.error:
        return f"  - {item.suite}/{item.name}{where}: could not be evaluated: {item.error}"
    if item.unexpected_count is not None:
        counts = f"{item.unexpected_count} of {item.element_count} rows"
    else:
        counts = f"observed {item.observed_value!r}"
    line = f"  - {item.suite}/{item.name}{where}: {counts}"
    for example in item.examples:
        line += "\n      e.g. " + ", ".join(
            f"{key}={_short(value)}" for key, value in example.items()
        )
    return line


def _short(value: object, limit: int = 80) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
