"""Text the database cannot take never reaches a published chunk.

Postgres refuses a NUL (U+0000) in text and a tsvector over about 1 MB, and one such value
failed the whole nightly load. A crawl with a good page beside pages carrying a NUL in
their title, body or URL, and a title of 120,000 words: the run publishes, the bad-title
pages are quarantined (`unusable-title`), a NUL in a body is dropped, a NUL in a URL makes
it `bad-url`, and no published chunk holds a NUL anywhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from firechunk.chunker.cleanup import CleanupOptions, clean_markdown
from firechunk.pipeline import Request, run_pipeline
from firechunk.run.plan import NOT_CHUNKED, plan_crawl
from firechunk.run.titles import MAX_TITLE_CHARS, clean_title, recorded_title, title_problem
from firechunk.urls import url_problem
from tests.chunk_helpers import crawl, run_pages, sentences

BASE = "https://docs.example.com/unusable"
NUL = "\x00"
HUGE_TITLE = "word " * 120_000
# No H1: the chunker falls back to the page title for the chunks' h1.
SHARED_MARKDOWN = sentences(300, 2, "shared")
LONG_URL = f"{BASE}/{'a' * 1_500}"  # a page without a title is titled by its URL


def page(url: str, markdown: str, title: str | None = None) -> dict[str, Any]:
    metadata = {"sourceURL": url} | ({"title": title} if title is not None else {})
    return {"markdown": markdown, "metadata": metadata}


def nul_body() -> str:
    return (
        f"# NUL{NUL} body\n\n{sentences(150, 4, 'prose')} Here{NUL}is a NUL.\n\n"
        f"## Code{NUL}\n\n```python\nprint('a{NUL}b')\n```\n\n{sentences(150, 5, 'after')}\n"
    )


PAGES = [
    page(f"{BASE}/good", "# Good page\n\n" + sentences(300, 1, "good"), "Good page"),
    page(f"{BASE}/nul-title", SHARED_MARKDOWN, f"Bad{NUL}title"),
    page(f"{BASE}/huge-title", "# Huge\n\n" + sentences(300, 3, "huge"), HUGE_TITLE),
    page(f"{BASE}/nul-body", nul_body(), "NUL body"),
    page(f"{BASE}/nul{NUL}path", "# Path\n\n" + sentences(200, 6, "path"), "NUL path"),
    page(f"https://docs.exa{NUL}mple.com/host", "# Host\n\n" + sentences(200, 7, "host"), "Host"),
    # The same markdown as /nul-title, crawled after it: chunked with its own title.
    page(f"{BASE}/copy", SHARED_MARKDOWN, "Copy of the shared page"),
    page(f"{BASE}/control-title", "# Ctl\n\n" + sentences(200, 8, "ctl"), "Bell\x07 and\x1b title"),
    page(LONG_URL, "# Long\n\n" + sentences(200, 9, "long")),
]


@pytest.fixture(scope="module")
def unusable_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("unusable")
    crawl = tmp / "unusable.json"
    crawl.write_text(json.dumps({"success": True, "status": "completed", "data": PAGES}))
    night = run_pipeline(Request(replay=crawl, data_dir=tmp / "data", run_id="unusable"))
    assert night.start is not None
    return night.start.run_dir, night.written, night.outcome, night.result


def quarantined(run_dir: Path) -> dict[str, dict[str, Any]]:
    lines = (run_dir / "quarantine.jsonl").read_text().splitlines()
    return {record["url"]: record for record in map(json.loads, lines)}


def chunks_of(run_dir: Path) -> list[dict[str, Any]]:
    return json.loads((run_dir / "chunks.json").read_text())


def strings(value: object) -> list[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in (key, *strings(item))]
    if isinstance(value, list):
        return [s for item in value for s in strings(item)]
    return []


def test_the_run_publishes(unusable_run):
    _, _, outcome, published = unusable_run
    assert outcome.success, [f"{f.suite}/{f.name}" for f in outcome.failed]
    assert published.published


def test_no_published_chunk_holds_a_nul(unusable_run):
    run_dir = unusable_run[0]
    assert "\\u0000" not in (run_dir / "chunks.json").read_text()
    assert not [s for s in strings(chunks_of(run_dir)) if NUL in s]


def test_no_published_title_is_over_the_bound(unusable_run):
    titles = {chunk["metadata"]["page_title"] for chunk in chunks_of(unusable_run[0])}
    h1s = {chunk["data"]["headers"]["h1"] for chunk in chunks_of(unusable_run[0])}
    assert max(map(len, titles | h1s)) <= len(LONG_URL)


def test_pages_with_an_unusable_title_are_quarantined_with_the_reason(unusable_run):
    run_dir, written, _, _ = unusable_run
    records = quarantined(run_dir)
    nul_title, huge = records[f"{BASE}/nul-title"], records[f"{BASE}/huge-title"]
    assert nul_title["reason"] == huge["reason"] == "unusable-title"
    assert "NUL" in nul_title["detail"] and "character 4" in nul_title["detail"]
    assert "600,000 characters" in huge["detail"]
    # The record names the page without carrying the bad title whole.
    assert NUL not in nul_title["page_title"]
    assert len(huge["page_title"]) <= 1_001
    cited = {chunk["metadata"]["sourceUrl"] for chunk in chunks_of(run_dir)}
    assert not {f"{BASE}/nul-title", f"{BASE}/huge-title"} & cited
    assert written.report.pages_quarantined == len(records)


def test_a_url_with_a_nul_is_a_bad_url(unusable_run):
    records = quarantined(unusable_run[0])
    assert records[f"{BASE}/nul{NUL}path"]["reason"] == "bad-url"
    assert records[f"https://docs.exa{NUL}mple.com/host"]["reason"] == "bad-url"
    assert "U+0000" in records[f"{BASE}/nul{NUL}path"]["detail"]


def test_a_bad_title_costs_its_page_only(unusable_run):
    chunks = chunks_of(unusable_run[0])
    by_url: dict[str, list[dict[str, Any]]] = {}
    for chunk in chunks:
        by_url.setdefault(chunk["metadata"]["sourceUrl"], []).append(chunk)
    good = " ".join(chunk["data"]["text"] for chunk in by_url[f"{BASE}/good"])
    assert sentences(300, 1, "good") in good
    copy = by_url[f"{BASE}/copy"]
    assert {c["metadata"]["page_title"] for c in copy} == {"Copy of the shared page"}
    assert {c["data"]["headers"]["h1"] for c in copy} == {"Copy of the shared page"}
    assert not any(c["metadata"]["aliases"] for c in copy)


def test_a_nul_in_the_body_is_dropped_and_the_page_kept(unusable_run):
    chunks = chunks_of(unusable_run[0])
    body = [c for c in chunks if c["metadata"]["sourceUrl"] == f"{BASE}/nul-body"]
    text = "\n".join(chunk["data"]["text"] for chunk in body)
    assert "Hereis a NUL." in text
    assert "print('ab')" in text
    assert sentences(150, 5, "after") in text
    assert {c["data"]["headers"]["h1"] for c in body} == {"NUL body"}
    assert ["NUL body", "Code"] in [path for c in body for path in c["metadata"]["sections"]]


def test_control_characters_leave_a_title_and_no_title_falls_back_to_the_url(unusable_run):
    chunks = chunks_of(unusable_run[0])
    title_of = {c["metadata"]["sourceUrl"]: c["metadata"]["page_title"] for c in chunks}
    assert title_of[f"{BASE}/control-title"] == "Bell and title"
    assert title_of[LONG_URL] == LONG_URL


# -- the rules, one by one ---------------------------------------------------------------


def test_a_title_is_unusable_past_the_bound_or_with_a_nul():
    url = f"{BASE}/page"
    assert title_problem("t" * MAX_TITLE_CHARS, url) is None
    assert title_problem("t" * (MAX_TITLE_CHARS + 1), url) == (
        "unusable-title",
        "the title is 1,001 characters, over 1,000",
    )
    assert title_problem(f"{NUL}Title", url) == (
        "unusable-title",
        "the title has a NUL (U+0000) at character 1",
    )
    assert title_problem("Tabs\tand\nnewlines are kept", url) is None
    assert title_problem(LONG_URL, LONG_URL) is None  # no title: the URL's to judge


def test_control_characters_but_nul_leave_a_title():
    assert clean_title("A\x1b[0m title\x7f") == "A[0m title"
    assert clean_title(f"Keeps{NUL}NUL") == f"Keeps{NUL}NUL"  # unusable: quarantined
    assert clean_title("\x07\x08") is None  # nothing left: titled by the URL
    assert clean_title("") is None


def test_a_recorded_title_holds_no_nul_and_is_cut():
    assert recorded_title(f"Bad{NUL}title") == "Bad\u2400title"
    assert recorded_title(HUGE_TITLE) == HUGE_TITLE[:MAX_TITLE_CHARS] + "…"
    assert recorded_title("Good page") == "Good page"


@pytest.mark.parametrize("character", [NUL, "\x07", "\x1b", "\x7f", "\t"])
def test_a_url_with_a_control_character_is_a_bad_url(character):
    reason, detail = url_problem(f"{BASE}/a{character}b")
    assert reason == "bad-url"
    assert f"U+{ord(character):04X}" in detail
    assert url_problem(f"  {BASE}/page\n") is None  # white space around it is not in it


def test_a_page_with_an_unusable_title_is_not_chunked_and_stands_for_no_other():
    markdown = sentences(100, 1)
    pages = crawl(
        page(f"{BASE}/bad", markdown, f"Bad{NUL}"),
        page(f"{BASE}/good", markdown, "Good"),
        page(f"{BASE}/huge", "other", HUGE_TITLE),
    ).data
    plan = plan_crawl(pages)
    assert [page.chunked_as for page in plan.pages] == [NOT_CHUNKED, 1, NOT_CHUNKED]
    assert plan.to_chunk == [1] and plan.many_urls == frozenset()


def test_an_unusable_title_costs_its_url_nothing_it_had_not_lost_otherwise():
    """The same URL crawled twice: the copy with a usable title is chunked, whichever came
    first, as when the other copy is quarantined for any reason."""
    for titles in ((f"Bad{NUL}", "Good"), ("Good", f"Bad{NUL}")):
        run = run_pages(
            *(
                {"markdown": sentences(100, n), "metadata": {"sourceURL": f"{BASE}/p", "title": t}}
                for n, t in enumerate(titles)
            )
        )
        assert {c.metadata.page_title for c in run.chunks} == {"Good"}
        assert [(q.url, q.reason) for q in run.quarantine] == [(f"{BASE}/p", "unusable-title")]
        assert sorted(p.status for p in run.pages) == ["chunked", "quarantined"]


def test_nuls_are_dropped_from_code_too_with_every_rule_off():
    markdown = f"# T{NUL}\n\n```\nx = '{NUL}{NUL}'\n```\n\nText{NUL}.\n"
    for options in (CleanupOptions(), CleanupOptions.none()):
        page = clean_markdown(markdown, options)
        assert NUL not in page.text
        assert page.lines == ["# T", "", "```", "x = ''", "```", "", "Text.", ""]
        assert page.removed["nul"] == [NUL * 4]


def test_the_report_counts_the_nuls_dropped():
    run = run_pages(
        {"markdown": f"# T\n\n{sentences(100, 1)}{NUL}\n", "metadata": {"sourceURL": f"{BASE}/n"}}
    )
    assert run.report.cleanup_tokens_removed["nul"] >= 1
    assert not any(NUL in c.data.text for c in run.chunks)
