"""Incremental rebuilds: only changed pages are chunked again, `changes.json` says what the
vector database must do, and the result is exactly what a full rebuild gives.

The pipeline runs in this process (`firechunk.pipeline.run_pipeline`) on the bundled sample
crawl, with validation by the real GX suites; one test runs them through the Prefect flow
and the CLI. The sample has aliases (a tracking-parameter URL, two Python reference URLs
with the same cleaned content, two CLI URLs with the same markdown) and quarantined pages,
which the assembly must handle the same way on every run.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
import sqlite3
import tempfile
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from firechunk.chunker.page import ChunkerOptions
from firechunk.chunker.split import Limits
from firechunk.crawlfile import CrawlFileError, read_crawl, write_crawl
from firechunk.layout import DataDir, RunDir
from firechunk.pipeline import Request, run_pipeline
from firechunk.publish import adopt_latest, format_result
from firechunk.run import stages
from firechunk.run.baseline import BaselineError
from firechunk.run.executors import in_process
from firechunk.run.memory import chunk_crawl
from firechunk.run.stages import (
    RunSuperseded,
    chunk_stage,
    publish_stage,
    start_run,
    validate_stage,
    write_stage,
)
from firechunk.schemas.changes import ChangeSet
from firechunk.schemas.page import CrawlResult
from firechunk.schemas.publish import PublishResult
from firechunk.settings import RunSettings
from tests.corpus import CORPUS_FILES, needs_corpus
from tests.prefect_helpers import SAMPLE_CRAWL, artifacts_of, table_of

BASE = "https://docs.example.com/docs"
ARCHITECTURE = f"{BASE}/guides/architecture"
SCHEMA_PAGE = f"{BASE}/reference/sql/reporting-schema"
PUBLISH_PAGE = f"{BASE}/reference/python/publish"
RECEIVE_PAGE = f"{BASE}/reference/python/receive"
SAMPLE_COLLECTION = "docs.example.com/docs"
OUTPUT_FILES = ("chunks.json", "chunks.parquet", "pages.parquet", "quarantine.jsonl")


# --- helpers -------------------------------------------------------------------------------


def crawl_file(crawl: CrawlResult) -> Path:
    """`crawl` saved as a crawl file, what the stages read."""
    return write_crawl(Path(tempfile.mkdtemp()) / "crawl.json", crawl)


def rebuild_here(
    crawl: CrawlResult, data_dir: Path, run_id: str, *, full: bool = False
) -> tuple[PublishResult, ChangeSet]:
    """Every stage, in this process, as `firechunk chunk` runs them."""
    saved = crawl_file(crawl)
    night = run_pipeline(
        Request(run=RunSettings(full=full), replay=saved, data_dir=data_dir, run_id=run_id)
    )
    written, result = night.written, night.result
    assert written is not None and result is not None  # a run is published, or refused
    return result, written.changes()


def sample() -> CrawlResult:
    return read_crawl(SAMPLE_CRAWL)


def page_of(crawl: CrawlResult, url: str):
    [page] = [page for page in crawl.data if page.url == url]
    return page


def edited(crawl: CrawlResult, url: str, old: str, new: str) -> CrawlResult:
    """A copy of `crawl` with `old` replaced by `new` in the markdown of page `url`."""
    crawl = crawl.model_copy(deep=True)
    page = page_of(crawl, url)
    assert old in page.markdown
    page.markdown = page.markdown.replace(old, new, 1)
    return crawl


def without(crawl: CrawlResult, url: str) -> CrawlResult:
    crawl = crawl.model_copy(deep=True)
    crawl.data = [page for page in crawl.data if page.url != url]
    return crawl


def chunks_of(run_dir: Path) -> list[dict]:
    return json.loads((run_dir / "chunks.json").read_text(encoding="utf-8"))


def ids_by_page(run_dir: Path) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for chunk in chunks_of(run_dir):
        found.setdefault(chunk["metadata"]["sourceUrl"], set()).add(chunk["chunk_id"])
    return found


def report_of(run_dir: Path) -> dict:
    report = json.loads((run_dir / "report.json").read_text(encoding="utf-8"))
    report.pop("seconds")
    return report


def digests(directory: Path) -> dict[str, str]:
    """sha256 of every file under `directory` (and where a symlink points)."""
    found = {}
    for root, _dirs, files in os.walk(directory):
        for name in files:
            path = Path(root) / name
            found[str(path.relative_to(directory))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """A data root whose `latest` is a rebuild of the sample; copy it before changing it."""
    data_dir = tmp_path_factory.mktemp("baseline")
    result, changes = rebuild_here(sample(), data_dir, "night-1")
    assert result.published, result.validation.failed
    return data_dir, changes


@pytest.fixture
def data_dir(baseline, tmp_path):
    """A private copy of the baseline's data root (runs/night-1 and latest)."""
    source, _ = baseline
    target = tmp_path / "data"
    shutil.copytree(source / "runs" / "night-1", target / "runs" / "night-1")
    os.symlink("runs/night-1", target / "latest")
    return target


