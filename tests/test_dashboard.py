"""The dashboard answers the operator: figures as numbers, the URLs behind the counts, chunk
sizes, the last nights side by side, and a validation report that reads offline.

The flow tests run real rebuilds against a temporary Prefect API and read the artifacts
back through the Prefect client; the others check the pieces on real run directories.
"""

from __future__ import annotations

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
from firechunk.run.history import RunRow, list_runs
from firechunk.run.sizes import size_histogram, token_counts
from firechunk.validate.report import REPORT_HTML, write_report_from_files
from firechunk.validate.suites import validate_run
from flows.names import what_is_built
from flows.rebuild import rebuild
from schemas.changes import PageChange
from schemas.report import QuarantineRecord
from tasks.artifacts import MAX_ROWS, TREND_RUNS, added_rows, quarantine_rows
from tasks.database import database_markdown
from tests.prefect_helpers import SAMPLE_CRAWL, artifacts_of, table_of, task_runs_of
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
    "validation",
    "published as latest",
    "baseline run",
    "full rebuild",
    "full replacement",
}


def rows_of(artifact: Any) -> list[dict[str, Any]]:
    return json.loads(artifact.data) if isinstance(artifact.data, str) else artifact.data


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
                replay=crawl, data_dir=data_dir, run_id=run_id, workers=1, load=load,
                return_state=True,
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
    report_html = run_dir.resolve() / "validation" / REPORT_HTML
    assert str(report_html) in artifacts["validation-report"].data
    assert str(report_html) in artifacts["rebuild-outputs"].data
    assert "file://" not in artifacts["validation-report"].data + artifacts["rebuild-outputs"].data


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
    # Narrow enough for the dashboard at 1400 px: nine short columns, the rest said once.
    assert list(trend[0]) == [
        "run", "status", "db", "pages", "chunks", "quar.", "upsert", "delete", "s"
    ]  # fmt: skip
    described = artifacts["rebuild-trend"].description
    assert "docs.example.com/docs" in described and "(night-1)" in described


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


def database_of(state) -> str:
    return artifacts_of(state.state_details.flow_run_id)["rebuild-database"].data


def test_every_night_says_what_the_database_holds(nights):
    states, data_dir = nights["states"], nights["data_dir"]
    chunks = json.loads((data_dir / "runs" / "night-1" / "report.json").read_text())["chunks_out"]

    loaded = database_of(states["night-1"])
    assert loaded.startswith("# The database holds this run\n")
    assert "| collection | docs.example.com/docs |" in loaded
    assert "| run held | night-1 |" in loaded and f"| rows (chunks) | {chunks} |" in loaded
    assert "| in sync | this run |" in loaded and "all-MiniLM-L6-v2" in loaded
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
    assert "Run night-3 failed validation" in said and "| this run | night-3 (failed) |" in said
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


def test_a_failed_validation_fails_its_task_and_still_fills_the_dashboard(nights):
    state = nights["states"]["night-3"]
    assert state.type == StateType.FAILED
    flow_run_id = state.state_details.flow_run_id
    tasks = {run.name.rsplit("-", 1)[0]: run.state_type for run in task_runs_of(flow_run_id)}
    assert tasks["validate-run"] == StateType.FAILED
    assert tasks["report-to-dashboard"] == StateType.COMPLETED
    assert "publish-run" not in tasks

    artifacts = artifacts_of(flow_run_id)
    summary = table_of(artifacts["rebuild-summary"])
    assert summary["validation"] == "FAILED" and summary["published as latest"] == "no"
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

    html = (run_dir / "validation" / REPORT_HTML).read_text()
    status = json.loads((run_dir / "status.json").read_text())
    assert status["failed_expectations"]
    for failed in status["failed_expectations"]:
        suite, name = failed.split("/")
        assert f"{suite} / {name}" in html
    assert not EXTERNAL.findall(html)


def test_the_validation_report_names_every_failure_and_loads_nothing_from_elsewhere(tmp_path):
    run = over_limit_run()
    outcome = validate_run(run, tmp_path, run_id="over-limit")
    html = (tmp_path / "validation" / REPORT_HTML).read_text(encoding="utf-8")

    assert not outcome.success and outcome.failed
    assert "Validation FAILED: run over-limit" in html
    for item in outcome.failed:
        assert f"{item.suite} / {item.name}" in html
        assert f"{item.unexpected_count} of {item.element_count} rows break it" in html
    assert "<style>" in html and not EXTERNAL.findall(html)
    assert "https://" in html  # the failing rows' page URLs, shown as text, not links
    assert html.count("<tr") >= outcome.evaluated_expectations

    os.remove(tmp_path / "validation" / REPORT_HTML)
    remade = write_report_from_files(tmp_path / "validation", run_id="over-limit").read_text()
    strip = re.compile(r"Written [^<]*UTC")
    assert strip.sub("", remade) == strip.sub("", html)


def test_a_passed_report_says_so(tmp_path):
    outcome = validate_run(clean_run(), tmp_path, run_id="clean")
    html = (tmp_path / "validation" / REPORT_HTML).read_text(encoding="utf-8")
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
    rows = added_rows(pages)
    assert len(rows) == MAX_ROWS + 1
    assert rows[-1]["url"] == f"… and {5000 - MAX_ROWS} more: all 5000 are in changes.json"
    assert added_rows(pages[:MAX_ROWS]) == added_rows(pages)[:MAX_ROWS]
    records = [QuarantineRecord(url=f"u{i}", reason="empty") for i in range(MAX_ROWS + 1)]
    assert quarantine_rows(records)[-1]["url"].endswith("all 201 are in quarantine.jsonl")
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
        replay=SAMPLE_CRAWL, data_dir=tmp_path / "data", workers=1, run_id="n", return_state=True
    )
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


def test_a_database_is_read_without_creating_or_starting_one(tmp_path):
    assert read_held(None, tmp_path, "x.test/docs") == Held("x.test/docs")
    assert not (tmp_path / "postgres").exists()
    unreachable = read_held("postgresql://u:pw@127.0.0.1:1/x", tmp_path, "x.test/docs", timeout=2)
    assert unreachable.run_id is None and "u:***@127.0.0.1:1" in unreachable.problem


def test_a_run_is_named_for_the_site_its_pages_come_from(tmp_path):
    sections = ["docs/guides/.*", "docs/reference/javascript/.*", "^/docs/reference/cli/?$"]
    nightly = {"site_url": "https://supabase.com/docs", "include_paths": sections}
    assert (
        what_is_built(nightly) == "supabase.com/docs (guides, reference/javascript, reference/cli)"
    )
    assert what_is_built({"site_url": "https://supabase.com/docs"}) == "supabase.com/docs"
    many = {**nightly, "include_paths": [f"docs/s{i}/.*" for i in range(6)]}
    assert what_is_built(many) == "supabase.com/docs (s0, s1, s2, s3, +2 more)"
    replay = {"site_url": "https://supabase.com/docs", "replay": str(SAMPLE_CRAWL)}
    assert what_is_built(replay) == "docs.example.com/docs replay of crawl.json"
    assert what_is_built({"crawl_file": str(tmp_path / "gone.json")}) == "gone.json"
