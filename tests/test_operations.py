"""prefect.yaml and automations/ as an operator sets them up, on a real `prefect server`,
and the nights that go wrong there.

One server for the module, configured as deploy/firechunk-server.service is (a fresh
database migrates first): the process work pool is created and `prefect deploy --all` run
from the repository root, as the README's guide does. Then:

- the scheduler creates the nightly's next runs (no run was ever created with SQLAlchemy
  2.1), and logs no error;
- `firechunk automations`, run twice, leaves exactly the automations of automations/ on
  the server, sending through the notification block named (a webhook block pointed at a
  local receiver: no internet); a rebuild that fails really sends the notification, a
  nightly never created and a run no worker takes are reported, each subject saying the
  automation's window;
- `manual-rebuild` runs on a `--run-once` worker and publishes what `firechunk chunk` gives;
- two runs of supabase-nightly on one process worker run one after the other;
- the faults of a real machine, each on runs of supabase-nightly replaying a crawl of our
  own (no network): the worker killed mid-chunking and mid-load, the server restarted
  mid-run, a run cancelled, and the worker killed together with its run (a ghost). Each
  run ends in a final state, the next one starts without a hand on it, the data directory
  and the database stay whole, and every night that does not complete sends one alert.

Everything is read back through the Prefect client. Several minutes on two cores (the ghost
alone waits for its missed heartbeats); deselect with `-m "not deployment"`.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

import pytest
from prefect.blocks.notifications import CustomWebhookNotificationBlock
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterDeploymentId,
    FlowRunFilterState,
    FlowRunFilterStateType,
)
from prefect.client.schemas.objects import StateType
from prefect.events.filters import EventFilter, EventResourceFilter
from prefect.events.schemas.automations import AutomationCore
from prefect.events.worker import EventsWorker
from prefect.logging.handlers import APILogWorker
from prefect.settings import PREFECT_API_URL, PREFECT_HOME, temporary_settings
from prefect.states import Cancelled, Cancelling

from firechunk.commands.automations import DEFAULT_BLOCK
from firechunk.layout import DataDir
from tests.deployed import (
    POOL,
    Notifications,
    states_of,
    wait_until,
    wait_until_final,
    wait_until_state,
    worker,
)
from tests.prefect_helpers import (
    ROOT,
    SAMPLE_CRAWL,
    PrefectServer,
    artifacts_of,
    chunk_ids,
    expected_sample_ids,
    logs_of,
    prefect_cli,
    prefect_env,
    table_of,
)
from tests.test_embedded_postgres import processes_naming
from tests.test_leftovers import big_crawl, workers_of

pytestmark = pytest.mark.deployment

FAILED = "firechunk-rebuild-failed"
UNRESPONSIVE = "firechunk-rebuild-unresponsive"
NOT_FINISHED = "firechunk-rebuild-not-finished"
NIGHTLY_MISSED = "firechunk-nightly-missed"
SCHEDULE_TIMEOUT = 90.0  # the bar: Scheduled runs within 90 s of `prefect deploy`
HEARTBEAT = 30  # seconds: the least Prefect allows, so that a ghost is found soon
GHOST_WINDOW = 2 * HEARTBEAT  # the unresponsive automation's window while the ghost runs
FINAL = {"Completed", "Failed", "Crashed", "Cancelled", "TimedOut"}


@dataclass
class Server:
    prefect: PrefectServer
    env: dict[str, str]
    root: Path
    deployed_at: float  # time.monotonic() once `prefect deploy --all` returned


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    """A real server with the repository deployed on it, and this process's client on it.

    A run that finds its deployment's slot taken is retried after 2 s rather than Prefect's
    30 s, so the queued run starts soon after the first ends; the worker polls every 2 s; a
    run no worker took is Late after 5 s rather than 15.
    """
    root = tmp_path_factory.mktemp("operations")
    home = root / "prefect-home"
    home.mkdir()
    env = prefect_env(
        home,
        PREFECT_SERVER_DEPLOYMENTS_CONCURRENCY_SLOT_WAIT_SECONDS="2",
        PREFECT_WORKER_QUERY_SECONDS="2",
        PREFECT_SERVER_SERVICES_LATE_RUNS_AFTER_SECONDS="5",
    )
    prefect = PrefectServer(env, root, root / "server.log")
    prefect.start()
    try:
        env["PREFECT_API_URL"] = prefect.api_url
        run_ok(prefect_cli("work-pool", "create", POOL, "--type", "process"), env)
        run_ok(prefect_cli("--no-prompt", "deploy", "--all"), env)
        deployed_at = time.monotonic()
        with temporary_settings({PREFECT_API_URL: prefect.api_url, PREFECT_HOME: home}):
            try:
                yield Server(prefect, env, root, deployed_at)
            finally:
                # Prefect's event and log workers live as long as the process and keep the
                # API they started with: stopped here, later tests' flows start their own.
                EventsWorker.drain_all(timeout=10)
                APILogWorker.drain_all(timeout=10)
    finally:
        prefect.stop()


@pytest.fixture(scope="module")
def alerts(server) -> Iterator[tuple[Notifications, str, str]]:
    """The notification block, a webhook to a local receiver, and the automations created
    by the documented command, run twice; yields the receiver and both outputs."""
    notifications = Notifications()
    CustomWebhookNotificationBlock(
        name="firechunk test receiver",
        url=notifications.url,
        json_data={"subject": "{{subject}}", "body": "{{body}}"},
    ).save(DEFAULT_BLOCK)
    first = firechunk_automations(server.env)
    again = firechunk_automations(server.env)  # replaces, never duplicates
    try:
        yield notifications, first, again
    finally:
        notifications.close()


def run_ok(command: list[str], env: dict[str, str], timeout: float = 120) -> str:
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{' '.join(command)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def firechunk_automations(env: dict[str, str]) -> str:
    """The documented command, as the operator runs it."""
    return run_ok([sys.executable, "-m", "firechunk.cli", "automations"], env)


def test_the_nightly_is_scheduled_and_the_scheduler_logs_no_error(server):
    """With the locked versions, the server's scheduler creates the nightly's next runs.

    Then the schedule is paused (which deletes those runs): the worker of a later test must
    never pick up a real 03:00 UTC crawl, whatever the time of day the suite runs at."""
    with get_client(sync_client=True) as client:
        nightly = client.read_deployment_by_name("rebuild/supabase-nightly")
        scheduled = FlowRunFilter(
            deployment_id=FlowRunFilterDeploymentId(any_=[nightly.id]),
            state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.SCHEDULED])),
        )
        deadline = server.deployed_at + SCHEDULE_TIMEOUT
        while not (runs := client.read_flow_runs(flow_run_filter=scheduled)):
            if time.monotonic() > deadline:
                break
            time.sleep(1)
        [schedule] = client.read_deployment_schedules(nightly.id)
        client.update_deployment_schedule(nightly.id, schedule.id, active=False)
    assert schedule.active  # as prefect.yaml deployed it

    log = (server.root / "server.log").read_text()
    print(f"Scheduled runs seen {time.monotonic() - server.deployed_at:.0f} s after deploy")
    assert runs, f"no Scheduled run of supabase-nightly {SCHEDULE_TIMEOUT:.0f} s after deploy"
    starts = sorted(run.expected_start_time.astimezone(UTC) for run in runs)
    assert all((start.hour, start.minute) == (3, 0) for start in starts), starts
    assert "Traceback" not in log and "Error" not in log, log[-3000:]


def test_automations_command_creates_them_once_and_a_failure_notifies(server, alerts, tmp_path):
    notifications, first, again = alerts
    names = [FAILED, NIGHTLY_MISSED, NOT_FINISHED, UNRESPONSIVE]
    assert all(f"created automation '{name}'" in first for name in names), first
    assert all(f"updated automation '{name}'" in again for name in names), again
    dashboard = server.prefect.api_url.removesuffix("/api")
    assert f"see them at {dashboard}/automations" in again
    with get_client(sync_client=True) as client:
        found = {automation.name: automation for automation in client.read_automations()}
        block = client.read_block_document_by_name(DEFAULT_BLOCK, "custom-webhook")
    assert sorted(found) == sorted(names)
    ended = {
        f"prefect.flow-run.{state}" for state in ("Failed", "TimedOut", "Crashed", "Cancelled")
    }

    failed = found[FAILED].trigger
    assert failed.posture == "Reactive"
    assert failed.expect == ended
    # One alert a run: its repeated final-state events fall in the window of the first.
    assert failed.for_each == {"prefect.resource.id"} and failed.within == timedelta(minutes=10)
    assert failed.match_related.model_dump() == {
        "prefect.resource.role": "flow",
        "prefect.resource.name": "rebuild",
    }

    unresponsive = found[UNRESPONSIVE].trigger
    assert unresponsive.posture == "Proactive" and unresponsive.after == {
        "prefect.flow-run.heartbeat"
    }
    assert unresponsive.expect == ended | {
        "prefect.flow-run.heartbeat",
        "prefect.flow-run.Completed",
    }
    [crash] = found[UNRESPONSIVE].actions
    assert crash.type == "change-flow-run-state" and crash.state == StateType.CRASHED

    not_finished = found[NOT_FINISHED].trigger
    assert not_finished.posture == "Proactive"
    assert not_finished.expect == ended | {"prefect.flow-run.Completed"}
    assert "prefect.flow-run.Late" in not_finished.after
    assert not_finished.within == timedelta(hours=1)

    missed = found[NIGHTLY_MISSED].trigger
    assert missed.posture == "Proactive" and missed.within == timedelta(hours=25)
    assert "firechunk.automations.applied" in missed.after

    for name in (FAILED, NOT_FINISHED, NIGHTLY_MISSED):
        [action] = found[name].actions
        assert found[name].enabled
        assert action.type == "send-notification"
        assert action.block_document_id == block.id

    failed_run = fail_a_rebuild(server, tmp_path)
    [notification] = notifications.wait_for(failed_run.id)
    assert notification["subject"].startswith("firechunk: rebuild Failed: ")
    assert failed_run.name in notification["body"]


def fail_a_rebuild(server: Server, data_dir: Path):
    """A rebuild flow run that fails before any work (keep_runs must be 0 or at least 1),
    run in a process of its own against the server, as `firechunk rebuild` would."""
    script = (
        "from firechunk.flows.rebuild import rebuild; "
        f"rebuild(replay={str(SAMPLE_CRAWL)!r}, data_dir={str(data_dir)!r}, "
        "run={'keep_runs': -1})"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=server.env, capture_output=True, timeout=120
    )
    assert done.returncode != 0
    failed = FlowRunFilter(
        state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.FAILED]))
    )
    with get_client(sync_client=True) as client:
        [run] = client.read_flow_runs(flow_run_filter=failed)
    return run


def test_a_nightly_that_is_never_created_is_reported(server, alerts):
    """No supabase-nightly run comes after `firechunk automations` (as when the scheduler
    fails, or the schedule is paused): once the window (shortened here to 18 s) has passed,
    the alert says so, with the window as set."""
    from firechunk.commands.automations import announce_applied

    notifications, _, _ = alerts
    with shortened(NIGHTLY_MISSED, timedelta(seconds=18)):
        with get_client(sync_client=True) as client:
            announce_applied(client)  # what the command sends: the first window opens
        [notification] = notifications.wait_saying("no supabase-nightly run", timeout=150)
    assert notification["subject"] == "firechunk: no supabase-nightly run for 0.005 h"
    assert "schedule is active" in notification["body"]


def test_the_not_finished_alert_says_its_window(server, alerts, tmp_path):
    """The subject is built from the automation's `within`, whatever it is set to: a run no
    worker takes is reported once the window (shortened here to 18 s) has passed."""
    notifications, _, _ = alerts
    with shortened(NOT_FINISHED, timedelta(seconds=18)):
        [run_id] = nightly_runs(1, replay=SAMPLE_CRAWL, data_dir=tmp_path / "data")
        # No worker: the run turns Late, which opens its window.
        [notification] = notifications.wait_for(run_id, timeout=120)
        with get_client(sync_client=True) as client:
            client.delete_flow_run(run_id)
    assert notification["subject"].startswith("firechunk: rebuild not finished 0.005 h after")
    assert "is Late" in notification["subject"], notification["subject"]


def test_second_nightly_run_waits_for_the_first(server, tmp_path):
    run_ids = nightly_runs(2, replay=SAMPLE_CRAWL, data_dir=tmp_path / "data")
    with worker(server.env, server.root) as started:
        runs = wait_until_final(run_ids)
        log = started.log()

    assert [run.state_type for run in runs] == [StateType.COMPLETED] * 2, log
    first, second = sorted(runs, key=lambda run: run.start_time)
    assert second.start_time >= first.end_time  # never side by side
    waited = [state for state in states_of(second.id) if state.name == "AwaitingConcurrencySlot"]
    assert waited and waited[0].timestamp < first.end_time  # queued while the first ran

    with get_client(sync_client=True) as client:
        nightly = client.read_deployment_by_name("rebuild/supabase-nightly")
        manual = client.read_deployment_by_name("rebuild/manual-rebuild")
    for deployment in (nightly, manual):
        assert deployment.global_concurrency_limit.limit == 1
        assert deployment.concurrency_options.collision_strategy == "ENQUEUE"
        assert deployment.job_variables == {"stream_output": False}
    assert manual.parameters["crawl"]["limit"] == 500
    assert nightly.parameters["crawl"]["limit"] == 5000
    assert nightly.parameters["crawl"]["max_wait"] == 14400
    form = nightly.parameter_openapi_schema["properties"]
    assert all(field.get("description") for field in form.values())


def test_manual_rebuild_deployment_runs_on_a_process_worker(server, tmp_path):
    """`manual-rebuild` on a replay of the sample, run by `prefect worker start --run-once`:
    it publishes what `firechunk chunk` gives, with the dashboard's artifacts."""
    data_dir = tmp_path / "data"
    with get_client(sync_client=True) as client:
        manual = client.read_deployment_by_name("rebuild/manual-rebuild")
        nightly = client.read_deployment_by_name("rebuild/supabase-nightly")
        flow_run = client.create_flow_run_from_deployment(
            manual.id, parameters={"replay": str(SAMPLE_CRAWL), "data_dir": str(data_dir)}
        )
    once = prefect_cli("worker", "start", "--pool", POOL, "--run-once")
    done = subprocess.run(
        once, cwd=server.root, env=server.env, capture_output=True, text=True, timeout=300
    )
    with get_client(sync_client=True) as client:
        finished = client.read_flow_run(flow_run.id)
    artifacts = artifacts_of(flow_run.id)

    assert finished.state_type == StateType.COMPLETED, (done.stdout + done.stderr)[-3000:]
    assert "replay of crawl.json" in finished.name
    assert {"rebuild-summary", "validation-report", "chunking-progress"} <= set(artifacts)
    assert {"rebuild-outputs", "run-directory"} <= set(artifacts)
    assert table_of(artifacts["rebuild-summary"])["published as latest"] == "yes"
    assert artifacts["validation-report"].data.startswith("# Validation passed")
    published_run = (data_dir / "latest").resolve()
    assert published_run.parent == (data_dir / "runs").resolve()
    assert chunk_ids(published_run / "chunks.json") == expected_sample_ids()

    [schedule] = nightly.schedules
    assert schedule.schedule.cron == "0 3 * * *" and schedule.schedule.timezone == "UTC"
    assert nightly.parameters["crawl"]["site_url"] == "https://supabase.com/docs"
    assert nightly.parameters["database"]["load"]
    assert nightly.work_pool_name == manual.work_pool_name == POOL
    assert manual.schedules == []
    assert manual.pull_steps == [
        {"prefect.deployments.steps.set_working_directory": {"directory": str(ROOT)}}
    ]


