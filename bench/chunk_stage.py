"""The chunk stage alone on the 5,000-page replay: 1 worker against 2, side by side.

    python bench/chunk_stage.py [--pages 5000] [--repeat 3]

Builds the same replay as `bench/scale.py` (distinct corpus pages, each copy with a URL and
a word of its own), then runs `firechunk.run.stages.chunk_stage` on it with nothing to
reuse, on `process_pool(1)` (this process) and `process_pool(2)` (this process and one
forked worker), alternately, `--repeat` times each, each into a fresh run directory.
Prints each time, the medians and their ratio (the issue's target: 2 workers at least
1.7x faster). No Prefect: this is the stage every flow and `firechunk chunk` runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from scale import CORPUS_DIR, distinct_pages, variant, write_crawl  # noqa: E402

from firechunk.run.executors import process_pool  # noqa: E402
from firechunk.run.stages import chunk_stage, start_out_run  # noqa: E402
from firechunk.settings import RunSettings  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    files = sorted(CORPUS_DIR.glob("*.json"))
    if not files:
        raise SystemExit(f"no crawl files in {CORPUS_DIR}")
    templates = distinct_pages(files)
    with tempfile.TemporaryDirectory() as work:
        crawl = write_crawl(
            Path(work) / "crawl.json", [variant(templates, n) for n in range(args.pages)]
        )
        times: dict[int, list[float]] = {1: [], 2: []}
        for round_ in range(args.repeat):
            for workers in (1, 2):
                settings = RunSettings(workers=workers)
                start = start_out_run(
                    Path(work) / f"run-{workers}-{round_}", settings, source=crawl
                )
                started = time.perf_counter()
                chunk_stage(start, crawl, process_pool(workers))
                times[workers].append(time.perf_counter() - started)
                print(f"{workers} worker(s): {times[workers][-1]:.2f} s", flush=True)
    one, two = statistics.median(times[1]), statistics.median(times[2])
    print(
        f"{args.pages} pages, chunk stage: 1 worker {one:.2f} s, 2 workers {two:.2f} s "
        f"(medians of {args.repeat}); 2 workers {one / two:.2f}x faster"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
