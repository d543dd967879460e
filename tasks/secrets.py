"""Secrets for the flows: a Prefect Secret block if it exists, else an environment variable.

The value goes to the client that needs it and nowhere else; what is logged is only where
it came from.
"""

from __future__ import annotations

from typing import cast

from prefect.blocks.system import Secret

from firechunk.pipeline import from_environment


def secret_or_env(block: str | None, env: str) -> tuple[str | None, str]:
    """The secret and where it came from: the block, else the environment (`firechunk.pipeline`)."""
    if block:
        try:
            # Called from a flow's or a command's thread, never inside an event loop:
            # Prefect's load returns the block there, not a coroutine.
            secret = cast(Secret, Secret.load(block))
            return secret.get(), f"Prefect Secret block {block!r}"
        except ValueError:  # Prefect's "Unable to find block document named ..."
            pass
    return from_environment(block, env)