# -- the faults of a real machine --------------------------------------------------------------


def test_a_killed_worker_or_a_restarted_server_leaves_each_night_to_finish(
    server, alerts, tmp_path
):
    """Three nights on one data directory, each queued while the one before runs: the
    worker is killed while the first chunks, the server restarted while the second chunks,
    the worker killed again while the third loads the database. systemd's restart of the
    worker is a new worker here. The first and third complete on their own, and each next
    night starts by itself. The second completes too: its chunking workers are the flow
    process's own, and do not talk to the API that restarts."""
    notifications, _, _ = alerts
    data_dir = tmp_path / "data"
    crawl = big_crawl(tmp_path / "crawl.json", copies=150)  # seconds of chunking
    postgres = DataDir(data_dir).postgres

    with worker(server.env, server.root) as started:
        [first] = nightly_runs(1, replay=crawl, data_dir=data_dir)
        assert wait_until(lambda: workers_of(started.descendants()), 180), started.log()
        [second] = nightly_runs(1, replay=crawl, data_dir=data_dir)
        faults = {"worker killed mid-chunking": datetime.now(UTC)}
        started.kill()
        started.start()
        wait_until_state(first, FINAL)
        assert wait_until(lambda: workers_of(started.descendants()), 180), started.log()
        [third] = nightly_runs(1, replay=SAMPLE_CRAWL, data_dir=data_dir, load=True)
        faults["server restarted mid-chunking"] = datetime.now(UTC)
        server.prefect.restart()
        assert wait_until(lambda: processes_naming(postgres), 240), started.log()
        faults["worker killed mid-load"] = datetime.now(UTC)
        started.kill()
        started.start()
        runs = wait_until_final([first, second, third])
        log = started.log()

    first_run, restarted, loaded = runs
    for (fault, at), run in zip(faults.items(), runs, strict=True):
        print(f"{fault}: {run.state_name} {(run.end_time - at).total_seconds():.0f} s later")
    assert [run.state_name for run in runs] == ["Completed"] * 3, log
    assert first_run.end_time <= restarted.start_time and restarted.end_time <= loaded.start_time
    assert published(data_dir) == newest_run(data_dir)
    assert published(data_dir) in database_holds(data_dir, server)
    assert not processes_naming(postgres)  # the load stopped its server
    assert [notifications.about(run.id) for run in runs] == [[], [], []]
    # Its logs went on reaching the dashboard after its worker was gone.
    assert any("Finished in state Completed" in line for line in logs_of(first_run.id))
    # What the automations act on: each run's final state reached the event feed, even
    # with the server's SQLite event writer dropping a batch it retries after a restart.
    for run in runs:
        assert f"prefect.flow-run.{run.state_name}" in events_of(run.id), run.name
    dropped = re.findall(r"dropping (\d+) events", (server.root / "server.log").read_text())
    print(f"events the server dropped: {sum(map(int, dropped))}")


