"""The pipeline as the Prefect `rebuild` flow, run for real against a temporary Prefect API
(prefect_test_harness), and the pipeline's executors.

What the dashboard would show (run names, artifacts, task runs, logs) is read back through
the Prefect client. The harness starts one server for the whole session; on a fresh
database that takes about 20-30 s on a two-core machine.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from distributed import LocalCluster
from prefect.blocks.system import Secret
from prefect.client.schemas.objects import StateType
from prefect.states import Failed
from typer.testing import CliRunner

from firechunk.cli import app
from firechunk.crawl import API_KEY_ENV
from firechunk.crawl.errors import (
    AccessRefusedError,
    CrawlError,
    DownloadError,
    JobFailedError,
    MissingApiKeyError,
    PollTimeoutError,
    TargetMismatchError,
)
from firechunk.crawlfile import read_crawl
from firechunk.flows.rebuild import rebuild
from firechunk.pipeline import STAGES, Request, run_pipeline
from firechunk.run.memory import chunk_crawl
from firechunk.schemas.page import CrawlResult
from firechunk.settings import CrawlSettings, RunSettings
from firechunk.tasks.stages import crawl_worth_retrying, task_options
from tests.crawl_fixtures import CANARY_KEY, page_size_for, served_pages
from tests.firecrawl_server import FakeFirecrawl
from tests.prefect_helpers import (
    SAMPLE_CRAWL,
    artifacts_of,
    chunk_ids,
    expected_sample_ids,
    flow_run,
    logs_of,
    table_of,
    task_runs_of,
)

DASHBOARD_KEYS = {
    "rebuild-summary",
    "validation-report",
    "rebuild-outputs",
    "run-directory",
    "chunking-progress",
    "rebuild-changes",
    "rebuild-pages-added",
    "rebuild-pages-changed",
    "rebuild-pages-removed",
    "rebuild-quarantine",
    "rebuild-chunk-sizes",
    "rebuild-trend",
    "rebuild-trend-chart",
    "rebuild-database",
}


@pytest.fixture(scope="session")
def sample_ids() -> list[str]:
    return expected_sample_ids()


def newest_flow_run():
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:
        [latest_run] = client.read_flow_runs(sort=FlowRunSort.START_TIME_DESC, limit=1)
    return latest_run


def log_records_of(flow_run_id) -> list:
    """Every log record of the run (level and message), after flushing the queue."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)
    with get_client(sync_client=True) as client:
        return client.read_logs(
            log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))
        )


def shrunk_crawl(path: Path, pages: int = 3) -> Path:
    """The sample crawl cut to its first pages: the shrink guard refuses to publish it."""
    crawl = json.loads(SAMPLE_CRAWL.read_text(encoding="utf-8"))
    crawl["data"] = crawl["data"][:pages]
    path.write_text(json.dumps(crawl), encoding="utf-8")
    return path


def test_rebuild_replays_the_sample_publishes_and_fills_the_dashboard(
    prefect_api, tmp_path, sample_ids
):
    data_dir = tmp_path / "data"
    state = rebuild(
        replay=SAMPLE_CRAWL,
        data_dir=data_dir,
        run=RunSettings(workers=2),
        run_id="night-1",
        return_state=True,
    )

    assert state.is_completed(), state.message
    result = state.result()
    run_dir = data_dir / "runs" / "night-1"
    assert result.published and result.run_dir == run_dir
    assert (data_dir / "latest").resolve() == run_dir.resolve()
    assert chunk_ids(run_dir / "chunks.json") == sample_ids  # same chunks as `firechunk chunk`

    run_id = state.state_details.flow_run_id
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    name = flow_run(run_id).name
    assert name.startswith("docs.example.com/docs replay of crawl.json ") and today in name

    artifacts = artifacts_of(run_id)
    assert set(artifacts) >= DASHBOARD_KEYS
    report = json.loads((run_dir / "report.json").read_text())
    summary = table_of(artifacts["rebuild-summary"])
    assert summary["pages crawled"] == report["pages_in"] == 13
    assert summary["chunks"] == report["chunks_out"]
    assert summary["aliases (same page, other URL)"] == report["pages_aliased"]
    assert summary["pages quarantined"] == report["pages_quarantined"]
    assert summary["tokens in chunks"] == report["tokens_in_chunks"]
    assert summary["duplicate chunks dropped"] == report["duplicate_chunks_dropped"]
    ran = ("prune", "start", "chunk", "write", "validate", "publish")
    assert {f"{stage} (s)" for stage in (*ran, "total")} <= set(summary)
    assert summary["published as latest"] == "yes"
    assert artifacts["validation-report"].data.startswith("# Validation passed")
    assert "chunks.parquet" in artifacts["rebuild-outputs"].data
    assert str(run_dir.resolve()) in artifacts["run-directory"].data
    assert "file://" not in artifacts["run-directory"].data + artifacts["rebuild-outputs"].data
    assert float(artifacts["chunking-progress"].data) == 100.0

    # One task run per stage the night ran, each named for its stage, in the pipeline's order.
    runs = sorted(task_runs_of(run_id), key=lambda run: run.expected_start_time)
    stages = [run.name.rsplit("-", 1)[0] for run in runs if run.name.rsplit("-", 1)[0] in STAGES]
    assert stages == [*ran, "prune"]  # pruned again once published
    assert all(run.state_type == StateType.COMPLETED for run in runs)


