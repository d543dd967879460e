"""The openai embedder's throughput against an API with latency, by concurrency, beside
the local embedder in this process on the same texts.

An embeddings API spends most of a request's time on the network and in its queue, not on
this machine: the openai embedder's speed is requests in flight over latency. The server is
the tests' fake (`tests/test_embedders.py`, OpenAI's request and answer shapes on
127.0.0.1) made to answer each request after `--latency` seconds, as a real API's round
trip. The texts are chunk-sized: `--texts` pieces of 1,500 characters of a made-up page.

Run: `python bench/openai_throughput.py [--texts 512] [--batch 32] [--latency 0.3]` in
the venv. Prints texts per second for each concurrency, and the local embedder's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' fake server

from firechunk.embedders import local_embedder, openai_embedder  # noqa: E402
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


def local_rate(corpus: list[str]) -> float:
    embedder = local_embedder()
    embedder.embed(corpus[:32])  # warm-up
    started = time.perf_counter()
    embedder.embed(corpus)
    return len(corpus) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    corpus = texts(args.texts)
    print(f"load average {os.getloadavg()[0]:.1f}; {args.texts} texts, batch {args.batch}")
    print(f"fake API latency {args.latency} s per request\n")
    print("| embedder | texts/s (median) | × concurrency 1 |")
    print("|---|---:|---:|")
    base = 0.0
    for concurrency in (1, 2, 4, 8):
        rates = [
            openai_rate(corpus, args.batch, args.latency, concurrency) for _ in range(args.repeat)
        ]
        rate = statistics.median(rates)
        base = base or rate
        print(f"| openai, concurrency {concurrency} | {rate:.0f} | {rate / base:.2f} |")
    rate = statistics.median(local_rate(corpus) for _ in range(args.repeat))
    print(f"| local (one process) | {rate:.0f} | {rate / base:.2f} |")


if __name__ == "__main__":
    main()
