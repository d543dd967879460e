"""Embedding throughput, side by side on the same texts: the openai embedder against an
API with latency, by concurrency; the local embedder in this process; the local embedder
spread over a local Dask cluster of `--workers` processes (`--task-runner dask`).

An embeddings API spends most of a request's time on the network and in its queue, not on
this machine: the openai embedder's speed is requests in flight over latency. The server is
the tests' fake (`tests/test_embedders.py`, OpenAI's request and answer shapes on
127.0.0.1) made to answer each request after `--latency` seconds, as a real API's round
trip. The texts are chunk-sized: `--texts` pieces of 1,500 characters of a made-up page.

The cluster is started once and warmed (each worker loads its model) before it is timed:
a load pays that start-up once, a few seconds.

Run: `python bench/embedding_throughput.py [--texts 512] [--batch 32] [--latency 0.3]` in
the venv. Prints texts per second of each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' fake server

from firechunk.cluster_embedder import ClusterEmbedder  # noqa: E402
from firechunk.embedders import Embedder, local_embedder, openai_embedder  # noqa: E402
from firechunk.run.executors import dask_client  # noqa: E402
from tests.test_embedders import KEY, Answer, FakeEmbeddings  # noqa: E402


def texts(count: int) -> list[str]:
    """Chunk-sized texts, each different."""
    sentence = "Message {n} waits in the queue until a worker leases it for {m} seconds. "
    return ["".join(sentence.format(n=n, m=m) for m in range(20))[:1500] for n in range(count)]


def openai_rate(corpus: list[str], batch: int, latency: float, concurrency: int) -> float:
    """Texts per second through the fake API, `concurrency` requests in flight."""
    answers = [Answer(delay=latency) for _ in range(len(corpus) // batch + 2)]
    with FakeEmbeddings(answers=answers) as server:
        embedder = openai_embedder(
            "text-embedding-test",
            base_url=server.base_url,
            api_key=KEY,
            batch_size=batch,
            dimensions=8,
            concurrency=concurrency,
        )
        started = time.perf_counter()
        embedder.embed(corpus)
        return len(corpus) / (time.perf_counter() - started)


def rate(embedder: Embedder, corpus: list[str]) -> float:
    """Texts per second of one pass, after a warm-up pass over a few."""
    embedder.embed(corpus[:64])
    started = time.perf_counter()
    embedder.embed(corpus)
    return len(corpus) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    corpus = texts(args.texts)
    print(f"load average {os.getloadavg()[0]:.1f}; {args.texts} texts, batch {args.batch}")
    print(f"fake API latency {args.latency} s per request\n")
    print("| embedder | texts/s (median) | × concurrency 1 |")
    print("|---|---:|---:|")
    base = 0.0
    for concurrency in (1, 2, 4, 8):
        runs = [
            openai_rate(corpus, args.batch, args.latency, concurrency) for _ in range(args.repeat)
        ]
        median = statistics.median(runs)
        base = base or median
        print(f"| openai, concurrency {concurrency} | {median:.0f} | {median / base:.2f} |")
    local = local_embedder()
    with dask_client(None, args.workers) as client:
        spread = ClusterEmbedder(local, client.scheduler.address, args.workers, part_texts=64)
        rates: dict[str, list[float]] = {"local": [], "cluster": []}
        for _ in range(args.repeat):  # taking turns, so both meet the same load
            rates["local"].append(rate(local, corpus))
            rates["cluster"].append(rate(spread, corpus))
    for name, label in (
        ("local", "local, one process"),
        ("cluster", f"local, Dask {args.workers} workers"),
    ):
        value = statistics.median(rates[name])
        print(f"| {label} | {value:.1f} | {value / base:.2f} |")


if __name__ == "__main__":
    main()