def test_failed_validation_fails_the_run_keeps_latest_and_exits_non_zero(prefect_api, tmp_path):
    crawl = json.loads(SAMPLE_CRAWL.read_text(encoding="utf-8"))
    for crawled in crawl["data"]:  # every page empty: no chunks, run_has_chunks fails
        crawled["markdown"] = ""
    bad_crawl = tmp_path / "twice.json"
    bad_crawl.write_text(json.dumps(crawl), encoding="utf-8")
    data_dir = tmp_path / "data"
    good = run_pipeline(Request(replay=SAMPLE_CRAWL, data_dir=data_dir, run_id="previous-good"))
    assert good.result is not None and good.result.published
    previous = data_dir / "runs" / "previous-good"

    result = CliRunner().invoke(
        app,
        ["rebuild", "--prefect", "--replay", str(bad_crawl), "--data-dir", str(data_dir)]
        + ["--workers", "1", "--run-id", "twice"],
    )

    assert result.exit_code == 1, result.output
    assert "FAILED validation" in result.output and "run_has_chunks" in result.output
    assert (data_dir / "latest").resolve() == previous.resolve()
    status = json.loads((data_dir / "runs" / "twice" / "status.json").read_text())
    assert status["status"] == "failed"

    latest_run = newest_flow_run()
    assert "replay of twice.json" in latest_run.name
    assert latest_run.state_type == StateType.FAILED
    artifacts = artifacts_of(latest_run.id)
    assert artifacts["validation-report"].data.startswith("# Validation FAILED")
    assert "run_has_chunks" in artifacts["validation-report"].data
    assert table_of(artifacts["rebuild-summary"])["published as latest"] == "no"
    # The dashboard shows where the night failed: the validate task, not a green one.
    states = {run.name.rsplit("-", 1)[0]: run.state_type for run in task_runs_of(latest_run.id)}
    assert states["validate"] == StateType.FAILED
    assert states["write"] == StateType.COMPLETED
    # Failed by its verdict, not by an exception: no traceback anywhere.
    assert not [log for log in logs_of(latest_run.id) if "Traceback" in log]


