"""The rebuild flow on the shared corpus with 1 and 2 chunking workers, side by side.

    python bench/rebuild_speed.py [--repeat 3] [--task-runner process|dask] [--pages N]
                                  [--json PATH]

Every crawl file of `../shared/corpus/` (relative to the repository root) is merged into one
crawl and rebuilt from that replay: load, chunk on N workers, validate, write, publish, the
whole `rebuild` flow with Prefect's ephemeral API (as `firechunk rebuild` runs it), full
(no pages reused from the run before). The corpus files are crawls of overlapping parts of
the site on different dates, so a URL can appear in several; a crawl never returns a URL
twice, so only its first occurrence is kept.

The merged corpus is 147 pages, about one second of chunking on one core, while the rest
of a rebuild (loading, validation, writing, publishing, Prefect's bookkeeping) takes
several: by Amdahl's law no number of workers can make that whole rebuild much faster.
`--pages N` rebuilds instead a replay of N distinct pages made from the corpus the way
`bench/scale.py` makes its 5,000 (each copy perturbed, so nothing is aliased or dropped as
a duplicate), where chunking is most of the work, as on the real site.

One untimed rebuild first starts the temporary Prefect API and warms imports; then each
repetition times 1 worker and 2 workers, in alternating order. The table shows medians
(and ranges) of the whole flow run, of its chunk step (task-runner start, batches, pool
shut-down, assembly), of validation and of the machine's busy CPU-seconds during the run
(every process: the flow's, its workers, Prefect's API server, anything else running), the
median of each round's own ratio, and a ceiling: the 1-worker time over the least time
the 2-worker run's CPU-seconds need on the machine's cores. No spreading of that work
beats the ceiling; only less work does. And Amdahl's bound: the speed-up if 2 workers
halved the 1-worker run's chunk step and the rest of the flow (loading, validation,
publishing, Prefect's bookkeeping) stayed as long as it was. The issue's target: 2 workers
at least 1.6x faster than 1 over the whole rebuild.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from firechunk.atomic import write_json
from firechunk.layout import RunDir
from firechunk.settings import RunSettings, TaskRunnerKind

ROOT = Path(__file__).resolve().parents[1]
CORPUS_DIR = ROOT.parent / "shared" / "corpus"
TARGET = 1.6


def main() -> int:
    args = parse_args()
    files = sorted(CORPUS_DIR.glob("*.json")) if CORPUS_DIR.is_dir() else []
    if not files:
        print(f"skipped: no shared corpus at {CORPUS_DIR} (it sits beside the repository)")
        return 0
    with tempfile.TemporaryDirectory(prefix="rebuild-bench-") as scratch:
        work = Path(scratch)
        # Prefect reads its settings when imported: a home of the bench's own, and time
        # for a fresh database to migrate.
        os.environ["PREFECT_HOME"] = str(work / "prefect-home")
        os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
        os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
        if args.pages:
            crawl_file = scaled_replay(files, args.pages, work / "scaled-crawl.json")
            print(f"{args.pages} distinct pages made from {len(files)} corpus files")
        else:
            crawl_file, pages, dropped = merge_corpus(files, work / "corpus-crawl.json")
            print(f"{len(files)} corpus files, {pages} pages ({dropped} repeated URLs left out)")
        results = measure(crawl_file, work / "data", args.repeat, args.task_runner)
    print_table(results, args.repeat, args.task_runner, args.pages)
    if args.json:
        write_json(args.json, results)
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per worker count")
    parser.add_argument("--task-runner", choices=["process", "dask"], default="process")
    parser.add_argument(
        "--pages", type=int, default=0, help="rebuild N distinct pages made from the corpus"
    )
    parser.add_argument("--json", type=Path, help="also write the raw timings here")
    return parser.parse_args()


def merge_corpus(files: list[Path], out: Path) -> tuple[Path, int, int]:
    """All pages of all files in one crawl file, each URL once (its first occurrence)."""
    from firechunk.crawlfile import read_crawl, write_crawl
    from firechunk.schemas.page import CrawlResult

    seen: set[str] = set()
    pages = []
    dropped = 0
    for path in files:
        for page in read_crawl(path).data:
            if page.url in seen:
                dropped += 1
                continue
            seen.add(page.url)
            pages.append(page)
    write_crawl(out, CrawlResult(completed=len(pages), total=len(pages), data=pages))
    return out, len(pages), dropped


def scaled_replay(files: list[Path], pages: int, out: Path) -> Path:
    """`pages` distinct pages made from the corpus by `bench/scale.py`'s recipe."""
    from scale import distinct_pages, variant, write_crawl

    templates = distinct_pages(files)
    return write_crawl(out, [variant(templates, number) for number in range(pages)])


