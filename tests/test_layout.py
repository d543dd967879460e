"""`firechunk.layout`: where the files of a data directory and of a run are, and the few
reads on them every layer shares. It must stay below every module that uses it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from firechunk.layout import DataDir, RunDir
from firechunk.publish import switch_latest
from firechunk.schemas.publish import RunStatus


def test_layout_imports_nothing_of_firechunk_but_atomic_and_schemas():
    probe = (
        "import json, sys\nimport firechunk.layout\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('firechunk.'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    imported = json.loads(done.stdout.strip().splitlines()[-1])
    assert [m for m in imported if not m.startswith("firechunk.schemas")] == [
        "firechunk.atomic",
        "firechunk.layout",
    ]


def test_only_run_directories_count_as_runs(tmp_path):
    data = DataDir(tmp_path)
    for run_id in ("b-2", "a-1"):
        data.run(run_id).path.mkdir(parents=True)
    (data.runs / ".removing-c-3-1a2b3c").mkdir()  # a removal under way
    data.publish_lock.write_text("")

    assert [path.name for path in data.run_dirs()] == ["a-1", "b-2"]
    assert DataDir(tmp_path / "none").run_dirs() == []


def test_a_run_knows_its_data_directory_and_an_out_run_has_none(tmp_path):
    run = DataDir(tmp_path).run("night-1")
    run.path.mkdir(parents=True)
    out = RunDir(tmp_path / "out")

    assert run.data_dir == DataDir(tmp_path.resolve())
    assert out.data_dir is None


def test_latest_run_is_where_the_link_points(tmp_path):
    data = DataDir(tmp_path)
    run = data.run("night-1")
    run.path.mkdir(parents=True)
    assert data.latest_run() is None

    switch_latest(tmp_path, run.path, "docs")

    assert data.latest_run() == run.path.resolve()
    assert os.readlink(data.latest) == os.path.join("runs", "night-1")
    assert data.new_latest_links() == []


def test_a_status_is_read_back_as_written_and_none_before(tmp_path):
    run = RunDir(tmp_path)
    assert run.read_status() is None

    run.write_status(RunStatus(run_id="night-1", status="failed", error="boom"))

    assert run.read_status().model_dump() == json.loads(run.status_json.read_text())
    assert run.read_status().error == "boom"


def test_the_validation_files_are_under_validation():
    run = RunDir(Path("run"))
    inside = [run.validation_summary, run.report_html, run.suite_result("chunks")]
    inside += [run.data_docs_index, run.table("pages")]
    assert all(path.is_relative_to(run.validation_dir) for path in inside)
    assert run.data_docs_index.relative_to(run.path).as_posix() == (
        "validation/data_docs/index.html"
    )
