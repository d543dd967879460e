"""Options that more than one sub-command takes and that are no setting of a run
(`firechunk.settings`: those are built by `firechunk.commands.settings_options`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

DataDir = Annotated[
    Path,
    typer.Option(
        envvar="FIRECHUNK_DATA_DIR",
        metavar="DIR",
        help="Data root: crawls (raw/, jobs/), runs (runs/<run-id>/; collections/<name>/latest "
        "is each collection's published run, latest the last published) and the embedded "
        "database (postgres/).",
    ),
]
RunId = Annotated[
    str | None,
    typer.Option(
        metavar="ID",
        help="Name of the run directory, which must be new (default: the UTC time and a suffix).",
    ),
]
AsJson = Annotated[
    bool,
    typer.Option("--json", help="Print JSON for a script to read, not lines for a person."),
]


def json_text(value: object) -> str:
    """`value` (dataclasses, dicts, lists, datetimes; a path as its text) as JSON."""
    import orjson

    return orjson.dumps(value, default=str, option=orjson.OPT_INDENT_2).decode()
