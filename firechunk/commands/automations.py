"""`firechunk automations`: create or update on the Prefect server the automations kept in
`automations/*.yaml`.

The files are in the shape `prefect automation create --from-file` reads, except that their
`send-notification` actions name no block: a block's id belongs to one server, so this
command fills in the id of the notification block named by `--block`. An automation of the
same name is replaced, not added again, and a `firechunk-` automation no file names any
more (one renamed or removed) is deleted, so running it after editing a file (or twice)
leaves the server holding exactly what the files say.

It then sends the event `firechunk.automations.applied`, naming the server's rebuild
deployments: it opens the first window of `nightly-missed.yaml`, so a schedule that never
created a run is noticed as well as one that stopped.

Prefect is imported inside the command, so other commands start without paying for it.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from uuid import UUID

import typer

from firechunk.commands.exits import CommandError, ExitCode

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.events.schemas.automations import AutomationCore

DEFAULT_BLOCK = "firechunk-alerts"
PREFIX = "firechunk-"  # every automation of automations/ is named so
APPLIED = "firechunk.automations.applied"
# automations/ in the repository, next to prefect.yaml, installed as the package data of
# firechunk.automations.
AUTOMATIONS_DIR = Path(str(files("firechunk.automations")))
_NOTIFY = "send-notification"
_PAGE = 200  # block documents read per request


def automations(
    block: Annotated[
        str,
        typer.Option(
            metavar="NAME",
            help="The notification block the automations send through: its name, or "
            "BLOCK-TYPE/NAME (e.g. slack-webhook/firechunk-alerts) when several types "
            "have a block of that name.",
        ),
    ] = DEFAULT_BLOCK,
    directory: Annotated[
        Path,
        typer.Option("--dir", metavar="DIR", help="Where the automation files are (*.yaml)."),
    ] = AUTOMATIONS_DIR,
) -> None:
    """Create or update the automations in automations/*.yaml on the Prefect server that
    PREFECT_API_URL names: notify when a rebuild fails, crashes, is cancelled or times out,
    when one has not finished an hour after it was due, and when no nightly run was created;
    mark a run whose heartbeats stopped Crashed. Re-running replaces them, never
    duplicates."""
    import httpx

    specs = read_automation_files(directory)
    for spec in specs:  # a mistake in a file is found before the server is asked anything
        with_block(spec, UUID(int=0))
    api_url = configured_api_url()
    try:
        applied = apply_automations(specs, block)
    except httpx.TransportError as error:
        raise CommandError(
            f"cannot reach the Prefect API at {api_url} ({error}): is `prefect server start` "
            "running?",
            ExitCode.NETWORK,
        ) from error
    for name, outcome in applied:
        typer.echo(f"{outcome} automation {name!r}")
    typer.echo(f"notifications go through block {block!r}; see them at {automations_page()}")


def read_automation_files(directory: Path) -> list[dict[str, Any]]:
    """Each `*.yaml` of `directory`, in name order, as the mapping it holds."""
    import yaml

    files = sorted(Path(directory).glob("*.yaml"))
    if not files:
        raise CommandError(f"no automation files (*.yaml) in {directory}")
    specs = []
    for path in files:
        try:
            spec = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as error:
            raise CommandError(f"{path} is not YAML: {error}".replace("\n", " ")) from error
        if not isinstance(spec, dict) or not spec.get("name"):
            raise CommandError(f"{path} is not an automation: a mapping with a `name` is expected")
        specs.append(spec)
    return specs


def configured_api_url() -> str:
    """The server the automations go to. Without one, Prefect would start a temporary API
    and the automations would vanish with it, so that is refused."""
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    if not url:
        raise CommandError(
            "PREFECT_API_URL is not set, so there is no server to hold the automations: "
            "prefect config set PREFECT_API_URL=http://127.0.0.1:4200/api"
        )
    return url


def apply_automations(specs: list[dict[str, Any]], block: str) -> list[tuple[str, str]]:
    """Create or update every automation of `specs`, its notifications sent through `block`;
    returns (name, "created" or "updated") for each."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        block_id = notification_block_id(client, block)
        applied = [upsert(client, with_block(spec, block_id)) for spec in specs]
        applied += delete_stale(client, {name for name, _ in applied})
        announce_applied(client)
        return applied


def automations_page() -> str:
    """The dashboard's Automations page (not the API the command talked to)."""
    from prefect.settings import get_current_settings

    return f"{get_current_settings().ui_url}/automations"


def delete_stale(client: SyncPrefectClient, kept: set[str]) -> list[tuple[str, str]]:
    """Delete the server's firechunk automations that no file names any more."""
    stale = [a for a in client.read_automations() if a.name.startswith(PREFIX)]
    stale = [automation for automation in stale if automation.name not in kept]
    for automation in stale:
        client.delete_automation(automation.id)
    return [(automation.name, "deleted") for automation in stale]


def announce_applied(client: SyncPrefectClient) -> None:
    """Send `firechunk.automations.applied`, related to every deployment of the rebuild flow,
    so that proactive automations waiting for a deployment's first run start counting."""
    from prefect.events import Event

    related = [
        {
            "prefect.resource.id": f"prefect.deployment.{deployment.id}",
            "prefect.resource.role": "deployment",
            "prefect.resource.name": deployment.name,
        }
        for deployment in rebuild_deployments(client)
    ]
    event = Event.model_validate(
        {
            "event": APPLIED,
            "resource": {"prefect.resource.id": "firechunk.automations"},
            "related": related,
        }
    )
    client.request("POST", "/events", json=[event.model_dump(mode="json")]).raise_for_status()


def rebuild_deployments(client: SyncPrefectClient) -> list[Any]:
    """The server's deployments of the rebuild flow (none before `prefect deploy`)."""
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName

    return client.read_deployments(flow_filter=FlowFilter(name=FlowFilterName(any_=["rebuild"])))


def notification_block_id(client: SyncPrefectClient, block: str) -> UUID:
    """The id of the notification block `block` (NAME or BLOCK-TYPE/NAME)."""
    slug, _, name = block.rpartition("/")
    found = [
        document
        for document in _block_documents(client)
        if document.name == name
        and (not slug or (document.block_type and document.block_type.slug == slug))
        and document.block_schema
        and "notify" in document.block_schema.capabilities
    ]
    if not found:
        raise CommandError(
            f"no notification block named {block!r} on the server: create one first "
            '(README, "Deploying on a Prefect server", the automations step), or pass '
            "--block NAME"
        )
    if len(found) > 1:
        kinds = ", ".join(f"{doc.block_type.slug}/{name}" for doc in found if doc.block_type)
        raise CommandError(f"several notification blocks are named {name!r}: pass one of {kinds}")
    return found[0].id


def _block_documents(client: SyncPrefectClient) -> list[Any]:
    """Every block document on the server, without secret values, page by page."""
    documents: list[Any] = []
    while True:
        page = client.read_block_documents(
            offset=len(documents), limit=_PAGE, include_secrets=False
        )
        documents += page
        if len(page) < _PAGE:
            return documents


def with_block(spec: dict[str, Any], block_id: UUID) -> AutomationCore:
    """The automation of `spec`, each notification without a block sent through
    `block_id`."""
    from prefect.events.schemas.automations import AutomationCore
    from pydantic import ValidationError

    actions = [
        {**action, "block_document_id": str(block_id)}
        if action.get("type") == _NOTIFY and not action.get("block_document_id")
        else action
        for action in spec.get("actions", [])
    ]
    try:
        return AutomationCore.model_validate({**spec, "actions": actions})
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise CommandError(
            f"automation {spec['name']!r} is not valid: {where}: {first['msg']}"
        ) from error


def upsert(client: SyncPrefectClient, automation: AutomationCore) -> tuple[str, str]:
    """Replace the server's automation of this name (and any copies of it, as `prefect
    automation create` run twice leaves), or create it."""
    existing = client.read_automations_by_name(automation.name)
    if not existing:
        client.create_automation(automation)
        return automation.name, "created"
    keep, *copies = existing
    client.update_automation(keep.id, automation)
    for copy in copies:
        client.delete_automation(copy.id)
    return automation.name, "updated"
