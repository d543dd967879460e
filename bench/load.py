"""Loading a 5,000-page replay into Postgres + pgvector, then a 1 %-changed night: time.

    python bench/load.py [--pages 5000] [--changed 0.01] [--workers 2] [--batch-size 32]
                         [--sample 500] [--repeat 3] [--budget 120] [--json PATH]
                         [--keep DIR]

The replay is `bench/scale.py`'s (imported from it, not copied): `--pages` pages cycled
from the distinct pages of `../shared/corpus/`, each with a URL and a made-up word of its
own, and a second crawl with `--changed` of the pages changed (80 % edited, 10 % removed,
10 % added). Both crawls are chunked without Prefect, as `firechunk chunk` does
(`firechunk.pipeline.run_pipeline` on `--workers` processes), into one data
directory, so the second run's baseline is the first. The database is the embedded
PostgreSQL 18 + pgvector that `firechunk load` starts under the data directory when no
URL is given; it starts empty and is stopped at the end.

In one invocation, in this order:

1. throughput: the local embedder (all-MiniLM-L6-v2 int8 ONNX on the CPU, `--batch-size`
   texts a batch) on a fixed sample of `--sample` chunks of the full run, the text the
   loader embeds (`RunChunk.embedded_text`). One untimed warm-up batch, then up to
   `--repeat` timed passes over the whole sample (fewer once they have spent
   `--budget` seconds; the count is printed); the median pass gives chunks/s and cl100k
   tokens/s (the chunks' `token_count`). The model reads at most 256 word pieces a text,
   so the share of sample chunks cut there is printed too: their tail is not embedded.
2. full load: the full run into the empty database, `load_run` as `firechunk load` calls
   it. Its wall time is split into the embedder's calls (timed by a thin wrapper that
   hands every call to the real embedder) and the rest, which is the database's: the
   diff, COPY, index upkeep and the commit.
3. changed load: the 1 %-changed run. Checked: it embeds exactly the chunk ids the new
   run has and the full run had not (from the two runs' chunks.json), and afterwards the
   database holds exactly the new run's ids.
4. again: the same run loaded a second time; checked: nothing changed, nothing embedded.
5. memory: a first load of a small run (the full run's first pages, about `--memory-chunks`
   chunks) into a new database, as `firechunk load` in a process of its own; its peak
   resident memory (VmHWM of that process) is what a first load costs whatever else the
   bench holds. Not ru_maxrss: subprocess starts the probe with vfork, and the child's
   ru_maxrss keeps the bench's own peak across exec.

A failed check exits with status 1. The seconds each chunking run took are printed as
context (they are `bench/scale.py`'s subject, not this bench's). The 1-minute load
average is noted before and after, since the embedder's speed depends on free cores.
Everything is built in a temporary directory, removed at the end unless `--keep DIR`
(then DIR, which must not exist yet, keeps the crawls, the runs and the stopped database).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType

import numpy as np
import orjson

from firechunk.atomic import write_json
from firechunk.db.connect import connect
from firechunk.db.load import LoadResult, load_run
from firechunk.db.runs import RunChunk, published_run
from firechunk.db.schema import CHUNKS
from firechunk.embedders import Embedder, local_embedder
from firechunk.layout import DataDir
from firechunk.pipeline import Request, run_pipeline
from firechunk.settings import RunSettings

BENCH_DIR = Path(__file__).resolve().parent
# A first load in a process of its own: the peak resident memory it reached, in kB.
_MEMORY_PROBE = """
import sys
from pathlib import Path
from firechunk.cli import app
try:
    app(["load", "--data-dir", sys.argv[1]])
except SystemExit as done:
    if done.code:
        raise
