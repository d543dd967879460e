"""A published run's manifest: the sha256 of every file in it, written as it is published.

The next run reads its baseline back from disk: the page cache it reuses outcomes from,
the chunk rows and pages it computes the change set against, the report the shrink guard
reads. Any of them may have been edited or damaged since. The manifest says which files
are still the ones published; `firechunk.run.baseline` decides what that means.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson

from firechunk.atomic import write_json
from firechunk.layout import RunDir

_CHUNK = 1 << 20


def write_manifest(run_dir: Path) -> Path:
    """Record the sha256 of every file under `run_dir` (paths relative to it)."""
    return write_json(RunDir(run_dir).manifest_json, {"files": _digests(run_dir)})


def damaged_files(run_dir: Path) -> list[str]:
    """The files of `run_dir` that are missing or differ from its manifest; the manifest's
    own name when it is missing or unreadable."""
    manifest = RunDir(run_dir).manifest_json
    try:
        recorded = orjson.loads(manifest.read_bytes())["files"]
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        return [manifest.name]
    if not isinstance(recorded, dict):
        return [manifest.name]
    return sorted(name for name, sha in recorded.items() if _sha256(run_dir / name) != sha)


def _digests(run_dir: Path) -> dict[str, str]:
    """Every file's sha256; a file that cannot be read fails the publish (a manifest
    recording none for it could never find it damaged)."""
    manifest = RunDir(run_dir).manifest_json
    return {
        path.relative_to(run_dir).as_posix(): _read_sha256(path)
        for path in sorted(run_dir.rglob("*"))
        if path.is_file() and path.name != manifest.name and not path.name.startswith(".")
    }


def _sha256(path: Path) -> str | None:
    """The file's sha256; None when it is missing or cannot be read."""
    try:
        return _read_sha256(path)
    except OSError:
        return None


def _read_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def record_again(run_dir: Path, names: set[str]) -> None:
    """Record the sha256 of the files `names` anew: files of the run firechunk itself
    rewrote (a collection renamed), each one the manifest vouched for before the rewrite
    (`damaged_files` said nothing of it). A run without a manifest keeps none."""
    manifest = RunDir(run_dir).manifest_json
    try:
        recorded = orjson.loads(manifest.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return
    files = recorded.get("files") if isinstance(recorded, dict) else None
    if not isinstance(files, dict) or not names:
        return
    files.update({name: _read_sha256(run_dir / name) for name in names if name in files})
    write_json(manifest, recorded)
