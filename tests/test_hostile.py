"""A crawl of hostile pages beside ordinary ones: the run publishes, each hostile page is
chunked within the rules or quarantined with a reason, and the ordinary pages are whole.

The pages are made here (nothing from a real site): what an audit threw at firechunk,
and what a crawler meets on the open web.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from firechunk.pipeline import Request, run_pipeline
from tests.chunk_helpers import sentences

BASE = "https://docs.example.com/hostile"


def nested_list(depth: int) -> str:
    return "\n".join(f"{'  ' * level}- item at depth {level}" for level in range(depth))


HOSTILE: dict[str, object] = {
    "empty": "",
    "whitespace": " \n\t\n   \n",
    "huge-paragraph": "word " * 1_100_000,  # 5.5 MB, over the page size limit
    "unclosed-fence": "# Unclosed\n\n```python\n" + "\n".join(f"x = {i}" for i in range(300)),
    "binary": "".join(chr(i % 32) for i in range(5000)),
    "surrogates": "# Surrogates\n\nA lone surrogate \ud800 and another \udfff in text.\n",
    "long-code": "# Code\n\n```text\n" + "\n".join(f"line {i}" for i in range(20_000)) + "\n```\n",
    "wide-table": "# Table\n\n| a | b |\n|---|---|\n"
    + "\n".join(f"| {i} | {i * 2} |" for i in range(6000)),
    "deep-list": "# Deep\n\n" + nested_list(800),
    "headings-only": "# One\n\n## Two\n\n### Three\n",
    "html-document": "<!DOCTYPE html><html><head><title>x</title></head><body>hi</body></html>",
    "long-heading": "# " + "very long heading " * 600 + "\n\n" + sentences(200, 1),
    "one-long-word": "# Word\n\n" + "a" * 200_000,
    "control-and-emoji": "# Mixed 🚀\n\nZero\u200bwidth, RTL \u202eevil\u202c, bell \x07 and é.\n",
    "not-a-string": 12345,
}


def crawl_file(tmp_path: Path) -> Path:
    pages: list[dict[str, object]] = [
        {"markdown": sentences(400, n, f"ok{n}"), "metadata": {"sourceURL": f"{BASE}/ok-{n}"}}
        for n in range(3)
    ]
    pages += [
        {"markdown": markdown, "metadata": {"sourceURL": f"{BASE}/{name}", "title": name}}
        for name, markdown in HOSTILE.items()
    ]
    pages += [
        {"markdown": sentences(100, 7), "metadata": {}},  # no URL
        {
            "markdown": sentences(100, 8),
            "metadata": {"sourceURL": "https://docs.example.com:99999/hostile/port"},
        },
        {"markdown": sentences(100, 9), "metadata": {"sourceURL": f"{BASE}/ok-1/"}},  # same URL
    ]
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps({"success": True, "status": "completed", "data": pages}))
    return path


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    crawl = crawl_file(tmp)
    night = run_pipeline(Request(replay=crawl, data_dir=tmp / "data", run_id="hostile"))
    assert night.start is not None
    return night.start.run_dir, night.written, night.outcome, night.result


def test_the_hostile_crawl_publishes(hostile_run):
    _, _, outcome, published = hostile_run
    assert outcome.success, [f"{f.suite}/{f.name}" for f in outcome.failed]
    assert published.published


def test_every_hostile_page_is_chunked_or_quarantined_with_a_reason(hostile_run):
    run_dir, written, _, _ = hostile_run
    quarantined = {
        json.loads(line)["url"]: json.loads(line)["reason"]
        for line in (run_dir / "quarantine.jsonl").read_text().splitlines()
    }
    chunks = json.loads((run_dir / "chunks.json").read_text())
    cited = {c["metadata"]["sourceUrl"] for c in chunks}
    for name in HOSTILE:
        url = f"{BASE}/{name}"
        assert (url in cited) != (url in quarantined), name
    assert quarantined[f"{BASE}/empty"] == "empty"
    assert quarantined[f"{BASE}/huge-paragraph"] == "too-large"
    assert quarantined[f"{BASE}/binary"] == "binary"
    assert quarantined[f"{BASE}/html-document"] == "html"
    assert quarantined[f"{BASE}/not-a-string"] == "not-text"
    assert quarantined[f"{BASE}/deep-list"] == "too-deep"
    assert quarantined[""] == "no-url"
    assert quarantined["https://docs.example.com:99999/hostile/port"] == "bad-url"
    assert quarantined[f"{BASE}/ok-1"] == "duplicate-url"  # the later /ok-1/ is kept
    assert {f"{BASE}/ok-0", f"{BASE}/ok-1", f"{BASE}/ok-2"} <= cited
    assert all(c["metadata"]["token_count"] <= 1000 for c in chunks)
    assert written.report.pages_quarantined == len(quarantined)
