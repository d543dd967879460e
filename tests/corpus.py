"""Where the shared corpus of real Firecrawl crawls lives, and a skip when it is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

CORPUS_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
CORPUS_FILES = sorted(CORPUS_DIR.glob("*.json")) if CORPUS_DIR.is_dir() else []

needs_corpus = pytest.mark.skipif(
    not CORPUS_FILES,
    reason=f"shared corpus of real Firecrawl crawls not found at {CORPUS_DIR} "
    "(it sits beside the repository on the team's machines and in CI, not in a user's clone)",
)


def corpus_params():
    """One pytest param per corpus file, or a single skipped placeholder when absent."""
    if not CORPUS_FILES:
        return [pytest.param(None, marks=needs_corpus, id="no-corpus")]
    return [pytest.param(path, id=path.stem) for path in CORPUS_FILES]
