"""The page cache's code hash: every module that shapes a stored outcome is in it, so an
outcome made by other code is never reused."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from firechunk.chunker.page import ChunkerOptions
from firechunk.run import cache
from firechunk.run.cache import _VERSIONED_SOURCES, chunker_version, code_version, outcome_key
from firechunk.run.plan import PageInput

PACKAGE = Path(cache.__file__).resolve().parents[1]  # firechunk/
WORKER = PACKAGE / "run" / "outcomes.py"  # outcomes.chunk_pages: what every executor runs
# Imported by the worker without shaping an outcome but through values `outcome_key` hashes:
# `PageInput` carries the page's inputs; the settings give the defaults of the token limits
# and encoding, which reach the worker as the options and encoding the key holds.
INPUTS_ONLY = {PACKAGE / "run" / "plan.py", PACKAGE / "settings.py"}


def firechunk_imports(path: Path) -> set[Path]:
    """The modules of the package that `path` imports (`from firechunk.x import y` names
    module x, or module x.y when y is one)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import"
            modules = [node.module or ""]
            modules += [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        for module in modules:
            if module == "firechunk" or not module.startswith("firechunk."):
                continue
            base = PACKAGE.joinpath(*module.split(".")[1:])
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                if candidate.is_file():
                    found.add(candidate)
    return found


def worker_modules() -> set[Path]:
    """Every module the worker runs, followed import by import."""
    seen, todo = set(), [WORKER]
    while todo:
        path = todo.pop()
        if path in seen or path in INPUTS_ONLY:
            continue
        seen.add(path)
        todo.extend(firechunk_imports(path))
    return seen


def test_the_code_hash_covers_every_module_the_worker_runs():
    modules = worker_modules()
    assert {WORKER, PACKAGE / "run" / "budget.py", PACKAGE / "chunker" / "blocks.py"} <= modules
    missing = sorted(str(path.relative_to(PACKAGE)) for path in modules - set(_VERSIONED_SOURCES))
    assert not missing, f"shape stored outcomes but are not in the cache's code hash: {missing}"


def copy_sources(into: Path) -> Path:
    package = into / "firechunk"
    for path in _VERSIONED_SOURCES:
        target = package / path.relative_to(PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return package


def test_a_faithful_copy_of_the_sources_has_the_same_code_version(tmp_path):
    assert code_version(copy_sources(tmp_path)) == chunker_version()


@pytest.mark.parametrize(
    "module", sorted(str(path.relative_to(PACKAGE)) for path in _VERSIONED_SOURCES)
)
def test_editing_a_module_that_shapes_outcomes_changes_every_key(tmp_path, monkeypatch, module):
    package = copy_sources(tmp_path)
    page = PageInput(0, "https://docs.example.com/a", "A", "# A\n\ntext\n")
    options = ChunkerOptions()
    monkeypatch.setattr(cache, "chunker_version", lambda: code_version(package))
    before = outcome_key(page, "raw-hash", "cl100k_base", options)
    with open(package / module, "a", encoding="utf-8") as source:
        source.write("\n# edited\n")
    assert outcome_key(page, "raw-hash", "cl100k_base", options) != before
