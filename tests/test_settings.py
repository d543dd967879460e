"""The run's settings are declared once (`firechunk.settings`) and everything else follows
from them: the commands' options and help, the flows' parameters, run.json, the page
cache's key and the expectation suites' thresholds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from prefect.exceptions import ParameterTypeError
from typer.testing import CliRunner

from firechunk.cli import app
from firechunk.flows.rebuild import rebuild
from firechunk.settings import SECTIONS, CrawlSettings, DatabaseSettings, RunSettings
from firechunk.validate.suites import validate_run
from tests.synthetic_runs import clean_run

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample" / "crawl.json"


def chunk(data_dir: Path, *options: str):
    return CliRunner().invoke(
        app, ["chunk", str(SAMPLE), "--data-dir", str(data_dir), "--workers", "1", *options]
    )


def latest_chunks(data_dir: Path) -> list[dict]:
    return json.loads((data_dir / "latest" / "chunks.json").read_text())


def checked_limit(run_dir: Path) -> int:
    """The ceiling the chunks suite applied to token_count, as GX recorded it."""
    result = json.loads((run_dir / "validation" / "results" / "chunks.json").read_text())
    [limit] = [
        r["expectation_config"]["kwargs"]["max_value"]
        for r in result["results"]
        if r["expectation_config"]["meta"]["name"] == "token_count_within_limit"
    ]
    return limit


def test_a_run_with_other_token_limits_is_chunked_cached_and_checked_by_them(tmp_path):
    data_dir = tmp_path / "data"
    small = chunk(data_dir, "--soft-tokens", "500", "--hard-tokens", "600", "--min-tokens", "60")
    assert small.exit_code == 0, small.output
    first = (data_dir / "latest").resolve()
    counts = [c["metadata"]["token_count"] for c in latest_chunks(data_dir)]
    assert max(counts) <= 600 < 984  # the sample's largest chunk at the defaults
    assert checked_limit(first) == 600
    recorded = json.loads((first / "run.json").read_text())["settings"]
    assert (recorded["soft_tokens"], recorded["hard_tokens"], recorded["min_tokens"]) == (
        500,
        600,
        60,
    )

    default = chunk(data_dir)
    assert default.exit_code == 0, default.output
    second = (data_dir / "latest").resolve()
    assert second != first and checked_limit(second) == 1000
    changes = json.loads((second / "changes.json").read_text())
    assert changes["pages_reused"] == 0  # outcomes made to other limits are not reused
    # 25 chunks became 17: bigger chunks are fewer, not lost, so the shrink guard let it be
    assert max(c["metadata"]["token_count"] for c in latest_chunks(data_dir)) > 600


def test_the_suite_checks_a_run_against_its_own_hard_limit(tmp_path):
    """The chunks suite's ceiling is the run's `hard_tokens`, not a number in the file."""
    assert validate_run(clean_run(), tmp_path / "default").success
    strict = RunSettings(min_tokens=5, soft_tokens=8, hard_tokens=10)
    outcome = validate_run(clean_run(), tmp_path / "strict", settings=strict)
    assert [(f.suite, f.name) for f in outcome.failed] == [("chunks", "token_count_within_limit")]


def test_limits_out_of_order_are_refused_in_one_line_before_a_run_starts(tmp_path):
    result = chunk(tmp_path / "data", "--soft-tokens", "1200")
    assert result.exit_code == 2
    assert "min_tokens <= soft_tokens <= hard_tokens, got 100, 1200, 1000" in result.output
    assert not (tmp_path / "data" / "runs").exists()


def test_a_field_the_settings_refuse_names_its_option(tmp_path):
    result = CliRunner().invoke(app, ["load", "--data-dir", str(tmp_path), "--embedder", "openai"])
    assert result.exit_code == 2
    assert "--embedder openai needs --model" in result.output


def test_each_option_of_a_setting_says_what_its_field_says():
    commands = typer.main.get_command(app).commands
    fields = {name: field for section in SECTIONS for name, field in section.model_fields.items()}
    shown = 0
    for command in ("rebuild", "chunk", "load", "search"):
        for option in commands[command].params:
            own = (command, option.name) in {
                ("load", "allow_shrink"),
                ("load", "collection"),  # which doc set's latest, not the run's collection
                ("search", "collection"),
            }
            if option.name in fields and not own:
                assert option.help == fields[option.name].description, (command, option.name)
                shown += 1
    assert shown >= len(fields)


def test_the_flow_takes_the_sections_as_the_deployment_writes_them():
    parameters = rebuild.validate_parameters(
        {"crawl": {"site_url": "https://docs.example.com", "limit": 5}, "run": {"workers": 1}}
    )
    assert parameters["crawl"] == CrawlSettings(site_url="https://docs.example.com", limit=5)
    assert parameters["run"] == RunSettings(workers=1)
    with pytest.raises(ParameterTypeError, match="keep_runs"):
        rebuild.validate_parameters({"run": {"keep_runs": 1}})
    with pytest.raises(ParameterTypeError, match="needs --model"):
        rebuild.validate_parameters({"database": {"embedder": "openai"}})
    assert DatabaseSettings(embedder="openai", embedding_model="m").embedder_options() == {
        "model": "m",
        "dimensions": None,
    }
