"""Validation in a helper process gives the verdict validation in this process gives."""

from __future__ import annotations

import pytest

from firechunk.tokens import TokenCounter
from firechunk.validation import validate_tables
from firechunk.validation_process import ValidationProcess
from firechunk.validation_tables import build_tables
from tests.synthetic_runs import clean_run, missing_h2_run


def verdict(outcome) -> dict:
    """The outcome without its duration, which differs from run to run."""
    return outcome.model_dump(mode="json", exclude={"seconds"})


@pytest.mark.parametrize("make_run", [clean_run, missing_h2_run], ids=["clean", "missing-h2"])
def test_the_helper_process_gives_the_same_verdict_and_files(make_run, tmp_path):
    tables = build_tables(make_run(), TokenCounter())
    here = validate_tables(tables, tmp_path / "here", run_id="r")
    validator = ValidationProcess(helper=True)
    assert validator.in_helper
    there = validator.validate_tables(tables, tmp_path / "there", run_id="r")
    assert verdict(there) == verdict(here)
    assert there.success is (make_run is clean_run)
    for name in ("summary.json", "data_docs/index.html", "results/chunks.json"):
        assert (tmp_path / "there" / "validation" / name).is_file(), name


def test_a_process_that_has_imported_gx_validates_in_itself(tmp_path):
    import great_expectations  # noqa: F401  (as a test session or a bench has)

    validator = ValidationProcess()
    assert not validator.in_helper
    outcome = validator.validate_tables(
        build_tables(clean_run(), TokenCounter()), tmp_path, run_id="r"
    )
    assert outcome.success