def test_a_cancelled_night_and_a_ghost_each_send_one_alert_and_the_next_night_runs(
    server, alerts, tmp_path
):
    """The first night is cancelled while it chunks, and its Cancelled state is set once more
    (as a retried state request does): one alert all the same. The worker and the second
    night are then killed together (the OOM killer): nobody tells the server, so the run
    would show Running for ever and hold the slot. With heartbeats every 30 s and the unresponsive
    automation's window shortened to 60 s while the ghost runs, it is marked Crashed; the
    third night, queued behind it, starts on the restarted worker and publishes."""
    notifications, _, _ = alerts
    data_dir = tmp_path / "data"
    crawl = big_crawl(tmp_path / "crawl.json", copies=150)
    with worker(server.env, server.root) as started:
        [cancelled] = nightly_runs(1, replay=crawl, data_dir=data_dir)
        assert wait_until(lambda: workers_of(started.descendants()), 180), started.log()
        [ghost] = nightly_runs(1, replay=crawl, data_dir=data_dir)
        cancelled_at = datetime.now(UTC)
        with get_client(sync_client=True) as client:
            client.set_flow_run_state(cancelled, Cancelling())
        with shortened(UNRESPONSIVE, timedelta(seconds=GHOST_WINDOW)):
            wait_until_state(cancelled, FINAL)
            # Its final state once more, as a retried state request sets it: a second
            # Cancelled event for the run, which must not send a second alert.
            with get_client(sync_client=True) as client:
                client.set_flow_run_state(cancelled, Cancelled(message="again"), force=True)
            assert wait_until(lambda: workers_of(started.descendants()), 180), started.log()
            killed_at = time.monotonic()
            started.kill_with_its_runs()
            [after] = nightly_runs(1, replay=crawl, data_dir=data_dir)  # queued behind it
            crashed = wait_until_state(ghost, {"Crashed"}, timeout=GHOST_WINDOW + 180)
            found_after = time.monotonic() - killed_at
        started.start()
        runs = wait_until_final([cancelled, ghost, after])
        log = started.log()

    took = (runs[0].end_time - cancelled_at).total_seconds()
    print(f"cancelled mid-chunking: {runs[0].state_name} {took:.0f} s later")
    print(f"ghost marked {crashed.state_name} {found_after:.0f} s after the kill")
    assert [run.state_name for run in runs] == ["Cancelled", "Crashed", "Completed"], log
    assert "heartbeat" in runs[1].state.message
    assert published(data_dir) == newest_run(data_dir)
    subjects = [[n["subject"] for n in notifications.wait_for(run.id)] for run in runs[:2]]
    cancelled_events = events_named(runs[0].id, "prefect.flow-run.Cancelled")
    print(f"Cancelled events of the cancelled run: {cancelled_events}")
    assert len(cancelled_events) >= 2, cancelled_events
    assert len(subjects[0]) == 1 and "rebuild Cancelled" in subjects[0][0], subjects
    assert len(subjects[1]) == 1 and "rebuild Crashed" in subjects[1][0], subjects
    assert notifications.about(runs[2].id) == []  # the alerts above came in the meantime


