"""Old runs are removed: `latest`, the newest ended runs (finished, or dead: killed with no
`status.json`) and every running run stay."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from firechunk import retention
from firechunk.cli import app
from firechunk.flows.rebuild import rebuild
from firechunk.layout import DataDir, RunDir
from firechunk.publish import switch_latest
from firechunk.retention import prune_raw_crawls, prune_runs
from firechunk.schemas.job import CrawlJobState, CrawlTarget
from firechunk.schemas.publish import RunState, RunStatus
from firechunk.settings import RunSettings
from tests.prefect_helpers import SAMPLE_CRAWL, artifacts_of, table_of


def finished(data_dir, run_id: str, at: str, status: RunState = "passed"):
    run_dir = DataDir(data_dir).run(run_id).path
    run_dir.mkdir(parents=True)
    (run_dir / "chunks.json").write_text("[]\n")
    RunDir(run_dir).write_status(RunStatus(run_id=run_id, status=status, finished_at=at))
    return run_dir


def run_names(data_dir) -> set[str]:
    return {path.name for path in DataDir(data_dir).runs.iterdir()}


def unfinished(data_dir, run_id: str) -> Path:
    """A run directory as the start and chunk stages leave it: no `status.json` yet."""
    run_dir = DataDir(data_dir).run(run_id).path
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text("{}\n")
    return run_dir


def last_changed(run_dir: Path, at: str) -> Path:
    """Date the run directory's last change (what a dead run is ordered by)."""
    stamp = datetime.fromisoformat(at).timestamp()
    os.utime(run_dir, (stamp, stamp))
    return run_dir


# A process that runs a run: it holds the run's lock until it is killed, or stdin closes.
HOLD_LOCK = (
    "import sys; from firechunk.retention import hold_run_lock; "
    "hold_run_lock(sys.argv[1]); print('held', flush=True); sys.stdin.read()"
)