# --- the change set ------------------------------------------------------------------------


def test_a_first_run_upserts_every_chunk_and_says_there_was_no_baseline(baseline):
    data_dir, changes = baseline
    run_dir = data_dir / "runs" / "night-1"
    written = json.loads((run_dir / "changes.json").read_text(encoding="utf-8"))

    assert written["baseline"] is None and changes.baseline is None
    assert written["upsert"] == [chunk["chunk_id"] for chunk in chunks_of(run_dir)]
    assert written["delete"] == [] and written["pages_removed"] == []
    assert written["pages_reused"] == 0 and written["pages_rechunked"] == 11
    canonical = {
        record["canonical_url"] for record in pq.read_table(run_dir / "pages.parquet").to_pylist()
    }
    assert {page["url"] for page in written["pages_added"]} == canonical
    assert RunDir(run_dir).state_file.is_file()


def test_unchanged_input_gives_an_empty_change_set_and_identical_outputs(data_dir):
    result, changes = rebuild_here(sample(), data_dir, "night-2")

    assert result.published
    assert changes.empty, changes
    assert changes.baseline == "night-1"
    assert (changes.pages_rechunked, changes.pages_reused) == (0, 11)
    before, after = data_dir / "runs" / "night-1", data_dir / "runs" / "night-2"
    for name in OUTPUT_FILES:
        assert (after / name).read_bytes() == (before / name).read_bytes(), name
    assert report_of(after) == report_of(before)
    assert json.loads((after / "changes.json").read_text())["upsert"] == []


def test_one_changed_page_upserts_and_deletes_only_its_chunks(data_dir):
    # A sentence in the middle of the page: its chunk gets a new id (new text), and the
    # chunk after it keeps its id but points at the new one (a changed row, same text).
    crawl = edited(
        sample(),
        ARCHITECTURE,
        "None of it is needed to send your first message",
        "None of this is needed to send a first message",
    )
    result, changes = rebuild_here(crawl, data_dir, "night-2")

    assert result.published, result.validation.failed
    before = ids_by_page(data_dir / "runs" / "night-1")
    after = ids_by_page(data_dir / "runs" / "night-2")
    assert changes.pages_rechunked == 1 and changes.pages_reused == 10
    assert [page.url for page in changes.pages_changed] == [ARCHITECTURE]
    assert changes.pages_added == [] and changes.pages_removed == []
    assert changes.upsert and changes.delete
    assert set(changes.upsert) <= after[ARCHITECTURE]
    assert set(changes.delete) == before[ARCHITECTURE] - after[ARCHITECTURE]
    assert set(changes.upsert) >= after[ARCHITECTURE] - before[ARCHITECTURE]
    # Some upserts are ids the baseline has: rows whose overlap link moved, text unchanged.
    assert set(changes.upsert) & before[ARCHITECTURE]
    for url in set(before) - {ARCHITECTURE}:
        assert after[url] == before[url]


