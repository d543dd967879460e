"""The streamed writer (`firechunk.streaming.RunWriter`): rows are written in crawl order as
outcomes arrive, and the files equal what the in-memory pipeline makes of the same crawl,
also when its guess of which pages are one page (same letters) turns out wrong, and when
an unchanged page's rows are copied from the last good run (`firechunk.emissions`)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from firechunk.chunker.page import ChunkerOptions
from firechunk.incremental import STATE_FILE, OutcomeStore, chunk_for_store, plan_reuse
from firechunk.outputs import CHUNKS_JSON, CHUNKS_PARQUET
from firechunk.pipeline import AliasPlan, chunk_crawl, page_inputs
from firechunk.rebuild import rebuild_here
from firechunk.streaming import RunWriter
from firechunk.tokens import DEFAULT_ENCODING
from schemas.page import CrawlResult
from tests.chunk_helpers import crawl, page, sentences

BASE = "https://docs.example.com/docs"


def article(tag: str, extra: str = "") -> str:
    return (
        f"# {tag.title()} guide\n\n{sentences(120, seed=len(tag), tag=tag)}\n\n"
        f"## Setup\n\n{extra}{sentences(200, seed=len(tag) + 1, tag=tag)}\n"
    )


def flattened(numbers: list[str]) -> str:
    """A page with a flattened code sample whose line markers are `numbers`."""
    code = "\n".join(f"{n}\nprint({i})" for i, n in enumerate(numbers))
    return f"# Client\n\n{sentences(150, seed=3, tag='c')}\n\n`\n{code}\n`\n"


def writer_for(crawl_result: CrawlResult, run_dir: Path):
    """A RunWriter on a new store, and the crawl's outcomes (chunked, not yet handed over),
    with the store and the outcome keys."""
    inputs = page_inputs(crawl_result)
    plan = AliasPlan.from_inputs(inputs)
    reuse = plan_reuse(plan, DEFAULT_ENCODING, ChunkerOptions(), None)
    store = OutcomeStore.create(run_dir / STATE_FILE, encoding=DEFAULT_ENCODING)
    writer = RunWriter(
        inputs, plan, reuse.keys, store, run_dir, encoding=DEFAULT_ENCODING, started=0.0
    )
    outcomes = chunk_for_store(plan.to_chunk, DEFAULT_ENCODING, ChunkerOptions())
    return writer, outcomes, store, reuse.keys


def hand_over(writer: RunWriter, outcome, store: OutcomeStore, keys: dict[int, str]) -> None:
    """What the chunk stage does with each outcome: store it, tell the writer."""
    store.put(keys[outcome.index], outcome)
    writer.add({keys[outcome.index]: outcome.content_hash})


def stream(crawl_result: CrawlResult, run_dir: Path, order: list[int]) -> tuple[RunWriter, list]:
    """Hand the outcomes to a RunWriter one by one in `order` (of the pages to chunk);
    return the writer (finished) and the pages written after each."""
    writer, outcomes, store, keys = writer_for(crawl_result, run_dir)
    progress = []
    for position in order:
        hand_over(writer, outcomes[position], store, keys)
        progress.append(writer.pages_written)
    writer.finish()
    store.close()
    return writer, progress


def assert_same_as_in_memory(crawl_result: CrawlResult, run_dir: Path) -> None:
    expected = chunk_crawl(crawl_result, workers=1)
    chunks = json.loads((run_dir / CHUNKS_JSON).read_text(encoding="utf-8"))
    assert chunks == [chunk.to_json() for chunk in expected.chunks]
    assert pq.read_table(run_dir / CHUNKS_PARQUET).to_pylist() == chunks
    written_pages = pq.read_table(run_dir / "pages.parquet").to_pylist()
    assert written_pages == [p.model_dump(mode="json") for p in expected.pages]


def test_pages_are_written_in_crawl_order_as_soon_as_every_earlier_page_is_in(tmp_path):
    pages = [page(article(tag), f"{BASE}/{tag}") for tag in ("alpha", "beta", "gamma", "delta")]
    writer, progress = stream(crawl(*pages), tmp_path, order=[2, 1, 0, 3])

    # Nothing before the first page arrives; then it and the two that were waiting for it.
    assert progress == [0, 0, 3, 4]
    assert not writer.rewritten
    assert_same_as_in_memory(crawl(*pages), tmp_path)


def test_the_same_page_with_other_line_markers_is_guessed_right_and_streamed(tmp_path):
    """Supabase serves one reference page under many URLs, its code's line markers
    flattened differently (`1`, `2` or `_10`): one group, streamed without a rewrite."""
    pages = [
        page(flattened(["1", "2", "3"]), f"{BASE}/reference/python/select"),
        page(flattened(["_10", "_10", "_10"]), f"{BASE}/reference/python/insert"),
        page(article("omega"), f"{BASE}/omega"),
    ]
    crawl_result = crawl(*pages)
    run = chunk_crawl(crawl_result, workers=1)
    assert run.report.pages_aliased == 1  # the two are one page once cleaned

    writer, _ = stream(crawl_result, tmp_path, order=[0, 1, 2])

    assert not writer.rewritten
    assert_same_as_in_memory(crawl_result, tmp_path)


def test_a_wrong_guess_of_one_page_is_written_again(tmp_path):
    """Other letters, same cleaned content (a `Loading...` line): the guess says two
    pages, the content says one, chunked under the smaller URL, found last."""
    pages = [
        page(article("kappa"), f"{BASE}/zz-kappa"),
        page(article("lambda"), f"{BASE}/lambda"),
        page(article("kappa", extra="Loading...\n\n"), f"{BASE}/aa-kappa"),
    ]
    crawl_result = crawl(*pages)

    writer, _ = stream(crawl_result, tmp_path, order=[0, 1, 2])

    assert writer.rewritten
    assert_same_as_in_memory(crawl_result, tmp_path)
    sources = {c["metadata"]["sourceUrl"] for c in json.loads((tmp_path / CHUNKS_JSON).read_text())}
    assert sources == {f"{BASE}/aa-kappa", f"{BASE}/lambda"}


def test_a_wrong_guess_of_two_pages_being_one_is_written_again(tmp_path):
    """Same letters, other content (only a version number differs): two pages after all."""
    pages = [
        page(article("sigma", extra="Version 1 of the API.\n\n"), f"{BASE}/v1"),
        page(article("sigma", extra="Version 2 of the API.\n\n"), f"{BASE}/v2"),
    ]
    crawl_result = crawl(*pages)

    writer, _ = stream(crawl_result, tmp_path, order=[1, 0])

    assert writer.rewritten
    assert_same_as_in_memory(crawl_result, tmp_path)


def test_an_abandoned_writer_leaves_no_files(tmp_path):
    writer, [outcome], store, keys = writer_for(
        crawl(page(article("tau"), f"{BASE}/tau")), tmp_path
    )
    hand_over(writer, outcome, store, keys)
    assert writer.pages_written == 1

    writer.abandon()
    store.discard()

    assert list(tmp_path.iterdir()) == []


# --- copying unchanged pages from the baseline ------------------------------------------------


def two_sections(first: str, second: str) -> str:
    """A page of two H1 sections, each its own chunk."""
    return (
        f"# {first.title()}\n\n{sentences(150, seed=len(first), tag=first)}\n\n"
        f"# {second.title()}\n\n{sentences(150, seed=len(second), tag=second)}\n"
    )


def rebuild_twice(tmp_path: Path, night_1: CrawlResult, night_2: CrawlResult):
    """Rebuild night 1, then night 2 on top of it; return night 2's result and changes."""
    data_dir = tmp_path / "data"
    first, _ = rebuild_here(night_1, data_dir, "night-1")
    assert first.published, first.validation.failed
    second, changes = rebuild_here(night_2, data_dir, "night-2")
    assert second.published, second.validation.failed
    return second, changes


