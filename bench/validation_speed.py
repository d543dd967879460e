"""Validation time: the GX suites in `expectations/` on a synthetic run and on the corpus.

Times `firechunk.validate.suites.validate_run` end to end: building the checked tables (with a
token recount of every chunk), running the three suites in a fresh ephemeral GX context,
writing the results JSON and the Data Docs site. Importing great_expectations is a one-off
cost per process and is reported apart. The synthetic run is the tests' clean builder
(`tests/synthetic_runs.py`) scaled up: PAGES pages of CHUNKS_PER_PAGE chunks of ~300 tokens.

Run: `python bench/validation_speed.py [--pages 200 --chunks-per-page 10 --repeat 3]`.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus"
sys.path.insert(0, str(ROOT))  # the synthetic runs are the tests' builders

from firechunk.crawlfile import read_crawl  # noqa: E402
from firechunk.run.memory import chunk_crawl  # noqa: E402
from firechunk.schemas.report import ChunkRun  # noqa: E402
from firechunk.validate.suites import validate_run  # noqa: E402
from tests.synthetic_runs import synthetic_run  # noqa: E402


def main(
    pages: Annotated[int, typer.Option(help="Synthetic pages.")] = 200,
    chunks_per_page: Annotated[int, typer.Option(help="Chunks per synthetic page.")] = 10,
    repeat: Annotated[int, typer.Option(min=1, help="Validations per input.")] = 3,
    corpus: Annotated[Path, typer.Option(help="Corpus dir; skipped if absent.")] = DEFAULT_CORPUS,
) -> None:
    started = time.perf_counter()
    import great_expectations  # noqa: F401

    print(f"import great_expectations: {time.perf_counter() - started:.2f} s (once per process)")
    inputs = [(f"synthetic {pages}x{chunks_per_page}", synthetic_run(pages, chunks_per_page))]
    for path in sorted(corpus.glob("*.json")) if corpus.is_dir() else []:
        inputs.append((path.name, chunk_crawl(read_crawl(path), workers=1)))
    print(f"{'input':<42} {'chunks':>7} {'pages':>6} {'expect.':>7} {'passed':>6}  seconds")
    for name, run in inputs:
        seconds, evaluated, passed = _time(run, repeat)
        print(
            f"{name:<42} {len(run.chunks):>7} {len(run.pages):>6} {evaluated:>7} {passed!s:>6}  "
            f"median {statistics.median(seconds):.2f} (min {min(seconds):.2f}, n={repeat})"
        )


def _time(run: ChunkRun, repeat: int) -> tuple[list[float], int, bool]:
    seconds = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as run_dir:
            outcome = validate_run(run, Path(run_dir))
        seconds.append(outcome.seconds)
    return seconds, outcome.evaluated_expectations, outcome.success


if __name__ == "__main__":
    typer.run(main)
