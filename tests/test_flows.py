"""The Prefect flows run for real against a temporary Prefect API (prefect_test_harness).

What the dashboard would show (run names, artifacts, task runs, logs) is read back through
the Prefect client. The harness starts one server for the whole session; on a fresh
database that takes about 20-30 s on a two-core machine.
"""

from __future__ import annotations

import json
import logging
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import prefect
import pytest
from distributed import Client, LocalCluster, get_task_stream
from prefect.blocks.system import Secret
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import StateType
from prefect.states import Failed
from typer.testing import CliRunner

from firechunk.cli import app
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
from firechunk.flows.chunk import chunk as chunk_flow
from firechunk.flows.crawl import crawl as crawl_flow
from firechunk.flows.rebuild import rebuild
from firechunk.flows.validate_publish import validate_publish
from firechunk.run.memory import chunk_crawl
from firechunk.run.stages import run_here, start_run
from firechunk.schemas.page import CrawlResult
from firechunk.settings import CrawlSettings, RunSettings
from firechunk.tasks.crawl import API_KEY_ENV, _worth_retrying, crawl_site
from firechunk.tasks.run import RunNotPublished
from firechunk.tasks.runners import WORKER_PRELOAD, api_shared_with_workers, make_task_runner
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
    assert {"chunk (s)", "write (s)", "validate + publish (s)", "total (s)"} <= set(summary)
    assert summary["published as latest"] == "yes"
    assert artifacts["validation-report"].data.startswith("# Validation passed")
    assert "chunks.parquet" in artifacts["rebuild-outputs"].data
    assert str(run_dir.resolve()) in artifacts["run-directory"].data
    assert "file://" not in artifacts["run-directory"].data + artifacts["rebuild-outputs"].data
    assert float(artifacts["chunking-progress"].data) == 100.0

    # Batches of pages per task run, not one task run per page.
    batches = [run for run in task_runs_of(run_id) if run.name.startswith("chunk-pages")]
    chunked_pages = len(read_crawl(SAMPLE_CRAWL).data) - report["pages_aliased"]
    assert 2 <= len(batches) < chunked_pages
    assert all(run.state_type == StateType.COMPLETED for run in batches)


def test_failed_validation_fails_the_run_keeps_latest_and_exits_non_zero(prefect_api, tmp_path):
    crawl = json.loads(SAMPLE_CRAWL.read_text(encoding="utf-8"))
    for crawled in crawl["data"]:  # every page empty: no chunks, run_has_chunks fails
        crawled["markdown"] = ""
    bad_crawl = tmp_path / "twice.json"
    bad_crawl.write_text(json.dumps(crawl), encoding="utf-8")
    data_dir = tmp_path / "data"
    good = run_here(start_run(data_dir, "previous-good", source=SAMPLE_CRAWL), SAMPLE_CRAWL)[2]
    assert good.published
    previous = data_dir / "runs" / "previous-good"

    result = CliRunner().invoke(
        app,
        ["rebuild", "--replay", str(bad_crawl), "--data-dir", str(data_dir)]
        + ["--workers", "1", "--run-id", "twice"],
    )

    assert result.exit_code == 1, result.output
    assert "FAILED validation" in result.output and "run_has_chunks" in result.output
    assert (data_dir / "latest").resolve() == previous.resolve()
    status = json.loads((data_dir / "runs" / "twice" / "status.json").read_text())
    assert status["status"] == "failed"

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:
        [latest_run] = client.read_flow_runs(sort=FlowRunSort.START_TIME_DESC, limit=1)
    assert "replay of twice.json" in latest_run.name
    assert latest_run.state_type == StateType.FAILED
    artifacts = artifacts_of(latest_run.id)
    assert artifacts["validation-report"].data.startswith("# Validation FAILED")
    assert "run_has_chunks" in artifacts["validation-report"].data
    assert table_of(artifacts["rebuild-summary"])["published as latest"] == "no"
    # The dashboard shows where the night failed: the validate task, not a green one.
    states = {run.name.rsplit("-", 1)[0]: run.state_type for run in task_runs_of(latest_run.id)}
    assert states["validate-run"] == StateType.FAILED
    assert states["write-run"] == StateType.COMPLETED
    assert "publish-run" not in states
    # The validate task's traceback, not the flow's again: the flow returns its failure.
    assert len([log for log in logs_of(latest_run.id) if "Traceback" in log]) <= 1


