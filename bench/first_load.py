"""A first load against one plain pass of the stock model over the same chunks, interleaved.

    python bench/first_load.py [--crawl supabase-guides-2026.json] [--rounds 5]
                               [--work /tmp/first-load] [--corpus ../shared/corpus]

The crawl is chunked once, as `firechunk chunk` does, into a data directory under `--work`
(kept, so a second invocation only times). Each round then times four things in turn (the
order rotates every round, so none always runs on a warmer machine):

- **load**: `load_run`, the function behind `firechunk load`, into an empty collection
  (the collection's rows are deleted, untimed, before each), with the local embedder as
  `firechunk load` builds it (intra-op threads not spinning); from the call to its
  return, the commit included;
- **load, spinning**: the same with onnxruntime's default, threads that spin while they
  wait (the embedder before it turned spinning off);
- **plain pass**: the stock int8 MiniLM, the shipped file run as exported
  (`shipped_local_embedder`, onnxruntime's defaults), once over each chunk's embedded
  text (breadcrumb and text, cut at 256 word pieces; navigation chunks left out, as the
  loader leaves them out): the yardstick;
- **plain pass, no spinning**: the same with spinning off, to tell what the setting
  gives from what fewer or cheaper windows give.

Each round's ratios to that round's plain pass, in wall time and in this process's CPU
time, are printed, then their medians, the windows a chunk is read as, and the 1-minute
load average: on a shared machine only ratios of one run compare. Wall time is what an
operator waits; CPU time is the work, less swayed by the neighbours (but a spinning thread
counts as working). Every model is built and warmed up before the first round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from retrieval import DEFAULT_CORPUS  # noqa: E402

from firechunk import embedder_model  # noqa: E402
from firechunk.db.connect import connect  # noqa: E402
from firechunk.db.load import load_run  # noqa: E402
from firechunk.db.runs import PublishedRun, published_run  # noqa: E402
from firechunk.db.schema import CHUNKS, SYNC, migrate  # noqa: E402
from firechunk.embedders import (  # noqa: E402
    LocalEmbedder,
    _minilm_file,
    _session_options,
    local_embedder,
    shipped_local_embedder,
)
from firechunk.layout import DataDir  # noqa: E402
from firechunk.pipeline import Request, run_pipeline  # noqa: E402
from firechunk.settings import RunSettings  # noqa: E402


def chunked(crawl: Path, work: Path) -> PublishedRun:
    """The crawl's published run, chunked into its own data directory the first time."""
    data_dir = work / crawl.stem
    if not DataDir(data_dir).latest.exists():
        settings = RunSettings(collection=crawl.stem)
        night = run_pipeline(Request(run=settings, replay=crawl, data_dir=data_dir))
        if night.result is None or not night.result.published:
            raise SystemExit(f"{crawl.name}: the run was not published ({night.outcome})")
    return published_run(data_dir, collection=crawl.stem)


def emptied(conn, collection: str) -> None:
    """The collection gone from the database (its vectors go with its rows)."""
    conn.execute(f"delete from {CHUNKS} where collection = %s", [collection])
    conn.execute(f"delete from {SYNC} where collection = %s", [collection])


Timing = tuple[float, float]  # (wall seconds, this process's CPU seconds)


def first_load(conn, run: PublishedRun, embedder: LocalEmbedder) -> Timing:
    emptied(conn, run.collection)
    started, cpu = time.perf_counter(), time.process_time()
    result = load_run(conn, run, embedder, say=lambda line: None)
    timing = time.perf_counter() - started, time.process_time() - cpu
    if result.inserted != len(run.chunks):
        raise SystemExit(f"the first load inserted {result.inserted} of {len(run.chunks)}")
    return timing


def plain_pass(stock: LocalEmbedder, texts: list[str]) -> Timing:
    started, cpu = time.perf_counter(), time.process_time()
    stock.embed(texts)
    return time.perf_counter() - started, time.process_time() - cpu


def load_average() -> float:
    return os.getloadavg()[0]


def spinning_twin(embedder: LocalEmbedder, source: bytes | str, spinning: bool) -> LocalEmbedder:
    """The same model and tokenizer in a session of its own whose intra-op threads spin
    (or not): only that setting differs."""
    import onnxruntime

    options = _session_options(onnxruntime, spinning=spinning)
    session = onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    return LocalEmbedder(
        session, embedder.tokenizer, embedder.tokenizer_path, embedder.batch_size,
        run_tokens=embedder.run_tokens, model=embedder.model,
    )  # fmt: skip


def contenders(run: PublishedRun, conn, texts: list[str]) -> dict[str, Callable[[], Timing]]:
    """Each timed thing by name, every model built and warmed up."""
    embedder, stock = local_embedder(), shipped_local_embedder()
    graph = embedder_model.cached_graph(*_minilm_file(), None)
    spinning = spinning_twin(embedder, graph, spinning=True)
    quiet_stock = spinning_twin(stock, str(_minilm_file()[0]), spinning=False)
    for model in (embedder, spinning, stock, quiet_stock):  # a session's first runs allocate
        model.embed(texts[:32])
    return {
        "load": lambda: first_load(conn, run, embedder),
        "load, spinning": lambda: first_load(conn, run, spinning),
        "plain pass": lambda: plain_pass(stock, texts),
        "plain pass, no spinning": lambda: plain_pass(quiet_stock, texts),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--crawl", default="supabase-guides-2026.json")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/first-load"))
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    run = chunked(args.corpus / args.crawl, args.work)
    embedded = [chunk for chunk in run.chunks if not chunk.navigation]
    texts = [chunk.embedded_text for chunk in embedded]
    with connect(None, args.work) as conn:
        conn.autocommit = True
        things = contenders(run, conn, texts)
        windows = sum(len(local_embedder().windows(c.heading, c.text)) for c in embedded)
        print(f"{args.crawl}: {len(run.chunks)} chunks, {len(texts)} embedded, {windows} "
              f"windows ({windows / len(texts):.2f} a chunk)", flush=True)  # fmt: skip
        migrate(conn, 384)
        timings: dict[str, list[Timing]] = {name: [] for name in things}
        for round_ in range(args.rounds):
            before = load_average()
            for name in list(things)[round_ % 4 :] + list(things)[: round_ % 4]:
                timings[name].append(things[name]())
            print(f"round {round_ + 1} (load average {before:.1f}-{load_average():.1f}):")
            for name in things:
                (wall, cpu), (plain_wall, plain_cpu) = timings[name][-1], timings["plain pass"][-1]
                print(f"  {name:<24} {wall:7.1f} s wall ({wall / plain_wall:.3f}x), {cpu:7.1f} s "
                      f"CPU ({cpu / plain_cpu:.3f}x)", flush=True)  # fmt: skip
    print("medians, x the same round's plain pass:")
    for name, times in timings.items():
        pairs = list(zip(times, timings["plain pass"], strict=True))
        wall = statistics.median(t[0] / p[0] for t, p in pairs)
        cpu = statistics.median(t[1] / p[1] for t, p in pairs)
        seconds = statistics.median(t[0] for t in times)
        print(f"  {name:<24} {seconds:7.1f} s wall: {wall:.3f}x wall, {cpu:.3f}x CPU")


if __name__ == "__main__":
    main()