def test_a_removed_page_has_its_chunk_ids_deleted(data_dir):
    result, changes = rebuild_here(without(sample(), SCHEMA_PAGE), data_dir, "night-2")

    assert result.published, result.validation.failed
    before = ids_by_page(data_dir / "runs" / "night-1")
    assert set(changes.delete) == before[SCHEMA_PAGE] and len(changes.delete) == 3
    assert changes.upsert == []
    assert [page.url for page in changes.pages_removed] == [SCHEMA_PAGE]
    assert changes.pages_removed[0].previous_status == "chunked"
    assert changes.pages_changed == [] and changes.pages_added == []
    assert changes.pages_rechunked == 0


# --- incremental equals full ---------------------------------------------------------------


SMALLER = ChunkerOptions(limits=Limits(soft=600))
NEW_PAGE = f"{BASE}/guides/regions"
REGIONS = """# Regions

Acme Queue runs in three regions. A project lives in one region, and so do its queues.

## Choosing a region

Pick the region closest to the services that publish: latency grows with distance, and a
queue cannot move between regions once it holds messages.

## Moving to another region

Create a project in the new region, publish to both for a day, then drain the old queues.
"""


def changed_sample() -> CrawlResult:
    """Every kind of change at once: an edited page, a removed one, a new one, and edits
    that end an alias (the two Python reference pages no longer read the same)."""
    crawl = edited(
        sample(),
        ARCHITECTURE,
        "None of it is needed to send your first message",
        "None of this is needed to send a first message",
    )
    crawl = without(crawl, SCHEMA_PAGE)
    for old, new in [
        ("This reference documents every method", "This reference lists every method"),
        ("Create one client per process", "Create a single client per process"),
        ("Publishing returns the identifier", "A publish returns the identifier"),
        ("The largest batch to return", "The biggest batch to return"),
    ]:
        crawl = edited(crawl, RECEIVE_PAGE, old, new)
    regions = copy.deepcopy(page_of(crawl, f"{BASE}/guides/webhooks"))
    regions.metadata.source_url = NEW_PAGE
    regions.metadata.title = "Regions | Acme Docs"
    regions.markdown = REGIONS
    crawl.data.append(regions)
    return crawl


def test_incremental_rebuild_equals_a_full_rebuild_of_the_same_crawl(data_dir, tmp_path):
    crawl = changed_sample()
    incremental, changes = rebuild_here(crawl, data_dir, "night-2")
    full, _ = rebuild_here(crawl, tmp_path / "fresh", "full")

    assert incremental.published and full.published
    assert changes.pages_reused > 0 and changes.pages_rechunked == 3
    a, b = incremental.run_dir, full.run_dir
    for name in OUTPUT_FILES:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert report_of(a) == report_of(b)
    # ... and the same chunks as the in-memory run (`firechunk.run.memory`).
    assert chunks_of(a) == [chunk.to_json() for chunk in chunk_crawl(crawl, workers=1).chunks]
    # The alias that ended is a changed page: it is chunked now.
    receive = [page for page in changes.pages_changed if page.url == RECEIVE_PAGE]
    assert receive and receive[0].previous_status == "alias" and receive[0].status == "chunked"
    assert [page.url for page in changes.pages_added] == [NEW_PAGE]


def test_full_rebuild_chunks_every_page_again_relative_to_the_last_good_run(data_dir):
    result, changes = rebuild_here(sample(), data_dir, "night-2", full=True)

    assert result.published
    assert changes.full and changes.baseline == "night-1"
    assert (changes.pages_rechunked, changes.pages_reused) == (11, 0)
    assert changes.empty  # same crawl: nothing for the database to do


@pytest.mark.parametrize(("options", "reused"), [(ChunkerOptions(), 11), (SMALLER, 0)])
def test_only_outcomes_made_with_the_same_options_are_reused(data_dir, options, reused):
    start = start_run(data_dir, "night-2", RunSettings(workers=1), source=SAMPLE_CRAWL)
    chunked = chunk_stage(start, crawl_file(sample()), in_process, options=options)
    assert (chunked.pages_reused, chunked.pages_chunked) == (reused, 11 - reused)


# --- safety --------------------------------------------------------------------------------