status = Path("/proc/self/status").read_text().splitlines()
print("peak_rss_kb", next(line.split()[1] for line in status if line.startswith("VmHWM:")))
"""


def main() -> int:
    args = parse_args()
    scale = import_scale()
    files = scale.corpus_files()
    if not files:
        return 0
    figures: dict = {"args": vars(args) | {"json": str(args.json), "keep": str(args.keep)}}
    figures["load_average_before"] = os.getloadavg()[0]
    started = time.perf_counter()
    with workspace(args.keep) as work:
        templates = scale.distinct_pages(files)
        full_crawl, changed_crawl, changes = scale.build_replays(templates, args, work)
        print(
            f"{len(templates)} distinct corpus pages -> {args.pages} pages; second crawl: "
            f"{changes['edited']} edited, {changes['removed']} removed, {changes['added']} added",
            flush=True,
        )
        data_dir = work / "data"
        figures["chunking"] = [
            chunk_run("full", full_crawl, data_dir, args.workers),
            chunk_run("changed", changed_crawl, data_dir, args.workers),
        ]
        figures.update(measure_loads(data_dir, args))
        figures["memory"] = first_load_memory(full_crawl, data_dir, work, args.memory_chunks)
    figures["bench_seconds"] = round(time.perf_counter() - started, 1)
    figures["load_average_after"] = os.getloadavg()[0]
    print_report(figures, args)
    if args.json:
        write_json(args.json, figures)
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=5000)
    parser.add_argument("--changed", type=float, default=0.01, help="share of pages changed")
    parser.add_argument("--workers", type=int, default=2, help="chunking processes")
    parser.add_argument("--batch-size", type=int, default=32, help="texts per embedder batch")
    parser.add_argument("--sample", type=int, default=500, help="chunks in the throughput sample")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes over the sample")
    parser.add_argument(
        "--budget", type=float, default=120.0, help="seconds after which passes stop repeating"
    )
    parser.add_argument(
        "--memory-chunks", type=int, default=400, help="chunks of the memory probe's run"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--keep", type=Path, help="build in this new directory and keep it")
    return parser.parse_args()


def import_scale() -> ModuleType:
    """`bench/scale.py`, whose replay this bench loads: one replay for both benches."""
    if str(BENCH_DIR) not in sys.path:
        sys.path.insert(0, str(BENCH_DIR))
    import scale

    return scale


@contextlib.contextmanager
def workspace(keep: Path | None) -> Iterator[Path]:
    """A temporary directory removed at the end, or `keep`, created new and kept."""
    if keep is not None:
        if keep.exists():  # it could hold an older database, and the first load needs none
            raise SystemExit(f"--keep {keep}: already exists; name a new directory")
        keep.mkdir(parents=True)
        yield keep.resolve()
        return
    with tempfile.TemporaryDirectory(prefix="load-bench-") as scratch:
        yield Path(scratch)


# --- chunking (context, not the subject) ---------------------------------------------------


def chunk_run(run_id: str, crawl: Path, data_dir: Path, workers: int) -> dict:
    """One run as `firechunk chunk` makes it, published as `data_dir/latest`."""
    started = time.perf_counter()
    settings = RunSettings(workers=workers)
    night = run_pipeline(Request(run=settings, replay=crawl, data_dir=data_dir, run_id=run_id))
    written, outcome, result = night.written, night.outcome, night.result
    assert written is not None and outcome is not None
    seconds = time.perf_counter() - started
    if not (outcome.success and result is not None and result.published):
        raise SystemExit(f"run {run_id} was not published: {outcome}")
    print(f"chunked {run_id}: {written.report.chunks_out} chunks, {seconds:.1f} s", flush=True)
    return {"run": run_id, "seconds": round(seconds, 2), "chunks": written.report.chunks_out}


def run_ids(data_dir: Path, run_id: str) -> set[str]:
    """The chunk ids of a run, read from its chunks.json, independently of the loader."""
    rows = orjson.loads(DataDir(data_dir).run(run_id).chunks_json.read_bytes())
    return {row["chunk_id"] for row in rows}


def say(text: str) -> None:
    """The loader's messages, flushed so they land in order with the bench's own lines."""
    print(text, flush=True)


def progress_lines() -> Callable[[int, int], None]:
    """A progress callback that prints a line at every tenth of the texts, so a long load
    shows it is moving and at what pace."""
    printed = 0

    def progress(done: int, total: int) -> None:
        nonlocal printed
        step = max(1, total // 10)
        if done == total or done // step > printed // step:
            printed = done
            print(f"  embedded {done:,} of {total:,} ({time.strftime('%H:%M:%S')})", flush=True)

    return progress


# --- the embedder --------------------------------------------------------------------------


class TimedEmbedder:
    """The real embedder, with the time spent in its calls and the texts it was given
    counted, so a load's seconds split into embedding and the database's share."""

    def __init__(self, inner: Embedder):
        self.inner = inner
        self.model = inner.model
        self.dimensions = inner.dimensions
        self.seconds = 0.0
        self.cpu_seconds = 0.0  # this process's, all threads: about 2x seconds on 2 free cores
        self.texts = 0  # windows: a chunk longer than the model reads is several

    def windows(self, heading: str, text: str) -> list[str]:
        return self.inner.windows(heading, text)

    def embed(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        started, cpu = time.perf_counter(), time.process_time()
        try:
            return self.inner.embed(texts, progress)
        finally:
            self.seconds += time.perf_counter() - started
            self.cpu_seconds += time.process_time() - cpu
            self.texts += len(texts)

    def reset(self) -> None:
        self.seconds, self.cpu_seconds, self.texts = 0.0, 0.0, 0


def throughput(embedder, chunks: Sequence[RunChunk], args: argparse.Namespace) -> dict:
    """Median pass of the embedder over a fixed sample of the run's chunks."""
    sample = random.Random(16).sample(list(chunks), min(args.sample, len(chunks)))
    texts = [chunk.embedded_text for chunk in sample]
    embedder.embed(texts[: args.batch_size])  # warm-up: onnxruntime's first run allocates
    times: list[float] = []
    cpu: list[float] = []
    while len(times) < args.repeat and (not times or sum(times) < args.budget):
        started, cpu_started = time.perf_counter(), time.process_time()
        embedder.embed(texts)
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)
    seconds = statistics.median(times)
    tokens = sum(chunk.token_count for chunk in sample)
    pieces = [embedder.tokenizer.encode(text) for text in texts]
    figures = {
        "chunks": len(texts),
        "passes": len(times),
        "pass_seconds": [round(t, 2) for t in times],
        "pass_cpu_per_wall": [round(c / t, 2) for c, t in zip(cpu, times, strict=True)],
        "seconds": round(seconds, 2),
        "chunks_per_second": round(len(texts) / seconds, 1),
        "tokens_per_second": round(tokens / seconds),
        "median_tokens": statistics.median(chunk.token_count for chunk in sample),
        "word_pieces_per_second": round(sum(len(p.ids) for p in pieces) / seconds),
        "cut_at_256_word_pieces": round(sum(bool(p.overflowing) for p in pieces) / len(texts), 3),
    }
    print(
        f"throughput: {figures['chunks_per_second']} chunks/s, "
        f"{figures['tokens_per_second']} tokens/s (median of {len(times)} passes)",
        flush=True,
    )
    return figures


