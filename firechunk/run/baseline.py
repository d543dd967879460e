"""The baseline: the last good run of the run's collection, which the collection's `latest`
points at (`collections/<name>/latest`), as the next run reads it. Another collection's runs
are never a baseline: a doc set is compared only with itself.

A run reuses the baseline's chunker outcomes and computes its change set against the
baseline's chunk rows and pages, so a baseline read wrong publishes wrong output. Two
rules:

- The marker must be sound: the collection's `latest` a symlink to a run directory whose
  `status.json` says passed. Anything else is an error that names the file and the way
  out, never a silent "no baseline" (which would publish every chunk as an upsert and no
  deletes).
- The files must be the ones published (`firechunk.run.manifest`): if any is missing or
  changed, nothing is reused from the baseline's page cache (every page is chunked again),
  and the run's report and log say which files. `--full` never reads that cache at all.
  The change set reads only chunk files that still match (`firechunk.run.changes`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from firechunk.layout import DataDir, RunDir
from firechunk.run.manifest import damaged_files
from firechunk.schemas.chunk import Chunk
from firechunk.urls import page_url


def way_out(link: Path | str = "the collection's latest link") -> str:
    """What to do about a baseline that cannot be used, whose marker is `link`."""
    return (
        f"move {link} aside to start without a baseline (every chunk is then an upsert; "
        "`firechunk load` still deletes what the database holds beyond the run), or point "
        "it at a run whose status.json says passed"
    )


WAY_OUT = way_out()


class BaselineError(RuntimeError):
    """The baseline marker is damaged; the message names the file and the way out."""


@dataclass(frozen=True)
class Baseline:
    run_id: str
    run_dir: Path
    damaged: tuple[str, ...]  # files missing or changed since it was published


def find_baseline(data_dir: Path, collection: str) -> Baseline | None:
    """The run the collection's `latest` points at; None before its first publication."""
    return read_marker(DataDir(data_dir).collection_latest(collection))


def read_marker(link: Path) -> Baseline | None:
    """The run the `latest` link `link` points at, which must have passed; None when there
    is no link. A damaged one is a BaselineError naming the file and the way out."""
    if not link.is_symlink():
        if link.exists():
            raise BaselineError(f"{link} is not a symlink to a run: {way_out(link)}")
        return None
    run_dir = link.resolve()
    if not run_dir.is_dir():
        raise BaselineError(f"{link} points at {run_dir}, which does not exist: {way_out(link)}")
    status_file = RunDir(run_dir).status_json
    try:
        status = RunDir(run_dir).read_status()
    except (OSError, ValueError) as error:
        first_line = str(error).splitlines()[0]
        raise BaselineError(
            f"{status_file} cannot be read ({first_line}): {way_out(link)}"
        ) from None
    if status is None:
        raise BaselineError(f"{status_file} is missing: {way_out(link)}")
    if status.status != "passed":
        raise BaselineError(f"{status_file} says {status.status}, not passed: {way_out(link)}")
    return Baseline(status.run_id, run_dir, tuple(damaged_files(run_dir)))


def published_digests(run_dir: Path) -> dict[str, str] | None:
    """File name -> the sha256 the run's manifest.json recorded as it was published; None
    when there is no readable manifest, and then none of the run's files can be verified."""
    try:
        recorded = orjson.loads(RunDir(run_dir).manifest_json.read_bytes())["files"]
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        return None
    if not isinstance(recorded, dict):
        return None
    return {name: sha for name, sha in recorded.items() if isinstance(sha, str)}


def damage_warning(baseline_id: str, damaged: tuple[str, ...]) -> str:
    files = ", ".join(damaged)
    return (
        f"baseline run {baseline_id}: {files} missing or changed since it was published "
        "(manifest.json): nothing reused from it, every page chunked again"
    )


def rows_of_pages(run_dir: Path, urls: Collection[str]) -> dict[str, list[dict[str, Any]]]:
    """The chunk rows (chunks.json) of the baseline's pages at the canonical `urls`, in
    their order: what a page set aside by validation keeps. Read only on that path, and
    only from a baseline whose files match its manifest."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for row in orjson.loads(RunDir(run_dir).chunks_json.read_bytes()):
        url = page_url(Chunk.model_validate(row))
        if url in urls:
            rows.setdefault(url, []).append(row)
    return rows