def test_a_refused_publish_fails_the_night_in_one_error_line_and_says_why(prefect_api, tmp_path):
    """The shrink guard refusing a run that passed validation is the guard working: one
    ERROR line, no traceback; the flow run fails, the CLI exits 1 with one line, and the
    dashboard says why the run was not published."""
    data_dir = tmp_path / "data"
    good = run_pipeline(Request(replay=SAMPLE_CRAWL, data_dir=data_dir, run_id="good"))
    assert good.result is not None and good.result.published
    shrunk = shrunk_crawl(tmp_path / "shrunk.json")

    result = CliRunner().invoke(
        app,
        ["rebuild", "--prefect", "--replay", str(shrunk), "--data-dir", str(data_dir)]
        + ["--workers", "1", "--run-id", "shrunk"]
        # Declared: a replay cut short to the guides would name the guides' collection.
        + ["--collection", "docs.example.com/docs"],
    )

    assert result.exit_code == 1, result.output
    said = result.output.strip().splitlines()[-1]
    assert said.startswith("Run shrunk passed (") and "--allow-shrink" in said, result.output
    assert "Traceback" not in result.output
    assert (data_dir / "latest").resolve() == (data_dir / "runs" / "good").resolve()

    flow_run_ = newest_flow_run()
    assert "replay of shrunk.json" in flow_run_.name
    assert flow_run_.state_type == StateType.FAILED
    assert flow_run_.state.message == "Run shrunk not published: refused by the shrink guard"
    records = log_records_of(flow_run_.id)
    refusals = [log for log in records if "--allow-shrink" in log.message]
    assert [log.level for log in refusals] == [logging.ERROR], [log.message for log in refusals]
    assert [log for log in records if log.level >= logging.ERROR] == refusals
    assert not [log for log in records if "Traceback" in log.message]
    states = {run.name.rsplit("-", 1)[0]: run.state_name for run in task_runs_of(flow_run_.id)}
    assert states["validate"] == "Completed"
    assert states["publish"] == "Refused"  # where the night stopped, and why
    assert states["report-database"] == "Completed"

    artifacts = artifacts_of(flow_run_.id)
    summary = table_of(artifacts["rebuild-summary"])
    assert summary["validation"] == "passed" and summary["published as latest"] == "no"
    assert summary["not published because"] == "refused by the shrink guard"
    assert (
        "**Not published**: it passed validation, but publishing it was refused by the shrink "
        "guard: the run drops "
    ) in artifacts["rebuild-summary"].description
    database = artifacts["rebuild-database"].data
    assert (
        "Run shrunk was not published, so not loaded: it passed validation, but publishing it "
        "was refused by the shrink guard: the run drops "
    ) in database and "--allow-shrink" in database


def test_the_pipeline_keeps_each_stages_seconds_and_their_total(tmp_path):
    data_dir = tmp_path / "data"
    night = run_pipeline(Request(replay=SAMPLE_CRAWL, data_dir=data_dir))
    assert night.start is not None
    recorded = json.loads((night.start.run_dir / "seconds.json").read_text())
    assert set(recorded) == {"prune", "start", "chunk", "write", "validate", "publish", "total"}
    stages = sum(value for stage, value in recorded.items() if stage != "total")
    assert recorded["total"] == pytest.approx(stages, abs=0.002)


def test_the_chunk_stage_on_a_dask_cluster_gives_the_chunk_crawl_ids(tmp_path, sample_ids):
    """Two Dask worker processes of a running cluster do the chunking."""
    from distributed import Client, get_task_stream

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0"
        ) as cluster,
        Client(cluster) as client,
        get_task_stream(client) as stream,
    ):
        run = RunSettings(task_runner="dask", dask_address=cluster.scheduler_address, workers=2)
        night = run_pipeline(Request(run=run, replay=SAMPLE_CRAWL, data_dir=tmp_path / "data"))
        workers = set(cluster.scheduler.workers)
    assert night.result is not None and night.result.published
    assert chunk_ids(night.result.run_dir / "chunks.json") == sample_ids
    ran_on = {task["worker"] for task in stream.data}
    assert ran_on and ran_on <= workers  # the batches ran in the cluster's worker processes


def test_cli_rebuild_on_its_own_local_dask_cluster(tmp_path, sample_ids, monkeypatch):
    """`--task-runner dask` with no address starts (and stops) a local cluster of its own."""
    started: list[int] = []
    real = LocalCluster.__init__

    def counted(self, *args, **kwargs):
        started.append(kwargs["n_workers"])
        real(self, *args, **kwargs)

    monkeypatch.setattr(LocalCluster, "__init__", counted)
    data_dir = tmp_path / "data"
    result = CliRunner().invoke(
        app,
        ["rebuild", "--replay", str(SAMPLE_CRAWL), "--data-dir", str(data_dir)]
        + ["--task-runner", "dask", "--workers", "2", "--run-id", "on-dask"],
    )

    assert result.exit_code == 0, result.output
    assert started == [2]
    run_dir = data_dir / "runs" / "on-dask"
    assert f"outputs in {run_dir.resolve()}/" in result.output
    assert (data_dir / "latest").resolve() == run_dir.resolve()
    assert chunk_ids(run_dir / "chunks.json") == sample_ids