# --- loading -------------------------------------------------------------------------------


def measure_loads(data_dir: Path, args: argparse.Namespace) -> dict:
    """Throughput and the three loads with their checks, on one database."""
    embedder = TimedEmbedder(local_embedder(args.batch_size))
    full = published_run(data_dir, "full")
    figures: dict[str, object] = {"throughput": throughput(embedder.inner, full.chunks, args)}
    full_ids, changed_ids = run_ids(data_dir, "full"), run_ids(data_dir, "changed")
    with connect(None, data_dir) as conn:
        conn.autocommit = True
        figures["database"] = database_facts(conn)
        first = load(conn, data_dir, "full", embedder, "first load (empty database)")
        check_load(conn, first, full_ids, embedded=len(full_ids))
        night = f"{args.changed:.0%}-changed night"
        second = load(conn, data_dir, "changed", embedder, night)
        check_load(conn, second, changed_ids, embedded=len(changed_ids - full_ids))
        third = load(conn, data_dir, "changed", embedder, "same run again")
        check_load(conn, third, changed_ids, embedded=0)
        if third["changed"]:
            raise SystemExit("loading the same run again changed the database")
        figures["loads"] = [first, second, third]
    figures["changes_json"] = change_counts(data_dir, full_ids, changed_ids)
    return figures


