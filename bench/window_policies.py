"""Ways to read a long chunk in fewer windows, scored by `firechunk search`'s MRR@10.

    python bench/window_policies.py [POLICY ...] [--work /tmp/window-policies]

Each policy is a `windows(heading, text)` for the local embedder; the crawls the questions
name are chunked and loaded as `bench/search_quality.py` does (its functions), a policy at
a time into one database (a policy is a model name of its own, so the loader embeds the
collection again), and both halves of bench/questions.jsonl are asked: choose on `tune`,
report `held`. Vectors are kept by window text across policies (a window is embedded
once), so every policy after the first costs little. Prints MRR@10 of the search and of
its vector side, and the windows a chunk is read as.

Policies (all but `shipped` cut the text into 256-piece windows without overlap):
`shipped` (the embedder's own windows), `no-overlap`, `at-most-N` (the first N),
`new-words-P` (a later window kept when at least P % of its distinct words are new).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_quality  # noqa: E402
from retrieval import DEFAULT_CORPUS, load_questions  # noqa: E402

from firechunk.db.connect import connect  # noqa: E402
from firechunk.db.search import RRF_K, TEXT_WEIGHT, VECTOR_WEIGHT, Fusion  # noqa: E402
from firechunk.embedders import MINILM_MAX_TOKENS, LocalEmbedder, local_embedder  # noqa: E402

Policy = Callable[[str, str], list[str]]
WORD = re.compile(r"[a-z0-9_]{3,}")
DEFAULT_POLICIES = ("shipped", "no-overlap", "new-words-50", "at-most-2")


def no_overlap(embedder: LocalEmbedder) -> Policy:
    """The heading, then consecutive windows of the text that share no piece."""

    def windows(heading: str, text: str) -> list[str]:
        if len(shipped := embedder.windows(heading, text)) == 1:
            return shipped
        pieces = embedder._untruncated
        prefix = f"{heading}\n\n" if heading else ""
        room = MINILM_MAX_TOKENS - 2
        prefix_pieces = len(pieces.encode(prefix, add_special_tokens=False))
        if prefix_pieces > room // 2:
            prefix, prefix_pieces = "", 0
        width = room - prefix_pieces
        offsets = pieces.encode(text, add_special_tokens=False).offsets
        return [
            prefix + text[offsets[start][0] : offsets[min(start + width, len(offsets)) - 1][1]]
            for start in range(0, len(offsets), width)
        ]

    return windows


def new_words(cut: Policy, share: float) -> Policy:
    """The first window, then each later one whose distinct words are at least `share` new."""

    def windows(heading: str, text: str) -> list[str]:
        kept: list[str] = []
        seen: set[str] = set()
        for window in cut(heading, text):
            words = set(WORD.findall(window.lower()))
            if not kept or (words and len(words - seen) / len(words) >= share):
                kept.append(window)
                seen |= words
        return kept

    return windows


def policy(name: str, embedder: LocalEmbedder) -> Policy:
    if name == "shipped":
        return embedder.windows
    if name == "no-overlap":
        return no_overlap(embedder)
    if name.startswith("at-most-"):
        most = int(name.removeprefix("at-most-"))
        return lambda heading, text: no_overlap(embedder)(heading, text)[:most]
    if name.startswith("new-words-"):
        return new_words(no_overlap(embedder), int(name.removeprefix("new-words-")) / 100)
    raise SystemExit(f"unknown policy {name!r}")


class PolicyEmbedder:
    """The local embedder reading chunks by `windows`, under a model name of its own,
    its vectors kept by text across policies."""

    dimensions = 384

    def __init__(self, name: str, inner: LocalEmbedder, cache: dict[str, np.ndarray]) -> None:
        self.model = f"window policy {name}"
        self.inner = inner
        self.cache = cache
        self.policy = policy(name, inner)
        self.chunks = self.windows_read = 0

    def windows(self, heading: str, text: str) -> list[str]:
        read = self.policy(heading, text)
        self.chunks, self.windows_read = self.chunks + 1, self.windows_read + len(read)
        return read

    def embed(self, texts: Sequence[str], progress=None) -> np.ndarray:
        missing = [text for text in dict.fromkeys(texts) if text not in self.cache]
        if missing:
            self.cache.update(zip(missing, self.inner.embed(missing), strict=True))
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return np.stack([self.cache[text] for text in texts])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("policies", nargs="*", default=list(DEFAULT_POLICIES))
    parser.add_argument("--work", type=Path, default=Path("/tmp/window-policies"))
    args = parser.parse_args()
    inner = local_embedder()
    cache: dict[str, np.ndarray] = {}
    fusion = Fusion(rrf_k=RRF_K, vector_weight=VECTOR_WEIGHT, text_weight=TEXT_WEIGHT)
    questions = search_quality.ROOT / "bench" / "questions.jsonl"
    args.work.mkdir(parents=True, exist_ok=True)
    with connect(None, args.work) as conn:
        conn.autocommit = True
        for name in args.policies:
            embedder = PolicyEmbedder(name, inner, cache)
            for split in ("tune", "held"):
                asked = load_questions(questions, split)
                crawls = sorted({q.corpus for q in asked})
                rows = {
                    crawl: search_quality.chunk_and_load(
                        DEFAULT_CORPUS / crawl, args.work, conn, embedder
                    )
                    for crawl in crawls
                }
                judged = [search_quality.judge(conn, embedder, q, rows[q.corpus]) for q in asked]
                search = search_quality.figures(judged, fusion)["mrr@10"]
                vector = search_quality.figures(judged, None, "vector")["mrr@10"]
                print(f"{name} {split}: MRR@10 search {search:.3f}, vector side {vector:.3f}")
            a_chunk = embedder.windows_read / max(1, embedder.chunks)
            print(f"{name}: {a_chunk:.2f} windows a chunk embedded", flush=True)


if __name__ == "__main__":
    main()
