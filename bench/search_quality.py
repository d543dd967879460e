"""`firechunk search` end to end on the question set: chunk, load, search, judge.

    python bench/search_quality.py [--split held|tune|all] [--work /tmp/search-quality]
                                   [--questions bench/questions.jsonl] [--sweep]

Each crawl a question names is chunked as `firechunk chunk` does (no Prefect) into a data
directory of its own under `--work`, and loaded, as `firechunk load` does, into one
embedded Postgres there, a collection per crawl; both are kept, so a second invocation only
searches. Every question is then asked of its crawl's collection through
`firechunk.db.search.search`, the function behind the command, with the local embedder.

A hit is judged as bench/retrieval.py judges one (imported from it): the chunk's text
holds the evidence and the chunk cites the question's page (its URL, its aliases or the
pages it is also on). Reported per crawl and overall, with and without the Python
reference: MRR@10 and hit@1/5 of the product search (the fused list), of its full-text
side alone (BM25) and of its vector side alone (best window).

`--sweep` (run it on the tune half): the search returns every candidate with its rank on
each side, so other fusion constants and weights are scored offline from the same answers;
the best on the tune half is what `firechunk.db.search` ships.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from retrieval import DEFAULT_CORPUS, Question, load_questions, normalise, page_key  # noqa: E402

from firechunk.db.connect import connect  # noqa: E402
from firechunk.db.load import load_run  # noqa: E402
from firechunk.db.runs import published_run  # noqa: E402
from firechunk.db.search import CANDIDATES, RRF_K, TEXT_WEIGHT, VECTOR_WEIGHT, Fusion  # noqa: E402
from firechunk.db.search import search as product_search  # noqa: E402
from firechunk.embedders import local_embedder  # noqa: E402
from firechunk.layout import DataDir, RunDir  # noqa: E402
from firechunk.pipeline import Request, run_pipeline  # noqa: E402
from firechunk.settings import RunSettings  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PYTHON_REFERENCE = "supabase-python-reference-2024-09.json"
SWEEP_K = (5, 10, 20, 30, 60, 100)
SWEEP_TEXT_WEIGHT = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0)  # the vector side weighs 1


@dataclass(frozen=True)
class Judged:
    """One question's candidates: (rank on the vector side, rank on the text side, hit)."""

    question: Question
    candidates: tuple[tuple[int | None, int | None, bool], ...]


def chunk_and_load(corpus: Path, work: Path, conn, embedder) -> dict[str, dict]:
    """The crawl chunked and published into its own data directory (once) and loaded into
    its collection; its chunks by id."""
    data_dir = work / corpus.stem
    if not DataDir(data_dir).latest.exists():
        settings = RunSettings(collection=corpus.stem)
        night = run_pipeline(Request(run=settings, replay=corpus, data_dir=data_dir))
        outcome, published = night.outcome, night.result
        if published is None or not published.published:
            raise SystemExit(f"{corpus.name}: the run was not published ({outcome})")
    run = published_run(data_dir, collection=corpus.stem)
    result = load_run(conn, run, embedder, say=lambda line: print(line, file=sys.stderr))
    print(f"{corpus.stem}: {result.chunks} chunks, {result.embedded} embedded", file=sys.stderr)
    rows = json.loads(RunDir(run.run_dir).chunks_json.read_bytes())
    return {row["chunk_id"]: row for row in rows}


def cites(row: dict) -> set[str]:
    meta = row["metadata"]
    urls = [meta["sourceUrl"], *meta.get("aliases", [])]
    urls += [also["url"] if isinstance(also, dict) else also for also in meta.get("also_on", [])]
    return {page_key(url) for url in urls}


def is_hit(question: Question, row: dict) -> bool:
    return question.target in cites(row) and question.needle in normalise(row["data"]["text"])


def judge(conn, embedder, question: Question, rows: dict[str, dict]) -> Judged:
    hits = product_search(
        conn, Path(question.corpus).stem, question.question, embedder, k=2 * CANDIDATES
    )
    return Judged(
        question,
        tuple((h.by_vector, h.by_text, is_hit(question, rows[h.chunk_id])) for h in hits),
    )


def reciprocal_rank(ranking: list[bool]) -> float:
    return next((1 / (n + 1) for n, hit in enumerate(ranking[:10]) if hit), 0.0)