def test_a_refused_publish_fails_the_night_in_one_error_line_and_says_why(prefect_api, tmp_path):
    """The shrink guard refusing a run that passed validation is the guard working: one
    ERROR line, no traceback; the flow run fails, the CLI exits 1 with one line, and the
    dashboard says why the run was not published."""
    data_dir = tmp_path / "data"
    assert run_here(start_run(data_dir, "good", source=SAMPLE_CRAWL), SAMPLE_CRAWL)[2].published
    shrunk = shrunk_crawl(tmp_path / "shrunk.json")

    result = CliRunner().invoke(
        app,
        ["rebuild", "--replay", str(shrunk), "--data-dir", str(data_dir)]
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
    assert states["validate-run"] == "Completed"
    assert states["publish-run"] == "Refused"  # where the night stopped, and why
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


def test_the_stage_flows_keep_the_seconds_and_fail_a_refused_run_quietly(prefect_api, tmp_path):
    data_dir = tmp_path / "data"
    assert run_here(start_run(data_dir, "good", source=SAMPLE_CRAWL), SAMPLE_CRAWL)[2].published
    run_dir = chunk_flow(
        crawl_file=shrunk_crawl(tmp_path / "shrunk.json"),
        data_dir=data_dir,
        run=RunSettings(collection="docs.example.com/docs"),
    )
    state = validate_publish(run_dir=run_dir, return_state=True)

    assert state.is_failed() and "refused by the shrink guard" in state.message
    with pytest.raises(RunNotPublished, match="--allow-shrink"):
        state.result()
    recorded = json.loads((run_dir / "seconds.json").read_text())
    assert {"chunk", "write", "validate + publish"} <= set(recorded)
    stages = sum(value for stage, value in recorded.items() if stage != "total")
    assert recorded["total"] == pytest.approx(stages, abs=0.002)
    assert not [log for log in logs_of(state.state_details.flow_run_id) if "Traceback" in log]


def test_chunk_flow_on_a_local_dask_cluster_gives_the_chunk_crawl_ids(
    prefect_api, tmp_path, sample_ids
):
    """Two Dask worker processes do the chunking; the stage flows hand over a run directory."""
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0"
        ) as cluster,
        Client(cluster) as client,
        get_task_stream(client) as stream,
    ):
        run_dir = chunk_flow(
            crawl_file=SAMPLE_CRAWL,
            data_dir=tmp_path / "data",
            run=RunSettings(task_runner="dask", dask_address=cluster.scheduler_address, workers=2),
        )
        workers = set(cluster.scheduler.workers)
    assert chunk_ids(run_dir / "chunks.json") == sample_ids
    assert not (tmp_path / "data" / "latest").exists()  # written, not yet validated
    ran_on = {task["worker"] for task in stream.data}
    assert ran_on and ran_on <= workers  # the batches ran in the cluster's worker processes

    published = validate_publish(run_dir=run_dir)
    assert published.published and published.run_dir == run_dir
    assert chunk_ids(published.run_dir / "chunks.json") == sample_ids


def test_cli_rebuild_on_its_own_local_dask_cluster(prefect_api, tmp_path, sample_ids):
    """`--task-runner dask` with no address starts (and stops) a local cluster of its own."""
    data_dir = tmp_path / "data"
    result = CliRunner().invoke(
        app,
        ["rebuild", "--replay", str(SAMPLE_CRAWL), "--data-dir", str(data_dir)]
        + ["--task-runner", "dask", "--workers", "2", "--run-id", "on-dask"],
    )

    assert result.exit_code == 0, result.output
    run_dir = data_dir / "runs" / "on-dask"
    assert f"outputs in {run_dir.resolve()}/" in result.output
    assert (data_dir / "latest").resolve() == run_dir.resolve()
    assert chunk_ids(run_dir / "chunks.json") == sample_ids

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:
        [latest_run] = client.read_flow_runs(sort=FlowRunSort.START_TIME_DESC, limit=1)
    assert any("batches on DaskTaskRunner" in line for line in logs_of(latest_run.id))


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


def test_crawl_flow_takes_the_key_from_a_secret_block_and_never_shows_it(
    prefect_api, tmp_path, monkeypatch
):
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    Secret(value=CANARY_KEY).save("firechunk-test-key", overwrite=True)
    pages = served_pages()
    data_dir = tmp_path / "data"
    with FakeFirecrawl(pages, api_key=CANARY_KEY, page_size=page_size_for(pages)) as server:
        state = crawl_flow(
            crawl=CrawlSettings(
                site_url="https://docs.example.com/",
                api_url=server.base_url,
                secret_block="firechunk-test-key",
            ),
            data_dir=data_dir,
            poll_interval=0.01,
            return_state=True,
        )
        start_calls, unauthorized = server.start_calls, server.unauthorized

    assert state.is_completed(), state.message
    crawl_file = state.result()
    assert len(read_crawl(crawl_file).data) == len(pages)
    assert start_calls == 1 and unauthorized == 0  # the block's key was sent and accepted
    logs = logs_of(state.state_details.flow_run_id)
    assert any("Secret block 'firechunk-test-key'" in message for message in logs)
    assert not [message for message in logs if CANARY_KEY in message]
    assert not [p for p in data_dir.rglob("*") if p.is_file() and CANARY_KEY in p.read_text()]


