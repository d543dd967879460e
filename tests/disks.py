"""Disks that are full or read-only, for real, for a command run in a subprocess.

The command gets a mount namespace of its own (`unshare --mount`, util-linux), where a
small tmpfs or a read-only bind mount covers one directory: the test's directory changes
for that command alone, and the mount goes with it. Mounting needs root (CI runs as root);
`mounts_unavailable` says why not otherwise, for a skip.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path


@functools.cache
def mounts_unavailable() -> str | None:
    """Why a command cannot be given mounts of its own here; None when it can."""
    if os.geteuid() != 0:
        return "mounting a tmpfs or a read-only bind mount needs root (CI runs as root)"
    if shutil.which("unshare") is None:
        return "needs unshare (util-linux)"
    tried = subprocess.run(["unshare", "--mount", "true"], capture_output=True, text=True)
    if tried.returncode != 0:
        return f"unshare --mount fails here: {tried.stderr.strip()}"
    return None


def on_small_disk(directory: Path, size: str, command: list[str]) -> list[str]:
    """`command`, run with an empty tmpfs of `size` (e.g. "1m") mounted on `directory`."""
    mount = 'mount -t tmpfs -o size="$1" tmpfs "$2" && shift 2 && exec "$@"'
    return ["unshare", "--mount", "--", "sh", "-c", mount, "sh", size, str(directory), *command]


def read_only(directory: Path, command: list[str]) -> list[str]:
    """`command`, run with `directory` mounted read-only over itself."""
    mount = 'mount --bind -o ro "$1" "$1" && shift && exec "$@"'
    return ["unshare", "--mount", "--", "sh", "-c", mount, "sh", str(directory), *command]
