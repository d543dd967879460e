"""Retrieval quality of firechunk's chunks against peer chunkers, on our own questions.

Each question (`bench/retrieval_questions.jsonl`) names a corpus file, the page URL that
answers it and a verbatim evidence snippet of that page. Every system chunks the corpus
file; BM25 (`bm25s`) ranks the chunks of that file for the question. A retrieved chunk is a
hit when it holds the evidence (compared as lower-case words) and cites the question's URL
(firechunk: `sourceUrl`, `aliases` or `also_on`; a peer: the page it chunked).

Printed per system: hit@1, hit@5, MRR@10, hit within 1k and 2k tokens of context (chunks
taken in rank order while they fit), cite@1 (the top hit's own URL is the question's), the
repeats in the top 5, chunk count and median tokens; overall and for short pages (under
2,000 tokens). Each peer also runs deduplicated (exact repeats removed, first kept).

Run: `python bench/retrieval.py` in the venv with the bench extras (`make bench`).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from firechunk.crawlfile import read_crawl
from firechunk.run.memory import chunk_crawl
from firechunk.tokens import get_encoding
from schemas.page import CrawlResult

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus"
DEFAULT_QUESTIONS = ROOT / "bench" / "retrieval_questions.jsonl"
CHUNK_TOKENS = 1000
SOFT_TOKENS = 800
SHORT_PAGE = 2000
ENCODING = get_encoding("cl100k_base")


@dataclass(frozen=True)
class Piece:
    """A retrievable chunk: its text, token count, the URL it cites and all it names."""

    text: str
    tokens: int
    url: str
    urls: frozenset[str]


@dataclass(frozen=True)
class Question:
    id: str
    corpus: str
    url: str
    question: str
    evidence: str


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def words(text: str) -> str:
    """Lower-case words joined by single spaces: evidence and chunk compared alike."""
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def same_url(url: str) -> str:
    return url.split("#", 1)[0].rstrip("/")


def piece(text: str, url: str, urls: set[str] | None = None) -> Piece:
    names = frozenset(same_url(u) for u in (urls or set()) | {url})
    return Piece(text, len(ENCODING.encode_ordinary(text)), same_url(url), names)


# -- systems: a crawl in, pieces out ------------------------------------------------------


def firechunk_pieces(crawl: CrawlResult) -> list[Piece]:
    run = chunk_crawl(crawl, workers=1)
    return [
        piece(
            chunk.data.text,
            chunk.metadata.source_url,
            {
                *chunk.metadata.aliases,
                *(entry.url for entry in getattr(chunk.metadata, "also_on", [])),
            },
        )
        for chunk in run.chunks
    ]


def per_page(split: Callable[[str], list[str]]) -> Callable[[CrawlResult], list[Piece]]:
    """A peer that chunks each page's markdown on its own; its chunks cite that page."""

    def run(crawl: CrawlResult) -> list[Piece]:
        return [
            piece(text, page.metadata.source_url)
            for page in crawl.data
            if isinstance(page.markdown, str)
            for text in split(page.markdown)
            if text.strip()
        ]

    return run


def naive_h2(markdown: str) -> list[str]:
    return re.split(r"\n(?=#{1,2} )", markdown)


def langchain() -> Callable[[str], list[str]]:
    from langchain_text_splitters import MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter

    by_header = MarkdownHeaderTextSplitter(
        headers_to_split_on=[("#", "h1"), ("##", "h2"), ("###", "h3")], strip_headers=False
    )
    by_size = RecursiveCharacterTextSplitter(
        chunk_size=CHUNK_TOKENS,
        chunk_overlap=0,
        length_function=lambda text: len(ENCODING.encode_ordinary(text)),
    )
    return lambda markdown: [
        d.page_content for d in by_size.split_documents(by_header.split_text(markdown))
    ]


def llamaindex() -> Callable[[str], list[str]]:
    from llama_index.core import Document
    from llama_index.core.node_parser import MarkdownNodeParser

    parser = MarkdownNodeParser()
    return lambda markdown: [
        node.get_content() for node in parser.get_nodes_from_documents([Document(text=markdown)])
    ]


