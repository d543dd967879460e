"""`firechunk chunk` end to end on the bundled sample, as a user runs it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample" / "crawl.json"


def run_cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "firechunk.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sample-run")
    result = run_cli("chunk", str(SAMPLE), "--out", str(out), "--workers", "2")
    assert result.returncode == 0, result.stderr
    return out


def test_writes_the_run_files_and_no_temporaries(sample_run: Path):
    names = sorted(p.name for p in sample_run.iterdir())
    assert names == [
        "changes.json",
        "chunks.json",
        "chunks.parquet",
        "pages.parquet",
        "quarantine.jsonl",
        "rebuild_state.sqlite",
        "report.json",
        "run.json",
        "status.json",
        "validation",
    ]
    assert json.loads((sample_run / "status.json").read_text())["status"] == "passed"


def test_publishes_into_a_relative_data_dir(chunked_sample):
    data_dir, result = chunked_sample  # `--data-dir data`, run in another directory
    latest = data_dir / "latest"
    assert latest.is_symlink()
    assert (latest / "chunks.json").is_file()
    assert "published" in result.stderr


def test_chunks_have_the_fixed_structure(sample_run: Path):
    chunks = json.loads((sample_run / "chunks.json").read_text())
    assert chunks
    for chunk in chunks:
        assert set(chunk) == {"chunk_id", "metadata", "data"}
        assert {"token_count", "sourceUrl", "page_title"} <= set(chunk["metadata"])
        assert {"breadcrumb", "chunk_index", "source_lines", "aliases"} <= set(chunk["metadata"])
        assert set(chunk["data"]) == {"headers", "text", "overlap_text"}
        assert set(chunk["data"]["headers"]) == {"h1", "h2"}
        assert set(chunk["data"]["overlap_text"]) == {"prev_chunk_id", "text"}
        assert 0 < chunk["metadata"]["token_count"] <= 1000
    ids = [chunk["chunk_id"] for chunk in chunks]
    assert len(ids) == len(set(ids))


def test_bad_pages_are_quarantined_with_reasons(sample_run: Path):
    lines = (sample_run / "quarantine.jsonl").read_text().splitlines()
    records = {json.loads(line)["url"]: json.loads(line)["reason"] for line in lines}
    assert records == {
        "https://docs.example.com/docs/guides/dashboard": "empty",
        "https://docs.example.com/docs/guides/integrations": "header-only",
    }


def test_report_accounts_for_every_page(sample_run: Path):
    report = json.loads((sample_run / "report.json").read_text())
    sample = json.loads(SAMPLE.read_text())
    assert report["pages_in"] == len(sample["data"])
    assert (
        report["pages_chunked"] + report["pages_aliased"] + report["pages_quarantined"]
        == report["pages_in"]
    )
    assert report["pages_aliased"] == 3  # same markdown twice, code-marker variant, utm URL
    assert report["tokens_before_cleanup"] > report["tokens_after_cleanup"]
    assert report["chunks_out"] == len(json.loads((sample_run / "chunks.json").read_text()))
    assert any("unclosed code fence" in warning for warning in report["warnings"])


def test_rerun_gives_the_same_bytes(sample_run: Path, chunked_sample):
    """Another run of the same crawl, with one worker rather than two, writes the same bytes."""
    data_dir, _ = chunked_sample
    rerun = data_dir / "latest" / "chunks.json"
    assert rerun.read_bytes() == (sample_run / "chunks.json").read_bytes()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "not JSON"),
        (b'{"pages": []}', "'data' list"),
        (b'{"data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
        (b'{"status": "scraping", "data": []}', "--allow-partial"),
    ],
)
def test_unreadable_crawl_file_is_a_clear_error(tmp_path: Path, content: bytes, message: str):
    crawl = tmp_path / "crawl.json"
    crawl.write_bytes(content)
    result = run_cli("chunk", str(crawl), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_directory_or_pages_jsonl_gets_a_hint(tmp_path: Path):
    pages = tmp_path / "pages.jsonl"
    pages.write_text('{"markdown": "x", "metadata": {}}\n')
    for given, hint in [(tmp_path, "give its crawl.json"), (pages, "use crawl.json beside it")]:
        result = run_cli("chunk", str(given), "--out", str(tmp_path / "out"))
        assert result.returncode == 2 and hint in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


def test_a_partial_crawl_is_chunked_only_when_allowed(tmp_path: Path):
    crawl = json.loads(SAMPLE.read_text())
    crawl["status"] = "scraping"
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps(crawl))
    refused = run_cli("chunk", str(partial), "--out", str(tmp_path / "refused"))
    assert refused.returncode == 2 and "'scraping'" in refused.stderr
    allowed = run_cli("chunk", str(partial), "--out", str(tmp_path / "out"), "--allow-partial")
    assert allowed.returncode == 0, allowed.stderr


def test_rebuild_refuses_a_bad_run_id_before_prefect_starts(tmp_path: Path):
    result = run_cli(
        "rebuild", "--replay", str(SAMPLE), "--data-dir", str(tmp_path), "--run-id", "../x"
    )
    assert result.returncode == 2 and "run id '../x'" in result.stderr
    assert "temporary server" not in result.stderr + result.stdout
    assert not (tmp_path / "runs").exists()


def test_non_utf8_bytes_do_not_abort_the_run(tmp_path: Path):
    good = "# Title\n\n" + "A sentence that is long enough to be a chunk of its own. " * 30
    junk = "# Junk\n\n" + "\ufffd" * 500
    crawl = {
        "data": [
            {"markdown": good, "metadata": {"sourceURL": "https://x.test/good", "title": "Good"}},
            {"markdown": junk, "metadata": {"sourceURL": "https://x.test/junk", "title": "Junk"}},
        ]
    }
    path = tmp_path / "crawl.json"
    raw = (
        json.dumps(crawl, ensure_ascii=False)
        .encode("utf-8")
        .replace("\ufffd".encode(), b"\xff\xfe")
    )
    path.write_bytes(raw)
    out = tmp_path / "out"
    result = run_cli("chunk", str(path), "--out", str(out), "--workers", "1")
    assert result.returncode == 0, result.stderr
    quarantined = [json.loads(line) for line in (out / "quarantine.jsonl").read_text().splitlines()]
    assert [(q["url"], q["reason"]) for q in quarantined] == [("https://x.test/junk", "not-utf8")]
    chunks = json.loads((out / "chunks.json").read_text())
    assert {c["metadata"]["sourceUrl"] for c in chunks} == {"https://x.test/good"}


def test_a_run_that_fails_validation_with_out_names_each_failed_expectation(tmp_path: Path):
    # A crawl with no pages (Firecrawl returned nothing): nothing to publish, and the
    # message says which expectations failed, as a failed publish does.
    crawl = tmp_path / "crawl.json"
    crawl.write_text('{"status": "completed", "data": []}')
    out = tmp_path / "out"
    result = run_cli("chunk", str(crawl), "--out", str(out))
    assert result.returncode == 1
    assert "FAILED validation (21/23 expectations passed" in result.stderr
    assert "chunks/run_has_chunks" in result.stderr and "pages/run_has_pages" in result.stderr
    assert json.loads((out / "status.json").read_text())["status"] == "failed"


def test_version_and_runs_list_each_run_with_its_verdict(chunked_sample, tmp_path: Path):
    assert run_cli("--version").stdout.startswith("firechunk ")
    data_dir = Path(shutil.copytree(chunked_sample[0], tmp_path / "data", symlinks=True))
    (data_dir / "runs" / "half-done").mkdir()
    listed = run_cli("runs", "--data-dir", str(data_dir))
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    published = next(line for line in lines if "<- latest" in line)
    assert published.split()[1:6] == ["passed", "13", "17", "2", "17"]
    assert any(line.startswith("half-done") and "unfinished" in line for line in lines)

    as_json = run_cli("runs", "--data-dir", str(data_dir), "--json")
    assert as_json.returncode == 0, as_json.stderr
    parsed = json.loads(as_json.stdout)
    [latest] = [run for run in parsed["runs"] if run["latest"]]
    assert (latest["verdict"], latest["pages"], latest["chunks"], latest["loaded"]) == (
        "passed", 13, 17, False
    )  # fmt: skip
    assert parsed["database"]["run_id"] is None  # nothing loaded
    nothing = run_cli("collections", "--data-dir", str(data_dir), "--json")
    assert nothing.returncode == 0 and json.loads(nothing.stdout) == []


def test_a_smaller_hard_limit_alone_brings_the_unset_limits_down(tmp_path: Path):
    """`--hard-tokens 500` alone: the soft limit follows it down, as in `RunSettings`; a
    soft limit given over it is refused, naming the limits."""
    chunked = run_cli("chunk", str(SAMPLE), "--out", str(tmp_path / "out"), "--hard-tokens", "500")
    assert chunked.returncode == 0, chunked.stderr
    settings = json.loads((tmp_path / "out" / "run.json").read_text())["settings"]
    assert (settings["min_tokens"], settings["soft_tokens"], settings["hard_tokens"]) == (
        100, 500, 500
    )  # fmt: skip
    chunks = json.loads((tmp_path / "out" / "chunks.json").read_text())
    assert max(chunk["metadata"]["token_count"] for chunk in chunks) <= 500
    refused = run_cli(
        "chunk", str(SAMPLE), "--out", str(tmp_path / "no"), "--hard-tokens", "500",
        "--soft-tokens", "600",
    )  # fmt: skip
    assert refused.returncode == 2
    assert "got 100, 600, 500" in refused.stderr
