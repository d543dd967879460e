"""Whether a rebuild's memory stays flat as the crawl grows: the largest process of a full
rebuild at each size, side by side in one run.

    python bench/memory_scale.py [--pages 5000 20000] [--workers 2] [--rounds 1]
                                 [--json PATH]

Each size's replay is built as `bench/scale.py` builds it (the shared corpus's distinct
pages, cycled, each copy with a URL and a word of its own: every page and chunk distinct),
then a full rebuild runs in a subprocess of its own, as `firechunk rebuild --replay` runs
it (the Prefect flow, its temporary API, `--workers` chunking processes), on a fresh data
directory. One untimed rebuild of the bundled sample first creates Prefect's database.

Memory is sampled every 0.1 s with psutil: the largest single process (the flow's, in
practice) and the whole tree (resident sets summed, an upper bound). Rounds take the sizes
in turn, smallest first then largest first, so neither always runs on a fresher machine.

Target (issue 35): the largest process at the largest size at most 1.25 times that at the
smallest. The figure is the median over rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import (  # noqa: E402  (a sibling bench, run as a script)
    SAMPLE_CRAWL,
    corpus_files,
    distinct_pages,
    measure,
    prefect_api,
    rebuild,
    variant,
    write_crawl,
)

TARGET_RATIO = 1.25
MB = 1024**2


def main() -> int:
    args = parse_args()
    files = corpus_files()
    if not files:
        return 0
    sizes = sorted(args.pages)
    largest: dict[int, list[int]] = {size: [] for size in sizes}
    tree: dict[int, list[int]] = {size: [] for size in sizes}
    with tempfile.TemporaryDirectory(prefix="memory-bench-") as scratch:
        work = Path(scratch)
        templates = distinct_pages(files)
        crawls = {
            size: write_crawl(
                work / f"crawl-{size}.json", [variant(templates, n) for n in range(size)]
            )
            for size in sizes
        }
        with prefect_api("temporary", work / "api") as env:
            rebuild(SAMPLE_CRAWL, work / "warm-up", "warm-up", args.workers, env)
            for round_number in range(args.rounds):
                order = sizes if round_number % 2 == 0 else sizes[::-1]
                for size in order:
                    data_dir = work / f"data-{size}-{round_number}"
                    figures = measure(
                        "full", crawls[size], data_dir, args.workers, env, "temporary"
                    )
                    largest[size].append(figures["peak_largest_process_bytes"])
                    tree[size].append(figures["peak_tree_bytes"])
    print_table(sizes, largest, tree, args)
    if args.json:
        args.json.write_text(json.dumps({"largest": largest, "tree": tree}, indent=2))
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, nargs="+", default=[5000, 20000])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    return parser.parse_args()


def print_table(
    sizes: list[int],
    largest: dict[int, list[int]],
    tree: dict[int, list[int]],
    args: argparse.Namespace,
) -> None:
    base = statistics.median(largest[sizes[0]])
    print()
    print(f"full rebuilds, {args.workers} workers, {args.rounds} round(s), medians")
    print(f"{'pages':>8}{'largest MB':>12}{'tree MB':>10}{'largest / smallest':>20}")
    for size in sizes:
        peak = statistics.median(largest[size])
        print(
            f"{size:8}{peak / MB:12.0f}{statistics.median(tree[size]) / MB:10.0f}"
            f"{peak / base:20.2f}"
        )
    ratio = statistics.median(largest[sizes[-1]]) / base
    verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
    print(f"target: largest process at {sizes[-1]} pages at most {TARGET_RATIO}x that at "
          f"{sizes[0]}: {ratio:.2f}x, {verdict}")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
