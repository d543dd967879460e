"""README's library examples run as written: every ```python block with `>>>` prompts is a
doctest, the blocks in order sharing their names, from the repository root (where the
examples' relative paths point)."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def readme_doctests() -> str:
    """README's doctest blocks, joined in order (a block without prompts is left out: the
    load and search need a database, and are tested in tests/test_api.py)."""
    blocks = [block for block in _BLOCK.findall((ROOT / "README.md").read_text()) if ">>>" in block]
    return "\n".join(blocks)


def test_readme_library_examples_run(monkeypatch):
    monkeypatch.chdir(ROOT)
    examples = readme_doctests()
    assert examples.count(">>>") >= 10
    test = doctest.DocTestParser().get_doctest(examples, {}, "README.md", "README.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of README's examples failed (output above)"
