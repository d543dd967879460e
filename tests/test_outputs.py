"""The files of a run: Parquet equals JSON, every file is complete, nothing dropped silently."""

from __future__ import annotations

import json

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from firechunk.atomic import write_json
from firechunk.run.write import RunFileWriter, write_run_outputs
from firechunk.schemas.chunk import Chunk
from firechunk.schemas.parquet import CHUNKS_SCHEMA, OMITTED_WHEN_NULL, PAGES_SCHEMA
from firechunk.schemas.report import ChunkReport, PageRecord, QuarantineRecord
from firechunk.tokens import TokenCounter
from firechunk.validate.facts import chunk_facts
from firechunk.validate.tables import TableBuilder, TableFiles, write_tables
from tests.synthetic_runs import clean_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    run = clean_run()
    run.quarantine.append(QuarantineRecord(url="https://docs.example.com/empty", reason="empty"))
    directory = tmp_path_factory.mktemp("run")
    write_run_outputs(run, directory)
    return directory, run


def test_chunks_parquet_read_back_equals_chunks_json(run_dir):
    directory, run = run_dir
    from_json = json.loads((directory / "chunks.json").read_text(encoding="utf-8"))
    from_parquet = pq.read_table(directory / "chunks.parquet").to_pylist()
    assert len(from_json) == len(run.chunks)
    assert from_parquet == [with_omitted_nulls(row) for row in from_json]
    assert [Chunk.model_validate(row) for row in from_parquet] == run.chunks


def with_omitted_nulls(row: dict) -> dict:
    """The JSON row as Parquet gives it back: the keys JSON leaves out when null, null."""
    for key in OMITTED_WHEN_NULL:
        section, name = key.split(".")
        row[section].setdefault(name, None)
    return row


def test_chunks_json_is_the_fixed_chunk_structure(run_dir):
    directory, run = run_dir
    first = json.loads((directory / "chunks.json").read_text(encoding="utf-8"))[0]
    assert set(first) == {"chunk_id", "metadata", "data"}
    assert {"token_count", "sourceUrl", "page_title"} <= set(first["metadata"])
    assert set(first["data"]) == {"headers", "text", "overlap_text"}
    assert set(first["data"]["overlap_text"]) == {"prev_chunk_id", "text"}
    assert first == run.chunks[0].to_json()


def test_parquet_files_use_the_documented_schema_and_zstd(run_dir):
    directory, _ = run_dir
    for name, schema in (("chunks.parquet", CHUNKS_SCHEMA), ("pages.parquet", PAGES_SCHEMA)):
        parquet = pq.ParquetFile(directory / name)
        assert parquet.schema_arrow.equals(schema), name
        column = parquet.metadata.row_group(0).column(0)
        assert column.compression == "ZSTD", name


def test_chunks_parquet_reads_in_polars_with_nested_fields(run_dir):
    directory, run = run_dir
    frame = pl.read_parquet(directory / "chunks.parquet")
    token_counts = frame.select(pl.col("metadata").struct.field("token_count")).to_series()
    assert token_counts.to_list() == [chunk.metadata.token_count for chunk in run.chunks]


def test_pages_parquet_has_one_row_per_page_and_round_trips(run_dir):
    directory, run = run_dir
    rows = pq.read_table(directory / "pages.parquet").to_pylist()
    assert [PageRecord.model_validate(row) for row in rows] == run.pages
    statuses = {row["url"]: row["status"] for row in rows}
    assert statuses["https://docs.example.com/auth/"] == "alias"
    assert statuses["https://docs.example.com/empty"] == "quarantined"


def test_quarantine_and_report_are_written(run_dir):
    directory, run = run_dir
    lines = (directory / "quarantine.jsonl").read_text(encoding="utf-8").splitlines()
    assert [QuarantineRecord.model_validate_json(line) for line in lines] == run.quarantine
    report = ChunkReport.model_validate_json((directory / "report.json").read_text("utf-8"))
    assert report == run.report


def test_no_temporary_files_are_left_behind(run_dir):
    directory, _ = run_dir
    assert sorted(path.name for path in directory.iterdir()) == [
        "chunks.json",
        "chunks.parquet",
        "pages.parquet",
        "quarantine.jsonl",
        "report.json",
    ]


def test_a_key_missing_from_the_schema_stops_the_write(tmp_path):
    row = clean_run().chunks[0].to_json()
    row["metadata"]["new_field"] = 1
    with (
        pytest.raises(ValueError, match=r"row 0\.metadata: keys not in the schema \['new_field'\]"),
        RunFileWriter(tmp_path) as writer,
    ):
        writer.add_rows([row])
    assert not (tmp_path / "chunks.parquet").exists()


def test_schemas_name_every_field_of_the_models():
    """A field added to Chunk reaches the Parquet schema; one added to PageRecord must be
    added to schemas/parquet.py too."""
    chunk_json = clean_run().chunks[0].to_json()
    assert (
        _field_names(pa.struct(list(CHUNKS_SCHEMA))) == _key_names(chunk_json) | OMITTED_WHEN_NULL
    )
    page_json = clean_run().pages[0].model_dump(mode="json")
    assert {field.name for field in PAGES_SCHEMA} == set(page_json)


def _field_names(arrow_type, prefix=""):
    names = set()
    for field in arrow_type:
        names.add(prefix + field.name)
        if pa.types.is_struct(field.type):
            names |= _field_names(field.type, f"{prefix}{field.name}.")
    return names


def _key_names(value, prefix=""):
    names = set()
    for key, item in value.items():
        names.add(prefix + key)
        if isinstance(item, dict):
            names |= _key_names(item, f"{prefix}{key}.")
    return names


def test_json_is_written_as_json_dumps_says_and_a_failed_write_keeps_the_old_file(tmp_path):
    path = tmp_path / "changes.json"
    value = {"upsert": [f"id-{n}" for n in range(3)], "note": "naïve\u200b", "gone": None}
    write_json(path, value)
    assert (
        path.read_text(encoding="utf-8") == json.dumps(value, ensure_ascii=False, indent=2) + "\n"
    )
    with pytest.raises(TypeError):
        write_json(path, {"upsert": ["kept?", object()]})
    assert json.loads(path.read_text(encoding="utf-8")) == value
    assert [p.name for p in tmp_path.iterdir()] == ["changes.json"]


def test_the_validation_tables_are_taken_once(tmp_path):
    builder = TableBuilder()
    builder.add_chunks(chunk_facts(chunk, TokenCounter()) for chunk in clean_run().chunks)
    written = write_tables(tmp_path, builder.tables())
    assert [path.stem for path in written] == ["headers", "pages", "chunks"]
    with pytest.raises(RuntimeError, match="already taken"):
        next(builder.tables())
    files = TableFiles(tmp_path)
    assert list(files) == ["chunks", "headers", "pages"] and len(files) == 3
    assert files["chunks"].height == len(clean_run().chunks)
    written[1].unlink()
    with pytest.raises(KeyError):
        files["pages"]
