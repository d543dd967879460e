"""The shrink guard: a run that drops much of what the last good run had is not published
without a person's say-so.

A site does not lose a fifth of its pages overnight; a crawl cut short, a changed include
pattern or a site outage does. Publishing such a run would delete those chunks from every
database that follows `latest`, so it is refused unless `allow_shrink`. Shrink is counted
net: pages of the baseline this run no longer has, and the fall in the chunk count (edited
pages replace their chunks, which is not shrink). The baseline is the last good run of the
run's own collection (`firechunk.run.baseline`): a doc set is never measured against
another. A run chunked to other token limits is compared by its pages only: bigger chunks
are fewer chunks, not lost ones.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from firechunk.layout import RunDir
from firechunk.run.changes import baseline_chunk_rows, read_changes


def shrink_problem(
    run_dir: Path, baseline_dir: Path, max_shrink: float, *, count_chunks: bool = True
) -> str | None:
    """Why the run at `run_dir` shrinks too much against `baseline_dir`, or None.
    `count_chunks`: whether the two runs' chunk counts compare (the same token limits)."""
    pages_before, chunks_before = _counts(baseline_dir)
    _, chunks_after = _counts(run_dir)
    removed_pages = len(read_changes(run_dir).pages_removed)
    lost_chunks = max(0, chunks_before - chunks_after) if count_chunks else 0
    shares = {
        f"{removed_pages} of its {pages_before} pages": _share(removed_pages, pages_before),
        f"{lost_chunks} of its {chunks_before} chunks": _share(lost_chunks, chunks_before),
    }
    over = [f"{what} ({share:.0%})" for what, share in shares.items() if share > max_shrink]
    if not over:
        return None
    return (
        f"the run drops {' and '.join(over)} of the last good run, more than {max_shrink:.0%}: "
        "not published. If the site really shrank, rebuild with --allow-shrink "
        "(flow parameter run.allow_shrink)."
    )


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def _counts(run_dir: Path) -> tuple[int, int]:
    """A run's crawled pages and chunks, read from what the change set was computed from
    (so a baseline's damaged report or Parquet copy does not matter)."""
    pages = pl.scan_parquet(RunDir(run_dir).pages_parquet).select(pl.len()).collect().item()
    return pages, len(baseline_chunk_rows(run_dir))