def chonkie() -> Callable[[str], list[str]]:
    from chonkie import RecursiveChunker

    chunker = RecursiveChunker(tokenizer=ENCODING, chunk_size=CHUNK_TOKENS)
    return lambda markdown: [chunk.text for chunk in chunker.chunk(markdown)]


def semantic_text_splitter() -> Callable[[str], list[str]]:
    from semantic_text_splitter import MarkdownSplitter

    splitter = MarkdownSplitter.from_tiktoken_model("gpt-3.5-turbo", (SOFT_TOKENS, CHUNK_TOKENS))
    return splitter.chunks


PEERS: list[tuple[str, Callable[[], Callable[[str], list[str]]]]] = [
    ("langchain header+recursive", langchain),
    ("llamaindex markdown", llamaindex),
    ("chonkie recursive", chonkie),
    ("semantic-text-splitter", semantic_text_splitter),
    ("naive H2", lambda: naive_h2),
]


def dedup(pieces: list[Piece]) -> list[Piece]:
    """Exact repeats removed; the first kept, citing only its own page."""
    seen: set[str] = set()
    kept = []
    for p in pieces:
        if p.text not in seen:
            seen.add(p.text)
            kept.append(Piece(p.text, p.tokens, p.url, frozenset({p.url})))
    return kept


# -- retrieval and scoring ----------------------------------------------------------------


def bm25_ranker(pieces: list[Piece]) -> Callable[[str], list[int]]:
    import bm25s

    retriever = bm25s.BM25()
    corpus = bm25s.tokenize([p.text for p in pieces], stopwords="en", show_progress=False)
    retriever.index(corpus, show_progress=False)

    def rank(question: str) -> list[int]:
        query = bm25s.tokenize([question], stopwords="en", show_progress=False)
        ids, _ = retriever.retrieve(query, k=min(10, len(pieces)), show_progress=False)
        return [int(i) for i in ids[0]]

    return rank


def score(question: Question, ranking: list[Piece]) -> dict[str, float]:
    evidence, url = words(question.evidence), same_url(question.url)
    hits = [evidence in words(p.text) and url in p.urls for p in ranking]
    first = hits.index(True) + 1 if True in hits else None
    texts = [words(p.text) for p in ranking[:5]]
    return {
        "hit@1": float(bool(hits[:1] and hits[0])),
        "hit@5": float(any(hits[:5])),
        "mrr@10": 1 / first if first else 0.0,
        "hit@1k": float(within(ranking, hits, 1000)),
        "hit@2k": float(within(ranking, hits, 2000)),
        "cite@1": float(bool(hits[:1] and hits[0] and ranking[0].url == url)),
        "repeats@5": float(sum(t in texts[:n] for n, t in enumerate(texts))),
    }


def within(ranking: list[Piece], hits: list[bool], budget: int) -> bool:
    """A hit among the chunks taken in rank order while they fit `budget` tokens (the
    first always counts)."""
    used = 0
    for n, (p, hit) in enumerate(zip(ranking, hits, strict=True)):
        used += p.tokens
        if n and used > budget:
            return False
        if hit:
            return True
    return False


def mean_scores(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.fmean(row[key] for row in rows) for key in rows[0]} if rows else {}


# -- the run ------------------------------------------------------------------------------


def load_questions(path: Path) -> list[Question]:
    with path.open(encoding="utf-8") as handle:
        return [Question(**json.loads(line)) for line in handle if line.strip()]


def short_pages(crawls: dict[str, CrawlResult]) -> set[str]:
    return {
        same_url(page.metadata.source_url)
        for crawl in crawls.values()
        for page in crawl.data
        if isinstance(page.markdown, str)
        and len(ENCODING.encode_ordinary(page.markdown)) < SHORT_PAGE
    }


