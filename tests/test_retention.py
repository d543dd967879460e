"""Old runs are removed after a publication: `latest`, the newest finished runs and every
unfinished run stay."""

from __future__ import annotations

import os
import shutil
import time

import pytest
from typer.testing import CliRunner

from firechunk import retention
from firechunk.cli import app
from firechunk.publish import RUNS_DIR, switch_latest, write_status
from firechunk.retention import prune_raw_crawls, prune_runs
from flows.rebuild import rebuild
from schemas.job import CrawlJobState, CrawlTarget
from schemas.publish import RunStatus
from tests.prefect_helpers import SAMPLE_CRAWL, artifacts_of, table_of


def finished(data_dir, run_id: str, at: str, status: str = "passed"):
    run_dir = data_dir / RUNS_DIR / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "chunks.json").write_text("[]\n")
    write_status(run_dir, RunStatus(run_id=run_id, status=status, finished_at=at))
    return run_dir


def run_names(data_dir) -> set[str]:
    return {path.name for path in (data_dir / RUNS_DIR).iterdir()}


def test_the_newest_runs_latest_and_unfinished_runs_stay(tmp_path):
    # Ids do not sort in time order here: the finishing time decides.
    oldest = finished(tmp_path, "b-oldest", "2026-11-01T03:10:00+00:00")
    finished(tmp_path, "a-failed", "2026-11-02T03:10:00+00:00", status="failed")
    finished(tmp_path, "d-third", "2026-11-03T03:10:00+00:00")
    published = finished(tmp_path, "c-newest", "2026-11-04T03:10:00+00:00")
    switch_latest(tmp_path, published)
    (tmp_path / RUNS_DIR / "e-running").mkdir()  # started, no status.json yet
    (tmp_path / RUNS_DIR / ".publish.lock").write_text("")
    (tmp_path / RUNS_DIR / ".removing-x-1a2b3c" / "validation").mkdir(parents=True)  # interrupted

    removed = prune_runs(tmp_path, keep=3)

    assert removed == ["b-oldest"]
    assert not oldest.exists()
    assert run_names(tmp_path) == {"a-failed", "d-third", "c-newest", "e-running", ".publish.lock"}


def test_latest_stays_when_newer_runs_failed(tmp_path):
    published = finished(tmp_path, "good", "2026-11-01T03:10:00+00:00")
    switch_latest(tmp_path, published)
    for night in (2, 3, 4):
        finished(tmp_path, f"failed-{night}", f"2026-11-0{night}T03:10:00+00:00", "failed")

    assert prune_runs(tmp_path, keep=2) == ["failed-2"]
    assert run_names(tmp_path) == {"good", "failed-3", "failed-4"}
    assert (tmp_path / "latest").resolve() == published.resolve()


def test_keep_zero_removes_nothing_and_one_is_refused(tmp_path):
    for night in (1, 2, 3):
        finished(tmp_path, f"night-{night}", f"2026-11-0{night}T03:10:00+00:00")

    assert prune_runs(tmp_path, keep=0) == []
    with pytest.raises(ValueError, match="at least 2"):
        prune_runs(tmp_path, keep=1)
    assert run_names(tmp_path) == {"night-1", "night-2", "night-3"}


def test_a_rebuild_removes_old_runs_once_it_is_published(prefect_api, tmp_path):
    data_dir = tmp_path / "data"
    for job_id, age in [("crawl-a", 30), ("crawl-b", 20), ("crawl-c", 10)]:
        raw_crawl(data_dir, job_id, age)
    args = ["rebuild", "--replay", str(SAMPLE_CRAWL), "--data-dir", str(data_dir)]
    for night in (1, 2):
        result = CliRunner().invoke(app, [*args, "--run-id", f"n{night}", "--keep-runs", "2"])
        assert result.exit_code == 0, result.output
    state = rebuild(
        replay=SAMPLE_CRAWL, data_dir=data_dir, run_id="n3", keep_runs=2, return_state=True
    )

    assert state.is_completed()
    summary = table_of(artifacts_of(state.state_details.flow_run_id)["rebuild-summary"])
    assert summary["old runs and raw crawls removed"] == "1"  # n1; crawl-a went on night 2
    assert run_names(data_dir) - {".publish.lock"} == {"n2", "n3"}
    assert (data_dir / "latest").resolve() == (data_dir / RUNS_DIR / "n3").resolve()
    assert {path.name for path in (data_dir / "raw").iterdir()} == {"crawl-b", "crawl-c"}
    refused = CliRunner().invoke(app, [*args, "--keep-runs", "1"])
    assert refused.exit_code == 2 and "at least 2" in refused.output


def test_a_run_another_rebuild_removed_meanwhile_is_skipped(tmp_path, monkeypatch):
    runs = [
        finished(tmp_path, f"night-{night}", f"2026-11-0{night}T03:10:00+00:00")
        for night in (1, 2, 3, 4)
    ]
    listed = retention.finished_runs(tmp_path / RUNS_DIR)
    for run_dir in runs[:2]:  # a rebuild finishing at the same time got there first
        shutil.rmtree(run_dir)
    monkeypatch.setattr(retention, "finished_runs", lambda _runs_dir: listed)

    assert prune_runs(tmp_path, keep=2) == []
    assert run_names(tmp_path) == {"night-3", "night-4"}


def raw_crawl(data_dir, job_id: str, age_hours: float, complete: bool = True):
    raw = data_dir / "raw" / job_id
    raw.mkdir(parents=True)
    (raw / "pages.jsonl").write_text("{}\n")
    if complete:
        crawl = raw / "crawl.json"
        crawl.write_text('{"data": []}')
        written = time.time() - age_hours * 3600
        os.utime(crawl, (written, written))
    return raw


def test_old_raw_crawls_go_unless_a_job_names_them_or_they_are_downloading(tmp_path):
    for job_id, age in [("oldest", 90), ("named", 80), ("replayed", 70), ("old", 60)]:
        raw_crawl(tmp_path, job_id, age)
    raw_crawl(tmp_path, "downloading", 100, complete=False)
    raw_crawl(tmp_path, "recent", 2)
    raw_crawl(tmp_path, "newest", 1)
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    state = CrawlJobState(
        name="docs",
        api_version="v2",
        api_url="http://localhost",
        job_id="named",
        target=CrawlTarget(url="https://example.com/docs"),
    )
    (jobs / "docs.json").write_text(state.model_dump_json())

    removed = prune_raw_crawls(tmp_path, keep=2, spare=tmp_path / "raw" / "replayed" / "crawl.json")

    assert sorted(removed) == ["old", "oldest"]
    left = {path.name for path in (tmp_path / "raw").iterdir()}
    assert left == {"named", "replayed", "downloading", "recent", "newest"}
    (jobs / "broken.json").write_text("{not json")  # which crawls it needs is unknown
    assert prune_raw_crawls(tmp_path, keep=2) == []