@pytest.fixture
def run_process():
    """Start a process that holds a run's lock, as the process running a run does."""
    started: list[subprocess.Popen] = []

    def start(run_dir: Path) -> subprocess.Popen:
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_LOCK, str(run_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        started.append(holder)
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n", "the run's lock was not taken"
        return holder

    yield start
    for holder in started:
        holder.kill()
        holder.communicate()


def test_the_newest_runs_latest_and_running_runs_stay(tmp_path, run_process):
    # Ids do not sort in time order here: the finishing time decides.
    oldest = finished(tmp_path, "b-oldest", "2026-11-01T03:10:00+00:00")
    finished(tmp_path, "a-failed", "2026-11-02T03:10:00+00:00", status="failed")
    finished(tmp_path, "d-third", "2026-11-03T03:10:00+00:00")
    published = finished(tmp_path, "c-newest", "2026-11-04T03:10:00+00:00")
    switch_latest(tmp_path, published, "docs")
    run_process(unfinished(tmp_path, "e-running"))  # no status.json yet, its process alive
    DataDir(tmp_path).publish_lock.write_text("")
    (DataDir(tmp_path).runs / ".removing-x-1a2b3c" / "validation").mkdir(
        parents=True
    )  # interrupted

    removed = prune_runs(tmp_path, keep=3)

    assert removed == ["b-oldest"]
    assert not oldest.exists()
    assert run_names(tmp_path) == {"a-failed", "d-third", "c-newest", "e-running", ".publish.lock"}


def test_every_collections_latest_stays(tmp_path):
    """A doc set published long ago keeps its latest (its next run's baseline) however many
    runs of other doc sets came since."""
    guides = finished(tmp_path, "guides-1", "2026-11-01T03:10:00+00:00")
    switch_latest(tmp_path, guides, "docs.example.com/docs/guides")
    for night in (2, 3, 4, 5):
        auth = finished(tmp_path, f"auth-{night}", f"2026-11-0{night}T03:10:00+00:00")
        switch_latest(tmp_path, auth, "docs.example.com/docs/guides/auth")

    assert prune_runs(tmp_path, keep=2) == ["auth-2", "auth-3"]
    assert run_names(tmp_path) == {"guides-1", "auth-4", "auth-5"}


@pytest.mark.parametrize("verdict", ["failed", "interrupted"])
def test_latest_stays_when_newer_runs_failed_or_were_interrupted(tmp_path, verdict):
    published = finished(tmp_path, "good", "2026-11-01T03:10:00+00:00")
    switch_latest(tmp_path, published, "docs")
    for night in (2, 3, 4):
        finished(tmp_path, f"{verdict}-{night}", f"2026-11-0{night}T03:10:00+00:00", verdict)

    assert prune_runs(tmp_path, keep=2) == [f"{verdict}-2"]
    assert run_names(tmp_path) == {"good", f"{verdict}-3", f"{verdict}-4"}
    assert (tmp_path / "latest").resolve() == published.resolve()


def test_keep_zero_removes_nothing_and_one_is_refused(tmp_path):
    for night in (1, 2, 3):
        finished(tmp_path, f"night-{night}", f"2026-11-0{night}T03:10:00+00:00")

    assert prune_runs(tmp_path, keep=0) == []
    with pytest.raises(ValueError, match="at least 2"):
        prune_runs(tmp_path, keep=1)
    assert run_names(tmp_path) == {"night-1", "night-2", "night-3"}


def test_a_dead_run_is_pruned_like_a_failed_one_and_a_running_one_stays(tmp_path, run_process):
    """A run killed before its `status.json` (its lock free: no process holds it) ended
    when it last changed; one whose process still runs stays, however old."""
    finished(tmp_path, "night-1", "2026-11-01T03:10:00+00:00", status="failed")
    killed = unfinished(tmp_path, "night-2")
    run_process(killed).kill()  # the OOM killer: its lock is released by the OS
    last_changed(killed, "2026-11-02T03:10:00+00:00")
    # Killed before this version took locks: no lock file at all.
    last_changed(unfinished(tmp_path, "night-3"), "2026-11-03T03:10:00+00:00")
    running = unfinished(tmp_path, "night-0-running")
    still_running = run_process(running)
    last_changed(running, "2026-10-30T03:10:00+00:00")  # older than all, but running
    finished(tmp_path, "night-4", "2026-11-04T03:10:00+00:00")
    switch_latest(tmp_path, finished(tmp_path, "night-5", "2026-11-05T03:10:00+00:00"), "docs")
    unfinished(tmp_path, "night-6")  # claimed an instant ago, its lock not taken yet

    assert prune_runs(tmp_path, keep=2) == ["night-1", "night-2", "night-3"]
    assert run_names(tmp_path) == {"night-0-running", "night-4", "night-5", "night-6"}

    still_running.kill()
    still_running.wait()
    assert prune_runs(tmp_path, keep=2) == ["night-0-running"]


def test_what_writes_a_kill_cut_short_left_is_removed(tmp_path, run_process):
    """Atomic writes leave `.<name>.<random>.tmp` when killed; one written to within the
    last minutes may be a write under way (another run, a crawl) and stays."""
    run_dir = finished(tmp_path, "night-1", "2026-11-01T03:10:00+00:00")
    tables = run_dir / "validation" / "tables"
    tables.mkdir(parents=True)
    raw = raw_crawl(tmp_path, "crawl-a", 1)
    (tmp_path / "jobs").mkdir()
    hours_ago = time.time() - 2 * 3600
    stray = [
        run_dir / ".chunks.parquet.k3j_x0aq.tmp",
        tables / ".chunks.parquet.a8d2mm1c.tmp",
        raw / ".crawl.json.0p2nnq8w.tmp",
        tmp_path / "jobs" / ".docs.json.q1w2e3r4.tmp",
    ]
    for path in stray:
        path.write_bytes(b"half")
        os.utime(path, (hours_ago, hours_ago))
    under_way = run_dir / ".chunks.json.zz9_aa1b.tmp"
    under_way.write_bytes(b"being written")
    running = unfinished(tmp_path, "night-2")
    run_process(running)
    running_stray = running / ".pages.parquet.b7c6d5e4.tmp"
    running_stray.write_bytes(b"its own")
    os.utime(running_stray, (hours_ago, hours_ago))

    prune_runs(tmp_path, keep=2)
    prune_raw_crawls(tmp_path, keep=2)

    assert [path for path in stray if path.exists()] == []
    assert under_way.exists() and running_stray.exists()
    assert (run_dir / "chunks.json").exists() and (raw / "crawl.json").exists()


def test_failed_and_dead_runs_are_pruned_by_a_run_that_is_not_published(prefect_api, tmp_path):
    """Failed nights must not fill the disk: pruning does not wait for a publication."""
    data_dir = tmp_path / "data"
    for night in (1, 2):
        finished(data_dir, f"failed-{night}", f"2026-11-0{night}T03:10:00+00:00", "failed")
    last_changed(unfinished(data_dir, "killed-3"), "2026-11-03T03:10:00+00:00")
    crawl = json.loads(SAMPLE_CRAWL.read_text(encoding="utf-8"))
    for page in crawl["data"]:  # every page empty: no chunks, the run fails validation
        page["markdown"] = ""
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps(crawl), encoding="utf-8")

    result = CliRunner().invoke(
        app,
        ["rebuild", "--replay", str(empty), "--data-dir", str(data_dir), "--workers", "1"]
        + ["--run-id", "failed-4", "--keep-runs", "2"],
    )

    assert result.exit_code == 1 and "FAILED validation" in result.output, result.output
    left = run_names(data_dir) - {".publish.lock"}
    assert "failed-1" not in left  # the oldest, beyond the 2 newest (the dead one counted)
    assert "failed-4" in left  # this run
    assert len(left) <= 3  # the 2 newest, and this run if it was not counted yet