def systems() -> tuple[list[tuple[str, Callable[[CrawlResult], list[Piece]]]], list[str]]:
    """Every system that can be built, and why the others cannot."""
    built: list[tuple[str, Callable[[CrawlResult], list[Piece]]]] = [
        ("firechunk", firechunk_pieces)
    ]
    missing = []
    for name, factory in PEERS:
        try:
            run = per_page(factory())
        except ImportError as error:
            missing.append(f"{name}: {error}")
            continue
        built.append((name, run))
        built.append((f"{name} dedup", lambda crawl, run=run: dedup(run(crawl))))
    return built, missing


def evaluate(
    questions: list[Question], crawls: dict[str, CrawlResult], short: set[str]
) -> dict[str, Any]:
    built, missing = systems()
    results: dict[str, Any] = {"missing": missing, "systems": {}}
    for name, run in built:
        started = time.perf_counter()
        rows_all, rows_short, sizes = [], [], []
        for corpus, crawl in crawls.items():
            pieces = run(crawl)
            sizes.extend(p.tokens for p in pieces)
            rank = bm25_ranker(pieces)
            for question in (q for q in questions if q.corpus == corpus):
                row = score(question, [pieces[i] for i in rank(question.question)])
                rows_all.append(row)
                if same_url(question.url) in short:
                    rows_short.append(row)
        results["systems"][name] = {
            "all": mean_scores(rows_all),
            "short": mean_scores(rows_short),
            "chunks": len(sizes),
            "median_tokens": statistics.median(sizes),
        }
        log(f"{name}: {time.perf_counter() - started:.1f} s")
    return results


def table(results: dict[str, Any], part: str) -> str:
    keys = ["hit@1", "hit@5", "mrr@10", "hit@1k", "hit@2k", "cite@1", "repeats@5"]
    lines = [
        "| system | " + " | ".join(keys) + " | chunks | median tokens |",
        "|---" * (len(keys) + 3) + "|",
    ]
    for name, figures in results["systems"].items():
        values = " | ".join(f"{figures[part][key]:.3f}" for key in keys)
        lines.append(
            f"| {name} | {values} | {figures['chunks']} | {figures['median_tokens']:.0f} |"
        )
    return "\n".join(lines)


def margins(results: dict[str, Any]) -> list[str]:
    ours = results["systems"]["firechunk"]
    peers = {name: f for name, f in results["systems"].items() if name != "firechunk"}
    best = max(peers, key=lambda name: peers[name]["all"]["mrr@10"])
    margin = ours["all"]["mrr@10"] - peers[best]["all"]["mrr@10"]
    behind = [n for n, f in peers.items() if f["short"]["hit@1"] > ours["short"]["hit@1"]]
    return [
        f"MRR@10 margin over the best peer ({best}): {margin:+.3f} (target >= +0.030)",
        f"peers ahead on short-page hit@1: {', '.join(behind) or 'none'}",
    ]


def main(
    corpus: Annotated[Path, typer.Option(help="Folder of crawl files.")] = DEFAULT_CORPUS,
    questions: Annotated[Path, typer.Option(help="Question file (JSON lines).")] = (
        DEFAULT_QUESTIONS
    ),
    out: Annotated[Path, typer.Option(help="Figures as JSON.")] = Path("/tmp/retrieval.json"),
) -> None:
    asked = load_questions(questions)
    crawls = {name: read_crawl(corpus / name) for name in sorted({q.corpus for q in asked})}
    short = short_pages(crawls)
    results = evaluate(asked, crawls, short)
    n_short = sum(same_url(q.url) in short for q in asked)
    print(f"## BM25, {len(asked)} questions\n\n{table(results, 'all')}\n")
    print(f"## BM25, {n_short} questions on short pages\n\n{table(results, 'short')}\n")
    for line in margins(results) + [f"not available: {m}" for m in results["missing"]]:
        print(line)
    with tempfile.NamedTemporaryFile("w", dir=out.parent, delete=False, suffix=".tmp") as f:
        json.dump(results, f, indent=1)
    os.replace(f.name, out)


if __name__ == "__main__":
    typer.run(main)