def ranking(judged: Judged, fusion: Fusion | None, side: str = "") -> list[bool]:
    """The hits in rank order: fused with `fusion`, or one side alone."""
    if fusion is None:
        index = 0 if side == "vector" else 1
        ranked = sorted(
            ((rank, candidate[2]) for candidate in judged.candidates if (rank := candidate[index])),
            key=lambda pair: pair[0],
        )
        return [hit for _, hit in ranked]

    def score(c):
        vector = fusion.vector_weight / (fusion.rrf_k + c[0]) if c[0] else 0.0
        text = fusion.text_weight / (fusion.rrf_k + c[1]) if c[1] else 0.0
        return -(vector + text)

    return [c[2] for c in sorted(judged.candidates, key=score)]


def figures(judged: list[Judged], fusion: Fusion | None, side: str = "") -> dict[str, float]:
    rankings = [ranking(j, fusion, side) for j in judged]
    return {
        "mrr@10": statistics.fmean(reciprocal_rank(r) for r in rankings),
        "hit@1": statistics.fmean(bool(r[:1] and r[0]) for r in rankings),
        "hit@5": statistics.fmean(any(r[:5]) for r in rankings),
    }


def report(judged: list[Judged], fusion: Fusion) -> None:
    crawls = sorted({j.question.corpus for j in judged})
    groups = {Path(c).stem: [j for j in judged if j.question.corpus == c] for c in crawls}
    groups["all but the Python reference"] = [
        j for j in judged if j.question.corpus != PYTHON_REFERENCE
    ]
    groups["all"] = judged
    print(f"{'questions':<40} {'n':>4}  {'search':>7} {'BM25':>7} {'vector':>7}  (MRR@10)")
    for name, group in groups.items():
        if not group:
            continue
        fused = figures(group, fusion)["mrr@10"]
        text = figures(group, None, "text")["mrr@10"]
        vector = figures(group, None, "vector")["mrr@10"]
        print(f"{name:<40} {len(group):>4}  {fused:>7.3f} {text:>7.3f} {vector:>7.3f}")
    overall = figures(judged, fusion)
    print(f"search, all: hit@1 {overall['hit@1']:.3f}, hit@5 {overall['hit@5']:.3f}")


def sweep(judged: list[Judged]) -> Fusion:
    """Every (constant, text weight) of the grid scored on `judged`; the best returned."""
    scored = []
    for k in SWEEP_K:
        for weight in SWEEP_TEXT_WEIGHT:
            fusion = Fusion(rrf_k=k, vector_weight=1.0, text_weight=weight)
            scored.append((figures(judged, fusion)["mrr@10"], k, weight, fusion))
    scored.sort(key=lambda row: -row[0])
    for mrr, k, weight, _ in scored[:8]:
        print(f"  rrf_k {k:>4}  text weight {weight:>5}  MRR@10 {mrr:.3f}")
    return scored[0][3]


def main(
    split: Annotated[str, typer.Option(help="held, tune or all")] = "held",
    questions: Annotated[Path, typer.Option()] = ROOT / "bench" / "questions.jsonl",
    corpus: Annotated[Path, typer.Option(help="Folder of crawl files.")] = DEFAULT_CORPUS,
    work: Annotated[Path, typer.Option(help="Data directories and database, kept.")] = Path(
        "/tmp/search-quality"
    ),
    do_sweep: Annotated[bool, typer.Option("--sweep", help="Tune the fusion.")] = False,
) -> None:
    asked = load_questions(questions, split)
    embedder = local_embedder()
    work.mkdir(parents=True, exist_ok=True)
    with connect(None, work) as conn:
        conn.autocommit = True
        rows: dict[str, dict[str, dict]] = {}
        for name in sorted({q.corpus for q in asked}):
            rows[name] = chunk_and_load(corpus / name, work, conn, embedder)
        judged = [judge(conn, embedder, q, rows[q.corpus]) for q in asked]
    shipped = Fusion(rrf_k=RRF_K, vector_weight=VECTOR_WEIGHT, text_weight=TEXT_WEIGHT)
    print(f"split {split}: {len(judged)} questions; fusion as shipped: {shipped}")
    report(judged, shipped)
    if do_sweep:
        print("sweep (best first):")
        best = sweep(judged)
        print(f"best: {best}")
        report(judged, best)


if __name__ == "__main__":
    typer.run(main)