def test_a_rebuild_removes_old_runs_once_it_is_published(prefect_api, tmp_path):
    data_dir = tmp_path / "data"
    for job_id, age in [("crawl-a", 30), ("crawl-b", 20), ("crawl-c", 10)]:
        raw_crawl(data_dir, job_id, age)
    args = ["rebuild", "--replay", str(SAMPLE_CRAWL), "--data-dir", str(data_dir)]
    for night in (1, 2):
        result = CliRunner().invoke(app, [*args, "--run-id", f"n{night}", "--keep-runs", "2"])
        assert result.exit_code == 0, result.output
    state = rebuild(
        replay=SAMPLE_CRAWL,
        data_dir=data_dir,
        run_id="n3",
        run=RunSettings(keep_runs=2),
        return_state=True,
    )

    assert state.is_completed()
    summary = table_of(artifacts_of(state.state_details.flow_run_id)["rebuild-summary"])
    assert summary["old runs and raw crawls removed"] == 1  # n1; crawl-a went on night 2
    assert run_names(data_dir) - {".publish.lock"} == {"n2", "n3"}
    assert (data_dir / "latest").resolve() == DataDir(data_dir).run("n3").path.resolve()
    assert {path.name for path in (data_dir / "raw").iterdir()} == {"crawl-b", "crawl-c"}
    refused = CliRunner().invoke(app, [*args, "--keep-runs", "1"])
    assert refused.exit_code == 2 and "at least 2" in refused.output


def test_a_run_another_rebuild_removed_meanwhile_is_skipped(tmp_path, monkeypatch):
    runs = [
        finished(tmp_path, f"night-{night}", f"2026-11-0{night}T03:10:00+00:00")
        for night in (1, 2, 3, 4)
    ]
    listed = retention.finished_runs(tmp_path)
    for run_dir in runs[:2]:  # a rebuild finishing at the same time got there first
        shutil.rmtree(run_dir)
    monkeypatch.setattr(retention, "finished_runs", lambda _data_dir: listed)

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
