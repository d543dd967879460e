"""`changes.json` is computed only from baseline files that still match its manifest.

A change set tells a vector database what to delete and what to upsert. Computed from a
baseline file edited after publication it deletes too little or skips an upsert, and the
database silently drifts from the run. These tests damage a real published run (the
bundled sample crawl, every stage in this process) the ways a tester did and check that
the change set is either exact or says it is a full replacement.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from firechunk.layout import RunDir
from firechunk.run.cache import read_chunk_rows
from tests.test_incremental import (
    SCHEMA_PAGE,
    changed_sample,
    chunks_of,
    ids_by_page,
    rebuild_here,
    sample,
    without,
)

MANIFEST = "manifest.json"


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """A data root whose `latest` is a rebuild of the sample; copy it before changing it."""
    data_dir = tmp_path_factory.mktemp("published")
    result, _ = rebuild_here(sample(), data_dir, "night-1")
    assert result.published, result.validation.failed
    return data_dir


@pytest.fixture
def data_dir(published, tmp_path):
    """A private copy of the published data root (runs/night-1 and latest)."""
    target = tmp_path / "data"
    shutil.copytree(published / "runs" / "night-1", target / "runs" / "night-1")
    os.symlink("runs/night-1", target / "latest")
    return target


def night_1(data_dir: Path) -> Path:
    return data_dir / "runs" / "night-1"


def forget_chunk_rows(cache: Path, chunk_ids: set[str]) -> None:
    """Drop `chunk_ids` from the cache's chunk digests and give every other row a digest
    that matches nothing: a cache edited by hand, still a valid database."""
    db = sqlite3.connect(cache)
    db.executemany("DELETE FROM chunk_rows WHERE chunk_id = ?", [(cid,) for cid in chunk_ids])
    db.execute("UPDATE chunk_rows SET row_sha = 'edited'")
    db.commit()
    db.close()


def unrecord(run_dir: Path, name: str) -> None:
    """Take `name` out of the run's manifest (the rest still verifies)."""
    manifest = json.loads((run_dir / MANIFEST).read_text())
    del manifest["files"][name]
    (run_dir / MANIFEST).write_text(json.dumps(manifest))


def all_chunk_ids(run_dir: Path) -> list[str]:
    return [chunk["chunk_id"] for chunk in chunks_of(run_dir)]


def written_changes(run_dir: Path) -> dict:
    return json.loads((run_dir / "changes.json").read_text(encoding="utf-8"))


# --- an unverifiable baseline --------------------------------------------------------------


def test_no_manifest_and_edited_cache_digests_give_a_full_replacement(data_dir):
    """The tester's case: without a manifest the cache's digests cannot be trusted, so the
    change set names no delete it cannot prove and upserts every chunk of the run."""
    baseline = night_1(data_dir)
    gone = ids_by_page(baseline)[SCHEMA_PAGE]
    (baseline / MANIFEST).unlink()
    forget_chunk_rows(RunDir(baseline).state_file, {sorted(gone)[0]})

    result, changes = rebuild_here(without(sample(), SCHEMA_PAGE), data_dir, "night-2")

    assert result.published, result.validation.failed
    written = written_changes(result.run_dir)
    assert written["full_replacement"] is True and changes.full_replacement
    assert MANIFEST in written["full_replacement_reason"]
    assert written["baseline"] == "night-1"
    assert written["upsert"] == all_chunk_ids(result.run_dir)
    assert written["delete"] == []
    assert not changes.empty


@pytest.mark.parametrize(
    "damage",
    [
        lambda run_dir: (run_dir / "chunks.json").write_text(
            "\n".join(
                line
                for line in (run_dir / "chunks.json").read_text().splitlines()
                if SCHEMA_PAGE not in line or line.startswith(("[", "]"))
            )
            + "\n"
        ),
        lambda run_dir: unrecord(run_dir, "chunks.json"),
        lambda run_dir: (run_dir / "chunks.parquet").write_bytes(
            (run_dir / "chunks.parquet").read_bytes() + b"\0"
        ),
    ],
    ids=["chunks.json edited", "chunks.json not in the manifest", "chunks.parquet edited"],
)
def test_a_chunk_file_not_as_published_is_not_trusted(data_dir, damage):
    """The manifest is there, but a chunk file a loader reads is not the one it records:
    the database may hold either version, so only a full replacement is safe."""
    damage(night_1(data_dir))

    result, changes = rebuild_here(without(sample(), SCHEMA_PAGE), data_dir, "night-2")

    assert result.published, result.validation.failed
    assert changes.full_replacement
    assert "chunks." in changes.full_replacement_reason
    assert changes.upsert == all_chunk_ids(result.run_dir) and changes.delete == []


# --- a baseline whose chunk files verify, whose cache does not -----------------------------


@pytest.mark.parametrize("recorded", [True, False], ids=["cache edited", "cache not recorded"])
def test_unverified_cache_digests_upsert_everything_and_delete_exactly(data_dir, recorded):
    """The cache's digests are used only when the manifest covers them; otherwise every
    chunk is an upsert and the deletes come from the verified chunks.json."""
    baseline = night_1(data_dir)
    gone = ids_by_page(baseline)[SCHEMA_PAGE]
    if not recorded:
        unrecord(baseline, RunDir(baseline).state_file.name)
    forget_chunk_rows(RunDir(baseline).state_file, {sorted(gone)[0]})

    result, changes = rebuild_here(without(sample(), SCHEMA_PAGE), data_dir, "night-2")

    assert result.published, result.validation.failed
    assert not changes.full_replacement and changes.full_replacement_reason is None
    assert changes.upsert == all_chunk_ids(result.run_dir)
    assert set(changes.delete) == gone and len(changes.delete) == len(gone)


# --- a verified baseline -------------------------------------------------------------------


def test_a_verified_baseline_gives_the_exact_change_set(data_dir):
    """Nothing damaged: the change set is the cache-digest comparison it always was."""
    before = read_chunk_rows(RunDir(night_1(data_dir)).state_file)

    result, changes = rebuild_here(changed_sample(), data_dir, "night-2")

    assert result.published, result.validation.failed
    after = read_chunk_rows(RunDir(result.run_dir).state_file)
    assert not changes.full_replacement and changes.full_replacement_reason is None
    assert changes.upsert == [cid for cid, sha in after.items() if before.get(cid) != sha]
    assert changes.delete == [cid for cid in before if cid not in after]
    assert set(changes.delete) >= ids_by_page(night_1(data_dir))[SCHEMA_PAGE]
    assert len(changes.upsert) < len(after)  # unchanged pages are not upserted
    written = written_changes(result.run_dir)
    assert written["full_replacement"] is False and written["full_replacement_reason"] is None