def test_rebuild_crawls_with_the_given_paths_then_chunks_and_publishes(
    prefect_api, tmp_path, monkeypatch
):
    monkeypatch.setenv(API_KEY_ENV, CANARY_KEY)
    pages = served_pages()
    data_dir = tmp_path / "data"
    with FakeFirecrawl(pages, api_key=CANARY_KEY, scraping_polls=0) as server:
        result = rebuild(
            crawl=CrawlSettings(
                site_url="https://docs.example.com/docs",
                include_paths=["/docs/guides/"],
                exclude_paths=["retries"],
                limit=50,
                api_url=server.base_url,
                secret_block="no-such-block",
            ),
            data_dir=data_dir,
            run=RunSettings(workers=1),
        )
        [body] = server.start_bodies

    assert body["url"] == "https://docs.example.com/docs" and body["limit"] == 50
    assert body["includePaths"] == ["/docs/guides/"] and body["excludePaths"] == ["retries"]
    wanted = [p for p in pages if "/docs/guides/" in p["metadata"]["sourceURL"]]
    wanted = [p for p in wanted if "retries" not in p["metadata"]["sourceURL"]]
    assert 2 <= len(wanted) < len(pages)
    expected = chunk_crawl(CrawlResult.model_validate({"data": wanted}), workers=1)
    assert result.published
    assert chunk_ids(result.run_dir / "chunks.json") == [c.chunk_id for c in expected.chunks]
    assert not [
        p for p in data_dir.rglob("*") if p.is_file() and CANARY_KEY.encode() in p.read_bytes()
    ]


def test_the_flow_takes_the_key_from_a_secret_block_and_never_shows_it(
    prefect_api, tmp_path, monkeypatch
):
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    Secret(value=CANARY_KEY).save("firechunk-test-key", overwrite=True)
    pages = served_pages()
    data_dir = tmp_path / "data"
    with FakeFirecrawl(pages, api_key=CANARY_KEY, page_size=page_size_for(pages)) as server:
        state = rebuild(
            crawl=CrawlSettings(
                site_url="https://docs.example.com/",
                api_url=server.base_url,
                secret_block="firechunk-test-key",
                poll_interval=0.01,
            ),
            data_dir=data_dir,
            return_state=True,
        )
        start_calls, unauthorized = server.start_calls, server.unauthorized

    assert state.is_completed(), state.message
    [crawl_file] = (data_dir / "raw").glob("*/crawl.json")
    assert len(read_crawl(crawl_file).data) == len(pages)
    assert start_calls == 1 and unauthorized == 0  # the block's key was sent and accepted
    logs = logs_of(state.state_details.flow_run_id)
    assert any("Secret block 'firechunk-test-key'" in message for message in logs)
    assert not [message for message in logs if CANARY_KEY in message]
    key = CANARY_KEY.encode()
    assert not [p for p in data_dir.rglob("*") if p.is_file() and key in p.read_bytes()]


def test_the_flow_falls_back_to_the_environment_then_fails_fast_without_a_key(
    prefect_api, tmp_path, monkeypatch
):
    pages = served_pages()
    monkeypatch.setenv(API_KEY_ENV, CANARY_KEY)
    with FakeFirecrawl(pages, api_key=CANARY_KEY, page_size=page_size_for(pages)) as server:
        result = rebuild(
            crawl=CrawlSettings(
                site_url="https://docs.example.com/",
                api_url=server.base_url,
                secret_block="no-such-block",
                poll_interval=0.01,
            ),
            data_dir=tmp_path / "env",
        )
    assert result.published
    [crawl_file] = (tmp_path / "env" / "raw").glob("*/crawl.json")
    assert len(read_crawl(crawl_file).data) == len(pages)

    monkeypatch.delenv(API_KEY_ENV)
    state = rebuild(
        crawl=CrawlSettings(
            site_url="https://docs.example.com/",
            api_url="http://127.0.0.1:9",  # never reached: there is no key to send
            secret_block="no-such-block",
        ),
        data_dir=tmp_path / "nokey",
        return_state=True,
    )
    assert state.is_failed()
    with pytest.raises(MissingApiKeyError):
        state.result()
    # Said before any task ran: no crawl task, so no retry and no traceback either.
    assert not task_runs_of(state.state_details.flow_run_id, timeout=5)
    assert "'no-such-block'" in state.message


