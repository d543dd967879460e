"""The local embedder cut to its first K transformer layers: search quality and CPU cost.

    python bench/model_layers.py [--layers 6 5 4 3] [--work /tmp/layers] [--rounds 3]
                                 [--windows N]

A K-layer model is all-MiniLM-L6-v2's int8 graph (`firechunk/embedder_model.py`) built with
only layers 0..K-1 (its `LAYERS` set to K while the graph is built, into a cache directory
of its own, `--work`/graph-K), mean-pooled as today. Nothing is retrained.

Quality: as bench/window_policies.py measures a policy (its `PolicyEmbedder`, the
`shipped` windows, vectors kept by text per K), and with bench/search_quality.py's
functions: the crawls the questions name are chunked and loaded into one embedded Postgres
under `--work`, a K at a time (each K a model name of its own, so the loader embeds the
collections again), and both halves of bench/questions.jsonl are asked: MRR@10 of the
product search and of its vector side.

Cost: process CPU time (`time.process_time`, every thread of the process) and wall time to
embed the same windows (the shipped windows of supabase-guides-2026's chunks, or the first
`--windows` of them) with each K, `--rounds` rounds with the Ks in alternating order;
medians, and the CPU ratio to the first K given (6 by default).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_quality  # noqa: E402
from retrieval import DEFAULT_CORPUS, load_questions  # noqa: E402
from window_policies import PolicyEmbedder  # noqa: E402

from firechunk import embedder_model  # noqa: E402
from firechunk.db.connect import connect  # noqa: E402
from firechunk.db.runs import published_run  # noqa: E402
from firechunk.db.search import RRF_K, TEXT_WEIGHT, VECTOR_WEIGHT, Fusion  # noqa: E402
from firechunk.embedders import LocalEmbedder, local_embedder  # noqa: E402

SHIPPED_LAYERS = embedder_model.LAYERS
COST_CRAWL = "supabase-guides-2026"


def k_layer_embedder(layers: int, work: Path) -> LocalEmbedder:
    """The local embedder on a graph of the first `layers` layers, cached in a folder of
    its own (the cache file's name does not say how many layers it has)."""
    cache_dir = work / f"graph-{layers}"
    embedder_model.LAYERS = layers
    try:
        embedder = local_embedder(cache_dir=cache_dir)
    finally:
        embedder_model.LAYERS = SHIPPED_LAYERS
    attention = graph_attention_layers(cache_dir)
    if attention != layers:
        raise SystemExit(f"{cache_dir}: the graph has {attention} attention layers, not {layers}")
    embedder.model = f"{embedder.model}, first {layers} of {SHIPPED_LAYERS} layers"
    return embedder


def graph_attention_layers(cache_dir: Path) -> int:
    """MultiHeadAttention nodes (one a layer) in the graph cached under `cache_dir`."""
    import onnx

    (path,) = cache_dir.glob(f"{embedder_model.CACHE_GLOB}.onnx")
    graph = onnx.load(str(path), load_external_data=False).graph
    return sum(node.op_type == "MultiHeadAttention" for node in graph.node)


def quality(
    embedders: dict[int, LocalEmbedder], work: Path
) -> dict[tuple[int, str], tuple[float, float]]:
    """MRR@10 (search, vector side) per (K, split), as bench/window_policies.py scores a
    policy, with the `shipped` windows."""
    fusion = Fusion(rrf_k=RRF_K, vector_weight=VECTOR_WEIGHT, text_weight=TEXT_WEIGHT)
    questions = search_quality.ROOT / "bench" / "questions.jsonl"
    scores: dict[tuple[int, str], tuple[float, float]] = {}
    with connect(None, work) as conn:
        conn.autocommit = True
        for layers, inner in embedders.items():
            embedder = PolicyEmbedder("shipped", inner, cache={})
            embedder.model = inner.model  # a model name per K: the loader embeds again
            for split in ("tune", "held"):
                asked = load_questions(questions, split)
                rows = {
                    crawl: search_quality.chunk_and_load(
                        DEFAULT_CORPUS / crawl, work, conn, embedder
                    )
                    for crawl in sorted({q.corpus for q in asked})
                }
                judged = [search_quality.judge(conn, embedder, q, rows[q.corpus]) for q in asked]
                search = search_quality.figures(judged, fusion)["mrr@10"]
                vector = search_quality.figures(judged, None, "vector")["mrr@10"]
                scores[layers, split] = (search, vector)
                print(f"K={layers} {split}: MRR@10 search {search:.3f}, vector side {vector:.3f}")
    return scores


def cost_windows(work: Path, embedder: LocalEmbedder, limit: int | None) -> list[str]:
    """The windows the loader embeds for the cost crawl's chunks (chunked by `quality`)."""
    run = published_run(work / COST_CRAWL, collection=COST_CRAWL)
    windows = [
        window
        for chunk in run.chunks
        if not chunk.navigation
        for window in embedder.windows(chunk.heading, chunk.text)
    ]
    return windows[:limit]


def cost(
    embedders: dict[int, LocalEmbedder], windows: list[str], rounds: int
) -> dict[int, tuple[float, float]]:
    """Median (CPU seconds, wall seconds) to embed `windows` per K, the Ks in alternating
    order round by round."""
    order = list(embedders)
    for embedder in embedders.values():
        embedder.embed(windows[:64])  # warm: the arena grows on the first runs
    times: dict[int, list[tuple[float, float]]] = {layers: [] for layers in order}
    for round_ in range(rounds):
        for layers in order if round_ % 2 == 0 else order[::-1]:
            cpu, wall = time.process_time(), time.perf_counter()
            embedders[layers].embed(windows)
            times[layers].append((time.process_time() - cpu, time.perf_counter() - wall))
            print(f"round {round_ + 1} K={layers}: CPU {times[layers][-1][0]:.1f} s", flush=True)
    return {
        layers: (statistics.median(c for c, _ in runs), statistics.median(w for _, w in runs))
        for layers, runs in times.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[6, 5, 4, 3])
    parser.add_argument("--work", type=Path, default=Path("/tmp/layers"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--windows", type=int, default=None, help="at most this many")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    embedders = {layers: k_layer_embedder(layers, args.work) for layers in args.layers}
    scores = quality(embedders, args.work)
    base = args.layers[0]
    windows = cost_windows(args.work, embedders[base], args.windows)
    sample = windows[:200]
    reference = embedders[base].embed(sample)
    cosine = {
        k: float(np.mean(np.sum(e.embed(sample) * reference, axis=1))) for k, e in embedders.items()
    }
    print(f"load average before the cost rounds: {os.getloadavg()}")
    spent = cost(embedders, windows, args.rounds)
    print(f"load average after: {os.getloadavg()}")
    print(
        f"\n{'K':>2} {'windows':>7} {'CPU s':>7} {'ratio':>6} {'wall s':>7} {'cos':>6}"
        f"  {'search tune':>11} {'held':>6}  {'vector tune':>11} {'held':>6}"
    )
    for layers in args.layers:
        (cpu, wall), ratio = spent[layers], spent[layers][0] / spent[base][0]
        tune, held = scores[layers, "tune"], scores[layers, "held"]
        print(
            f"{layers:>2} {len(windows):>7} {cpu:>7.1f} {ratio:>6.2f} {wall:>7.1f}"
            f" {cosine[layers]:>6.3f}  {tune[0]:>11.3f} {held[0]:>6.3f}"
            f"  {tune[1]:>11.3f} {held[1]:>6.3f}"
        )
    print(f"(cos: mean cosine with K={base}'s vectors on {len(sample)} of the windows)")


if __name__ == "__main__":
    main()
