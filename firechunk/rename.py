"""Renaming a collection in a data directory: an operator's act, never inferred.

A run records its collection in its run.json (and names it in report.json and
changes.json). Renaming OLD to NEW makes the data directory as if the doc set had always
been NEW: OLD's `latest` becomes NEW's (its next run reuses every page and compares with
it), and every run of OLD records NEW. The files firechunk rewrites in a published run are
recorded again in its manifest.json, each only if the manifest vouched for it before, so a
damaged file stays damaged. A run's start time (its run.json's mtime) is kept.

The rows in the database are renamed by `firechunk.db.rename`; `firechunk rename-collection`
does both. Refused while a run of OLD is running, and when NEW exists already.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from firechunk.atomic import write_json
from firechunk.layout import DataDir, RunDir
from firechunk.publish import adopt_latest, publish_lock, switch_collection_latest
from firechunk.retention import run_is_running
from firechunk.run.collection import run_collection
from firechunk.run.manifest import damaged_files, record_again
from firechunk.settings import check_collection


class RenameRefused(ValueError):
    """The rename cannot be made as asked; nothing was changed. The message says why."""


@dataclass(frozen=True)
class Renamed:
    runs: int  # runs of the collection on disk, each now recording the new name
    latest: str | None  # the run its latest points at; None if it had none


def rename_in_data_dir(data_dir: Path, old: str, new: str) -> Renamed:
    """Rename the collection `old` of `data_dir` to `new` (see the module doc); nothing to
    do when the data directory has no collection `old`."""
    check_collection(new)
    data = DataDir(data_dir)
    adopt_latest(data_dir)
    with publish_lock(data_dir):
        check_rename(data_dir, old, new)
        runs = _runs_of(data, old)
        for run_dir in runs:
            _record_name(run_dir, old, new)
        latest = data.latest_run(old)
        if latest is not None:
            switch_collection_latest(data_dir, latest, new)
            _remove_link(data.collection_latest(old))
    return Renamed(runs=len(runs), latest=latest.name if latest else None)


def has_collection(data_dir: Path, name: str) -> bool:
    """Whether `data_dir` has a run of the collection `name`, or its `latest`."""
    data = DataDir(data_dir)
    return data.latest_run(name) is not None or bool(_runs_of(data, name))


def check_rename(data_dir: Path, old: str, new: str) -> None:
    """RenameRefused when `data_dir` has a collection `new` already, or a run of `old` is
    running."""
    data = DataDir(data_dir)
    if has_collection(data_dir, new):
        raise RenameRefused(f"{data.path} has a collection {new!r} already")
    running = [
        run_dir.name
        for run_dir in _runs_of(data, old)
        if not RunDir(run_dir).status_json.exists() and run_is_running(run_dir)
    ]
    if running:
        raise RenameRefused(f"run {running[0]} of {old!r} is running: rename once it has ended")


def _runs_of(data: DataDir, name: str) -> list[Path]:
    return [run_dir for run_dir in data.run_dirs() if run_collection(run_dir) == name]


def _record_name(run_dir: Path, old: str, new: str) -> None:
    """The run's files name `new` where they named `old`; run.json keeps its mtime (the run's
    start), the manifest the files it vouched for."""
    run = RunDir(run_dir)
    rewritten = {path.name for path in (run.run_json, run.report_json, run.changes_json)}
    intact = rewritten - set(damaged_files(run_dir))
    started = run.run_json.stat()
    _rewrite(run.run_json, lambda value: _renamed_settings(value, old, new))
    os.utime(run.run_json, ns=(started.st_atime_ns, started.st_mtime_ns))
    for path in (run.report_json, run.changes_json):
        _rewrite(path, lambda value: {**value, "collection": new})
    record_again(run_dir, intact)


def _renamed_settings(start: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    settings = start.get("settings")
    if not isinstance(settings, dict) or settings.get("collection") not in (old, None):
        return start
    return {**start, "settings": {**settings, "collection": new}}


def _rewrite(path: Path, change) -> None:
    """`path`, a JSON object, changed by `change`; left alone if the run has none."""
    try:
        value = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return
    if isinstance(value, dict):
        write_json(path, change(value))


def _remove_link(link: Path) -> None:
    link.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # something else in the collection's folder: kept
        link.parent.rmdir()