def load(conn, data_dir: Path, run_id: str, embedder: TimedEmbedder, label: str) -> dict:
    """One `load_run`, timed from its call to its return, the commit included; reading
    the run's chunks.json is timed apart."""
    embedder.reset()
    started = time.perf_counter()
    run = published_run(data_dir, run_id)
    read = time.perf_counter() - started
    result = load_run(conn, run, embedder, say=say, progress=progress_lines())
    seconds = time.perf_counter() - started - read
    figures = load_figures(label, result, seconds, read, embedder)
    print(
        f"{label}: {seconds:.1f} s ({figures['embed_seconds']:.1f} s embedding), "
        f"{result.inserted} inserted, {result.updated} updated, {result.deleted} deleted, "
        f"{result.embedded} embedded",
        flush=True,
    )
    return figures


def load_figures(
    label: str, result: LoadResult, seconds: float, read: float, embedder: TimedEmbedder
) -> dict:
    """The database's share is what is left of the load's wall time once the embedder's
    calls are taken out: diff, COPY, updates, deletes, index upkeep and the commit."""
    return {
        "load": label,
        "run": result.run_id,
        "chunks": result.chunks,
        "read_run_seconds": round(read, 2),
        "seconds": round(seconds, 2),
        "loader_seconds": result.seconds,
        "embed_seconds": round(embedder.seconds, 2),
        "embed_cpu_per_wall": round(embedder.cpu_seconds / embedder.seconds, 2)
        if embedder.seconds
        else None,
        "database_seconds": round(seconds - embedder.seconds, 2),
        "texts_embedded": embedder.texts,
        "inserted": result.inserted,
        "updated": result.updated,
        "deleted": result.deleted,
        "embedded": result.embedded,
        "changed": result.changed,
    }


def check_load(conn, figures: dict, wanted_ids: set[str], *, embedded: int) -> None:
    """The load embedded what it had to, and the database holds exactly the run's ids."""
    held = {row[0] for row in conn.execute(f"select chunk_id::text from {CHUNKS}")}
    problems = []
    if figures["embedded"] != embedded or (figures["texts_embedded"] > 0) != (embedded > 0):
        problems.append(
            f"embedded {figures['embedded']} chunks (the embedder saw "
            f"{figures['texts_embedded']} windows), not the {embedded} ids the run adds"
        )
    if held != wanted_ids:
        problems.append(
            f"the database holds {len(held - wanted_ids)} ids the run lacks and lacks "
            f"{len(wanted_ids - held)} of the run's {len(wanted_ids)}"
        )
    if problems:
        raise SystemExit(f"{figures['load']}: " + "; ".join(problems))


def change_counts(data_dir: Path, full_ids: set[str], changed_ids: set[str]) -> dict:
    """What the changed run's changes.json says against the ids the two runs differ by."""
    changes = json.loads(DataDir(data_dir).run("changed").changes_json.read_text())
    return {
        "upsert": len(changes["upsert"]),
        "delete": len(changes["delete"]),
        "new_ids": len(changed_ids - full_ids),
        "gone_ids": len(full_ids - changed_ids),
    }


def database_facts(conn) -> dict:
    """The server's version and the settings an index build depends on."""
    facts = {}
    for setting in ("server_version", "maintenance_work_mem", "max_parallel_maintenance_workers"):
        facts[setting] = conn.execute(f"show {setting}").fetchone()[0]
    facts["pgvector"] = conn.execute(
        "select extversion from pg_extension where extname = 'vector'"
    ).fetchone()[0]
    return facts


# --- memory of a first load ------------------------------------------------------------


