"""The retrievers of `bench/retrieval.py`: BM25, MiniLM on a chunk's first window, MiniLM on
every window of a chunk, and the last two's fusion with BM25 by reciprocal rank.

A retriever indexes one system's chunks of one crawl and gives, for a question, one score a
chunk (higher is better). Why several dense variants: all-MiniLM-L6-v2 reads at most 256
word pieces of a text and drops the rest, so a 600-token chunk is judged by its first third
("first window") and a chunker that cuts small wins by being read whole. "Windows" embeds
every consecutive window of at most 256 word pieces of a chunk and scores the chunk by its
best window (max cosine), so length no longer hides text from the model; each window starts
with the chunk's heading line (title > breadcrumb for firechunk, the header metadata for the
peers that keep any), since a window cut from the middle of a section no longer shows what
the section is about. "Hybrid" fuses BM25 and windows the way `firechunk search` fuses
full-text and vector search: each side's top `candidates` give weight / (k + rank).

Vectors are cached on disk by the embedder's `model` string (and tokenizer file) in the file
name and the sha1 of the text as the key: another embedder, or the same one renamed after a
change, starts a new cache, while a text that several systems or runs share is embedded once.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from firechunk.atomic import atomic_write
from firechunk.embedders import BERT_HELLO_WORLD, MINILM_MAX_TOKENS, local_embedder

MINILM_BATCH = 32
SPECIAL_TOKENS = 2  # [CLS] and [SEP], inside MiniLM's 256
MAX_HEADING_TOKENS = 64  # a heading line longer than this is cut, so a window keeps text
SANITY_PAIRS = (
    "How do I reset my password?",
    "What are the steps to recover a forgotten password?",
    "The recipe calls for two cups of flour and a pinch of salt.",
)
STARTED = time.perf_counter()


def log(message: str) -> None:
    """Progress goes to stderr, with seconds since start; stdout holds only the report."""
    print(f"{time.perf_counter() - STARTED:7.1f} s  {message}", file=sys.stderr, flush=True)


class Indexable(Protocol):
    """What a retriever reads of a chunk (`retrieval.Piece`, frozen, is one)."""

    @property
    def text(self) -> str: ...

    @property
    def heading(self) -> str:
        """title > breadcrumb, or the peer's header metadata; "" when none."""
        ...

    @property
    def indexed(self) -> str:
        """The text, or the heading line then the text (`--with-headings`)."""
        ...


Ranker = Callable[[str], np.ndarray]  # a question -> one score per chunk, higher is better


@dataclass
class Retriever:
    key: str  # the name `--retrievers` takes
    name: str
    index: Callable[[Sequence[Indexable]], Ranker]
    # Sees every chunk and question of the run once before any index call (to embed them
    # in one go and save the cache once).
    prepare: Callable[[Sequence[Indexable], Sequence[str]], None] = lambda pieces, qs: None
    lexical: bool = False  # a score of 0 means no word of the question matched: not a match
    seconds: float = 0.0


# ---------------------------------------------------------------------------------------
# BM25
# ---------------------------------------------------------------------------------------


def bm25(stem: bool = False) -> Retriever:
    """bm25s with its default tokenizer, English stop words, lower case; with `stem`, words
    reduced to their Snowball stems as Postgres's English full text reduces them."""
    import bm25s

    stemmer = None
    if stem:
        import Stemmer

        stemmer = Stemmer.Stemmer("english")

    def tokens(texts: list[str], **options: Any) -> Any:
        return bm25s.tokenize(
            texts, lower=True, stopwords="en", stemmer=stemmer, show_progress=False, **options
        )

    def index(pieces: Sequence[Indexable]) -> Ranker:
        retriever = bm25s.BM25()
        retriever.index(tokens([piece.indexed for piece in pieces]), show_progress=False)

        def rank(question: str) -> np.ndarray:
            query = tokens([question], return_ids=False)[0]
            return retriever.get_scores(query) if query else np.zeros(len(pieces))

        return rank

    return Retriever("bm25", "BM25", index, lexical=True)


# ---------------------------------------------------------------------------------------
# MiniLM and its vector cache
# ---------------------------------------------------------------------------------------


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


