"""A page that fails page-level expectations costs that page, not the night.

The suites here are the project's own with one threshold tightened (the chunk limit to
400 tokens), so a page made to hold a 700-token paragraph fails `token_count_within_limit`
while every other page passes: the same path a page takes when it breaks a real limit.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import orjson
import pytest

from firechunk.layout import DataDir, RunDir
from firechunk.pipeline import Request, run_pipeline
from firechunk.run.changes import read_changes
from firechunk.run.stages import RunStart
from firechunk.run.write import read_quarantine
from firechunk.settings import RunSettings
from firechunk.validate.suites import SUITES_DIR
from tests.chunk_helpers import sentences

BASE = "https://docs.example.com/guides"
PAGES = 120  # 1 % of them: one page may be set aside


def page_markdown(n: int, long: bool = False) -> str:
    body = sentences(700 if long else 150, n, f"p{n}")
    return f"# Page {n}\n\nAbout page {n}.\n\n## Details\n\n{body}\n"


def write_crawl(path: Path, long: frozenset[int] = frozenset(), extra: int | None = None) -> Path:
    """PAGES pages (those in `long` with a 700-token paragraph), an alias of page 5 (the
    same markdown at another URL), and optionally one more page `extra`, long."""
    pages = [(f"{BASE}/page-{n}", page_markdown(n, n in long)) for n in range(PAGES)]
    pages.append((f"{BASE}/page-5-copy", page_markdown(5, 5 in long)))
    if extra is not None:
        pages.append((f"{BASE}/page-{extra}", page_markdown(extra, long=True)))
    data = [
        {"markdown": markdown, "metadata": {"sourceURL": url, "title": url.rsplit("/", 1)[1]}}
        for url, markdown in pages
    ]
    path.write_text(json.dumps({"success": True, "status": "completed", "data": data}))
    return path


@pytest.fixture
def strict_suites(tmp_path) -> Path:
    """The project's suites with the chunk limit at 400 tokens."""
    suites = tmp_path / "suites"
    shutil.copytree(SUITES_DIR, suites)
    chunks = json.loads((suites / "chunks.json").read_text())
    for expectation in chunks["expectations"]:
        if expectation["meta"]["name"] == "token_count_within_limit":
            expectation["kwargs"]["max_value"] = 400
    (suites / "chunks.json").write_text(json.dumps(chunks))
    return suites


def night(data_dir: Path, crawl: Path, suites: Path, run_id: str, **options) -> tuple:
    """The pipeline on `crawl`, validated with `suites`: the run, its verdict, its publication."""
    run = RunSettings(workers=1, **options)
    done = run_pipeline(
        Request(run=run, replay=crawl, data_dir=data_dir, run_id=run_id, suites_dir=suites)
    )
    return done.start, done.outcome, done.result


def chunks_of(run_dir: Path, url: str) -> list[dict]:
    rows = orjson.loads(RunDir(run_dir).chunks_json.read_bytes())
    return [row for row in rows if row["metadata"]["sourceUrl"] == url]


@pytest.fixture
def baseline(tmp_path, strict_suites) -> tuple[Path, RunStart]:
    data_dir = tmp_path / "data"
    start, outcome, published = night(
        data_dir, write_crawl(tmp_path / "night1.json"), strict_suites, "night-1"
    )
    assert outcome.success and published.published
    return data_dir, start


def test_a_page_over_the_limit_is_set_aside_and_keeps_its_last_good_chunks(
    tmp_path, strict_suites, baseline
):
    data_dir, night1 = baseline
    crawl = write_crawl(tmp_path / "night2.json", long=frozenset({5}))
    start, outcome, published = night(data_dir, crawl, strict_suites, "night-2")

    assert outcome.success and published.published
    assert DataDir(data_dir).latest.resolve() == start.run_dir
    [aside] = outcome.pages_set_aside
    page5 = f"{BASE}/page-5"
    kept = chunks_of(night1.run_dir, page5)
    assert aside.url == page5 and aside.expectations == ["token_count_within_limit"]
    assert (aside.chunks_carried, aside.carried_from) == (len(kept), "night-1")
    assert chunks_of(start.run_dir, page5) == kept  # the same rows, the same ids
    changes = read_changes(start.run_dir)
    assert not set(changes.upsert) | set(changes.delete)  # the database keeps page 5 as is
    reasons = {record.url: record.reason for record in read_quarantine(start.run_dir)}
    assert reasons == {
        page5: "token_count_within_limit",
        f"{BASE}/page-5-copy": "token_count_within_limit",
    }
    report = json.loads(RunDir(start.run_dir).report_json.read_text())
    assert [page["url"] for page in report["pages_set_aside"]] == [page5]
    assert published.validation.pages_set_aside == outcome.pages_set_aside
    html = (start.run_dir / "validation" / "report.html").read_text()
    assert "Pages set aside (1)" in html and page5 in html


def test_a_new_page_over_the_limit_is_quarantined_with_nothing_to_keep(
    tmp_path, strict_suites, baseline
):
    data_dir, _night1 = baseline
    crawl = write_crawl(tmp_path / "night2.json", extra=PAGES)
    start, outcome, published = night(data_dir, crawl, strict_suites, "night-2")

    assert outcome.success and published.published
    [aside] = outcome.pages_set_aside
    assert (aside.url, aside.chunks_carried, aside.carried_from) == (
        f"{BASE}/page-{PAGES}",
        0,
        None,
    )
    assert chunks_of(start.run_dir, aside.url) == []
    changes = read_changes(start.run_dir)
    assert changes.upsert == [] and changes.delete == []
    assert [(page.url, page.status) for page in changes.pages_added] == [(aside.url, "quarantined")]


def test_more_failed_pages_than_max_failed_pages_fail_the_run(tmp_path, strict_suites, baseline):
    data_dir, night1 = baseline
    crawl = write_crawl(tmp_path / "night2.json", long=frozenset({5, 6}))
    start, outcome, published = night(data_dir, crawl, strict_suites, "night-2")

    assert not outcome.success and not published.published
    assert outcome.set_aside_refused == (
        "2 pages failed page-level expectations, more than max_failed_pages allows "
        "(1.0% of 121 pages = 1)"
    )
    assert RunDir(start.run_dir).read_status().status == "failed"
    assert DataDir(data_dir).latest.resolve() == night1.run_dir

    again, outcome, published = night(
        data_dir, crawl, strict_suites, "night-2-again", max_failed_pages=0.02
    )
    assert published.published
    assert sorted(page.url for page in outcome.pages_set_aside) == [
        f"{BASE}/page-5",
        f"{BASE}/page-6",
    ]


def test_a_run_level_failure_is_never_set_aside(tmp_path, strict_suites):
    pages = json.loads((strict_suites / "pages.json").read_text())
    pages["expectations"][0]["kwargs"]["min_value"] = 10**6  # run_has_pages
    (strict_suites / "pages.json").write_text(json.dumps(pages))
    crawl = write_crawl(tmp_path / "night.json", long=frozenset({5}))
    start, outcome, published = night(
        tmp_path / "data", crawl, strict_suites, "night-1", max_failed_pages=1.0
    )

    assert not published.published and outcome.pages_set_aside == []
    assert outcome.set_aside_refused == "run-level expectations failed: pages/run_has_pages"
    assert {item.name for item in outcome.failed} == {"run_has_pages", "token_count_within_limit"}


def test_max_failed_pages_is_a_share():
    with pytest.raises(ValueError, match="less than or equal to 1"):
        RunSettings(max_failed_pages=5)