def first_load_memory(full_crawl: Path, data_dir: Path, work: Path, chunks: int) -> dict:
    """The full crawl's first pages, up to about `chunks` chunks of the full run, chunked
    into a data directory of their own and loaded by `firechunk load` in a new process."""
    per_page: dict[str, int] = {}
    for row in orjson.loads(DataDir(data_dir).run("full").chunks_json.read_bytes()):
        url = row["metadata"]["sourceUrl"]
        per_page[url] = per_page.get(url, 0) + 1
    crawl = orjson.loads(full_crawl.read_bytes())
    kept, total = [], 0
    for page in crawl["data"]:
        if total >= chunks:
            break
        kept.append(page)
        total += per_page.get(page["metadata"]["sourceURL"], 0)
    small_crawl = work / "memory-crawl.json"
    small_crawl.write_bytes(orjson.dumps({**crawl, "data": kept}))
    small_dir = work / "memory"
    chunk_run("memory", small_crawl, small_dir, 1)
    done = subprocess.run(
        [sys.executable, "-c", _MEMORY_PROBE, str(small_dir)],
        capture_output=True,
        text=True,
        check=True,
    )
    peak = int(done.stdout.split("peak_rss_kb")[-1])
    figures = {"chunks": len(run_ids(small_dir, "memory")), "peak_rss_mb": round(peak / 1024)}
    print(f"memory: first load of {figures['chunks']} chunks peaked at {figures['peak_rss_mb']} MB")
    return figures


# --- report --------------------------------------------------------------------------------


def table_row(row: dict) -> str:
    """One load as a markdown row; embedded/s is left blank when nothing was embedded."""
    per_second = f"{row['embedded'] / row['embed_seconds']:.1f}" if row["embedded"] else ""
    cells = [
        row["load"], f"{row['chunks']:,}", f"{row['seconds']:.1f}",
        f"{row['embed_seconds']:.1f}",
        f"{row['embed_cpu_per_wall']:.2f}" if row["embed_cpu_per_wall"] else "",
        f"{row['database_seconds']:.1f}",
        f"{row['inserted']:,}", f"{row['updated']:,}", f"{row['deleted']:,}",
        f"{row['embedded']:,}", per_second,
    ]  # fmt: skip
    return "| " + " | ".join(cells) + " |"


def print_report(figures: dict, args: argparse.Namespace) -> None:
    """A markdown table of the loads, then the other figures on lines of their own."""
    rate = figures["throughput"]
    print()
    print(
        f"load of {args.pages} pages ({args.changed:.0%} changed), batch size "
        f"{args.batch_size}, {os.cpu_count()} CPUs; 1-minute load average "
        f"{figures['load_average_before']:.2f} before, {figures['load_average_after']:.2f} "
        f"after; the whole bench {figures['bench_seconds']:.0f} s"
    )
    print()
    print(
        "| load | chunks | wall s | embedding s | embedding CPU/wall | database s | inserted "
        "| updated | deleted | embedded | embedded/s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in figures["loads"]:
        print(table_row(row))
    print()
    for row in figures["loads"]:
        print(
            f"{row['load']}: reading the run {row['read_run_seconds']:.2f} s (not in wall s); "
            f"the loader's own seconds {row['loader_seconds']:.2f} (wall s less the commit)"
        )
    print()
    print(
        f"embedder alone: {rate['chunks_per_second']} chunks/s, {rate['tokens_per_second']:,} "
        f"cl100k tokens/s, {rate['word_pieces_per_second']:,} word pieces/s (median of "
        f"{rate['passes']} passes over {rate['chunks']} chunks, median "
        f"{rate['median_tokens']} tokens; passes {rate['pass_seconds']} s, CPU / wall "
        f"{rate['pass_cpu_per_wall']}); "
        f"{rate['cut_at_256_word_pieces']:.1%} of them cut at 256 word pieces"
    )
    for run in figures["chunking"]:
        print(f"chunking {run['run']}: {run['seconds']:.1f} s, {run['chunks']:,} chunks")
    memory = figures["memory"]
    print(
        f"memory: a first load of {memory['chunks']} chunks in a process of its own peaked "
        f"at {memory['peak_rss_mb']} MB resident"
    )
    print(f"database: {figures['database']}")
    print(f"changes.json of the changed run: {figures['changes_json']}")


if __name__ == "__main__":
    sys.exit(main())