class MiniLM:
    """The local embedder of `firechunk.embedders` with its vectors kept by the sha1 of their
    text, in a cache file named after the embedder's `model` string and tokenizer file."""

    def __init__(self, tokenizer_path: Path | None, cache_dir: Path | None) -> None:
        self.embedder = local_embedder(MINILM_BATCH, tokenizer_path=tokenizer_path)
        self.model: str = self.embedder.model
        self.tokenizer_path: Path = self.embedder.tokenizer_path
        vocab = hashlib.sha1(self.tokenizer_path.read_bytes()).hexdigest()
        identity = f"{self.model}\0{vocab}\0{MINILM_MAX_TOKENS}"
        name = f"firechunk-retrieval-vectors-{text_key(identity)[:16]}.npz"
        self.cache_path = cache_dir / name if cache_dir else None
        self.vectors = self._load_cache()
        self.embedded = 0  # texts embedded by this run (not found in the cache)
        self.embed_seconds = 0.0

    def _load_cache(self) -> dict[str, np.ndarray]:
        """The cached vectors, if the file is this model's (its `model` string is inside)."""
        if self.cache_path is None or not self.cache_path.is_file():
            return {}
        with np.load(self.cache_path) as saved:
            if str(saved["model"]) != self.model:
                log(f"{self.cache_path}: another model's vectors; not used")
                return {}
            vectors = dict(zip(saved["keys"].tolist(), saved["vectors"], strict=True))
        log(f"MiniLM: {len(vectors)} cached vectors of {self.model!r}")
        return vectors

    def save_cache(self) -> None:
        if self.cache_path is None or not self.embedded:
            return
        keys = np.array(list(self.vectors))
        vectors = np.stack(list(self.vectors.values()))
        model = np.array(self.model)
        atomic_write(
            self.cache_path,
            lambda handle: np.savez(handle, keys=keys, vectors=vectors, model=model),
        )
        log(f"MiniLM: {len(keys)} vectors saved to {self.cache_path}")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised row per text; texts not seen before are embedded first."""
        keys = [text_key(text) for text in texts]
        missing = {key: text for key, text in zip(keys, texts, strict=True)}
        missing = {key: text for key, text in missing.items() if key not in self.vectors}
        if missing:
            self._embed_missing(list(missing), list(missing.values()))
        if not keys:
            return np.zeros((0, self.embedder.dimensions), dtype=np.float32)
        return np.stack([self.vectors[key] for key in keys])

    def _embed_missing(self, keys: list[str], texts: list[str]) -> None:
        started = last_report = time.perf_counter()

        def progress(done: int) -> None:
            nonlocal last_report
            if time.perf_counter() - last_report > 30:
                last_report = time.perf_counter()
                log(f"MiniLM: {done} of {len(texts)} texts embedded")

        vectors = self.embedder.embed(texts, progress)
        self.vectors.update(zip(keys, vectors, strict=True))
        self.embedded += len(texts)
        seconds = time.perf_counter() - started
        self.embed_seconds += seconds
        log(f"MiniLM: {len(texts)} texts embedded in {seconds:.1f} s")

    def sanity(self) -> dict[str, Any]:
        """The vocabulary is bert-base-uncased's and a paraphrase scores above an unrelated
        sentence; raises otherwise (a wrong tokenizer gives plausible-looking noise)."""
        ids = self.embedder.tokenize("Hello world")
        question, paraphrase, unrelated = self.embed(list(SANITY_PAIRS))
        figures = {
            "model": self.model,
            "hello_world_ids": ids,
            "vocab_size": self.embedder.tokenizer.get_vocab_size(),
            "paraphrase_cosine": round(float(question @ paraphrase), 4),
            "unrelated_cosine": round(float(question @ unrelated), 4),
        }
        ok = ids == BERT_HELLO_WORLD and figures["paraphrase_cosine"] > figures["unrelated_cosine"]
        log(f"MiniLM sanity check {'passed' if ok else 'FAILED'}: {figures}")
        if not ok:
            raise RuntimeError(f"MiniLM sanity check failed: {figures}")
        return figures


def dense_first_window(model: MiniLM) -> Retriever:
    """Each chunk's indexed text embedded once: the model reads its first 256 word pieces."""

    def prepare(pieces: Sequence[Indexable], questions: Sequence[str]) -> None:
        model.embed([*dict.fromkeys(piece.indexed for piece in pieces), *questions])
        model.save_cache()

    def index(pieces: Sequence[Indexable]) -> Ranker:
        matrix = model.embed([piece.indexed for piece in pieces])
        return lambda question: matrix @ model.embed([question])[0]

    return Retriever("dense", "dense, first window", index, prepare)


# ---------------------------------------------------------------------------------------
# Windows
# ---------------------------------------------------------------------------------------


def word_start(word_ids: Sequence[int | None], i: int, floor: int) -> int:
    """`i`, or the first piece of the word piece `i` is in, but not below `floor`."""
    while i > floor and word_ids[i] is not None and word_ids[i] == word_ids[i - 1]:
        i -= 1
    return i


