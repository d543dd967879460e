"""Write a chunking run's files into its run directory, each file atomically.

Loaders read `chunks.parquet` (or `chunks.json`, the same rows in the fixed JSON shape);
people read `report.json` and `quarantine.jsonl`; `pages.parquet` says what became of every
crawled URL. Validation results go to `validation/` (see `firechunk.validate.suites`).

The chunk files and pages.parquet are written as assembly hands over each page's rows and
record (`RunFileWriter`): Parquet one row group per batch of rows, `chunks.json` one chunk
per line of a JSON array, so a written run never holds all its chunk texts, or all its page
records, at once.
"""

from __future__ import annotations

import hashlib
from contextlib import ExitStack, suppress
from functools import lru_cache
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from firechunk.atomic import atomic_open, write_json, write_jsonl
from firechunk.layout import RunDir
from firechunk.schemas.parquet import (
    CHUNKS_SCHEMA,
    OMITTED_WHEN_NULL,
    PAGES_SCHEMA,
    PARQUET_COMPRESSION,
    ROWS_PER_GROUP,
)
from firechunk.schemas.report import ChunkReport, ChunkRun, PageRecord, QuarantineRecord


def write_run_outputs(run: ChunkRun, run_dir: Path) -> list[Path]:
    """Write every data file of `run` into `run_dir`; return the paths written."""
    with RunFileWriter(run_dir) as writer:
        writer.add_rows([chunk.to_json() for chunk in run.chunks])
        for page in run.pages:
            writer.add_page(page)
    return [*writer.paths, *write_page_files(run_dir, run.quarantine, run.report)]


def write_page_files(run_dir: Path, quarantine: list, report: ChunkReport) -> list[Path]:
    """quarantine.jsonl (QuarantineRecords) and report.json."""
    run = RunDir(run_dir)
    return [
        write_jsonl(run.quarantine_jsonl, (q.model_dump(mode="json") for q in quarantine)),
        write_json(run.report_json, report.model_dump(mode="json")),
    ]


def read_report(run_dir: Path) -> ChunkReport:
    """The run's report.json (written again when validation set pages aside)."""
    return ChunkReport.model_validate_json(RunDir(run_dir).report_json.read_bytes())


def read_quarantine(run_dir: Path) -> list[QuarantineRecord]:
    path = RunDir(run_dir).quarantine_jsonl
    lines = path.read_bytes().splitlines() if path.is_file() else []
    return [QuarantineRecord.model_validate_json(line) for line in lines if line.strip()]


class RunFileWriter:
    """`chunks.parquet`, `chunks.json` and `pages.parquet`, written as assembly hands over
    each page's chunk rows and record, so a written run never holds them all at once.

    Rows are the chunk JSON objects (`Chunk.to_json()` shape). Each is written to
    `chunks.json` at once, as one line of the array (compact JSON, by orjson: the standard
    library's encoder took seconds on a few thousand pages), and to Parquet a row group at a
    time; page records (`PageRecord`) go to pages.parquet a row group at a time. The files
    appear (atomically) when the `with` block ends without error; on an error none does.
    The sha256 of each row's line in `chunks.json` is returned: it is what
    `firechunk.run.changes` compares from one run to the next.
    """

    def __init__(self, run_dir: Path) -> None:
        run = RunDir(run_dir)
        self.paths = [run.chunks_parquet, run.chunks_json, run.pages_parquet]
        self._stack = ExitStack()
        self._lines = 0

    def __enter__(self) -> RunFileWriter:
        chunks_parquet, self._json, pages_parquet = (
            self._stack.enter_context(atomic_open(path)) for path in self.paths
        )
        self._chunks = RowGroups(chunks_parquet, self.paths[0].name, CHUNKS_SCHEMA)
        self._pages = RowGroups(pages_parquet, self.paths[2].name, PAGES_SCHEMA)
        self._json.write(b"[")
        return self

    def add_rows(self, rows: list[dict[str, Any]]) -> list[str]:
        """Write chunk rows (a page's); return their lines' digests."""
        lines = [orjson.dumps(row) for row in rows]
        if lines:
            self._json.write((b"\n" if self._lines == 0 else b",\n") + b",\n".join(lines))
            self._lines += len(lines)
        self._chunks.add(rows)
        return line_digests(lines)

    def add_page(self, page: PageRecord) -> None:
        # Python mode: a heading stays a tuple, which Arrow takes for its struct.
        self._pages.add([page.model_dump()])

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if error is None:
            self.close()
        else:
            self.abandon(error)

    def close(self) -> None:
        """Finish every file and move them into place."""
        try:
            self._chunks.close()
            self._pages.close()
            self._json.write(b"\n]\n")
        except BaseException as failure:
            self.abandon(failure)
            raise
        self._stack.close()  # every file complete: rename them into place

    def abandon(self, error: BaseException | None = None) -> None:
        """Close everything and leave no file behind."""
        error = error or RuntimeError("the run's files were abandoned")
        for groups in (self._chunks, self._pages):
            with suppress(Exception):  # the write already failed; that error is reported
                groups.writer.close()
        self._stack.__exit__(type(error), error, error.__traceback__)