def test_a_crawl_file_changed_between_the_readings_is_an_error_not_wrong_chunks(
    data_dir, monkeypatch
):
    """The chunk stage reads the crawl file again after planning it: a file written again
    in between would give one page's chunks under another's URL."""
    path = crawl_file(sample())
    plan_crawl = stages.plan_crawl

    def plan_then_edit(pages):
        planned = plan_crawl(pages)
        write_crawl(path, edited(sample(), ARCHITECTURE, "a", "A"))
        return planned

    monkeypatch.setattr(stages, "plan_crawl", plan_then_edit)
    start = start_run(data_dir, "night-2", RunSettings(workers=1), source=SAMPLE_CRAWL)
    with pytest.raises(CrawlFileError, match="changed while it was chunked"):
        chunk_stage(start, path, in_process)
    assert not RunDir(start.run_dir).state_file.exists()


def test_a_failed_validation_leaves_latest_and_its_state_alone(data_dir):
    # Every page empty: all quarantined, no chunks, run_has_chunks fails.
    crawl = sample()
    for crawled in crawl.data:
        crawled.markdown = ""
    baseline_dir = data_dir / "runs" / "night-1"
    before = digests(baseline_dir)

    failed, failed_changes = rebuild_here(crawl, data_dir, "night-2")

    assert not failed.published
    assert "run_has_chunks" in {item.name for item in failed.validation.failed}
    assert os.readlink(data_dir / "latest") == "runs/night-1"
    assert digests(baseline_dir) == before
    status = json.loads((data_dir / "runs" / "night-2" / "status.json").read_text())
    assert status["status"] == "failed"
    assert failed_changes.baseline == "night-1"

    # The next run is still relative to the last good run, and reuses its outcomes.
    _, changes = rebuild_here(sample(), data_dir, "night-3")
    assert changes.baseline == "night-1" and changes.empty
    assert changes.pages_reused == 11


def test_a_run_overtaken_by_another_publish_is_kept_superseded_not_published(data_dir):
    # A manual rebuild starts while the nightly runs; the nightly publishes first. The
    # manual run's changes.json is relative to night-1, which the database no longer
    # holds: publishing it would leave the database wrong. It is kept, not published.
    manual = start_run(data_dir, "manual", RunSettings(workers=1), source=SAMPLE_CRAWL)
    nightly, _ = rebuild_here(edited(sample(), ARCHITECTURE, "a", "A"), data_dir, "nightly")
    assert nightly.published

    chunk_stage(manual, crawl_file(sample()), in_process)
    changes = write_stage(manual).changes()
    result = publish_stage(manual, validate_stage(manual))

    assert changes.baseline == "night-1"
    assert result.validation.success and not result.published
    assert result.superseded_by == "nightly"
    assert os.readlink(data_dir / "latest") == "runs/nightly"
    status = json.loads((data_dir / "runs" / "manual" / "status.json").read_text())
    assert status["status"] == "superseded" and "nightly" in status["error"]
    assert "NOT published" in format_result(result) and "nightly" in format_result(result)

    # The next run is relative to the run that was published.
    _, after = rebuild_here(sample(), data_dir, "next")
    assert after.baseline == "nightly"


def swap_two_outcomes(cache: Path) -> None:
    """Give two outcomes each other's payload: valid outcomes, under the wrong keys."""
    db = sqlite3.connect(cache)
    (key_a, payload_a), (key_b, payload_b) = db.execute(
        "SELECT key, payload FROM outcomes LIMIT 2"
    ).fetchall()
    db.execute("UPDATE outcomes SET payload = ? WHERE key = ?", (payload_b, key_a))
    db.execute("UPDATE outcomes SET payload = ? WHERE key = ?", (payload_a, key_b))
    db.commit()
    db.close()


