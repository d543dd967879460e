"""How firechunk installs: the repository's folders inside the firechunk namespace (through
the links firechunk/flows -> ../flows etc.), the data folders as package data, and the heavy
parts as extras that say when they are missing. (`make wheel-check` installs the built
wheel in a fresh venv and runs it.)"""

from __future__ import annotations

import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINKED = ["flows", "tasks", "schemas", "expectations", "automations"]


@pytest.mark.parametrize("name", LINKED)
def test_the_top_level_folder_is_linked_into_the_package(name):
    """firechunk/<name> is a symbolic link to <name>/: one copy of the files, found by
    every tool under its firechunk.* name. (A checkout made with git's core.symlinks off
    has a small text file there instead.)"""
    link = ROOT / "firechunk" / name
    assert link.is_symlink(), f"{link} is not a symbolic link"
    assert link.resolve() == (ROOT / name).resolve()


def test_data_files_come_from_the_package():
    from firechunk.commands.automations import AUTOMATIONS_DIR
    from firechunk.validate.suites import SUITES_DIR

    assert Path(str(files("firechunk.expectations"))) == SUITES_DIR
    assert Path(str(files("firechunk.automations"))) == AUTOMATIONS_DIR
    assert {p.name for p in SUITES_DIR.glob("*.json")} == {
        p.name for p in (ROOT / "expectations").glob("*.json")
    }
    assert sorted(AUTOMATIONS_DIR.glob("*.yaml"))


def test_the_linked_packages_import_from_elsewhere(tmp_path):
    """An editable install finds firechunk.flows (flows/, through its link) whatever the
    working directory; no top-level `tasks` is importable there."""
    script = (
        "import importlib.util, firechunk.flows.rebuild, firechunk.tasks.stages, "
        "firechunk.schemas.chunk\n"
        "assert importlib.util.find_spec('tasks') is None\n"
        "assert importlib.util.find_spec('flows') is None\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()


def _without(modules: list[str], args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """`firechunk ARGS` in a process where `modules` cannot be imported."""
    script = (
        "import sys\n"
        f"for name in {modules!r}:\n"
        "    sys.modules[name] = None\n"
        "from firechunk.cli import app\n"
        f"sys.argv = ['firechunk', *{args!r}]\n"
        "app()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("missing", "args", "line"),
    [
        (
            ["psycopg"],
            ["load", "--data-dir", "data"],
            "firechunk load needs the database extra (psycopg[binary] is not installed): "
            "pip install 'firechunk[db]'",
        ),
        (
            ["psycopg"],
            ["search", "retries", "--data-dir", "data"],
            "firechunk search needs the database extra (psycopg[binary] is not installed): "
            "pip install 'firechunk[db]'",
        ),
        (
            ["onnxruntime"],
            ["rebuild", "--replay", str(ROOT / "data/sample/crawl.json"), "--load"],
            "firechunk rebuild --load needs the embedder extra (onnxruntime is not "
            "installed): pip install 'firechunk[embed]'",
        ),
        (
            ["distributed"],
            ["rebuild", "--replay", str(ROOT / "data/sample/crawl.json")]
            + ["--task-runner", "dask"],
            "firechunk rebuild --task-runner dask needs the Dask extra (dask[distributed] is "
            "not installed): pip install 'firechunk[dask]'",
        ),
    ],
)
def test_a_missing_extra_is_one_line_and_exit_2(tmp_path, missing, args, line):
    done = _without(missing, args, tmp_path)
    assert (done.returncode, done.stderr.strip()) == (2, line), done.stderr
    assert not (tmp_path / "data" / "runs").exists()  # refused before any run started


def test_a_load_with_the_openai_embedder_needs_no_local_embedder(tmp_path):
    """The embedder extra is asked for only when the local embedder embeds."""
    args = ["rebuild", "--replay", str(ROOT / "data/sample/crawl.json"), "--load"]
    args += ["--embedder", "openai", "--base-url", "http://127.0.0.1:9", "--data-dir", "data"]
    done = _without(["onnxruntime"], args, tmp_path)
    assert "embedder extra" not in done.stderr, done.stderr
    assert done.returncode in (2, 3), done.stderr  # no key, or no embedding API, not a bug


def test_the_library_names_the_extra(tmp_path):
    script = (
        "import sys\n"
        "sys.modules['psycopg'] = None\n"
        "import firechunk\n"
        "try:\n"
        "    firechunk.search('retries', data_dir='data')\n"
        "except ModuleNotFoundError as error:\n"
        "    print(error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.stdout.strip() == (
        "firechunk.search needs the database extra (psycopg[binary] is not installed): "
        "pip install 'firechunk[db]'"
    ), done.stderr


def test_the_base_install_imports_without_any_extra(tmp_path):
    """`pip install firechunk` (no extras) runs `chunk` and `rebuild` without --load: the
    commands, the flows and their tasks import none of the extras' modules."""
    from firechunk.extras import MODULES

    script = (
        "import sys\n"
        f"for name in {sorted(MODULES)!r}:\n"
        "    sys.modules[name] = None\n"
        "import firechunk.cli, firechunk.api, firechunk.flows.rebuild\n"
        "import firechunk.tasks.stages, firechunk.tasks.dashboard\n"
        "from firechunk import chunk_markdown\n"
        "assert chunk_markdown('# A\\n\\nSome text here.')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