@pytest.mark.parametrize(
    ("error", "retried"),
    [
        (PollTimeoutError("still scraping"), False),  # its wait is spent: the next run resumes
        (DownloadError("short download"), True),
        (CrawlError("HTTP 503 after 6 attempts; run again to resume"), True),
        (MissingApiKeyError("no key"), False),
        (AccessRefusedError("HTTP 401: invalid token"), False),
        (TargetMismatchError("other options"), False),
        (JobFailedError("job failed"), False),
        (ValueError("a bug"), False),
    ],
)
def test_crawl_task_retries_only_what_a_rerun_can_fix(error, retried):
    assert crawl_worth_retrying(None, None, Failed(data=error)) is retried


def test_flows_have_no_secret_parameter():
    """The key never travels as a parameter (the API records flow-run parameters)."""
    names = set(rebuild.parameters.properties)
    assert not [name for name in names if "key" in name or "token" in name]


def test_workers_fork_from_a_one_thread_process_and_spawn_from_a_busy_one():
    """A fork copies only the calling thread: a lock another thread held (a Prefect flow's
    event loop, its log shipping) would stay held in the worker for ever. Asked in a fresh
    interpreter: this one runs the test session's threads."""
    script = (
        "import threading; from firechunk.run.executors import _start_method as m; "
        "alone = m(); stop = threading.Event(); t = threading.Thread(target=stop.wait); "
        "t.start(); busy = m(); stop.set(); t.join(); print(alone, busy)"
    )
    said = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    assert said == ["fork", "spawn"]


def test_a_replay_file_that_does_not_exist_is_refused_before_prefect_starts(tmp_path):
    result = CliRunner().invoke(
        app, ["rebuild", "--replay", str(tmp_path / "missing.json"), "--data-dir", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert "does not exist" in result.output
    assert not (tmp_path / "runs").exists()  # no run was claimed: the flow never started


def test_every_task_has_a_name_of_its_own():
    """Two tasks of one name read as one on the dashboard: each stage's task is named for
    its stage, and the dashboard's own tasks for what they report."""
    import importlib
    import pkgutil

    from prefect import Task

    from firechunk import tasks

    request = Request()
    found: dict[str, str] = {task_options(stage, request)["name"]: stage for stage in STAGES}
    assert len(found) == len(STAGES)
    for module_info in pkgutil.iter_modules(tasks.__path__):
        module = importlib.import_module(f"firechunk.tasks.{module_info.name}")
        for attribute, value in vars(module).items():
            if isinstance(value, Task) and value.__module__ == module.__name__:
                where = f"{module.__name__}.{attribute}"
                assert value.name not in found, f"{where} and {found[value.name]}"
                found[value.name] = where
    assert {"report-to-dashboard", "report-database"} <= set(found)


def test_chunk_out_rebuild_and_the_flow_write_the_same_files(prefect_api, tmp_path):
    """`firechunk chunk --out`, `firechunk rebuild` and the Prefect flow run the one
    pipeline: the same bytes."""
    out, here, flow = tmp_path / "out", tmp_path / "here", tmp_path / "flow"
    chunked = CliRunner().invoke(
        app, ["chunk", str(SAMPLE_CRAWL), "--out", str(out), "--workers", "2"]
    )
    rebuilt = CliRunner().invoke(
        app,
        ["rebuild", "--replay", str(SAMPLE_CRAWL), "--data-dir", str(here)]
        + ["--workers", "2", "--run-id", "r"],
    )
    on_prefect = rebuild(replay=SAMPLE_CRAWL, data_dir=flow, run=RunSettings(workers=2))

    assert chunked.exit_code == 0, chunked.output
    assert rebuilt.exit_code == 0, rebuilt.output
    for name in ("chunks.json", "chunks.parquet", "pages.parquet", "quarantine.jsonl"):
        written = (out / name).read_bytes()
        assert written == (here / "runs" / "r" / name).read_bytes(), name
        assert written == (on_prefect.run_dir / name).read_bytes(), name
