"""The local embedder's int8 graph against the shipped one, side by side: speed, memory,
agreement, first build.

Texts: the markdown of the pages in `../shared/corpus/*.json` cut into pieces of 3,000
characters (about 800 word pieces, so every one fills the model's 256), the pieces shorter
than 1,500 characters dropped, `--texts` of them taken evenly across the corpus.

In one invocation:

1. **speed**: both embedders (`local_embedder()` and `shipped_local_embedder()`, the
   shipped file run as exported, as the local embedder did before its own graph) built in
   this process, one warm-up batch each, then `--passes` passes over the texts, the two
   taking turns every 32 texts (one batch) so that both meet the same load; per pass and
   embedder the wall and CPU seconds of its turns, summed; medians and their ratio;
2. **agreement**: the cosine of each text's two vectors (new against shipped), and whether
   the int8 graph gives a text the same vector alone as in its batch;
3. **memory**: each embedder built in a fresh process that embeds `--rss-texts` texts;
   the peak resident set of that process (VmHWM). The int8 graph is built there with
   an empty cache directory, as on a first load, and again with the cache warm;
4. **first build**: the seconds `local_embedder()` takes with an empty cache (graph built
   and written) and with a warm one (read and its sha256 checked), in fresh processes.

Run: `python bench/embedder_speed.py [--texts 300] [--passes 3] [--rss-texts 400]` in the
venv. The report goes to stdout, progress to stderr. The embedder's speed follows the free
cores: `uptime` is printed before and after.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from firechunk.embedders import LocalEmbedder, local_embedder, shipped_local_embedder

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
PIECE_CHARS = 3000
MIN_PIECE_CHARS = 1500
SLICE = 32  # texts each embedder embeds before the other takes its turn
BUILDERS: dict[str, Callable[[], LocalEmbedder]] = {
    "shipped": shipped_local_embedder,
    "int8": local_embedder,
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def corpus_texts(count: int, corpus: Path = CORPUS) -> list[str]:
    """`count` pieces of 3,000 characters, taken evenly from the corpus's pages."""
    pieces = []
    for path in sorted(corpus.glob("*.json")):
        for page in json.loads(path.read_text(encoding="utf-8")).get("data", []):
            markdown = page.get("markdown") or ""
            for start in range(0, len(markdown), PIECE_CHARS):
                piece = markdown[start : start + PIECE_CHARS]
                if len(piece) >= MIN_PIECE_CHARS:
                    pieces.append(piece)
    if len(pieces) < count:
        raise SystemExit(f"{corpus}: {len(pieces)} pieces, fewer than {count}")
    step = len(pieces) / count
    return [pieces[int(n * step)] for n in range(count)]


def uptime() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


# ---------------------------------------------------------------------------------------
# Speed and agreement, in this process
# ---------------------------------------------------------------------------------------


def timed(embedder: LocalEmbedder, texts: Sequence[str]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    embedder.embed(texts)
    return time.perf_counter() - wall, time.process_time() - cpu


def speed(embedders: dict[str, LocalEmbedder], texts: list[str], passes: int) -> dict:
    """Passes over the texts, the embedders taking turns every SLICE texts so that both
    see the same load on a shared machine; per embedder the median pass (wall and CPU
    seconds, summed over its slices) and chunks/s."""
    for embedder in embedders.values():
        embedder.embed(texts[: embedder.batch_size])  # warm-up: the first run allocates
    walls: dict[str, list[float]] = {name: [] for name in embedders}
    cpus: dict[str, list[float]] = {name: [] for name in embedders}
    for n in range(passes):
        wall = dict.fromkeys(embedders, 0.0)
        cpu = dict.fromkeys(embedders, 0.0)
        for start in range(0, len(texts), SLICE):
            for name, embedder in embedders.items():
                seconds = timed(embedder, texts[start : start + SLICE])
                wall[name] += seconds[0]
                cpu[name] += seconds[1]
        for name in embedders:
            walls[name].append(wall[name])
            cpus[name].append(cpu[name])
            log(f"pass {n + 1}/{passes} {name}: {wall[name]:.2f} s wall, {cpu[name]:.2f} s CPU")
    return {
        name: {
            "walls": walls[name],
            "wall": statistics.median(walls[name]),
            "cpu": statistics.median(cpus[name]),
            "chunks_per_s": len(texts) / statistics.median(walls[name]),
        }
        for name in embedders
    }


def agreement(embedders: dict[str, LocalEmbedder], texts: list[str]) -> dict:
    """Cosine of the int8 graph's vectors with the shipped graph's; alone against batched."""
    new, old = embedders["int8"].embed(texts), embedders["shipped"].embed(texts)
    cosines = (new * old).sum(axis=1)
    alone = np.stack([embedders["int8"].embed([text])[0] for text in texts[:16]])
    return {
        "min": float(cosines.min()),
        "median": float(np.median(cosines)),
        "alone_vs_batched_max_abs": float(np.abs(alone - new[:16]).max()),
    }


# ---------------------------------------------------------------------------------------
# Memory and first build, in fresh processes
# ---------------------------------------------------------------------------------------


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM). Not ru_maxrss: a child that subprocess
    starts with vfork carries its parent's peak across exec in it."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(args: argparse.Namespace) -> None:
    """Run inside a fresh process: build one embedder, maybe embed, print JSON."""
    cache = Path(args.cache_dir) if args.cache_dir else None
    texts = corpus_texts(args.rss_texts) if args.embed else []
    started = time.perf_counter()
    build = functools.partial(local_embedder, cache_dir=cache)
    embedder = (build if args.child == "int8" else shipped_local_embedder)()
    built = time.perf_counter() - started
    built_rss = peak_rss_mb()
    embedder.embed(texts)
    peak = peak_rss_mb()
    print(json.dumps({"build_s": built, "built_rss_mb": built_rss, "peak_rss_mb": peak}))


