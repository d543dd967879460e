"""Rewrite imports of the repository's top-level folders to the firechunk namespace.

The folders `flows/`, `tasks/` and `schemas/` stay where they are in the repository but
install as `firechunk.flows`, `firechunk.tasks` and `firechunk.schemas` (pyproject.toml's
`package-dir`), so every reference to them by module name goes through `firechunk.`:

    from schemas.chunk import Chunk      ->  from firechunk.schemas.chunk import Chunk
    import flows.rebuild                 ->  import firechunk.flows.rebuild
    import tasks                         ->  from firechunk import tasks
    "tasks.dask_preload"                 ->  "firechunk.tasks.dask_preload"
    f"tasks.{name}"                      ->  f"firechunk.tasks.{name}"
    "from flows.rebuild import rebuild"  ->  "from firechunk.flows.rebuild import rebuild"

Idempotent (a rewritten name never matches again), so it can be run again after merging a
newer main: `python scripts/namespace_imports.py` from the repository root. It then sorts
the imports of the files it changed and formats them (`ruff check --select I --fix`,
`ruff format`) when ruff is on PATH or in .venv/bin. `--check` changes nothing and exits 1
when a file would change (for CI or a test).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("firechunk", "flows", "tasks", "schemas", "tests", "bench", "scripts")
NAMES = "schemas|tasks|flows"

REWRITES: tuple[tuple[re.Pattern[str], str], ...] = (
    # `import tasks` (a whole package, maybe indented, maybe with a comment)
    (re.compile(rf"^(\s*)import ({NAMES})(?=\s*(#.*)?$)", re.M), r"\1from firechunk import \2"),
    # `from schemas.chunk import X`, `from tasks import run`, `import flows.rebuild`: in
    # code, and in code held in a string (`python -c "from flows.rebuild import ..."`)
    (re.compile(rf"(?<![\w.])from ({NAMES})(?=\.\w|\s+import\b)"), r"from firechunk.\1"),
    (
        re.compile(rf"(^[ \t]*|[\"';][ \t]*)import ({NAMES})(?=\.\w)", re.M),
        r"\1import firechunk.\2",
    ),
    # a module name as a string: "tasks.dask_preload", f"tasks.{name}", 'flows.rebuild'
    (re.compile(rf"(?<=[\"'])({NAMES})\.(?=[\w{{])"), r"firechunk.\1."),
)


def rewritten(text: str) -> str:
    for pattern, replacement in REWRITES:
        text = pattern.sub(replacement, text)
    return text


def python_files() -> list[Path]:
    own = Path(__file__).resolve()
    files = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.resolve() != own and "__pycache__" not in path.parts:
                files.append(path)
    return files


def ruff() -> str | None:
    local = ROOT / ".venv" / "bin" / "ruff"
    return str(local) if local.exists() else shutil.which("ruff")


def main(argv: list[str]) -> int:
    check = "--check" in argv
    changed = []
    for path in python_files():
        text = path.read_text(encoding="utf-8")
        new = rewritten(text)
        if new != text:
            changed.append(path)
            if not check:
                path.write_text(new, encoding="utf-8")
    for path in changed:
        print(f"{'would rewrite' if check else 'rewrote'} {path.relative_to(ROOT)}")
    if check:
        return 1 if changed else 0
    tool = ruff()
    if changed and tool:
        names = [str(path) for path in changed]
        subprocess.run([tool, "check", "--quiet", "--select", "I", "--fix", *names], cwd=ROOT)
        subprocess.run([tool, "format", "--quiet", *names], cwd=ROOT)
    elif changed:
        print("ruff not found: sort the imports of the files above (ruff check --select I --fix)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
