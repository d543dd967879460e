"""`firechunk --help` and every `firechunk COMMAND --help` read as help: a flag shows no
value, an argument and an option's value are words in capitals (no `<bool>`, `<str>` or
`{url}`), and each paragraph is one line the terminal wraps, so no sentence is cut where
the docstring's line happened to end."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from firechunk.cli import app

COMMANDS = ("crawl", "chunk", "rebuild", "load", "search", "collections", "runs", "automations")
USAGE = {
    "crawl": "Usage: firechunk crawl [OPTIONS] URL",
    "chunk": "Usage: firechunk chunk [OPTIONS] CRAWL_FILE",
    "search": "Usage: firechunk search [OPTIONS] QUESTION",
    "load": "Usage: firechunk load [OPTIONS]",
}


def help_text(*args: str, columns: int = 100) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_no_type_labels_in_angle_brackets_or_arguments_in_braces(command):
    text = help_text(*([command] if command else []))
    assert not re.search(r"<(bool|str|int|float|path)\b[^>]*>", text), text
    assert not re.search(r"\{[a-z_]+\}", text), text


@pytest.mark.parametrize("command", sorted(USAGE))
def test_usage_names_arguments_in_capitals(command):
    assert USAGE[command] in help_text(command)


def test_search_shows_top_as_the_long_form_of_k():
    text = help_text("search")
    assert re.search(r"--top\s+-k\s+N", text), text


def test_every_paragraph_of_help_is_one_line():
    group = typer.main.get_command(app)
    for name, command in group.commands.items():
        for paragraph in (command.help or "").split("\n\n"):
            assert "\n" not in paragraph, (name, paragraph)


def test_a_narrow_terminal_wraps_sentences_whole():
    """At 60 columns no line of the commands list is a docstring's line ending early."""
    text = help_text(columns=60)
    commands = text.split("Commands")[1]
    lines = [line.strip("│ ").rstrip() for line in commands.splitlines()]
    short = [line for line in lines if line and 0 < len(line) < 25 and line[-1].isalpha()]
    assert not short, short


def test_every_rebuild_flow_parameter_is_an_option_of_the_command():
    """What the nightly deployment can set, `firechunk rebuild` can set too: each plain
    flow parameter, and each field of each settings section it takes."""
    import inspect

    from pydantic import BaseModel

    from firechunk.flows.rebuild import rebuild as flow

    command = typer.main.get_command(app).commands["rebuild"]
    options = {parameter.name for parameter in command.params}
    expected = set()
    for name, parameter in inspect.signature(flow.fn).parameters.items():
        default = parameter.default
        expected |= set(type(default).model_fields) if isinstance(default, BaseModel) else {name}
    assert expected - options == set()
    assert options - expected == {"prefect"}  # where the command runs it: here or on Prefect


@pytest.mark.parametrize(
    ("words", "expected"), [("firechunk ru", "runs"), ("firechunk runs --j", "--json")]
)
def test_the_shell_completes_commands_and_options(words, expected):
    """What `firechunk --install-completion` wires into bash: the command line so far in,
    the completions out."""
    env = {**os.environ, "_FIRECHUNK_COMPLETE": "complete_bash", "COMP_WORDS": words,
           "COMP_CWORD": str(len(words.split()) - 1)}  # fmt: skip
    command = [sys.executable, "-c", "from firechunk.cli import app; app(prog_name='firechunk')"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert expected in done.stdout.split()
