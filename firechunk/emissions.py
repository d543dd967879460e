"""What the run writer did with each chunked page, kept so the next run can copy its rows.

A page's rows in the chunk files are a function of its outcome (the key it is stored
under), the URL and title its chunks carry, its alias URLs and which of its drafts were
dropped as repeats of an earlier chunk of the run (and of which). The writer
(`firechunk.streaming.RunWriter`) keeps these for every page it writes, as a
`PageEmission`, with where the rows went (`RowSpan`) and what else the run needs of them
(validation facts, the page's figures, the dropped drafts). When the next run comes to a
page whose outcome the baseline has and all of these are the same, it copies the page's
lines from the baseline's `chunks.json` and its Arrow rows from the baseline's
`chunks.parquet` (`BaselineRows`) instead of decoding the outcome and building the rows
again: on a night when 1 % of the pages changed, that is 99 % of the writing.

`ROWS_VERSION` hashes the code that shapes rows and facts: a baseline written by other
code is not copied from (its outcomes may still be reused, see `firechunk.incremental`).
"""

from __future__ import annotations

import bisect
import hashlib
import mmap
import zlib
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from firechunk.incremental import STATE_FILE, OutcomeStore, StoredOutcome, chunker_version
from firechunk.outputs import CHUNKS_JSON, CHUNKS_PARQUET, RowSpan, line_digests
from firechunk.validation_tables import ChunkFacts

_ROOT = Path(__file__).resolve().parent.parent
# The code that shapes chunk rows and facts, beyond what `chunker_version` covers.
_ROW_SOURCES = [
    _ROOT / "firechunk" / name
    for name in ("chunk_rows.py", "streaming.py", "outputs.py", "emissions.py")
] + [_ROOT / "schemas" / name for name in ("chunk.py", "parquet.py", "report.py")]
ROWS_VERSION_KEY = "rows_version"