def test_an_unchanged_night_copies_every_page_and_writes_the_same_files(tmp_path):
    pages = [page(article(tag), f"{BASE}/{tag}") for tag in ("alpha", "beta", "gamma")]
    night = crawl(*pages)

    result, changes = rebuild_twice(tmp_path, night, night)

    assert (changes.pages_reused, changes.pages_copied) == (3, 3)
    first, second = tmp_path / "data" / "runs" / "night-1", result.run_dir
    assert (second / CHUNKS_JSON).read_bytes() == (first / CHUNKS_JSON).read_bytes()
    assert pq.read_table(second / CHUNKS_PARQUET).equals(pq.read_table(first / CHUNKS_PARQUET))
    assert_same_as_in_memory(night, second)


def test_a_page_whose_chunk_is_now_a_repeat_is_written_anew_not_copied(tmp_path):
    """Night 2 edits an early page so one of its chunks has the text of a chunk of a later,
    unchanged page: the later page's chunk is now the repeat, dropped, and the later page's
    rows (its chunk indexes and overlap links) are built again. Its heading `Shared` is now
    only in the early page's chunk, and still counts as covered: the run is published."""
    early = f"{BASE}/early"
    later = f"{BASE}/later"
    other = f"{BASE}/other"
    night_1 = crawl(
        page(two_sections("intro", "legacy"), early),
        page(article("delta"), other),
        page(two_sections("shared", "closing"), later),
    )
    night_2 = crawl(
        page(two_sections("intro", "shared"), early),
        page(article("delta"), other),
        page(two_sections("shared", "closing"), later),
    )

    result, changes = rebuild_twice(tmp_path, night_1, night_2)

    assert (changes.pages_rechunked, changes.pages_copied) == (1, 1)  # only `other` copied
    assert_same_as_in_memory(night_2, result.run_dir)
    report = json.loads((result.run_dir / "report.json").read_text(encoding="utf-8"))
    assert [d["source_url"] for d in report["duplicates"]] == [later]


