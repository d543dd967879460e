"""Validate a chunking run with Great Expectations, using the suite files in `expectations/`.

The suites are loaded from disk at every run (never built in code), so what is in
`expectations/*.json` is exactly what runs. Each suite checks the table of the same name
built by `firechunk.validate.tables`.

GX runs in a fresh ephemeral Data Context per validation (it takes milliseconds to make),
so nothing from one run's results leaks into another's Data Docs. Written into
`<run-dir>/validation/`:
- `results/<suite>.json`: GX's validation result for each suite, as GX serialises it;
- `summary.json`: a `schemas.validation.ValidationOutcome`, what the publisher reads;
- `report.html`: the outcome as one self-contained page (`firechunk.validate.report`);
- `data_docs/`: the GX Data Docs site (open `data_docs/index.html`). GX writes the site
  file by file, so it is built in a temporary directory and renamed into place: a reader
  sees the whole site or none of it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from firechunk.atomic import write_json
from firechunk.layout import RunDir
from firechunk.schemas.report import ChunkRun
from firechunk.schemas.validation import ExpectationOutcome, ValidationOutcome
from firechunk.settings import RunSettings
from firechunk.tokens import TokenCounter
from firechunk.validate.report import write_report_from_files
from firechunk.validate.tables import ID_COLUMNS, PAGE_URL_COLUMN, build_tables

if TYPE_CHECKING:
    import polars as pl

# expectations/ in the repository, installed as the package data of firechunk.expectations.
SUITES_DIR = Path(str(files("firechunk.expectations")))
SETTING = "$setting"  # a threshold that is a run setting: {"$setting": "hard_tokens"}
DATA_DOCS_SITE = "firechunk"
EXAMPLES_PER_EXPECTATION = 5
_VIEWS = {  # GX's page views, compiling their templates once per process
    "page": {"module_name": "firechunk.validate.data_docs_views", "class_name": "PageView"},
    "index": {"module_name": "firechunk.validate.data_docs_views", "class_name": "IndexPageView"},
}
_PARTIAL_UNEXPECTED = 20  # failing rows shown per expectation in Data Docs
_KEPT_UNEXPECTED = 200  # failing rows kept per expectation in the results JSON


class SuiteFileError(ValueError):
    """A suite file is missing, unreadable, or names an expectation GX does not accept."""


def import_gx() -> None:
    """Import great_expectations now, not when the first run is validated: 2-3 s of CPU
    that `firechunk rebuild` spends while Prefect's temporary server boots on the other
    core, where it costs nothing."""
    import great_expectations  # noqa: F401


def load_suite_files(
    suites_dir: Path = SUITES_DIR, settings: RunSettings = RunSettings()
) -> dict[str, dict[str, Any]]:
    """Read every `*.json` suite in `suites_dir`; there must be one per table, no more.

    A threshold written `{"$setting": "hard_tokens"}` is the run's setting of that name, so
    a run chunked to other limits is checked against its own."""
    suites: dict[str, dict[str, Any]] = {}
    for path in sorted(Path(suites_dir).glob("*.json")):
        try:
            suite = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as error:
            raise SuiteFileError(f"cannot read suite file {path}: {error}") from error
        _check_suite(path, suite)
        suite = _with_settings(path, suite, settings)
        suites[suite["name"]] = suite
    if set(suites) != set(ID_COLUMNS):
        raise SuiteFileError(
            f"{suites_dir} must hold one suite per table {sorted(ID_COLUMNS)}, "
            f"found {sorted(suites)}"
        )
    return suites


def _with_settings(path: Path, value: Any, settings: RunSettings) -> Any:
    """`value` with every `{"$setting": name}` in it replaced by that setting's value."""
    if isinstance(value, list):
        return [_with_settings(path, item, settings) for item in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {SETTING}:
        name = value[SETTING]
        if name not in RunSettings.model_fields:
            raise SuiteFileError(f"{path}: no run setting {name!r} (the settings are "
                                 f"{sorted(RunSettings.model_fields)})")  # fmt: skip
        return getattr(settings, name)
    return {key: _with_settings(path, item, settings) for key, item in value.items()}


def _check_suite(path: Path, suite: Any) -> None:
    """Every expectation needs a unique `meta.name`: failures are reported by that name."""
    if not isinstance(suite, dict) or not isinstance(suite.get("expectations"), list):
        raise SuiteFileError(f"{path}: not an expectation suite (no 'expectations' list)")
    names = [(exp.get("meta") or {}).get("name") for exp in suite["expectations"]]
    if any(not name for name in names) or len(set(names)) != len(names):
        raise SuiteFileError(f"{path}: every expectation needs a unique meta.name, got {names}")


def validate_run(
    run: ChunkRun,
    run_dir: Path,
    *,
    suites_dir: Path = SUITES_DIR,
    run_id: str | None = None,
    settings: RunSettings = RunSettings(),
) -> ValidationOutcome:
    """Run every suite on `run`, write results and Data Docs under `run_dir/validation/`."""
    started = time.perf_counter()
    tables = build_tables(run, TokenCounter(run.report.encoding))
    return validate_tables(
        tables, run_dir, suites_dir=suites_dir, run_id=run_id, started=started, settings=settings
    )


def validate_tables(
    tables: Mapping[str, pl.DataFrame],
    run_dir: Path,
    *,
    suites_dir: Path = SUITES_DIR,
    run_id: str | None = None,
    started: float | None = None,
    settings: RunSettings = RunSettings(),
) -> ValidationOutcome:
    """Run every suite on its table (`firechunk.validate.tables`), write the results.

    `started` is when building the tables began, so `seconds` covers them too; `settings`
    are the run's, which the suites' thresholds may name.
    """
    started = time.perf_counter() if started is None else started
    suites = load_suite_files(suites_dir, settings)
    run = RunDir(run_dir)
    run.validation_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(
        tempfile.mkdtemp(prefix=f".{run.data_docs_dir.name}.", dir=run.data_docs_dir.parent)
    )
    try:
        results = _run_suites(suites, tables, staging, run_id)
        outcomes = [
            _outcome(name, result)
            for name, result in results.items()
            for result in result["results"]
        ]
        for name, result in results.items():
            write_json(run.suite_result(name), _trimmed(result))
        _replace_dir(staging, run.data_docs_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    outcome = ValidationOutcome(
        success=all(item.success for item in outcomes),
        evaluated_expectations=len(outcomes),
        successful_expectations=sum(item.success for item in outcomes),
        seconds=round(time.perf_counter() - started, 3),
        suites=list(results),
        expectations=outcomes,
        data_docs_index=run.data_docs_index.relative_to(run.path).as_posix(),
    )
    record_outcome(run_dir, outcome, run_id)
    return outcome


def record_outcome(run_dir: Path, outcome: ValidationOutcome, run_id: str | None) -> None:
    """`summary.json` and `report.html` (readable offline, unlike Data Docs) for `outcome`,
    from the results written beside them. Called again when the validate stage adds to
    an outcome (`firechunk.run.stages`), so both say which pages were set aside."""
    write_json(RunDir(run_dir).validation_summary, outcome.model_dump(mode="json"))
    write_report_from_files(run_dir, outcome, run_id)


def _run_suites(
    suites: dict[str, dict[str, Any]],
    tables: Mapping[str, pl.DataFrame],
    docs_dir: Path,
    run_id: str | None,
) -> dict[str, dict[str, Any]]:
    """Validate each table with its suite; build Data Docs into `docs_dir`; return GX JSON."""
    # Imported here: GX takes seconds to import, and only validation needs it.
    import great_expectations as gx
    from great_expectations.core.expectation_suite import ExpectationSuite
    from great_expectations.core.run_identifier import RunIdentifier

    context = gx.get_context(mode="ephemeral", project_config=_context_config(docs_dir))
    source = context.data_sources.add_pandas("firechunk_run")
    # The time is given: without it GX parses the run id as a date, and an id such as
    # "20261127T030719Z-2360ad" reads as a UTC offset of 2360 hours and fails.
    gx_run_id = RunIdentifier(run_name=run_id, run_time=datetime.now(UTC))
    results: dict[str, dict[str, Any]] = {}
    for name, suite_json in suites.items():
        suite = context.suites.add(ExpectationSuite(**suite_json))
        if len(suite.expectations) != len(suite_json["expectations"]):
            # GX logs and skips an expectation it cannot build; we refuse to run without it.
            raise SuiteFileError(
                f"suite {name!r}: GX accepted {len(suite.expectations)} of "
                f"{len(suite_json['expectations'])} expectations (see the GX error logged above)"
            )
        batch = source.add_dataframe_asset(name).add_batch_definition_whole_dataframe(name)
        definition = context.validation_definitions.add(
            gx.ValidationDefinition(name=name, data=batch, suite=suite)
        )
        result = definition.run(
            batch_parameters={"dataframe": tables[name].to_pandas()},  # GX reads pandas
            # COMPLETE: every failing row's ids, to know every page a failure belongs to.
            result_format={
                "result_format": "COMPLETE",
                "partial_unexpected_count": _PARTIAL_UNEXPECTED,
                "unexpected_index_column_names": ID_COLUMNS[name],
            },
            run_id=gx_run_id,
        )
        results[name] = result.to_json_dict()
    context.build_data_docs(site_names=[DATA_DOCS_SITE])
    return results


def _context_config(docs_dir: Path):
    """In-memory stores, one Data Docs site in `docs_dir`, no analytics, no progress bars.

    The site's pages are drawn by GX's views with their templates compiled once per process
    (`firechunk.validate.data_docs_views`), not once per validation."""
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    return DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False),
        data_docs_sites={
            DATA_DOCS_SITE: {
                "class_name": "SiteBuilder",
                "show_how_to_buttons": False,
                "store_backend": {
                    "class_name": "TupleFilesystemStoreBackend",
                    "base_directory": str(docs_dir),
                },
                "site_index_builder": {
                    "class_name": "DefaultSiteIndexBuilder",
                    "view": _VIEWS["index"],
                },
                "site_section_builders": {
                    section: {"view": _VIEWS["page"]}
                    for section in ("expectations", "validations", "profiling")
                },
            }
        },
    )