def window_spans(
    offsets: Sequence[tuple[int, int]],
    word_ids: Sequence[int | None],
    budget: int,
    overlap: int = 0,
) -> list[tuple[int, int]]:
    """Character spans of consecutive runs of at most `budget` word pieces, each starting
    `overlap` pieces (about: whole words) before the last one ended, cut between words
    where one fits (a word cut in two reads as two other words to the model)."""
    spans, start, count = [], 0, len(offsets)
    while start < count:
        end = min(start + budget, count)
        if end < count:
            cut = word_start(word_ids, end, start)
            end = cut if cut > start else end  # a word longer than the budget is cut
        spans.append((offsets[start][0], offsets[end - 1][1]))
        if end == count:
            break
        # With an overlap, the next window starts at a word's first piece.
        back = word_start(word_ids, end - overlap, start + 1) if overlap else end
        start = max(start + 1, back)
    return spans


class Windower:
    """Cuts a chunk into window texts for MiniLM: the heading line, then at most as many
    word pieces of the text as leave the whole window within MINILM_MAX_TOKENS."""

    def __init__(
        self, tokenizer_path: Path, overlap: int = 0, max_tokens: int = MINILM_MAX_TOKENS
    ) -> None:
        from tokenizers import Tokenizer

        # A fresh tokenizer: the embedder's cuts at 256, so its offsets stop there.
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.overlap = overlap
        self.max_tokens = max_tokens
        self.memo: dict[tuple[str, str], list[str]] = {}

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def prefix(self, heading: str) -> str:
        """The heading on a line of its own, cut to MAX_HEADING_TOKENS word pieces."""
        if not heading.strip():
            return ""
        encoding = self.tokenizer.encode(heading, add_special_tokens=False)
        if len(encoding.offsets) > MAX_HEADING_TOKENS:
            heading = heading[: encoding.offsets[MAX_HEADING_TOKENS - 1][1]]
        return f"{heading}\n"

    def __call__(self, heading: str, text: str) -> list[str]:
        key = (heading, text)
        if key not in self.memo:
            self.memo[key] = self._windows(heading, text)
        return self.memo[key]

    def _windows(self, heading: str, text: str) -> list[str]:
        prefix = self.prefix(heading)
        budget = self.max_tokens - SPECIAL_TOKENS - self.count(prefix)
        encoding = self.tokenizer.encode(text, add_special_tokens=False)
        spans = window_spans(encoding.offsets, encoding.word_ids, budget, self.overlap)
        return [prefix + text[start:end] for start, end in spans] or [prefix + text]


def dense_windows(model: MiniLM, windower: Windower) -> Retriever:
    """Every window of a chunk embedded; a chunk scores its best window's cosine."""

    def prepare(pieces: Sequence[Indexable], questions: Sequence[str]) -> None:
        started = time.perf_counter()
        texts = [
            window
            for key in dict.fromkeys((piece.heading, piece.text) for piece in pieces)
            for window in windower(*key)
        ]
        log(f"windows: {len(texts)} cut in {time.perf_counter() - started:.1f} s")
        model.embed([*dict.fromkeys(texts), *questions])
        model.save_cache()

    def index(pieces: Sequence[Indexable]) -> Ranker:
        groups = [windower(piece.heading, piece.text) for piece in pieces]
        matrix = model.embed([window for group in groups for window in group])
        starts = np.cumsum([0, *(len(group) for group in groups[:-1])])
        return lambda question: np.maximum.reduceat(matrix @ model.embed([question])[0], starts)

    return Retriever("windows", "dense, windows", index, prepare)


# ---------------------------------------------------------------------------------------
# Hybrid: reciprocal rank fusion
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fusion:
    """score = bm25_weight / (k + BM25 rank) + dense_weight / (k + windows rank), ranks from
    1, over each side's top `candidates` (BM25's only where a word matched), as
    `firechunk search` fuses its two sides (k 60, 50 candidates, equal weights)."""

    k: float = 60.0
    bm25_weight: float = 1.0
    dense_weight: float = 1.0
    candidates: int = 50

    def describe(self) -> str:
        return f"k {self.k:g}, weights BM25 {self.bm25_weight:g} : dense {self.dense_weight:g}"


def fuse(lexical: np.ndarray, semantic: np.ndarray, fusion: Fusion) -> np.ndarray:
    """Chunk indices best first: every chunk in either side's top list, by its fused score
    (ties: lower index first). Chunks in neither list are left out."""
    scores: dict[int, float] = {}
    sides = ((fusion.bm25_weight, lexical), (fusion.dense_weight, semantic))
    for weight, ranked in sides:
        for rank, i in enumerate(ranked[: fusion.candidates].tolist(), 1):
            scores[i] = scores.get(i, 0.0) + weight / (fusion.k + rank)
    return np.array(sorted(scores, key=lambda i: (-scores[i], i)), dtype=np.int64)
