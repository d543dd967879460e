"""Every kind of night says its verdict first: on the one card the flow itself makes (the
Prefect UI lists a flow run's own artifacts before its task runs'), and in a log with no
traceback for an outcome firechunk expects.

The nights run as a deployment's do: a flow run created on a real Prefect API, then
`python -m prefect.flow_engine flows/rebuild.py:rebuild` in a process of its own, the
command a worker runs (its engine logs a failed flow's error again, which a direct call
does not)."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from firechunk.pipeline import Request, run_pipeline
from firechunk.schemas.publish import PublishResult
from firechunk.schemas.validation import ValidationOutcome
from firechunk.tasks.artifacts import CARDS, validation_markdown
from firechunk.tasks.verdict import allowed_values, readable, result_verdict, validation_verdict
from firechunk.validate.suites import validate_run
from tests.prefect_helpers import ROOT, SAMPLE_CRAWL, artifacts_of, flow_run
from tests.synthetic_runs import over_limit_run

CARD_MAKERS = re.compile(
    r"""(?:card_key|table_card|markdown_card|card_description)\(\s*"([^"]+)\""""
)


def test_a_failed_validation_names_the_value_and_what_is_allowed_first(tmp_path):
    outcome = validate_run(over_limit_run(), tmp_path, run_id="over-limit")
    verdict = validation_verdict(outcome, allowed_values(tmp_path))

    assert verdict.headline == (
        "VALIDATION FAILED: chunks/token_count_within_limit: token_count 1206 on 1 of 9 "
        "rows, allowed between 1 and 1000"
    )
    said = validation_markdown(outcome, None, tmp_path)
    assert f"- **{verdict.details[0]}**" in said.split("| suite |")[0]  # above the table
    rows = [line for line in said.splitlines() if line.startswith("| chunks ")]
    assert rows[0].startswith("| chunks | token_count_within_limit | token_count | **failed**")
    examples = said[said.index("failing rows") :]
    assert "token_count 1206, chunk_id " in examples and "{" not in examples


def test_values_read_as_numbers_not_reprs():
    assert readable({"token_ratio": np.float64(1.030812345678), "rows": 3}) == (
        "token_ratio 1.0308123, rows 3"
    )
    assert readable("np.float64(0.5)") == "0.5"
    assert readable(["none", "same_page"]) == "none, same_page"


def test_a_refused_night_says_what_the_guard_counted(tmp_path):
    refused = (
        "the run drops 56 of its 68 pages (82%) and 90 of its 120 chunks (75%) of the last "
        "good run, more than 20%: not published."
    )
    result = PublishResult(
        run_id="r", run_dir=tmp_path, published=False, latest=tmp_path / "latest",
        validation=ValidationOutcome(success=True, evaluated_expectations=23,
                                     successful_expectations=23, seconds=1.0),
        refused=refused,
    )  # fmt: skip
    verdict = result_verdict(result)
    assert verdict.headline == (
        "REFUSED: the shrink guard, 56 of 68 pages dropped, 90 of 120 chunks dropped"
    )
    assert refused in verdict.details[0]


def test_runs_tell_a_refused_run_from_a_failed_one(tmp_path):
    from firechunk.publish import SHRINK_GUARD
    from firechunk.run.history import list_runs
    from firechunk.schemas.publish import RunStatus

    for run_id, failed in (("refused", [SHRINK_GUARD]), ("failed", ["chunks/run_has_chunks"])):
        run_dir = tmp_path / "runs" / run_id
        run_dir.mkdir(parents=True)
        (run_dir / "run.json").write_text("{}")
        status = RunStatus(run_id=run_id, status="failed", failed_expectations=failed)
        (run_dir / "status.json").write_text(status.model_dump_json())
    verdicts = {row.run_id: row.verdict for row in list_runs(tmp_path)}
    assert verdicts == {"refused": "refused", "failed": "failed"}


def test_every_card_the_dashboard_makes_has_its_place_in_the_order():
    made = set()
    for path in [*(ROOT / "tasks").glob("*.py"), *(ROOT / "flows").glob("*.py")]:
        made |= set(CARD_MAKERS.findall(path.read_text(encoding="utf-8")))
    assert made and made <= set(CARDS), made - set(CARDS)
    assert next(iter(CARDS)) == "rebuild-verdict"


def deployed_night(tmp_path: Path, parameters: dict[str, Any]) -> Any:
    """A flow run of `rebuild` with `parameters`, run as a worker runs it: its flow run."""
    from prefect.client.orchestration import get_client
    from prefect.settings import get_current_settings

    from firechunk.flows.rebuild import rebuild

    with get_client(sync_client=True) as client:
        created = client.create_flow_run(rebuild, parameters=parameters)
    settings = get_current_settings()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.pop("FIRECRAWL_API_KEY", None)
    env.update(
        PREFECT__FLOW_RUN_ID=str(created.id),
        PREFECT_API_URL=str(settings.api.url),
        PREFECT_HOME=str(settings.home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
    )
    engine = [sys.executable, "-m", "prefect.flow_engine", "flows/rebuild.py:rebuild"]
    finished = subprocess.run(
        engine, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert "Traceback" not in finished.stderr, finished.stderr
    return flow_run(created.id)


def records_of(flow_run_id) -> list:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    with get_client(sync_client=True) as client:
        return client.read_logs(
            log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))
        )


def first_card(flow_run_id) -> Any:
    """The one artifact of the flow run itself, not of a task run: the first card."""
    artifacts = artifacts_of(flow_run_id).values()
    [own] = [artifact for artifact in artifacts if artifact.task_run_id is None]
    return own


def shrunk(path: Path) -> Path:
    crawl = json.loads(SAMPLE_CRAWL.read_text(encoding="utf-8"))
    crawl["data"] = crawl["data"][:3]
    path.write_text(json.dumps(crawl), encoding="utf-8")
    return path


def test_a_refused_night_logs_one_error_line_and_leads_with_its_verdict(prefect_api, tmp_path):
    data_dir = tmp_path / "data"
    collection = "docs.example.com/docs"
    good = run_pipeline(Request(replay=SAMPLE_CRAWL, data_dir=data_dir, run_id="good"))
    assert good.result is not None and good.result.published

    night = deployed_night(tmp_path, {
        "replay": str(shrunk(tmp_path / "shrunk.json")), "data_dir": str(data_dir),
        "run": {"workers": 1, "collection": collection},
    })  # fmt: skip

    assert night.state.is_failed()
    records = records_of(night.id)
    errors = [record.message for record in records if record.level >= logging.ERROR]
    assert len(errors) == 1 and "--allow-shrink" in errors[0], errors
    assert not [record for record in records if "Traceback" in record.message]
    card = first_card(night.id)
    assert card.key == "rebuild-verdict"
    assert card.description == (
        "REFUSED: the shrink guard, 9 of 13 pages dropped, 9 of 17 chunks dropped"
    )
    others = [a.description for a in artifacts_of(night.id).values() if a.task_run_id]
    assert others and all(re.match(r"\d+ · ", text) for text in others), others


def test_a_night_without_a_key_stops_before_any_task_naming_the_secret_block(prefect_api, tmp_path):
    night = deployed_night(tmp_path, {
        "data_dir": str(tmp_path / "data"), "crawl": {"secret_block": "no-such-block"},
    })  # fmt: skip

    assert night.state.is_failed() and "'no-such-block'" in night.state.message
    records = records_of(night.id)
    errors = [record.message for record in records if record.level >= logging.ERROR]
    assert len(errors) == 1 and "FIRECRAWL_API_KEY" in errors[0], errors
    assert not [record for record in records if "Traceback" in record.message]
    assert first_card(night.id).description == (
        "CRAWL FAILED: no Firecrawl API key (Secret block 'no-such-block' or $FIRECRAWL_API_KEY)"
    )


def test_a_night_that_fails_validation_leads_with_the_failing_expectation(prefect_api, tmp_path):
    crawl = json.loads(SAMPLE_CRAWL.read_text(encoding="utf-8"))
    for page in crawl["data"]:
        page["markdown"] = ""
    bad = tmp_path / "empty.json"
    bad.write_text(json.dumps(crawl), encoding="utf-8")

    night = deployed_night(tmp_path, {
        "replay": str(bad), "data_dir": str(tmp_path / "data"), "run": {"workers": 1},
    })  # fmt: skip

    assert night.state.is_failed()
    records = records_of(night.id)
    assert not [record for record in records if "Traceback" in record.message]
    assert not [record for record in records if "NoneType: None" in record.message]
    assert first_card(night.id).description == (
        "VALIDATION FAILED: chunks/run_has_chunks: value 0, allowed at least 1"
    )


def test_the_flow_refuses_a_night_that_cannot_start_before_any_task(tmp_path):
    """`flows.checks`: the data directory, the URLs and the key, each the error the command
    line would give, found without starting anything."""
    from firechunk.commands.exits import CommandError
    from firechunk.crawl.errors import MissingApiKeyError
    from firechunk.flows.checks import check_before_start
    from firechunk.settings import CrawlSettings

    def no_secret(block, env):
        return None, "nowhere"

    a_file = tmp_path / "file"
    a_file.write_text("")
    with pytest.raises(CommandError, match="is a file, not a directory"):
        check_before_start(Request(replay=SAMPLE_CRAWL, data_dir=a_file), no_secret)
    bad_api = Request(crawl=CrawlSettings(api_url="ftp://firecrawl"), data_dir=tmp_path)
    with pytest.raises(CommandError, match="must start with http"):
        check_before_start(bad_api, no_secret)
    with pytest.raises(MissingApiKeyError, match="'firecrawl-api-key'"):
        check_before_start(Request(data_dir=tmp_path), no_secret)
    check_before_start(Request(data_dir=tmp_path), lambda block, env: ("fc-key", "here"))
    check_before_start(Request(replay=SAMPLE_CRAWL, data_dir=tmp_path), no_secret)
    assert list(tmp_path.iterdir()) == [a_file]  # nothing made to find that out