def test_an_edited_outcome_in_the_baseline_cache_is_chunked_again(data_dir, tmp_path):
    swap_two_outcomes(DataDir(data_dir).run("night-1").state_file)
    crawl = changed_sample()

    result, changes = rebuild_here(crawl, data_dir, "night-2")
    full, _ = rebuild_here(crawl, tmp_path / "fresh", "full")

    assert result.published
    # The cache no longer matches the manifest of the published run: nothing is reused.
    assert (changes.pages_rechunked, changes.pages_reused) == (11, 0)
    report = json.loads((result.run_dir / "report.json").read_text())
    assert "rebuild_state.sqlite missing or changed" in report["warnings"][0]
    for name in OUTPUT_FILES:
        assert (result.run_dir / name).read_bytes() == (full.run_dir / name).read_bytes(), name


@pytest.mark.parametrize("damage", ["missing", "not sqlite"])
def test_a_baseline_without_a_readable_cache_is_rechunked_and_diffed_by_id(data_dir, damage):
    """With no cache to reuse, the rebuild chunks every page, upserts every chunk (it
    cannot tell which rows are unchanged) and still deletes exactly the ids that are gone."""
    cache = DataDir(data_dir).run("night-1").state_file
    cache.unlink()
    if damage == "not sqlite":
        cache.write_bytes(b"this is not a database" * 100)

    result, changes = rebuild_here(without(sample(), SCHEMA_PAGE), data_dir, "rebuilt")

    assert result.published
    assert changes.baseline == "night-1"
    assert (changes.pages_rechunked, changes.pages_reused) == (10, 0)
    assert changes.upsert == [chunk["chunk_id"] for chunk in chunks_of(result.run_dir)]
    assert set(changes.delete) == ids_by_page(data_dir / "runs" / "night-1")[SCHEMA_PAGE]


# --- the real corpus -----------------------------------------------------------------------


@pytest.mark.corpus
@needs_corpus
def test_streamed_rebuild_of_the_corpus_equals_the_in_memory_pipeline(tmp_path):
    """Aliases by the dozen (the Python reference) and real duplicate chunks."""
    seen: set[str] = set()
    pages = []
    for path in CORPUS_FILES:
        for page in read_crawl(path).data:
            if page.url not in seen:
                seen.add(page.url)
                pages.append(page)
    crawl = CrawlResult(data=pages)

    result, _ = rebuild_here(crawl, tmp_path, "corpus")
    expected = chunk_crawl(crawl, workers=2)

    assert result.published, result.validation.failed
    assert chunks_of(result.run_dir) == [chunk.to_json() for chunk in expected.chunks]
    written_pages = pq.read_table(result.run_dir / "pages.parquet").to_pylist()
    assert written_pages == [page.model_dump(mode="json") for page in expected.pages]
    report = expected.report.model_dump(mode="json")
    report.pop("seconds")
    assert report_of(result.run_dir) == report
    assert report["pages_aliased"] > 40 and report["duplicate_chunks_dropped"] > 0


# --- through Prefect -----------------------------------------------------------------------


def test_rebuild_flow_and_cli_reuse_pages_and_full_chunks_them_again(prefect_api, tmp_path):
    from typer.testing import CliRunner

    from firechunk.cli import app
    from firechunk.flows.rebuild import rebuild
    from tests.prefect_helpers import logs_of

    data_dir = tmp_path / "data"
    first = rebuild(replay=SAMPLE_CRAWL, data_dir=data_dir, run=RunSettings(workers=2), run_id="n1")
    changed = tmp_path / "changed.json"
    crawl = edited(without(sample(), SCHEMA_PAGE), ARCHITECTURE, "None of it", "None of this")
    changed.write_text(json.dumps(crawl.to_firecrawl_json()), encoding="utf-8")
    state = rebuild(
        replay=changed,
        data_dir=data_dir,
        run=RunSettings(workers=2),
        run_id="n2",
        return_state=True,
    )
    cli = CliRunner().invoke(
        app,
        ["rebuild", "--replay", str(changed), "--data-dir", str(data_dir)]
        + ["--workers", "1", "--run-id", "n3", "--full"],
    )

    assert first.published and state.is_completed() and cli.exit_code == 0, cli.output
    before = ids_by_page(data_dir / "runs" / "n1")
    second = json.loads((data_dir / "runs" / "n2" / "changes.json").read_text())
    assert second["baseline"] == "n1"
    assert (second["pages_rechunked"], second["pages_reused"]) == (1, 9)
    assert set(second["delete"]) >= before[SCHEMA_PAGE]
    assert set(second["delete"]) - before[SCHEMA_PAGE] <= before[ARCHITECTURE]
    assert (
        second["upsert"]
        and set(second["upsert"]) <= ids_by_page(data_dir / "runs" / "n2")[ARCHITECTURE]
    )
    # One changed page is chunked in the flow's process: no workers started.
    run_id = state.state_details.flow_run_id
    assert any("in this process" in line for line in logs_of(run_id))
    changes_table = table_of(artifacts_of(run_id)["rebuild-changes"])
    assert changes_table["chunk ids to delete"] == len(second["delete"])
    assert changes_table["pages reused from the baseline"] == 9
    third = json.loads((data_dir / "runs" / "n3" / "changes.json").read_text())
    assert third["full"] and third["baseline"] == "n2"
    assert (third["pages_rechunked"], third["pages_reused"]) == (10, 0)
    assert third["upsert"] == [] and third["delete"] == []
    assert os.readlink(data_dir / "latest") == "runs/n3"


