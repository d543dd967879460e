"""Each thing is declared once: the chunk row's shape, each threshold, each exit code's type.

The chunk row is declared by the models of `schemas/chunk.py`; the Parquet schema, the
database's columns (the loader's list; `tests/test_database.py` holds the table itself to
it) and the chunks suite's columns must be what those models give. A threshold is a
constant of `firechunk/settings.py` and nowhere else a literal. An exit code belongs to an
exception type, imported as a type: a renamed or moved type fails here, and an exception
type firechunk defines must be known or named below as a bug when it reaches a command.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import json
from pathlib import Path
from typing import get_args, get_origin

import pyarrow as pa
import pytest

from firechunk.commands.exits import KNOWN_FAILURES, CommandError, ExitCode, classify
from firechunk.schemas.chunk import Checked, Chunk, OmittedWhenNull, Stored, chunk_leaves
from firechunk.schemas.parquet import CHUNKS_SCHEMA, OMITTED_WHEN_NULL
from firechunk.settings import DEFAULT_WORKERS, INLINE_CHARS, MAX_SHRINK, RunSettings
from tests.synthetic_runs import clean_run

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "firechunk", ROOT / "tasks", ROOT / "flows", ROOT / "schemas"]
LEAVES = chunk_leaves()


def _path(leaf) -> str:
    return ".".join(leaf.path)


def _arrow_leaves(arrow_type: pa.DataType, prefix: str = "") -> dict[str, pa.Field]:
    """The Arrow fields of a schema that are not structs, by dotted path."""
    found: dict[str, pa.Field] = {}
    for field in arrow_type:
        if pa.types.is_struct(field.type):
            found |= _arrow_leaves(field.type, f"{prefix}{field.name}.")
        else:
            found[prefix + field.name] = field
    return found


def _may_be_none(annotation) -> bool:
    return get_origin(annotation) is not None and type(None) in get_args(annotation)


# -- the chunk row ------------------------------------------------------------------------


def test_the_parquet_schema_has_a_column_for_each_field_of_the_chunk_and_no_other():
    columns = _arrow_leaves(pa.struct(list(CHUNKS_SCHEMA)))
    assert list(columns) == [_path(leaf) for leaf in LEAVES]
    for leaf in LEAVES:
        assert columns[_path(leaf)].nullable == _may_be_none(leaf.annotation), _path(leaf)


def test_the_chunk_json_has_a_key_for_each_leaf_but_a_none_left_out():
    row = clean_run().chunks[0].to_json()  # a content chunk: its kind is None
    assert _json_paths(row) == {_path(leaf) for leaf in LEAVES} - OMITTED_WHEN_NULL
    assert {_path(leaf) for leaf in LEAVES if leaf.marker(OmittedWhenNull)} == OMITTED_WHEN_NULL


def _json_paths(value: dict, prefix: str = "") -> set[str]:
    """The dotted path of every key of a JSON object whose value is not an object."""
    paths = set()
    for key, item in value.items():
        if isinstance(item, dict):
            paths |= _json_paths(item, f"{prefix}{key}.")
        else:
            paths.add(prefix + key)
    return paths


def test_a_chunk_without_kind_has_no_kind_key_and_one_with_it_has():
    chunk = clean_run().chunks[0]
    assert "kind" not in chunk.to_json()["metadata"]
    navigation = chunk.model_copy(
        update={"metadata": chunk.metadata.model_copy(update={"kind": "navigation"})}
    )
    assert navigation.to_json()["metadata"]["kind"] == "navigation"


def test_the_loader_writes_exactly_the_stored_fields_and_its_own_columns():
    from firechunk.db import load, schema
    from firechunk.db.runs import RunChunk

    stored = [leaf.marker(Stored).column for leaf in LEAVES if leaf.marker(Stored)]
    names = [column.name for column in schema.CHUNKS_COLUMNS]
    assert names == stored + [column.name for column in schema.LOADER_COLUMNS]
    assert load._COLUMNS.split(", ") == names
    assert [column.sql for column in schema.CHUNKS_COLUMNS] == load._TYPES
    assert schema.CHUNKS_COLUMNS[0] == schema.Column("chunk_id", "uuid")
    # Every column but the collection is a RunChunk attribute of its name.
    attributes = {name for name, _ in inspect.getmembers(RunChunk)} | set(
        RunChunk.__dataclass_fields__
    )
    assert set(names) - {"collection"} <= attributes
    chunk = _run_chunk()
    assert len(load._row("c", chunk)) == len(names)
    updated = set(load._update_params("c", chunk))
    assert updated == set(names) - {"text"}
    assert all(
        f"{name} = %({name})s" in load._UPDATE for name in updated - {"collection", "chunk_id"}
    )


def _run_chunk():
    from firechunk.db.runs import _chunk

    return _chunk(clean_run().chunks[0].to_json())


def test_a_loaded_row_keeps_each_stored_field_of_the_chunk():
    from firechunk.db.runs import _chunk

    chunk = clean_run().chunks[1]
    row = _chunk(chunk.to_json())
    assert row.url == chunk.metadata.source_url and row.title == chunk.metadata.page_title
    assert row.h1 == chunk.data.headers.h1 and row.breadcrumb == tuple(chunk.metadata.breadcrumb)
    assert row.overlap_text == chunk.data.overlap_text.text and row.text == chunk.data.text


def test_the_chunks_table_has_the_checked_fields_then_the_computed_columns():
    from firechunk.tokens import TokenCounter
    from firechunk.validate import tables

    checked = [leaf.key for leaf in LEAVES if leaf.marker(Checked)]
    assert [*checked, "token_recount", "text_hash", "prev_chunk_link"] == tables.CHUNK_COLUMNS
    built = tables.build_tables(clean_run(), TokenCounter("cl100k_base"))["chunks"]
    assert built.columns == tables.CHUNK_COLUMNS
    named = _columns_named(json.loads((ROOT / "expectations" / "chunks.json").read_text()))
    assert named <= set(tables.CHUNK_COLUMNS), named - set(tables.CHUNK_COLUMNS)
    assert {*tables.ID_COLUMNS["chunks"], tables.PAGE_URL_COLUMN["chunks"]} <= set(built.columns)


def _columns_named(value) -> set[str]:
    """Every column an expectation suite names (`column`, `column_list`, ...)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("column", "column_A", "column_B") and isinstance(item, str):
                found.add(item)
            elif key == "column_list" and isinstance(item, list):
                found |= set(item)
            else:
                found |= _columns_named(item)
    elif isinstance(value, list):
        for item in value:
            found |= _columns_named(item)
    return found


