"""How firechunk installs: the repository's folders inside the firechunk namespace (through
the links firechunk/flows -> ../flows etc.), the data folders as package data, and the heavy
parts as extras that say when they are missing. (`make wheel-check` installs the built
wheel in a fresh venv and runs it.)"""

from __future__ import annotations

import ast
import functools
import os
import re
import subprocess
import sys
import tomllib
from importlib.metadata import distribution, packages_distributions
from importlib.resources import files
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from firechunk.extras import MODULES, modules_of

ROOT = Path(__file__).resolve().parents[1]
LINKED = ["flows", "tasks", "schemas", "expectations", "automations"]
SAMPLE = str(ROOT / "data/sample/crawl.json")
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# What `pip install firechunk` must not bring: the pipeline's libraries, each tens or
# hundreds of MB with what they pull in (`make wheel-check` measures a real base install and
# looks for the same there).
HEAVY = {
    "prefect",
    "great-expectations",
    "polars",
    "pyarrow",
    "pandas",
    "fastapi",
    "sqlalchemy",
    "firecrawl-py",
    "scipy",
    "numpy",
}


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
    """`pip install firechunk` (no extras) runs the command line and the library's chunker,
    the page's and the whole crawl's: they import none of the extras' modules."""
    script = (
        "import sys\n"
        f"for name in {sorted(MODULES)!r}:\n"
        "    sys.modules[name] = None\n"
        "import firechunk.cli, firechunk.api\n"
        "from firechunk import chunk_crawl, chunk_markdown\n"
        "assert chunk_markdown('# A\\n\\nSome text here.')\n"
        f"assert chunk_crawl({SAMPLE!r}).chunks\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()[-2000:]


def test_the_pipeline_imports_without_the_other_extras(tmp_path):
    """`pip install 'firechunk[pipeline]'` runs `chunk` and `rebuild` without --load: the
    flows and their tasks import no module of the database, embedder or Dask extras."""
    others = sorted(set(MODULES) - set(modules_of("pipeline")))
    script = (
        "import sys\n"
        f"for name in {others!r}:\n"
        "    sys.modules[name] = None\n"
        "import firechunk.cli, firechunk.pipeline, firechunk.flows.rebuild\n"
        "import firechunk.tasks.stages, firechunk.tasks.dashboard\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()[-2000:]


def test_the_database_imports_without_the_pipeline(tmp_path):
    """`pip install 'firechunk[db,embed]'` loads and searches: a published run is read from
    its JSON, so the database's modules import none of the pipeline's."""
    script = (
        "import sys\n"
        f"for name in {modules_of('pipeline')!r}:\n"
        "    sys.modules[name] = None\n"
        "import firechunk.commands.database, firechunk.commands.rename, firechunk.commands.runs\n"
        "import firechunk.db.load, firechunk.db.search, firechunk.db.runs, firechunk.db.rename\n"
        "import firechunk.embedders, firechunk.embedder_model, firechunk.rename\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()[-2000:]


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("chunk", ["chunk", SAMPLE, "--data-dir", "data"]),
        ("crawl", ["crawl", "https://docs.example.com/docs", "--data-dir", "data"]),
        ("rebuild", ["rebuild", "--replay", SAMPLE, "--load", "--data-dir", "data"]),
        ("automations", ["automations"]),
    ],
)
def test_a_pipeline_command_without_the_pipeline_is_one_line_and_exit_2(tmp_path, command, args):
    """In the base install a pipeline command names the extra to install, before any run
    starts (`rebuild --load` asks for the pipeline before the database)."""
    done = _without(sorted(MODULES), args, tmp_path)
    line = (
        rf"firechunk {command} needs the pipeline extra \(\S+ is not installed\): "
        r"pip install 'firechunk\[pipeline\]'"
    )
    assert done.returncode == 2, done.stderr
    assert re.fullmatch(line, done.stderr.strip()), done.stderr
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["chunk", "--help"]])
def test_help_and_version_need_no_extra(tmp_path, args):
    done = _without(sorted(MODULES), args, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


def installed_by(requirements: list[str]) -> set[str]:
    """The distributions (canonical names) that `pip install` of `requirements` brings, read
    from this venv's metadata (`make` installs every extra); firechunk's own extras, such
    as `firechunk[pipeline]` inside another, from pyproject.toml."""
    found: set[str] = set()
    seen: set[tuple[str, frozenset[str]]] = set()
    pending = [Requirement(text) for text in requirements]
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        key = (name, frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        if name == "firechunk":
            for extra in requirement.extras:
                pending += [Requirement(text) for text in PROJECT["optional-dependencies"][extra]]
            continue
        found.add(name)
        for text in distribution(name).requires or []:
            needed = Requirement(text)
            wanted = ["", *requirement.extras]
            if needed.marker is None or any(needed.marker.evaluate({"extra": e}) for e in wanted):
                pending.append(needed)
    return found


def modules_installed_by(distributions: set[str]) -> set[str]:
    """The top-level modules that `distributions` provide."""
    return {
        module
        for module, providers in _providers().items()
        if any(canonicalize_name(provider) in distributions for provider in providers)
    }


@functools.cache
def _providers() -> dict[str, list[str]]:
    """Each top-level module of this venv and the distributions that provide it (read once:
    it reads every distribution's file list)."""
    return dict(packages_distributions())


def third_party_imports() -> dict[str, set[str]]:
    """Every top-level module firechunk's code imports that is neither the standard
    library's nor firechunk's own, with the files that import it (the linked folders
    included)."""
    found: dict[str, set[str]] = {}
    for folder, _, names in os.walk(ROOT / "firechunk", followlinks=True):
        for name in names:
            if name.endswith(".py"):
                path = Path(folder, name)
                for module in _imported(ast.parse(path.read_text(encoding="utf-8"))):
                    found.setdefault(module, set()).add(str(path.relative_to(ROOT)))
    ours = {"firechunk", "__future__", *sys.stdlib_module_names}
    return {module: paths for module, paths in found.items() if module not in ours}


def _imported(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.partition(".")[0])
    return names


def test_the_base_install_holds_nothing_heavy():
    """`pip install firechunk` brings none of the pipeline's libraries, not even through
    another dependency."""
    assert installed_by(PROJECT["dependencies"]) & HEAVY == set()


def test_every_module_firechunk_imports_is_installed_or_an_extras():
    """A module firechunk imports is installed by the base dependencies, or the extras
    table names the extra that installs it (so a command reaching it without the extra
    says so in one line, not as a bug)."""
    base = modules_installed_by(installed_by(PROJECT["dependencies"]))
    undeclared = {
        module: paths
        for module, paths in third_party_imports().items()
        if module not in base and module not in MODULES
    }
    assert undeclared == {}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_the_extra_the_table_names_installs_the_module(module):
    """Each module of the table comes with its extra and not with the base install: the
    one line names the right extra and a distribution that extra brings."""
    extra, provider = MODULES[module]
    with_extra = installed_by([f"firechunk[{extra}]"])
    base = installed_by(PROJECT["dependencies"])
    assert canonicalize_name(Requirement(provider).name) in with_extra - base
    assert module in modules_installed_by(with_extra) - modules_installed_by(base)


@pytest.mark.parametrize("extra", ["dev", "dask"])
def test_the_extra_installs_the_pipeline(extra):
    """The tests need the pipeline; Dask runs only the pipeline's chunking."""
    assert installed_by([f"firechunk[{extra}]"]) >= installed_by(["firechunk[pipeline]"])