def test_one_url_crawled_with_other_contents_keeps_the_last_and_publishes(data_dir):
    """`/x`, `/x/`, `?utm_…` and `#frag` are one page: with other texts, the last crawled
    is kept and each other copy is quarantined as duplicate-url naming both hashes; with
    the same text, a copy stays an alias. Nothing is dropped silently and the run passes."""
    crawl = sample()
    base = page_of(crawl, ARCHITECTURE)
    variants = [f"{ARCHITECTURE}/", f"{ARCHITECTURE}?utm_source=x", f"{ARCHITECTURE}#faq"]
    for n, url in enumerate(variants):
        copy = base.model_copy(deep=True)
        copy.metadata.source_url = url
        copy.markdown += f"\n\nVariant {n} of the page adds sentence number {n}.\n"
        crawl.data.append(copy)
    same = base.model_copy(deep=True)
    same.metadata.source_url = f"{ARCHITECTURE}?utm_medium=email"
    same.markdown = crawl.data[-1].markdown  # the same text as the last variant
    crawl.data.append(same)

    result, _ = rebuild_here(crawl, data_dir, "night-2")

    assert result.published, result.validation.failed
    run_dir = data_dir / "runs" / "night-2"
    records = [json.loads(line) for line in (run_dir / "quarantine.jsonl").read_text().splitlines()]
    duplicates = {r["url"]: r["detail"] for r in records if r["reason"] == "duplicate-url"}
    assert set(duplicates) == {ARCHITECTURE, *variants[:2]}
    assert all(f"{same.url} (crawled later)" in detail for detail in duplicates.values())
    assert all(len(re.findall(r"\b[0-9a-f]{64}\b", d)) == 2 for d in duplicates.values())
    texts = "\n".join(c["data"]["text"] for c in json.loads((run_dir / "chunks.json").read_text()))
    assert "Variant 2 of the page" in texts and "Variant 0 of the page" not in texts
    pages = {row["url"]: row for row in pl.read_parquet(run_dir / "pages.parquet").to_dicts()}
    assert pages[same.url]["status"] == "alias"


def test_the_shrink_guard_keeps_a_run_that_drops_a_fifth_of_the_pages_unpublished(data_dir):
    crawl = sample()
    crawl.data = crawl.data[4:]  # 4 of the 13 pages gone: a crawl cut short
    refused = run_pipeline(
        Request(replay=crawl_file(crawl), data_dir=data_dir, run_id="night-2")
    ).outcome
    assert refused is not None and refused.success and not refused_published(data_dir, "night-2")
    status = json.loads((data_dir / "runs" / "night-2" / "status.json").read_text())
    assert status["status"] == "failed" and "--allow-shrink" in status["error"]
    assert re.search(r"drops \d+ of its 13 pages \(\d+%\)", status["error"])
    assert os.readlink(data_dir / "latest") == "runs/night-1"

    allowed = RunSettings(allow_shrink=True)
    published = run_pipeline(
        Request(run=allowed, replay=crawl_file(crawl), data_dir=data_dir, run_id="night-3")
    ).result
    assert published is not None and published.published


