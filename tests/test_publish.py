"""Publishing: only a run that passed validation becomes `data/latest`; a failed one never
touches it, stays in `data/runs/` marked failed, and says which expectations failed."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from datetime import UTC, datetime

import pytest

from firechunk.publish import (
    claim_run_dir,
    format_result,
    new_run_id,
    switch_latest,
)
from firechunk.validate.suites import SUITES_DIR, SuiteFileError
from tests.synthetic_runs import (
    broken_token_count_run,
    clean_run,
    duplicated_chunk_run,
    missing_h2_run,
    over_limit_run,
    publish_run,
)

RUN_FILES = {
    "chunks.parquet",
    "chunks.json",
    "pages.parquet",
    "quarantine.jsonl",
    "report.json",
    "run.json",
    "status.json",
    "validation",
}


def snapshot(latest) -> dict[str, str]:
    """Where `latest` points and the sha256 of every file under it."""
    digests = {"->": os.readlink(latest)}
    for root, _dirs, files in os.walk(latest):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as handle:
                digests[os.path.relpath(path, latest)] = hashlib.sha256(handle.read()).hexdigest()
    return digests


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """A data root whose `latest` is a clean run."""
    data_dir = tmp_path_factory.mktemp("data")
    return data_dir, publish_run(clean_run(), data_dir)


def test_a_clean_run_is_published_as_latest(published):
    data_dir, result = published
    assert result.published, format_result(result)
    latest = data_dir / "latest"
    assert latest.is_symlink()
    assert os.readlink(latest) == f"runs/{result.run_id}"
    assert latest.resolve() == result.run_dir.resolve()
    assert {path.name for path in latest.iterdir()} >= RUN_FILES
    status = json.loads((latest / "status.json").read_text())
    assert status["status"] == "passed"
    assert status["failed_expectations"] == []
    assert format_result(result).startswith(f"Run {result.run_id} published")


@pytest.mark.parametrize(
    ("make_run", "suite", "expectation"),
    [
        (duplicated_chunk_run, "chunks", "chunk_text_unique"),
        (over_limit_run, "chunks", "token_count_within_limit"),
        (missing_h2_run, "headers", "heading_covered_by_chunk"),
        (broken_token_count_run, "chunks", "token_count_matches_recount"),
    ],
)
def test_a_defect_fails_its_expectation_and_leaves_latest_untouched(
    published, make_run, suite, expectation
):
    data_dir, good = published
    latest = data_dir / "latest"
    before = snapshot(latest)

    result = publish_run(make_run(), data_dir)

    assert not result.published
    failed = [(item.suite, item.name) for item in result.validation.failed]
    assert failed == [(suite, expectation)]  # its expectation, and every other one passed
    assert result.validation.evaluated_expectations == good.validation.evaluated_expectations
    assert snapshot(latest) == before
    assert os.readlink(latest) == f"runs/{good.run_id}"
    # The failed run is kept, complete, and marked failed.
    assert {path.name for path in result.run_dir.iterdir()} >= RUN_FILES
    status = json.loads((result.run_dir / "status.json").read_text())
    assert status["status"] == "failed"
    assert status["failed_expectations"] == [f"{suite}/{expectation}"]
    # The message names the expectation, its counts and an example.
    message = format_result(result)
    item = result.validation.failed[0]
    assert f"{suite}/{expectation}" in message
    assert f"{item.unexpected_count} of {item.element_count} rows" in message
    assert "e.g. " in message
    assert "left unchanged" in message


def test_a_failed_first_run_publishes_nothing(tmp_path):
    result = publish_run(over_limit_run(), tmp_path, run_id="first-try")
    assert not result.published
    assert not os.path.lexists(tmp_path / "latest")
    assert (tmp_path / "runs" / "first-try" / "status.json").is_file()


def test_a_run_that_cannot_be_validated_is_marked_failed_and_not_published(published, tmp_path):
    data_dir, _ = published
    before = snapshot(data_dir / "latest")
    suites_dir = tmp_path / "expectations"
    shutil.copytree(SUITES_DIR, suites_dir)
    (suites_dir / "headers.json").unlink()

    with pytest.raises(SuiteFileError):
        publish_run(clean_run(), data_dir, run_id="no-suites", suites_dir=suites_dir)

    status = json.loads((data_dir / "runs" / "no-suites" / "status.json").read_text())
    assert status["status"] == "failed"
    assert "SuiteFileError" in status["error"]
    assert snapshot(data_dir / "latest") == before


def test_switching_latest_replaces_the_link_in_one_step(tmp_path):
    first, second = tmp_path / "runs" / "a", tmp_path / "runs" / "b"
    first.mkdir(parents=True)
    second.mkdir()
    switch_latest(tmp_path, first, "docs")
    switch_latest(tmp_path, second, "docs")
    assert os.readlink(tmp_path / "latest") == "runs/b"
    assert os.readlink(tmp_path / "collections" / "docs" / "latest") == "../../runs/b"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["collections", "latest", "runs"]
    assert [path.name for path in (tmp_path / "collections" / "docs").iterdir()] == ["latest"]


def test_latest_that_is_not_a_link_is_never_replaced(tmp_path):
    (tmp_path / "latest").mkdir()
    (tmp_path / "runs" / "a").mkdir(parents=True)
    with pytest.raises(FileExistsError, match="not a symlink"):
        switch_latest(tmp_path, tmp_path / "runs" / "a", "docs")
    assert (tmp_path / "latest").is_dir()


def test_run_ids_sort_by_time_and_never_repeat(tmp_path):
    earlier = new_run_id(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    later = new_run_id(datetime(2026, 1, 2, 3, 4, 6, tzinfo=UTC))
    assert earlier.startswith("20260102T030405Z-")
    assert earlier < later
    ids = {claim_run_dir(tmp_path)[0] for _ in range(50)}
    assert len(ids) == 50
    assert {path.name for path in tmp_path.iterdir()} == ids


def test_a_run_id_is_never_reused(tmp_path):
    claim_run_dir(tmp_path, "nightly-1")
    with pytest.raises(FileExistsError, match="already exists"):
        claim_run_dir(tmp_path, "nightly-1")
    with pytest.raises(ValueError, match="letters, digits"):
        claim_run_dir(tmp_path, "../escape")
