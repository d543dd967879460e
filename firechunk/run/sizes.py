"""How a run's chunks are spread over sizes: token counts in buckets of 100.

The report's percentiles say where the middle is; a histogram shows what they hide, such as
a pile of tiny chunks (debris the clean-up missed) or a wall just under the limit (pages
packed to the brim). Read from the run's `chunks.parquet`, the file loaders read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from firechunk.chunker.split import Limits
from firechunk.layout import RunDir

BUCKET_TOKENS = 100
TOP_TOKENS = Limits.hard  # the chunks suite's ceiling: buckets up to it are always shown


@dataclass(frozen=True)
class Bucket:
    """Chunks of `low`..`high` tokens, both included; `high` None for "over TOP_TOKENS"."""

    low: int
    high: int | None
    chunks: int

    @property
    def label(self) -> str:
        return f"{self.low}–{self.high}" if self.high is not None else f"over {self.low - 1}"


def token_counts(run_dir: Path) -> pl.Series:
    """Every chunk's token count, in chunks.parquet order (only that column is read)."""
    path = RunDir(run_dir).chunks_parquet
    counts = pl.scan_parquet(path).select(pl.col("metadata").struct.field("token_count"))
    return counts.collect().to_series()


def size_histogram(counts: pl.Series) -> list[Bucket]:
    """Buckets 1–100, 101–200, … up to TOP_TOKENS, every one shown (an empty one too, so
    nights compare row for row), then one for the chunks over it, if any. (An empty chunk,
    which the chunks suite refuses, is counted in the first.)"""
    edges = range(0, TOP_TOKENS, BUCKET_TOKENS)
    index = ((counts.cast(pl.Int64) - 1) // BUCKET_TOKENS).clip(lower_bound=0)
    per_bucket = dict(index.value_counts().iter_rows())
    buckets = [
        Bucket(low + 1, low + BUCKET_TOKENS, per_bucket.get(i, 0)) for i, low in enumerate(edges)
    ]
    over = sum(n for i, n in per_bucket.items() if i >= len(edges))
    if over:
        buckets.append(Bucket(TOP_TOKENS + 1, None, over))
    return buckets