def test_another_site_in_the_same_data_directory_publishes_under_its_own_collection(data_dir):
    """Four of the sample's pages on another host: not a shrink of the sample's site (the
    run the data directory held), and its collection is its own host's."""
    crawl = moved(sample(), "docs.example.com", "other.example.org")
    crawl.data = crawl.data[9:]
    saved = crawl_file(crawl)
    night = run_pipeline(Request(replay=saved, data_dir=data_dir, run_id="other-site"))
    outcome, published = night.outcome, night.result
    assert outcome and outcome.success and published and published.published, published
    report = json.loads((data_dir / "runs" / "other-site" / "report.json").read_text())
    assert report["collection"].startswith("other.example.org")


def moved(crawl: CrawlResult, old: str, new: str) -> CrawlResult:
    """`crawl` with every page URL's `old` replaced by `new`."""
    for page in crawl.data:
        for field in ("source_url", "url"):
            value = getattr(page.metadata, field)
            if value:
                setattr(page.metadata, field, value.replace(old, new))
    return crawl


def test_another_section_of_the_same_site_publishes_under_its_own_collection(data_dir):
    """The sample's pages under another path of the same host (a reference beside the
    guides): not a shrink of the guides, and not loaded into their collection."""
    crawl = moved(sample(), "docs.example.com/docs/", "docs.example.com/api/")
    crawl.data = crawl.data[9:]
    saved = crawl_file(crawl)
    night = run_pipeline(Request(replay=saved, data_dir=data_dir, run_id="api"))
    outcome, published = night.outcome, night.result
    assert outcome and outcome.success and published and published.published, published
    report = json.loads((data_dir / "runs" / "api" / "report.json").read_text())
    assert report["collection"].startswith("docs.example.com/api")


def test_runs_of_two_doc_sets_started_together_both_publish(data_dir):
    """Chunked side by side into one data directory: the first to publish does not
    supersede a run of another doc set (a run of the same one it does, above)."""
    crawl = crawl_file(moved(sample(), "docs.example.com", "other.example.org"))
    other = start_run(data_dir, "other-site", RunSettings(workers=1), source=crawl)
    nightly, _ = rebuild_here(edited(sample(), ARCHITECTURE, "a", "A"), data_dir, "nightly")
    assert nightly.published

    chunk_stage(other, crawl, in_process)
    write_stage(other)
    result = publish_stage(other, validate_stage(other))
    assert result.published and result.superseded_by is None
    assert os.readlink(data_dir / "latest") == "runs/other-site"


def test_the_shrink_guard_lets_a_small_removal_through(data_dir):
    crawl = sample()
    webhooks = f"{BASE}/guides/webhooks"  # 1 of 13 pages, 1 of 17 chunks
    crawl.data = [page for page in crawl.data if page.url != webhooks]
    result, changes = rebuild_here(crawl, data_dir, "night-2")
    assert result.published and [p.url for p in changes.pages_removed] == [webhooks]


def test_a_damaged_collection_latest_is_an_error_naming_it(data_dir):
    assert adopt_latest(data_dir) == SAMPLE_COLLECTION
    own_latest(data_dir).unlink()
    own_latest(data_dir).write_text("x")
    with pytest.raises(BaselineError, match=r"collections/docs.example.com%2Fdocs/latest is not"):
        start_run(data_dir, "night-2", source=SAMPLE_CRAWL)


def test_a_data_directory_from_before_collections_keeps_its_baseline(data_dir):
    """Its `latest` becomes its collection's: the next run reuses every page of it."""
    result, changes = rebuild_here(sample(), data_dir, "night-2")
    assert result.published and changes.baseline == "night-1" and changes.pages_rechunked == 0
    assert os.readlink(own_latest(data_dir)) == "../../runs/night-2"
    assert os.readlink(data_dir / "latest") == "runs/night-2"