@lru_cache(maxsize=1)
def rows_version() -> str:
    digest = hashlib.sha256(chunker_version().encode())
    for path in _ROW_SOURCES:
        digest.update(f"{path.name}\n".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


@dataclass
class PageEmission:
    """One chunked page as the writer wrote it."""

    url: str  # the URL its chunks carry (sourceUrl)
    title: str
    aliases: list[str]
    repeats: list[str | None]  # per draft: None if kept, else the id of the chunk it repeats
    text_hashes: list[str]  # per draft
    tokens: list[int]  # per draft
    facts: list[dict[str, Any]]  # ChunkFacts of the kept drafts (`facts_to_json`)
    figures: dict[str, Any]  # content hash, token figures, headings, removed tokens, warnings

    def to_blob(self) -> bytes:
        """What the store keeps: its place in the files (`RowSpan`) apart, so a copied
        page's blob is kept as it is."""
        return zlib.compress(orjson.dumps(self), 1)

    @classmethod
    def from_blob(cls, blob: bytes) -> PageEmission:
        return cls(**orjson.loads(zlib.decompress(blob)))

    def chunk_facts(self) -> list[ChunkFacts]:
        return [
            ChunkFacts(**{**f, "heading_lines": frozenset(f["heading_lines"])}) for f in self.facts
        ]

    def page_figures(self) -> StoredOutcome:
        """The figures a page record is made of (`pipeline.chunked_record`)."""
        figures = self.figures
        return StoredOutcome(
            index=-1,
            content_hash=figures["content_hash"],
            headings=[tuple(h) for h in figures["headings"]],
            tokens_before=figures["tokens_before"],
            tokens_after=figures["tokens_after"],
            removed_tokens=figures["removed_tokens"],
            warnings=figures["warnings"],
        )


_FACT_FIELDS = tuple(field.name for field in fields(ChunkFacts))


def facts_to_json(facts: ChunkFacts) -> dict[str, Any]:
    """The facts as a JSON object. Field by field: `dataclasses.asdict` deep-copies every
    value, which took about a second of a 1,500-page rebuild."""
    data = {name: getattr(facts, name) for name in _FACT_FIELDS}
    data["heading_lines"] = sorted(facts.heading_lines)
    return data


def figures_of(outcome: StoredOutcome) -> dict[str, Any]:
    """What `PageEmission.figures` keeps of an outcome: all of it but the drafts."""
    return {
        "content_hash": outcome.content_hash,
        "headings": outcome.headings,
        "tokens_before": outcome.tokens_before,
        "tokens_after": outcome.tokens_after,
        "removed_tokens": outcome.removed_tokens,
        "warnings": outcome.warnings,
    }


class BaselineRows:
    """The last good run's page emissions and chunk files, to copy unchanged pages from."""

    def __init__(self, run_dir: Path, store: OutcomeStore) -> None:
        self._store = store
        self._digests = store.chunk_rows()  # chunk id -> sha256 of its chunks.json line
        with open(run_dir / CHUNKS_JSON, "rb") as handle:
            self._json = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        self._parquet = pq.ParquetFile(run_dir / CHUNKS_PARQUET)
        metadata = self._parquet.metadata
        self._group_starts = [0]
        for group in range(metadata.num_row_groups):
            self._group_starts.append(self._group_starts[-1] + metadata.row_group(group).num_rows)
        self._group: tuple[int, pa.Table] | None = None  # the row group read last

    @classmethod
    def open(cls, run_dir: Path) -> BaselineRows | None:
        """The baseline at `run_dir`, or None if it kept no emissions made by this code."""
        state = Path(run_dir) / STATE_FILE
        if not state.is_file():
            return None
        store = OutcomeStore(state)
        try:
            if store.meta(ROWS_VERSION_KEY) != rows_version():
                store.close()
                return None
            return cls(Path(run_dir), store)
        except (OSError, ValueError, pa.ArrowException):
            store.close()
            return None  # files missing or unreadable: build every page's rows anew

    def emission(self, key: str) -> tuple[PageEmission, bytes, RowSpan] | None:
        """How the baseline wrote the page of outcome `key`: the emission, its blob, and
        where its rows are in the baseline's files."""
        found = self._store.emission(key)
        if found is None:
            return None
        blob, span = found
        return PageEmission.from_blob(blob), blob, RowSpan(*span)

    def page_rows(
        self, emission: PageEmission, span: RowSpan
    ) -> tuple[list[bytes], list[str], pa.Table] | None:
        """The page's chunks.json lines, their digests and its Parquet rows, if they are
        the rows the baseline wrote: each line's sha256 as recorded when it was written,
        each Parquet row the same chunk. None if not (a file changed since): then the
        page's rows are built again rather than a damaged row copied into every later run.
        """
        block = self._json[span.json_start : span.json_end]
        lines = block.split(b",\n") if block else []  # orjson writes no raw newline
        ids = [facts["chunk_id"] for facts in emission.facts]
        digests = line_digests(lines)
        if digests != [self._digests.get(chunk_id) for chunk_id in ids]:
            return None
        table = self._rows(span)
        if table.column("chunk_id").to_pylist() != ids:
            return None
        return lines, digests, table

    def _rows(self, span: RowSpan) -> pa.Table:
        pieces = []
        row, end = span.first_row, span.first_row + span.rows
        while row < end:
            group, table = self._row_group(row)
            start = row - self._group_starts[group]
            piece = table.slice(start, min(end - row, table.num_rows - start))
            pieces.append(piece)
            row += piece.num_rows
        return pa.concat_tables(pieces) if pieces else self._parquet.schema_arrow.empty_table()

    def _row_group(self, row: int) -> tuple[int, pa.Table]:
        if self._group is None or not (
            self._group_starts[self._group[0]] <= row < self._group_starts[self._group[0] + 1]
        ):
            group = bisect.bisect_right(self._group_starts, row) - 1
            self._group = (group, self._parquet.read_row_group(group))
        return self._group

    def close(self) -> None:
        self._json.close()
        self._parquet.close()
        self._store.close()