def test_a_field_added_to_a_model_reaches_the_parquet_schema():
    from firechunk.schemas.parquet import model_fields

    class Wider(Chunk):
        rank: int | None = None

    assert pa.schema(model_fields(Wider)).field("rank") == pa.field("rank", pa.int32())


def test_a_heading_fills_the_pages_schema_struct_field_by_field_in_order():
    """pages.parquet takes a heading as a tuple, by position: its fields must be the
    struct's, in the struct's order."""
    from firechunk.schemas.parquet import PAGES_SCHEMA
    from firechunk.schemas.report import HeadingRecord

    struct = PAGES_SCHEMA.field("headings").type.value_type
    assert list(HeadingRecord._fields) == [field.name for field in struct]


# -- thresholds ---------------------------------------------------------------------------

THRESHOLDS = {"MAX_SHRINK": MAX_SHRINK, "INLINE_CHARS": INLINE_CHARS}


def _numbers(path: Path) -> list[tuple[int, float]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)  # True and False are ints too
    ]


@pytest.mark.parametrize("name", THRESHOLDS)
def test_a_threshold_is_a_literal_in_settings_only(name):
    value = THRESHOLDS[name]
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for source in SOURCES
        for path in sorted(source.rglob("*.py"))
        if path != ROOT / "firechunk" / "settings.py"
        for line, number in _numbers(path)
        if number == value
    ]
    assert not found, f"{name} ({value}) written again: {found}; import it from firechunk.settings"