def own_latest(data_dir: Path) -> Path:
    """The sample's collection's `latest` link."""
    return DataDir(data_dir).collection_latest(SAMPLE_COLLECTION)


def refused_published(data_dir: Path, run_id: str) -> bool:
    return (data_dir / "latest").resolve() == (data_dir / "runs" / run_id).resolve()


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        (lambda d: (d / "latest").unlink() or (d / "latest").write_text("x"), "latest"),
        (lambda d: shutil.rmtree(d / "runs" / "night-1"), "latest"),
        (lambda d: (d / "runs" / "night-1" / "status.json").unlink(), "status.json"),
        (lambda d: (d / "runs" / "night-1" / "status.json").write_text("{oops"), "status.json"),
        (
            lambda d: (d / "runs" / "night-1" / "status.json").write_text(
                json.dumps({"run_id": "night-1", "status": "failed"})
            ),
            "status.json",
        ),
    ],
)
def test_a_damaged_baseline_marker_is_an_error_naming_the_file(data_dir, damage, named):
    """`data_dir` is laid out as before collections: its `latest` is adopted as the
    sample's collection's as the run starts, and a damaged one is said, never skipped."""
    damage(data_dir)
    with pytest.raises(BaselineError, match=rf"{named}.*move \S+/latest aside"):
        start_run(data_dir, "night-2", source=SAMPLE_CRAWL)
    assert not (data_dir / "runs" / "night-2").exists()


@pytest.mark.parametrize("name", ["rebuild_state.sqlite", "chunks.parquet", "report.json"])
def test_a_baseline_file_changed_since_publication_is_reused_for_nothing(data_dir, name):
    path = data_dir / "runs" / "night-1" / name
    path.write_bytes(path.read_bytes() + b"\0")  # still readable, no longer as published
    result, changes = rebuild_here(sample(), data_dir, "night-2")
    assert result.published and (changes.pages_reused, changes.pages_rechunked) == (0, 11)
    report = json.loads((result.run_dir / "report.json").read_text())
    assert report["warnings"][0].startswith(f"baseline run night-1: {name} missing or changed")
    assert (result.run_dir / "manifest.json").is_file()


def test_an_unreadable_baseline_file_is_an_error_naming_it(data_dir):
    (data_dir / "runs" / "night-1" / "pages.parquet").write_bytes(b"not parquet")
    with pytest.raises(BaselineError, match=r"pages\.parquet cannot be read"):
        rebuild_here(sample(), data_dir, "night-2")
    assert os.readlink(data_dir / "latest") == "runs/night-1"


def test_full_never_reads_a_damaged_baseline_cache(data_dir):
    (DataDir(data_dir).run("night-1").state_file).write_bytes(b"garbage, not sqlite")
    result, changes = rebuild_here(sample(), data_dir, "night-2", full=True)
    assert result.published and changes.pages_reused == 0 and changes.baseline == "night-1"


def test_a_run_whose_baseline_was_pruned_meanwhile_is_superseded_not_failed(data_dir):
    late = start_run(
        data_dir, "late", RunSettings(workers=1), source=SAMPLE_CRAWL
    )  # its baseline: night-1
    chunk_stage(late, crawl_file(sample()), in_process)
    # Meanwhile another run is published and prunes night-1.
    shutil.copytree(data_dir / "runs" / "night-1", data_dir / "runs" / "nightly")
    status_file = data_dir / "runs" / "nightly" / "status.json"
    status_file.write_text(status_file.read_text().replace('"night-1"', '"nightly"'))
    adopt_latest(data_dir)
    own_latest(data_dir).unlink()
    os.symlink("../../runs/nightly", own_latest(data_dir))
    shutil.rmtree(data_dir / "runs" / "night-1")

    with pytest.raises(RunSuperseded, match="run night-1, was removed while it ran"):
        write_stage(late)
    status = json.loads((data_dir / "runs" / "late" / "status.json").read_text())
    assert status["status"] == "superseded" and "latest is now run nightly" in status["error"]
