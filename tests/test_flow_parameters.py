"""Every flow parameter is described, so the deployment's run form explains itself.

Prefect builds each parameter's description on the run form from the `Args:` section of
the flow's docstring, and the fields of a settings section (`firechunk.settings`) from the
field descriptions; a parameter or field without one shows as a bare name.
"""

from __future__ import annotations

import inspect

import pytest

from firechunk.flows.rebuild import rebuild


@pytest.mark.parametrize("flow", [rebuild], ids=lambda f: f.name)
def test_every_flow_parameter_and_settings_field_has_a_description(flow):
    schema = flow.parameters.model_dump()
    described = schema["properties"]
    for name in inspect.signature(flow.fn).parameters:
        assert described[name].get("description"), f"{flow.name}: {name} has no Args line"
    for section, definition in schema.get("definitions", {}).items():
        for field, spec in definition["properties"].items():
            assert spec.get("description"), f"{flow.name}: {section}.{field} is not described"
