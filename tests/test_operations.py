"""prefect.yaml and automations/ as an operator sets them up, on a real `prefect server`.

One server for the module (a fresh database migrates first): the process work pool is
created and `prefect deploy --all` run from the repository root, as the README's guide
does. Then:

- `firechunk automations`, run twice, leaves exactly the automations of automations/ on
  the server, with their triggers, sending through the notification block named; a
  rebuild that fails really sends the notification (a webhook block pointed at a local
  receiver: no internet);
- two runs of supabase-nightly (replaying the sample: no network) on one process worker
  run one after the other: the second waits in AwaitingConcurrencySlot while the first
  runs, and the nightly automation's trigger covers the events those runs emit.

Everything is read back through the Prefect client. About two minutes on two cores;
deselect with `-m "not deployment"`.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from uuid import UUID, uuid4

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
from prefect.events.worker import EventsWorker
from prefect.logging.handlers import APILogWorker
from prefect.server.events.schemas.automations import EventTrigger as ServerEventTrigger
from prefect.server.events.schemas.events import ReceivedEvent
from prefect.settings import PREFECT_API_URL, PREFECT_HOME, temporary_settings

from firechunk.commands.automations import (
    AUTOMATIONS_DIR,
    DEFAULT_BLOCK,
    read_automation_files,
    with_block,
)
from tests.prefect_helpers import (
    ROOT,
    SAMPLE_CRAWL,
    prefect_cli,
    prefect_env,
    prefect_server,
    stop_process_group,
)

pytestmark = pytest.mark.deployment

POOL = "firechunk-process"
FAILED = "firechunk-rebuild-failed"
NIGHTLY_LATE = "firechunk-nightly-not-completed"
RUNS_TIMEOUT = 300.0
NOTIFICATION_TIMEOUT = 90.0


@dataclass
class Server:
    api_url: str
    env: dict[str, str]
    root: Path
    deployed_at: float  # time.monotonic() once `prefect deploy --all` returned


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    """A real server with the repository deployed on it, and this process's client on it.

    A run that finds its deployment's slot taken is retried after 2 s rather than Prefect's
    30 s, so the queued run starts soon after the first ends.
    """
    root = tmp_path_factory.mktemp("operations")
    home = root / "prefect-home"
    home.mkdir()
    env = prefect_env(
        home,
        PREFECT_SERVER_DEPLOYMENTS_CONCURRENCY_SLOT_WAIT_SECONDS="2",
        PREFECT_WORKER_QUERY_SECONDS="2",
    )
    with prefect_server(env, root, root / "server.log") as api_url:
        env["PREFECT_API_URL"] = api_url
        run_ok(prefect_cli("work-pool", "create", POOL, "--type", "process"), env)
        run_ok(prefect_cli("--no-prompt", "deploy", "--all"), env)
        deployed_at = time.monotonic()
        with temporary_settings({PREFECT_API_URL: api_url, PREFECT_HOME: home}):
            try:
                yield Server(api_url, env, root, deployed_at)
            finally:
                # Prefect's event and log workers live as long as the process and keep the
                # API they started with: stopped here, later tests' flows start their own.
                EventsWorker.drain_all(timeout=10)
                APILogWorker.drain_all(timeout=10)


@pytest.fixture(scope="module")
def receiver() -> Iterator[tuple[str, queue.Queue]]:
    """A local HTTP endpoint that keeps every JSON body POSTed to it."""
    received: queue.Queue = queue.Queue()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            received.put(json.loads(self.rfile.read(length)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args) -> None:  # quiet
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}/notify", received
    finally:
        httpd.shutdown()


def run_ok(command: list[str], env: dict[str, str], timeout: float = 120) -> str:
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{' '.join(command)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def firechunk_automations(env: dict[str, str]) -> str:
    """The documented command, as the operator runs it."""
    return run_ok([sys.executable, "-m", "firechunk.cli", "automations"], env)


SCHEDULE_TIMEOUT = 90.0  # the bar: Scheduled runs within 90 s of `prefect deploy`


def test_the_nightly_is_scheduled_and_the_scheduler_logs_no_error(server):
    """With the locked versions, the server's scheduler creates the nightly's next runs.

    Then the schedule is paused (which deletes those runs): the worker of a later test must
    never pick up a real 03:00 UTC crawl, whatever the time of day the suite runs at."""
    with get_client(sync_client=True) as client:
        nightly = client.read_deployment_by_name("rebuild/supabase-nightly")
        scheduled = FlowRunFilter(
            deployment_id=FlowRunFilterDeploymentId(any_=[nightly.id]),
            state=FlowRunFilterState(type=FlowRunFilterStateType(any_=["SCHEDULED"])),
        )
        deadline = server.deployed_at + SCHEDULE_TIMEOUT
        while not (runs := client.read_flow_runs(flow_run_filter=scheduled)):
            if time.monotonic() > deadline:
                break
            time.sleep(1)
        [schedule] = client.read_deployment_schedules(nightly.id)
        client.update_deployment_schedule(nightly.id, schedule.id, active=False)

    log = (server.root / "server.log").read_text()
    assert runs, f"no Scheduled run of supabase-nightly {SCHEDULE_TIMEOUT:.0f} s after deploy"
    starts = sorted(run.expected_start_time.astimezone(UTC) for run in runs)
    assert all((start.hour, start.minute) == (3, 0) for start in starts), starts
    assert "Traceback" not in log and "Error" not in log, log[-3000:]


def test_automations_command_creates_them_once_and_a_failure_notifies(server, receiver, tmp_path):
    url, received = receiver
    CustomWebhookNotificationBlock(
        name="firechunk test receiver",
        url=url,
        json_data={"subject": "{{subject}}", "body": "{{body}}"},
    ).save(DEFAULT_BLOCK)

    first = firechunk_automations(server.env)
    again = firechunk_automations(server.env)  # replaces, never duplicates

    assert f"created automation '{FAILED}'" in first
    assert f"created automation '{NIGHTLY_LATE}'" in first
    assert f"updated automation '{FAILED}'" in again
    with get_client(sync_client=True) as client:
        found = {automation.name: automation for automation in client.read_automations()}
        block = client.read_block_document_by_name(DEFAULT_BLOCK, "custom-webhook")
    assert sorted(found) == sorted([FAILED, NIGHTLY_LATE])

    failed = found[FAILED].trigger
    assert failed.posture == "Reactive"
    assert failed.expect == {"prefect.flow-run.Failed", "prefect.flow-run.Crashed"}
    assert failed.match_related.model_dump() == {
        "prefect.resource.role": "flow",
        "prefect.resource.name": "rebuild",
    }

    late = found[NIGHTLY_LATE].trigger
    assert late.posture == "Proactive"
    assert late.expect == {"prefect.flow-run.Completed"}
    assert "prefect.flow-run.Pending" in late.after and "prefect.flow-run.Late" in late.after
    assert late.within == timedelta(hours=1)  # the 03:00 UTC schedule + 1 h: 04:00 UTC
    assert late.for_each == {"prefect.resource.id"}
    assert {"prefect.resource.role": "deployment", "prefect.resource.name": "supabase-nightly"} in [
        spec.model_dump() for spec in late.match_related
    ]

    for automation in found.values():
        assert automation.enabled
        [action] = automation.actions
        assert action.type == "send-notification"
        assert action.block_document_id == block.id

    failed_run = fail_a_rebuild(server, tmp_path)
    notification = next_notification(received, failed_run.name)
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
    failed = FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(any_=["FAILED"])))
    with get_client(sync_client=True) as client:
        [run] = client.read_flow_runs(flow_run_filter=failed)
    return run


def next_notification(received: queue.Queue, run_name: str) -> dict:
    """The notification about `run_name` the server sent, once it arrives."""
    deadline = time.monotonic() + NOTIFICATION_TIMEOUT
    while (left := deadline - time.monotonic()) > 0:
        try:
            body = received.get(timeout=left)
        except queue.Empty:
            break
        if run_name in body.get("subject", ""):
            return body
    raise AssertionError(f"no notification about {run_name!r} in {NOTIFICATION_TIMEOUT:.0f} s")


def test_second_nightly_run_waits_for_the_first(server, tmp_path):
    parameters = {
        "replay": str(SAMPLE_CRAWL),
        "data_dir": str(tmp_path / "data"),
        "database": {"load": False},
    }
    with get_client(sync_client=True) as client:
        nightly = client.read_deployment_by_name("rebuild/supabase-nightly")
        manual = client.read_deployment_by_name("rebuild/manual-rebuild")
        run_ids = [
            client.create_flow_run_from_deployment(nightly.id, parameters=parameters).id
            for _ in range(2)
        ]

    worker = subprocess.Popen(
        prefect_cli("worker", "start", "--pool", POOL),
        cwd=server.root,
        env=server.env,
        stdout=(server.root / "worker.log").open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        runs = wait_until_final(run_ids)
    finally:
        stop_process_group(worker)

    log = (server.root / "worker.log").read_text()[-3000:]
    assert [run.state_type for run in runs] == [StateType.COMPLETED] * 2, log
    first, second = sorted(runs, key=lambda run: run.start_time)
    assert second.start_time >= first.end_time  # never side by side
    waited = [state for state in states_of(second.id) if state.name == "AwaitingConcurrencySlot"]
    assert waited and waited[0].timestamp < first.end_time  # queued while the first ran

    for deployment in (nightly, manual):
        assert deployment.global_concurrency_limit.limit == 1
        assert deployment.concurrency_options.collision_strategy == "ENQUEUE"
    assert manual.parameters["crawl"]["limit"] == 500
    assert nightly.parameters["crawl"]["limit"] == 5000
    form = nightly.parameter_openapi_schema["properties"]
    assert all(field.get("description") for field in form.values())

    covered = events_the_nightly_trigger_covers(second.id)
    assert "prefect.flow-run.Completed" in covered  # what it expects
    assert covered & {"prefect.flow-run.Pending", "prefect.flow-run.AwaitingConcurrencySlot"}


def wait_until_final(run_ids: list[UUID]) -> list:
    deadline = time.monotonic() + RUNS_TIMEOUT
    with get_client(sync_client=True) as client:
        while True:
            runs = [client.read_flow_run(run_id) for run_id in run_ids]
            if all(run.state and run.state.is_final() for run in runs):
                return runs
            if time.monotonic() > deadline:
                return runs
            time.sleep(1)


def states_of(flow_run_id: UUID) -> list:
    with get_client(sync_client=True) as client:
        return client.read_flow_run_states(flow_run_id)


def events_the_nightly_trigger_covers(flow_run_id: UUID) -> set[str]:
    """The events of the run that the nightly automation's trigger, as the server evaluates
    it, counts: its `after` and `expect` events, with the related resources matched. The
    server records events in batches, so it is read until the run's Completed is there."""
    [spec] = [s for s in read_automation_files(AUTOMATIONS_DIR) if s["name"] == NIGHTLY_LATE]
    trigger = ServerEventTrigger.model_validate(with_block(spec, uuid4()).trigger.model_dump())
    event_filter = EventFilter(resource=EventResourceFilter(id=[f"prefect.flow-run.{flow_run_id}"]))
    deadline = time.monotonic() + 60
    while True:
        with get_client(sync_client=True) as client:
            events = client.read_events(event_filter, limit=50).events
        names = {e.event for e in events}
        if "prefect.flow-run.Completed" in names or time.monotonic() > deadline:
            break
        time.sleep(1)
    received = [ReceivedEvent.model_validate(event.model_dump()) for event in events]
    return {event.event for event in received if trigger.covers(event)}