def nightly_runs(count: int, *, replay: Path, data_dir: Path, load: bool = False) -> list[UUID]:
    """`count` runs of supabase-nightly replaying `replay` into `data_dir`, queued in order.
    Every page is chunked (`full`): a night that reuses them all would never start workers.
    Heartbeats come every 30 s, the least Prefect allows."""
    parameters = {
        "replay": str(replay),
        "data_dir": str(data_dir),
        "run": {"workers": 2, "full": True, "allow_shrink": True},
        "database": {"load": load},
    }
    heartbeat = {"env": {"PREFECT_FLOWS_HEARTBEAT_FREQUENCY": str(HEARTBEAT)}}
    with get_client(sync_client=True) as client:
        nightly = client.read_deployment_by_name("rebuild/supabase-nightly")
        return [
            client.create_flow_run_from_deployment(
                nightly.id, parameters=parameters, job_variables=heartbeat
            ).id
            for _ in range(count)
        ]


@contextmanager
def shortened(name: str, within: timedelta) -> Iterator[None]:
    """The automation `name` with its window set to `within`, for the `with` block."""
    with get_client(sync_client=True) as client:
        [automation] = client.read_automations_by_name(name)
    as_set = AutomationCore.model_validate(automation.model_dump(exclude={"id"}, exclude_none=True))
    short = as_set.model_copy(
        update={"trigger": as_set.trigger.model_copy(update={"within": within})}
    )
    with get_client(sync_client=True) as client:
        client.update_automation(automation.id, short)
    try:
        yield
    finally:
        with get_client(sync_client=True) as client:
            client.update_automation(automation.id, as_set)


