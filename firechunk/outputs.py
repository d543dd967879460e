"""Write a chunking run's files into its run directory, each file atomically.

Loaders read `chunks.parquet` (or `chunks.json`, the same rows in the fixed JSON shape);
people read `report.json` and `quarantine.jsonl`; `pages.parquet` says what became of every
crawled URL. Validation results go to `validation/` (see `firechunk.validation`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from firechunk.atomic import atomic_write, write_json, write_jsonl
from schemas.parquet import CHUNKS_SCHEMA, PAGES_SCHEMA
from schemas.report import ChunkRun

CHUNKS_PARQUET = "chunks.parquet"
CHUNKS_JSON = "chunks.json"
PAGES_PARQUET = "pages.parquet"
QUARANTINE_JSONL = "quarantine.jsonl"
REPORT_JSON = "report.json"

PARQUET_COMPRESSION = "zstd"


def write_run_outputs(run: ChunkRun, run_dir: Path) -> list[Path]:
    """Write every data file of `run` into `run_dir`; return the paths written."""
    chunks = [chunk.to_json() for chunk in run.chunks]
    pages = [page.model_dump(mode="json") for page in run.pages]
    return [
        write_parquet(run_dir / CHUNKS_PARQUET, chunks, CHUNKS_SCHEMA),
        write_json(run_dir / CHUNKS_JSON, chunks),
        write_parquet(run_dir / PAGES_PARQUET, pages, PAGES_SCHEMA),
        write_jsonl(
            run_dir / QUARANTINE_JSONL, (q.model_dump(mode="json") for q in run.quarantine)
        ),
        write_json(run_dir / REPORT_JSON, run.report.model_dump(mode="json")),
    ]


def write_parquet(path: Path, rows: list[dict[str, Any]], schema: pa.Schema) -> Path:
    """Write `rows` with the explicit `schema`, zstd-compressed.

    pyarrow silently ignores keys a schema does not name, so the keys are checked first:
    a field added to a model but not to `schemas/parquet.py` stops the write instead of
    vanishing from the Parquet file.
    """
    row_type = pa.struct(list(schema))
    for index, row in enumerate(rows):
        mismatch = _key_mismatch(row, row_type, where=f"row {index}")
        if mismatch:
            raise ValueError(f"{path.name}: {mismatch}; update schemas/parquet.py")
    table = pa.Table.from_pylist(rows, schema=schema)
    return atomic_write(
        path, lambda handle: pq.write_table(table, handle, compression=PARQUET_COMPRESSION)
    )


def _key_mismatch(value: Any, arrow_type: pa.DataType, where: str) -> str | None:
    """Describe the first place where `value`'s dict keys differ from `arrow_type`'s fields."""
    if isinstance(value, dict) and pa.types.is_struct(arrow_type):
        expected = {field.name for field in arrow_type}
        if set(value) != expected:
            extra, missing = sorted(set(value) - expected), sorted(expected - set(value))
            return f"{where}: keys not in the schema {extra}, schema keys missing {missing}"
        for field in arrow_type:
            mismatch = _key_mismatch(value[field.name], field.type, f"{where}.{field.name}")
            if mismatch:
                return mismatch
    elif isinstance(value, list) and pa.types.is_list(arrow_type):
        for position, item in enumerate(value):
            mismatch = _key_mismatch(item, arrow_type.value_type, f"{where}[{position}]")
            if mismatch:
                return mismatch
    return None