def in_fresh_process(name: str, args: argparse.Namespace, cache: Path | None, embed: bool) -> dict:
    command = [sys.executable, __file__, "--child", name, "--rss-texts", str(args.rss_texts)]
    if cache is not None:
        command += ["--cache-dir", str(cache)]
    if embed:
        command.append("--embed")
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def memory_and_build(args: argparse.Namespace) -> dict:
    """Peak RSS for each embedder embedding --rss-texts texts (int8: cache cold, then
    warm); first-build seconds with a cold cache and a warm one."""
    figures = {}
    with tempfile.TemporaryDirectory() as folder:
        cache = Path(folder)
        figures["int8, cache cold"] = in_fresh_process("int8", args, cache, embed=True)
        figures["int8, cache warm"] = in_fresh_process("int8", args, cache, embed=True)
        figures["shipped"] = in_fresh_process("shipped", args, None, embed=True)
    with tempfile.TemporaryDirectory() as folder:
        cache = Path(folder)
        figures["build cold"] = in_fresh_process("int8", args, cache, embed=False)
        figures["build warm"] = in_fresh_process("int8", args, cache, embed=False)
    figures["build shipped"] = in_fresh_process("shipped", args, None, embed=False)
    return figures


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------


def report(texts: list[str], timings: dict, agree: dict, memory: dict, loads: list[str]) -> None:
    tokens = [len(local_embedder().tokenize(text)) for text in texts]
    print(f"{len(texts)} texts, median {statistics.median(tokens):.0f} word pieces read")
    print(f"load average before {loads[0]}, after {loads[1]}\n")
    print("| graph | wall s (median) | passes | CPU s | chunks/s |\n|---|---:|---|---:|---:|")
    for name, row in timings.items():
        passes = ", ".join(f"{wall:.2f}" for wall in row["walls"])
        print(
            f"| {name} | {row['wall']:.2f} | {passes} | {row['cpu']:.2f} "
            f"| {row['chunks_per_s']:.1f} |"
        )
    ratio = timings["shipped"]["wall"] / timings["int8"]["wall"]
    cpu_ratio = timings["shipped"]["cpu"] / timings["int8"]["cpu"]
    print(f"\nint8 graph: {ratio:.2f}x the shipped graph's chunks/s ({cpu_ratio:.2f}x in CPU s)")
    print(
        f"cosine(int8, shipped): min {agree['min']:.4f}, median {agree['median']:.4f}; "
        f"alone against batched, largest difference {agree['alone_vs_batched_max_abs']:.1e}\n"
    )
    print("| process | build s | RSS after build MB | peak RSS MB |\n|---|---:|---:|---:|")
    for name, row in memory.items():
        print(
            f"| {name} | {row['build_s']:.2f} | {row['built_rss_mb']:.0f} "
            f"| {row['peak_rss_mb']:.0f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=300, help="texts for speed and agreement")
    parser.add_argument("--passes", type=int, default=3, help="timed passes per embedder")
    parser.add_argument("--rss-texts", type=int, default=400, help="texts embedded for memory")
    parser.add_argument("--child", choices=sorted(BUILDERS), help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", help=argparse.SUPPRESS)
    parser.add_argument("--embed", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    loads = [uptime()]
    texts = corpus_texts(args.texts)
    embedders = {name: build() for name, build in BUILDERS.items()}
    timings = speed(embedders, texts, args.passes)
    agree = agreement(embedders, texts)
    del embedders
    log("memory and first build, in fresh processes")
    memory = memory_and_build(args)
    loads.append(uptime())
    report(texts, timings, agree, memory, loads)


if __name__ == "__main__":
    main()