class RowGroups:
    """A Parquet file written a row group at a time from dict rows of one model.

    pyarrow silently ignores keys a schema does not name, so the keys are checked first: a
    field added to a model but not to `schemas/parquet.py` stops the write instead of
    vanishing from the Parquet file. The check runs on the first row of every row group
    rather than on every row: all rows are made the same way, and checking each nested row
    was most of the time of writing a large run.
    """

    def __init__(self, handle: Any, name: str, schema: pa.Schema) -> None:
        self.writer = pq.ParquetWriter(handle, schema, compression=PARQUET_COMPRESSION)
        self._name, self._schema = name, schema
        self._rows: list[dict[str, Any]] = []
        self._written = 0  # rows in the row groups written

    def add(self, rows: list[dict[str, Any]]) -> None:
        self._rows.extend(rows)
        if len(self._rows) >= ROWS_PER_GROUP:
            self._flush()

    def close(self) -> None:
        self._flush()
        self.writer.close()

    def _flush(self) -> None:
        """Write the rows held as one row group, after checking their keys."""
        if not self._rows:
            return
        where = f"row {self._written}"
        mismatch = _key_mismatch(self._rows[0], pa.struct(list(self._schema)), where=where)
        if mismatch:
            raise ValueError(f"{self._name}: {mismatch}; update schemas/parquet.py")
        table = pa.Table.from_pylist(self._rows, schema=self._schema)
        self.writer.write_table(table, ROWS_PER_GROUP)
        self._written += len(self._rows)
        self._rows = []


def line_digests(lines: list[bytes]) -> list[str]:
    """The sha256 of each chunks.json line: what `firechunk.run.changes` compares."""
    return [hashlib.sha256(line).hexdigest() for line in lines]


def _key_mismatch(value: Any, arrow_type: pa.DataType, where: str, path: str = "") -> str | None:
    """Describe the first place where `value`'s dict keys differ from `arrow_type`'s fields
    (`path`: the dotted name of `value` in the row). A key of `OMITTED_WHEN_NULL` may be
    absent: Parquet writes null for it."""
    if isinstance(value, dict) and pa.types.is_struct(arrow_type):
        expected = {field.name for field in arrow_type}
        optional = {name for name in expected if f"{path}{name}" in OMITTED_WHEN_NULL}
        if not expected - optional <= set(value) <= expected:
            extra = sorted(set(value) - expected)
            missing = sorted(expected - optional - set(value))
            return f"{where}: keys not in the schema {extra}, schema keys missing {missing}"
        for field in arrow_type:
            if not _nested(field.type) or field.name not in value:
                continue  # a plain value has no keys to differ
            mismatch = _key_mismatch(
                value[field.name], field.type, f"{where}.{field.name}", f"{path}{field.name}."
            )
            if mismatch:
                return mismatch
    elif isinstance(value, tuple) and pa.types.is_struct(arrow_type):
        # A tuple (a dumped NamedTuple) fills a struct by position: one value per field.
        if len(value) != arrow_type.num_fields:
            names = [field.name for field in arrow_type]
            return f"{where}: {len(value)} values for the schema's fields {names}"
    elif isinstance(value, list) and value and pa.types.is_list(arrow_type):
        # The items of one list are made alike (from one model): the first stands for all.
        return _key_mismatch(value[0], arrow_type.value_type, f"{where}[0]", path)
    return None


@lru_cache(maxsize=64)
def _nested(arrow_type: pa.DataType) -> bool:
    return pa.types.is_struct(arrow_type) or (
        pa.types.is_list(arrow_type) and _nested(arrow_type.value_type)
    )