def test_the_shrink_guards_and_their_help_take_the_one_threshold():
    from typer.main import get_command

    from firechunk.cli import app
    from firechunk.db.load import LoadGuards
    from firechunk.run import stages

    assert LoadGuards().max_shrink == MAX_SHRINK
    options = {option.name: option for option in get_command(app).commands["load"].params}
    assert options["max_shrink"].default == MAX_SHRINK
    assert stages.MAX_SHRINK is MAX_SHRINK
    assert f"{MAX_SHRINK * 100:g} %" in RunSettings.model_fields["allow_shrink"].description


def test_the_workers_help_says_the_declared_default_and_inline_size():
    description = RunSettings.model_fields["workers"].description
    assert f"empty for {DEFAULT_WORKERS}," in description
    assert f"under {INLINE_CHARS / 1e6:g} MB" in description


# -- exit codes ---------------------------------------------------------------------------


@pytest.mark.parametrize("module", KNOWN_FAILURES)
def test_every_mapped_type_is_an_exception_defined_in_its_module(module):
    importlib.import_module(module)
    failures = KNOWN_FAILURES[module]()
    assert failures
    for known in failures:
        assert issubclass(known.kind, Exception)
        assert known.kind.__module__ == module, (known.kind, module)
        assert classify(known.kind("x")) == (known.code, known.prefix)


def test_the_nearest_type_wins_whatever_the_order():
    from firechunk.crawl.errors import CrawlError, MissingApiKeyError
    from firechunk.db.failures import DatabaseError, NotAPostgresUrl

    assert classify(MissingApiKeyError("no key"))[0] == ExitCode.BAD_INPUT
    assert classify(CrawlError("503"))[0] == ExitCode.NETWORK
    assert classify(NotAPostgresUrl("x"))[0] == ExitCode.BAD_INPUT
    assert classify(DatabaseError("x"))[0] == ExitCode.NETWORK


# Exception types firechunk defines that no command maps to an exit code, and why: each is
# handled where it is raised, or reaching a command is a bug (exit 4, the traceback saved).
NOT_MAPPED = {
    "PageRejected": "a page quarantined by the run; the library raises it to its caller",
    "RenameRefused": "commands/rename.py turns it into a CommandError",
    "NameTaken": "commands/rename.py turns it into a CommandError",
    "CollectionNotLoaded": "commands/database.py turns it into a CommandError",
    "SuiteFileError": "a broken suite file shipped with firechunk: a bug",
    "CacheDamaged": "a page cache damaged after its hash was checked: a bug",
    "GraphError": "embedders.py turns it into an EmbedderError",
    "MissingExtra": "a ModuleNotFoundError: `handled` names the extra to install",
    "PageTimeout": "a BaseException the chunking worker catches to quarantine the page",
    "Unverified": "run/changes.py falls back to a full replacement",
    "_RetryableAnswer": "embedders.py retries it",
    "DocumentNotChunked": "a warning the adapters give their framework's caller",
}


def _exception_classes() -> dict[str, list[str]]:
    """Every exception class the project defines, by name, with its ancestors' names as
    the source writes them (an exception's base is a built-in exception or such a class)."""
    bases: dict[str, list[str]] = {}
    for source in SOURCES:
        for path in sorted(source.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef):
                    bases[node.name] = [ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases]

    def ancestors(name: str) -> list[str]:
        found = [name]
        for base in bases.get(name, []):
            found += ancestors(base) if base != name else []
        return found

    def is_exception(name: str) -> bool:
        builtin = [getattr(builtins, each, None) for each in ancestors(name)]
        return any(isinstance(kind, type) and issubclass(kind, BaseException) for kind in builtin)

    return {name: ancestors(name) for name in bases if is_exception(name)}


def test_every_exception_type_is_mapped_or_named_as_not_mapped():
    mapped = {CommandError.__name__}
    for module, failures in KNOWN_FAILURES.items():
        importlib.import_module(module)
        mapped |= {known.kind.__name__ for known in failures()}
    defined = _exception_classes()
    unaccounted = {
        name for name, ancestors in defined.items() if not mapped & set(ancestors)
    } - set(NOT_MAPPED)
    assert not unaccounted, (
        f"exception types with no exit code: {sorted(unaccounted)}; map them in "
        "firechunk/commands/exits.py or say in NOT_MAPPED why not"
    )
    assert set(NOT_MAPPED) <= set(defined), "NOT_MAPPED names a type that no longer exists"
