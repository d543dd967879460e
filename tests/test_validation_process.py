"""Validation in a helper process gives the verdict validation in this process gives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from firechunk import validation_process
from firechunk.tokens import TokenCounter
from firechunk.validation import validate_tables
from firechunk.validation_process import HELPER_MIN_PAGES, ValidationProcess
from firechunk.validation_tables import build_tables
from tests.synthetic_runs import clean_run, missing_h2_run

ROOT = Path(__file__).resolve().parents[1]


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


def test_only_a_large_run_that_reuses_pages_starts_a_helper(monkeypatch, tmp_path):
    monkeypatch.setattr(validation_process, "_helper", None)  # no helper started yet
    monkeypatch.delitem(sys.modules, "great_expectations", raising=False)  # GX not imported
    monkeypatch.setattr(validation_process, "_start_helper", lambda: None)  # none started
    store = tmp_path / "rebuild_state.sqlite"
    assert not ValidationProcess.for_run(HELPER_MIN_PAGES - 1, reuse=store).in_helper
    assert ValidationProcess.for_run(HELPER_MIN_PAGES, reuse=store).in_helper
    # A full rebuild chunks on every core: no helper beside its workers.
    assert not ValidationProcess.for_run(HELPER_MIN_PAGES, reuse=None).in_helper


def test_a_small_run_validates_in_its_own_process(tmp_path, monkeypatch):
    monkeypatch.setattr(validation_process, "_helper", None)
    validator = ValidationProcess.for_run(1, reuse=None)
    assert not validator.in_helper
    outcome = validator.validate_tables(
        build_tables(clean_run(), TokenCounter()), tmp_path, run_id="r"
    )
    assert outcome.success
    assert validation_process._helper is None  # and started no helper


def test_a_process_that_has_imported_gx_and_no_helper_validates_in_itself(monkeypatch, tmp_path):
    import great_expectations  # noqa: F401  (as a test session or a bench has)

    monkeypatch.setattr(validation_process, "_helper", None)
    assert not ValidationProcess.for_run(HELPER_MIN_PAGES, reuse=tmp_path).in_helper


def test_a_running_helper_validates_every_run_after(monkeypatch):
    ValidationProcess(helper=True)  # started: its imports are paid
    assert ValidationProcess.for_run(1, reuse=None).in_helper


PROBE_MAIN = """
import os
import sys
from pathlib import Path

if __name__ == "__mp_main__":  # a spawned child importing this file again
    Path(os.environ["MAIN_IMPORTED"]).write_text("imported")
if __name__ == "__main__":
    sys.path.insert(0, os.environ["REPO"])
    from firechunk.validation_process import _start_helper

    print("helper pid", _start_helper().submit(os.getpid).result(), "mine", os.getpid())
"""


def test_the_helper_does_not_import_the_parent_s_main_module(tmp_path):
    """A deployment's flow run has `prefect.engine` as its main module: seconds of imports
    the helper would pay before it can validate, and does not need."""
    probe = tmp_path / "probe_main.py"
    probe.write_text(PROBE_MAIN, encoding="utf-8")
    marker = tmp_path / "main-imported"
    env = {**os.environ, "MAIN_IMPORTED": str(marker), "REPO": str(ROOT)}

    done = subprocess.run(
        [sys.executable, str(probe)], env=env, capture_output=True, text=True, timeout=300
    )

    assert done.returncode == 0, done.stderr
    helper_pid, own_pid = done.stdout.split()[2::2]
    assert helper_pid != own_pid
    assert not marker.exists()
