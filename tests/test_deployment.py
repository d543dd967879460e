"""prefect.yaml deployed on a real `prefect server`, run by a real process worker.

The test starts `prefect server start` on 127.0.0.1 with its own PREFECT_HOME, creates the
process work pool, runs `prefect deploy --all` from the repository root, triggers
`manual-rebuild` on a replay of the sample, and lets `prefect worker start --run-once` run
it. Everything is checked through the Prefect client. About a minute on a two-core machine
(a fresh server database migrates first); deselect with `-m "not deployment"`.
"""

from __future__ import annotations

import subprocess

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import StateType
from prefect.settings import PREFECT_API_URL, PREFECT_HOME, temporary_settings

from tests.prefect_helpers import (
    ROOT,
    SAMPLE_CRAWL,
    artifacts_of,
    chunk_ids,
    expected_sample_ids,
    prefect_cli,
    prefect_env,
    prefect_server,
    stop_process_group,
    table_of,
)

POOL = "firechunk-process"
WORKER_TIMEOUT = 300.0

pytestmark = pytest.mark.deployment


def run_cli(env: dict[str, str], *args: str, timeout: float = 120) -> str:
    done = subprocess.run(
        prefect_cli(*args), cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"prefect {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_manual_rebuild_deployment_runs_on_a_process_worker(tmp_path):
    home = tmp_path / "prefect-home"
    home.mkdir()
    env = prefect_env(home)
    data_dir = tmp_path / "data"
    worker = None
    try:
        with prefect_server(env, tmp_path, tmp_path / "server.log") as api_url:
            env["PREFECT_API_URL"] = api_url
            run_cli(env, "work-pool", "create", POOL, "--type", "process")
            run_cli(env, "--no-prompt", "deploy", "--all")

            with temporary_settings({PREFECT_API_URL: api_url, PREFECT_HOME: home}):
                with get_client(sync_client=True) as client:
                    manual = client.read_deployment_by_name("rebuild/manual-rebuild")
                    flow_run = client.create_flow_run_from_deployment(
                        manual.id,
                        parameters={"replay": str(SAMPLE_CRAWL), "data_dir": str(data_dir)},
                    )
                worker = subprocess.Popen(
                    prefect_cli("worker", "start", "--pool", POOL, "--run-once"),
                    cwd=tmp_path,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    start_new_session=True,
                )
                worker_output, _ = worker.communicate(timeout=WORKER_TIMEOUT)

                with get_client(sync_client=True) as client:
                    finished = client.read_flow_run(flow_run.id)
                    nightly = client.read_deployment_by_name("rebuild/supabase-nightly")
                    manual = client.read_deployment_by_name("rebuild/manual-rebuild")
                artifacts = artifacts_of(flow_run.id)
    finally:
        stop_process_group(worker)

    assert finished.state_type == StateType.COMPLETED, worker_output[-3000:]
    assert "replay of crawl.json" in finished.name

    assert {"rebuild-summary", "validation-report", "chunking-progress"} <= set(artifacts)
    assert {"rebuild-outputs", "run-directory"} <= set(artifacts)
    assert table_of(artifacts["rebuild-summary"])["published as latest"] == "yes"
    assert artifacts["validation-report"].data.startswith("# Validation passed")

    published = (data_dir / "latest").resolve()
    assert published.parent == (data_dir / "runs").resolve()
    assert chunk_ids(published / "chunks.json") == expected_sample_ids()

    [schedule] = nightly.schedules
    assert schedule.active
    assert schedule.schedule.cron == "0 3 * * *" and schedule.schedule.timezone == "UTC"
    assert nightly.parameters["crawl"]["site_url"] == "https://supabase.com/docs"
    assert nightly.parameters["crawl"]["limit"] == 5000 and nightly.parameters["database"]["load"]
    assert manual.parameters["crawl"]["limit"] == 500
    assert nightly.work_pool_name == manual.work_pool_name == POOL
    assert manual.schedules == []
    assert manual.pull_steps == [
        {"prefect.deployments.steps.set_working_directory": {"directory": str(ROOT)}}
    ]
