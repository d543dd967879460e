"""Every flow parameter is described, so the deployment's run form explains itself; every
parameter the docs pass to a deployment run is one the flow takes.

Prefect builds each parameter's description on the run form from the `Args:` section of
the flow's docstring, and the fields of a settings section (`firechunk.settings`) from the
field descriptions; a parameter or field without one shows as a bare name.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest

from firechunk.flows.rebuild import rebuild

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("flow", [rebuild], ids=lambda f: f.name)
def test_every_flow_parameter_and_settings_field_has_a_description(flow):
    schema = flow.parameters.model_dump()
    described = schema["properties"]
    for name in inspect.signature(flow.fn).parameters:
        assert described[name].get("description"), f"{flow.name}: {name} has no Args line"
    for section, definition in schema.get("definitions", {}).items():
        for field, spec in definition["properties"].items():
            assert spec.get("description"), f"{flow.name}: {section}.{field} is not described"


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# `--param NAME=VALUE` of `prefect deployment run`, the value quoted or not.
PARAM = re.compile(r"""--param\s+(['"]?)([A-Za-z_][\w.]*)=(.*?)\1(?=\s|$)""")


def documented_params() -> list[tuple[str, str, str]]:
    """(file, name, value) of every `--param NAME=VALUE` in the docs."""
    found = []
    for path in DOCS:
        for line in path.read_text(encoding="utf-8").splitlines():
            found += [(path.name, name, value) for _, name, value in PARAM.findall(line)]
    return found


def test_the_docs_show_parameters_at_all():
    assert documented_params(), "no `--param NAME=` found: the pattern no longer matches"


@pytest.mark.parametrize(("doc", "name", "value"), documented_params())
def test_every_documented_param_is_one_the_flow_takes(doc, name, value):
    """`prefect deployment run … --param NAME=VALUE` as README and docs/ show it: NAME is
    a parameter of the deployments' flow, and VALUE (JSON when it parses as JSON, as
    Prefect's CLI reads it) is valid for it."""
    assert name in rebuild.parameters.properties, f"{doc}: --param {name}= is no parameter"
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = value.replace("$PWD", str(ROOT))
    rebuild.validate_parameters({name: parsed})