def test_a_baseline_written_by_other_row_code_is_not_copied_from(tmp_path, monkeypatch):
    from firechunk import emissions

    pages = [page(article(tag), f"{BASE}/{tag}") for tag in ("alpha", "beta")]
    data_dir = tmp_path / "data"
    rebuild_here(crawl(*pages), data_dir, "night-1")
    emissions.rows_version.cache_clear()
    monkeypatch.setattr(emissions, "_ROW_SOURCES", [*emissions._ROW_SOURCES, Path(__file__)])
    try:
        result, changes = rebuild_here(crawl(*pages), data_dir, "night-2")
    finally:
        emissions.rows_version.cache_clear()

    assert (changes.pages_reused, changes.pages_copied) == (2, 0)
    assert_same_as_in_memory(crawl(*pages), result.run_dir)


def test_a_page_whose_lines_changed_in_the_baseline_file_is_built_not_copied(tmp_path):
    """A byte of the last good run's chunks.json changed after it was written (a disk
    error, a hand edit): that page's rows are built again, so the damage does not travel
    into this run and every run after it; the other pages are still copied."""
    pages = [page(article(tag), f"{BASE}/{tag}") for tag in ("alpha", "beta", "gamma")]
    data_dir = tmp_path / "data"
    first, _ = rebuild_here(crawl(*pages), data_dir, "night-1")
    chunks_json = first.run_dir / CHUNKS_JSON
    damaged = chunks_json.read_bytes().replace(b"beta", b"BETA", 1)
    assert damaged != chunks_json.read_bytes()
    chunks_json.write_bytes(damaged)

    result, changes = rebuild_here(crawl(*pages), data_dir, "night-2")

    assert (changes.pages_reused, changes.pages_copied) == (3, 2)
    assert_same_as_in_memory(crawl(*pages), result.run_dir)