def test_crawl_flow_falls_back_to_the_environment_then_fails_fast_without_a_key(
    prefect_api, tmp_path, monkeypatch
):
    pages = served_pages()
    monkeypatch.setenv(API_KEY_ENV, CANARY_KEY)
    with FakeFirecrawl(pages, api_key=CANARY_KEY, page_size=page_size_for(pages)) as server:
        crawl_file = crawl_flow(
            crawl=CrawlSettings(
                site_url="https://docs.example.com/",
                api_url=server.base_url,
                secret_block="no-such-block",
            ),
            data_dir=tmp_path / "env",
            poll_interval=0.01,
        )
    assert len(read_crawl(crawl_file).data) == len(pages)

    monkeypatch.delenv(API_KEY_ENV)
    state = crawl_flow(
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
    [crawl_run] = task_runs_of(state.state_details.flow_run_id)
    assert crawl_run.run_count == 1  # not retried: a rerun cannot find a key


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
    assert _worth_retrying(crawl_site, None, Failed(data=error)) is retried


def test_flows_have_no_secret_parameter():
    """The key never travels as a parameter (the API records flow-run parameters)."""
    for flow in (rebuild, crawl_flow, chunk_flow, validate_publish):
        names = set(flow.parameters.properties)
        assert not [name for name in names if "key" in name or "token" in name], flow.name


@prefect.task(cache_policy=NO_CACHE)
def worker_parent() -> tuple[int, str]:
    """The worker's parent process and its command line."""
    parent = os.getppid()
    return parent, Path(f"/proc/{parent}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@prefect.flow
def where_workers_start() -> tuple[int, tuple[int, str]]:
    with api_shared_with_workers(), make_task_runner(RunSettings(workers=1)) as runner:
        return os.getpid(), runner.submit(worker_parent, {}).result()


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="reads /proc (Linux)")
def test_process_workers_fork_from_a_server_that_preloaded_the_chunker(prefect_api):
    flow_pid, (parent, command) = where_workers_start()
    assert parent != flow_pid  # not forked from the flow's process, with its threads
    assert "multiprocessing.forkserver" in command
    assert all(module in command for module in WORKER_PRELOAD)


def test_a_replay_file_that_does_not_exist_is_refused_before_prefect_starts(tmp_path):
    result = CliRunner().invoke(
        app, ["rebuild", "--replay", str(tmp_path / "missing.json"), "--data-dir", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert "does not exist" in result.output
    assert not (tmp_path / "runs").exists()  # no run was claimed: the flow never started


def test_every_task_has_a_name_of_its_own():
    """Two tasks of one name read as one on the dashboard."""
    import importlib
    import pkgutil

    from prefect import Task

    from firechunk import tasks

    found: dict[str, str] = {}
    for module_info in pkgutil.iter_modules(tasks.__path__):
        module = importlib.import_module(f"firechunk.tasks.{module_info.name}")
        for attribute, value in vars(module).items():
            if isinstance(value, Task) and value.__module__ == module.__name__:
                where = f"{module.__name__}.{attribute}"
                assert value.name not in found, f"{where} and {found[value.name]}"
                found[value.name] = where
    assert {"chunk-pages", "write-run", "validate-run", "publish-run"} <= set(found)


def test_chunk_out_and_rebuild_write_the_same_files(prefect_api, tmp_path):
    """`firechunk chunk --out` and `firechunk rebuild` run the same stages: the same bytes."""
    out, data_dir = tmp_path / "out", tmp_path / "data"
    chunked = CliRunner().invoke(
        app, ["chunk", str(SAMPLE_CRAWL), "--out", str(out), "--workers", "2"]
    )
    rebuilt = CliRunner().invoke(
        app,
        ["rebuild", "--replay", str(SAMPLE_CRAWL), "--data-dir", str(data_dir)]
        + ["--workers", "2", "--run-id", "r"],
    )

    assert chunked.exit_code == 0, chunked.output
    assert rebuilt.exit_code == 0, rebuilt.output
    for name in ("chunks.json", "chunks.parquet", "pages.parquet", "quarantine.jsonl"):
        assert (out / name).read_bytes() == (data_dir / "runs" / "r" / name).read_bytes(), name


def test_batches_that_never_come_back_stop_the_chunk_stage_instead_of_hanging(prefect_api):
    """A batch that does not come back within `run.batch_timeout` ends the wait with
    ChunkingStalled, naming how many came back, rather than the flow run waiting for ever."""
    from prefect import task
    from prefect.futures import PrefectFuture
    from prefect.task_runners import ThreadPoolTaskRunner

    from firechunk.tasks.chunk import as_finished
    from firechunk.tasks.runners import ChunkingStalled

    @task
    def takes(seconds: float) -> float:
        time.sleep(seconds)
        return seconds

    @prefect.flow
    def waits() -> tuple[list[float], str]:
        came_back: list[float] = []
        runner: ThreadPoolTaskRunner[float]
        with ThreadPoolTaskRunner(max_workers=2) as runner:
            futures: list[PrefectFuture[Any]] = [
                runner.submit(takes, {"seconds": s}) for s in (0.1, 6.0)
            ]
            try:
                for future in as_finished(futures, timeout=2.0):
                    came_back.append(future.result())
            except ChunkingStalled as stalled:
                return came_back, str(stalled)
        return came_back, ""

    came_back, message = waits()
    assert came_back == [0.1]
    assert message.startswith("no batch of pages came back in 2 s (1 of 2 done)")