def _replace_dir(source: Path, target: Path) -> None:
    """Move the directory `source` to `target` with one rename, replacing an older one."""
    if target.exists():
        old = target.with_name(f".{target.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(target, old)
        os.replace(source, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(source, target)


def _outcome(suite: str, result: dict[str, Any]) -> ExpectationOutcome:
    """Condense one GX expectation result to what a person needs to act on it."""
    config = result["expectation_config"]
    kwargs = config.get("kwargs", {})
    details = result.get("result") or {}
    meta = config.get("meta") or {}
    page_scoped = bool(meta.get("page_scoped"))
    return ExpectationOutcome(
        suite=suite,
        name=meta.get("name", config["type"]),
        expectation_type=config["type"],
        column=_columns(kwargs),
        success=bool(result["success"]),
        element_count=details.get("element_count"),
        unexpected_count=details.get("unexpected_count"),
        observed_value=details.get("observed_value"),
        examples=_examples(details),
        error=_error(result.get("exception_info")),
        page_scoped=page_scoped,
        failed_urls=_failed_urls(suite, details) if page_scoped and not result["success"] else [],
    )


def _failed_urls(suite: str, details: dict[str, Any]) -> list[str]:
    """Each page URL named by the expectation's failing rows, once, in row order."""
    column = PAGE_URL_COLUMN[suite]
    rows = details.get("unexpected_index_list") or []
    return list(dict.fromkeys(row[column] for row in rows if row.get(column)))


def _trimmed(suite_result: dict[str, Any]) -> dict[str, Any]:
    """GX's result for a suite with at most `_KEPT_UNEXPECTED` failing rows per expectation:
    a run broken everywhere must not write every one of its rows into the results."""
    results = []
    for result in suite_result["results"]:
        details = dict(result.get("result") or {})
        for key in ("unexpected_list", "unexpected_index_list"):
            if key in details:
                details[key] = details[key][:_KEPT_UNEXPECTED]
        details.pop("unexpected_index_query", None)
        results.append({**result, "result": details})
    return {**suite_result, "results": results}


def _columns(kwargs: dict[str, Any]) -> str | None:
    if "column" in kwargs:
        return kwargs["column"]
    if "column_A" in kwargs:
        return f"{kwargs['column_A']}, {kwargs['column_B']}"
    if "column_list" in kwargs:
        return ", ".join(kwargs["column_list"])
    return None


def _examples(details: dict[str, Any]) -> list[dict[str, Any]]:
    rows = details.get("partial_unexpected_index_list")
    if not rows:
        rows = [{"value": value} for value in details.get("partial_unexpected_list") or []]
    return rows[:EXAMPLES_PER_EXPECTATION]


def _error(exception_info: Any) -> str | None:
    """GX reports errors either as one record or as a dict of records keyed by metric."""
    if not isinstance(exception_info, dict):
        return None
    records = [exception_info] if "raised_exception" in exception_info else exception_info.values()
    messages = [
        record.get("exception_message") or "error"
        for record in records
        if isinstance(record, dict) and record.get("raised_exception")
    ]
    return "; ".join(dict.fromkeys(messages)) or None
