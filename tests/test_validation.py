"""GX validation of a run: the suites in `expectations/` run for real, and they are what runs."""

from __future__ import annotations

import json
import shutil

import pytest

from firechunk.schemas.report import DuplicateChunk
from firechunk.tokens import TokenCounter
from firechunk.validate.suites import SUITES_DIR, SuiteFileError, load_suite_files, validate_run
from firechunk.validate.tables import build_tables
from tests.synthetic_runs import BASE, clean_run


def _expectation_count(suites_dir) -> int:
    return sum(
        len(json.loads(path.read_text())["expectations"]) for path in suites_dir.glob("*.json")
    )


@pytest.fixture(scope="module")
def clean_validation(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("clean")
    return run_dir, validate_run(clean_run(), run_dir, run_id="clean-run")


def test_a_clean_run_passes_every_expectation_of_every_suite(clean_validation):
    _, outcome = clean_validation
    assert outcome.success, [item.name for item in outcome.failed]
    assert outcome.evaluated_expectations == _expectation_count(SUITES_DIR)
    assert set(outcome.suites) == {"chunks", "pages", "headers"}
    # Conditional expectations looked at rows: the clean run exercises each of them.
    for item in outcome.expectations:
        assert item.element_count != 0, item.name


def test_results_json_and_data_docs_are_written(clean_validation):
    run_dir, outcome = clean_validation
    validation = run_dir / "validation"
    for suite in ("chunks", "pages", "headers"):
        result = json.loads((validation / "results" / f"{suite}.json").read_text())
        assert result["suite_name"] == suite
        assert result["success"] is True
    docs = validation / "data_docs"
    assert (run_dir / outcome.data_docs_index).is_file()
    pages = sorted(path.name for path in (docs / "validations").rglob("*.html"))
    assert len(pages) == 3
    summary = json.loads((validation / "summary.json").read_text())
    assert summary["evaluated_expectations"] == outcome.evaluated_expectations
    assert not [path for path in validation.iterdir() if path.name.startswith(".")]


def test_the_suite_files_on_disk_are_what_runs(clean_validation, tmp_path):
    """Lowering the token limit in the file (1000 -> 500) fails the 604-token chunk."""
    suites_dir = tmp_path / "expectations"
    shutil.copytree(SUITES_DIR, suites_dir)
    chunks_suite = json.loads((suites_dir / "chunks.json").read_text())
    limit = _by_name(chunks_suite, "token_count_within_limit")
    assert limit["kwargs"]["max_value"] == {"$setting": "hard_tokens"}  # the run's own limit
    limit["kwargs"]["max_value"] = 500
    (suites_dir / "chunks.json").write_text(json.dumps(chunks_suite))

    outcome = validate_run(clean_run(), tmp_path / "run", suites_dir=suites_dir)

    assert clean_validation[1].success
    assert [item.name for item in outcome.failed] == ["token_count_within_limit"]
    failure = outcome.failed[0]
    assert failure.unexpected_count == 1
    assert failure.examples[0]["token_count"] > 500
    assert failure.examples[0]["sourceUrl"] == f"{BASE}/auth"


def test_a_page_without_chunks_fails_page_has_chunks(tmp_path):
    run = clean_run()
    rpc = run.chunks.pop(6)  # the only chunk of /rpc
    assert rpc.metadata.source_url == f"{BASE}/rpc"
    run.report.duplicates.clear()  # and it had no chunks dropped as duplicates

    outcome = validate_run(run, tmp_path)

    failed = {item.name: item for item in outcome.failed}
    assert "page_has_chunks" in failed
    assert failed["page_has_chunks"].examples[0]["url"] == f"{BASE}/rpc"


def test_an_expectation_gx_cannot_build_is_refused_not_skipped(tmp_path):
    suites_dir = tmp_path / "expectations"
    shutil.copytree(SUITES_DIR, suites_dir)
    headers = json.loads((suites_dir / "headers.json").read_text())
    headers["expectations"].append(
        {"type": "expect_column_values_to_be_lovely", "kwargs": {}, "meta": {"name": "lovely"}}
    )
    (suites_dir / "headers.json").write_text(json.dumps(headers))
    with pytest.raises(SuiteFileError, match="accepted 2 of 3 expectations"):
        validate_run(clean_run(), tmp_path / "run", suites_dir=suites_dir)


def test_every_expectation_needs_a_unique_name(tmp_path):
    shutil.copytree(SUITES_DIR, tmp_path, dirs_exist_ok=True)
    pages = json.loads((tmp_path / "pages.json").read_text())
    del pages["expectations"][0]["meta"]["name"]
    (tmp_path / "pages.json").write_text(json.dumps(pages))
    with pytest.raises(SuiteFileError, match="unique meta.name"):
        load_suite_files(tmp_path)


def test_a_missing_suite_file_is_an_error(tmp_path):
    shutil.copytree(SUITES_DIR, tmp_path, dirs_exist_ok=True)
    (tmp_path / "headers.json").unlink()
    with pytest.raises(SuiteFileError, match="one suite per table"):
        load_suite_files(tmp_path)


# The derived columns the suites check, without GX.


def _tables(run):
    return {name: table.to_pandas() for name, table in build_tables(run, TokenCounter()).items()}


def test_prev_chunk_link_names_what_the_link_points_at():
    run = clean_run()
    auth_intro, storage_intro = run.chunks[0], run.chunks[3]
    run.chunks[1].data.overlap_text.prev_chunk_id = storage_intro.chunk_id
    run.chunks[2].data.overlap_text.prev_chunk_id = "not-a-chunk"
    links = _tables(run)["chunks"]["prev_chunk_link"].tolist()
    assert auth_intro.data.overlap_text.prev_chunk_id is None
    assert links[:3] == ["none", "other_page", "unknown_chunk"]
    assert links[4] == "same_page"


def test_heading_coverage_by_headers_by_text_and_missing():
    run = clean_run()
    run.chunks[5].data.headers.h2 = "Something else"  # "Need help?" now only in the text
    run.chunks[2].data.headers.h2 = None  # "Sessions": still in the text as "## Sessions"
    run.chunks[2].data.text = run.chunks[2].data.text.replace("## Sessions", "Sessions:")
    headers = _tables(run)["headers"].set_index(["url", "heading"])["coverage"]
    assert headers[(f"{BASE}/auth", "Sign in")] == "headers"
    assert headers[(f"{BASE}/storage", "Need help?")] == "text"
    assert headers[(f"{BASE}/storage", "Bucket policies")] == "text"  # "## Bucket `policies`"
    assert headers[(f"{BASE}/auth", "Sessions")] == "missing"
    assert headers[(f"{BASE}/auth/", "Sign in")] == "headers"  # alias: via its page's chunks
    assert headers[(f"{BASE}/empty", "Empty")] == "page_quarantined"


def test_page_tokens_count_alias_chunks_and_dropped_duplicates():
    pages = _tables(clean_run())["pages"].set_index("url")
    alias, original = pages.loc[f"{BASE}/auth/"], pages.loc[f"{BASE}/auth"]
    assert alias["chunks_found"] == original["chunks_found"] == 3
    assert alias["alias_target_status"] == "chunked"
    rpc = pages.loc[f"{BASE}/rpc"]
    assert rpc["dropped_duplicate_tokens"] > 0
    assert (
        rpc["chunk_tokens_found"] + rpc["dropped_duplicate_tokens"] == rpc["tokens_after_cleanup"]
    )
    assert rpc["token_ratio"] == 1.0


def test_pages_find_their_chunks_by_canonical_url_whatever_the_order():
    """The chunker labels chunks with the canonical URL; an alias may come first."""
    run = clean_run()
    run.pages.insert(0, run.pages.pop(3))  # the alias https://…/auth/ before /auth
    run.report.duplicates.append(
        DuplicateChunk(source_url=f"{BASE}/auth", chunk_index=3, duplicate_of="x", token_count=5)
    )
    pages = _tables(run)["pages"].set_index("url")
    assert pages.loc[f"{BASE}/auth/", "alias_target_status"] == "chunked"
    assert pages.loc[f"{BASE}/auth/", "dropped_duplicate_tokens"] == 5


def _by_name(suite: dict, name: str) -> dict:
    return next(exp for exp in suite["expectations"] if exp["meta"]["name"] == name)


def test_a_run_id_that_reads_as_a_date_validates(tmp_path):
    # dateutil reads the suffix "-2360ad" as a UTC offset of 2360 hours.
    outcome = validate_run(clean_run(), tmp_path, run_id="20261127T030719Z-2360ad")
    assert outcome.success, [item.name for item in outcome.failed]