def events_of(flow_run_id: UUID) -> set[str]:
    """The names of the events the server holds about the flow run, once its final state's
    is among them (events are written in batches) or after a minute."""
    resource = EventResourceFilter(id=[f"prefect.flow-run.{flow_run_id}"])
    final = {f"prefect.flow-run.{name}" for name in FINAL}

    def names() -> set[str]:
        with get_client(sync_client=True) as client:
            page = client.read_events(EventFilter(resource=resource), limit=50)
        return {event.event for event in page.events}

    wait_until(lambda: names() & final, 60, every=1)
    return names()


def events_named(flow_run_id: UUID, name: str) -> list[str]:
    """When each event `name` about the flow run occurred, and what its state message said."""
    resource = EventResourceFilter(id=[f"prefect.flow-run.{flow_run_id}"])
    with get_client(sync_client=True) as client:
        page = client.read_events(EventFilter(resource=resource), limit=50)
    return [
        f"{event.occurred:%H:%M:%S.%f} {event.resource.get('prefect.state-message')!r}"
        for event in page.events
        if event.event == name
    ]


def published(data_dir: Path) -> str:
    """The run `latest` points at."""
    return DataDir(data_dir).latest.resolve().name


def newest_run(data_dir: Path) -> str:
    """The run started last (run ids begin with their UTC start time)."""
    return max(path.name for path in DataDir(data_dir).run_dirs())


def database_holds(data_dir: Path, server: Server) -> str:
    """What `firechunk collections` says the data directory's database holds."""
    return run_ok(
        [sys.executable, "-m", "firechunk.cli", "collections", "--data-dir", str(data_dir)],
        server.env,
    )
