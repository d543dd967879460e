"""Print the chunk-quality acceptance figures for every crawl of the shared corpus.

    python bench/chunk_quality.py [--corpus DIR]

The figures come from `firechunk.quality.check_run`, which re-derives headings, code
blocks, words and header placement from the cleaned pages, not from the chunker's own
structures.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from firechunk.crawlfile import read_crawl  # noqa: E402
from firechunk.quality import check_run  # noqa: E402
from firechunk.run.memory import chunk_crawl  # noqa: E402

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
COLUMNS = [
    ("pages", "pages"),
    ("chunks", "chunks"),
    ("max tokens", "max_tokens"),
    ("over 1000", "over_hard_limit"),
    ("token_count wrong", "token_count_mismatches"),
    ("code blocks that fit", "code_blocks_fitting"),
    ("of them split", "code_blocks_split"),
    ("H1+H2", "headings_h1_h2"),
    ("missing", "headings_missing"),
    ("words kept %", "words_kept_pct"),
    ("lines checked", "lines_checked"),
    ("under wrong header", "lines_under_wrong_header"),
    ("duplicate texts", "duplicate_texts"),
    ("chunks < 100 tokens %", "small_chunks_pct"),
    ("header-only chunks", "header_only_chunks"),
    ("line-number markers", "line_number_markers"),
    ("site chrome %", "chrome_share_pct"),
]


def main(corpus: Path = DEFAULT_CORPUS) -> None:
    files = sorted(corpus.glob("*.json"))
    if not files:
        print(f"no corpus at {corpus}: nothing to measure")
        return
    print("| file | " + " | ".join(title for title, _ in COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for path in files:
        crawl = read_crawl(path)
        run = chunk_crawl(crawl, workers=1)
        figures = check_run(crawl, run).as_dict()
        cells = " | ".join(str(figures[key]) for _, key in COLUMNS)
        print(f"| {path.stem} | {cells} |")
        report = run.report
        print(
            f"|   ↳ {report.pages_chunked} chunked, {report.pages_aliased} aliases, "
            f"{report.pages_quarantined} quarantined, {report.duplicate_chunks_dropped} "
            f"duplicate chunks dropped; tokens {report.tokens_before_cleanup:,} before "
            f"clean-up, {report.tokens_after_cleanup:,} after, {report.tokens_in_chunks:,} "
            f"in chunks; chunk tokens p5/p50/p95 = {report.chunk_tokens.p5}/"
            f"{report.chunk_tokens.p50}/{report.chunk_tokens.p95} |"
        )
        removed = ", ".join(
            f"{rule} {tokens:,}"
            for rule, tokens in sorted(report.cleanup_tokens_removed.items())
            if tokens
        )
        print(f"|   ↳ tokens removed by clean-up rule: {removed or 'none'} |")


if __name__ == "__main__":
    main(
        Path(sys.argv[sys.argv.index("--corpus") + 1]) if "--corpus" in sys.argv else DEFAULT_CORPUS
    )
