"""`firechunk --version`, `--help` and `search` start without the libraries of the other
commands: typer reads every sub-command's signature at start-up, so a command module that
imports the Firecrawl SDK, the chunker's parser or Prefect at its top makes every command
pay for it (a second or more before this was kept). Each check runs in a fresh interpreter,
since this one has imported everything already."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# What only crawl, chunk, rebuild, runs or the flows need.
HEAVY = (
    "firecrawl",
    "mistletoe",
    "polars",
    "pyarrow",
    "prefect",
    "great_expectations",
    "firechunk.run.history",
)


def imported_after(code: str) -> list[str]:
    """The HEAVY modules a fresh interpreter holds after running `code`."""
    probe = (
        f"{code}\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_the_cli_imports_no_command_library():
    assert imported_after("import firechunk.cli") == []


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["search", "--help"]])
def test_version_and_help_import_no_command_library(args):
    run = (
        "import sys\nfrom firechunk.cli import app\n"
        f"try:\n    app({args!r})\nexcept SystemExit:\n    pass"
    )
    assert imported_after(run) == []


def test_a_search_where_nothing_was_loaded_imports_no_command_library(tmp_path):
    """The search path up to the database: the database modules and the error line."""
    run = (
        "from firechunk.cli import app\n"
        f"try:\n    app(['search', 'x', '--data-dir', {str(tmp_path)!r}])\n"
        "except SystemExit:\n    pass\n"
        "import firechunk.db.search, firechunk.db.connect, firechunk.db.failures"
    )
    assert imported_after(run) == []