def measure(crawl_file: Path, data_dir: Path, repeat: int, task_runner: TaskRunnerKind) -> dict:
    from firechunk.flows.rebuild import rebuild
    from firechunk.schemas.publish import PublishResult

    def one(workers: int, run_id: str) -> dict[str, float]:
        busy_before = machine_busy_seconds()
        started = time.perf_counter()
        result = rebuild(
            replay=crawl_file,
            data_dir=data_dir,
            run=RunSettings(workers=workers, task_runner=task_runner, full=True),
            run_id=run_id,
        )
        seconds = time.perf_counter() - started
        busy = machine_busy_seconds() - busy_before
        if not isinstance(result, PublishResult):  # an unpublished run fails the flow: raised
            raise SystemExit(f"rebuild {run_id} ended {result}")
        report = json.loads(RunDir(result.run_dir).report_json.read_text(encoding="utf-8"))
        return {
            "rebuild": seconds,
            "chunk": report["seconds"],
            "validate": result.validation.seconds,
            "cpu": busy,
        }

    print("warm-up rebuild (starts the temporary Prefect API) ...", file=sys.stderr)
    one(1, "warm-up")
    timings: dict[int, list[dict[str, float]]] = {1: [], 2: []}
    for round_ in range(repeat):
        order = (1, 2) if round_ % 2 == 0 else (2, 1)
        for workers in order:
            timing = one(workers, f"w{workers}-r{round_}")
            timings[workers].append(timing)
            print(
                f"round {round_ + 1}/{repeat}, {workers} worker(s): "
                f"{timing['rebuild']:.2f} s (chunk + write {timing['chunk']:.2f} s)",
                file=sys.stderr,
            )
    return {"cpus": os.cpu_count(), "task_runner": task_runner, "timings": timings}


def machine_busy_seconds() -> float:
    """CPU-seconds the machine has spent busy since boot, all cores (Linux /proc/stat;
    NaN elsewhere): the rebuild's processes, Prefect's API server, and anything else."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            ticks = [int(value) for value in stat.readline().split()[1:]]
    except OSError:
        return float("nan")
    idle = ticks[3] + ticks[4]  # idle, iowait
    return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK")


def print_table(results: dict, repeat: int, task_runner: str, pages: int) -> None:
    timings = results["timings"]

    def cell(workers: int, what: str) -> str:
        values = [t[what] for t in timings[workers]]
        return f"{statistics.median(values):6.2f} ({min(values):.2f}-{max(values):.2f})"

    def median(workers: int, what: str) -> float:
        return statistics.median(t[what] for t in timings[workers])

    print()
    print(
        f"rebuild of {f'{pages} pages made from the corpus' if pages else 'the merged corpus'}, "
        f"{task_runner} task runner, {results['cpus']} CPUs, "
        f"median (range) of {repeat} runs, seconds"
    )
    print(f"{'':22}{'1 worker':>22}{'2 workers':>22}{'speed-up':>10}")
    for what, label in [
        ("rebuild", "whole flow run"),
        ("chunk", "  chunk + write"),
        ("validate", "  validation"),
        ("cpu", "machine CPU-s busy"),
    ]:
        ratio = median(1, what) / median(2, what)
        print(f"{label:22}{cell(1, what):>22}{cell(2, what):>22}{ratio:>9.2f}x")
    speedup = median(1, "rebuild") / median(2, "rebuild")
    # Each round ran 1 and 2 workers back to back: their ratio is less exposed to the
    # machine's speed drifting between rounds than the ratio of the two medians.
    paired = [
        one["rebuild"] / two["rebuild"] for one, two in zip(timings[1], timings[2], strict=True)
    ]
    print(
        f"{'paired, per round':22}{'':44}{statistics.median(paired):>9.2f}x"
        f"  ({', '.join(f'{ratio:.2f}' for ratio in paired)})"
    )
    # However well the work were spread, 2 workers on this machine cannot finish faster
    # than its CPU-seconds divided by the cores: the ceiling for this much work.
    cores = min(2, results["cpus"] or 1)
    ceiling = median(1, "rebuild") / (median(2, "cpu") / cores)
    print(
        f"{'ceiling':22}{'':44}{ceiling:>9.2f}x  (1-worker time / (2-worker CPU-s / {cores} cores))"
    )
    # Amdahl's law: if 2 workers halved the chunk step and left the rest of the flow as it
    # is on 1 worker, the run would be this much faster, and no more.
    one, chunk = median(1, "rebuild"), median(1, "chunk")
    print(
        f"{'Amdahl':22}{'':44}{one / (one - chunk / 2):>9.2f}x"
        f"  (1-worker time / (1-worker time - half its chunk + write))"
    )
    verdict = "met" if speedup >= TARGET else "NOT met"
    print(f"\ntarget: 2 workers >= {TARGET}x faster over the whole rebuild: {verdict}")


if __name__ == "__main__":
    sys.exit(main())
