"""A whole crawl through `chunk_crawl` (rules 1, 4, 7, 8, 9): canonical URLs, aliases,
duplicate chunks, stable ids, quarantine, unclosed fences, giant pages, clean headers."""

from __future__ import annotations

import json
import random
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firechunk.chunker.page import ChunkerOptions
from firechunk.crawlfile import CrawlFileError, CrawlReader, read_crawl
from firechunk.run import executors, plan
from firechunk.run.memory import chunk_crawl
from firechunk.run.outcomes import StoredOutcome, chunk_pages
from firechunk.run.plan import PageInput
from firechunk.schemas.page import CrawledPage
from firechunk.tokens import DEFAULT_ENCODING
from firechunk.urls import canonical_by_w3lib, canonical_url
from tests.chunk_helpers import count, crawl, page, run_markdown, run_pages, sentences

BASE = "https://docs.example.com/guides"


def guide(seed: int, title: str = "Guide") -> str:
    return f"# {title}\n\n{sentences(200, seed, 'a')}\n\n## Step\n\n{sentences(200, seed, 'b')}"


# -- canonical URLs -----------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        f"{BASE}/auth",
        f"{BASE}/auth/",
        f"{BASE}/auth#sign-in",
        f"{BASE}/auth/#sign-in",
        f"{BASE}/auth?utm_source=newsletter&utm_medium=email",
        f"{BASE}/auth?gclid=abc&fbclid=def",
        "HTTPS://DOCS.EXAMPLE.COM/guides/auth",
        f"  {BASE}/auth  ",
    ],
)
def test_spellings_of_one_page_share_a_canonical_url(url):
    assert canonical_url(url) == f"{BASE}/auth"


_LABEL = st.text("abcdefghijklmnopqrstuvwxyzABC0123456789-", min_size=1, max_size=8)
_SEGMENT = st.text(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_~.", min_size=1, max_size=10
)


@settings(max_examples=300, deadline=None)
@given(
    scheme=st.sampled_from(["http", "https", "HTTPS"]),
    host=st.lists(_LABEL, min_size=1, max_size=3),
    path=st.lists(_SEGMENT, max_size=4),
    slash=st.booleans(),
    tail=st.sampled_from(["", "?a=1", "?utm_source=x", "#frag", ":8080"]),
)
def test_plain_urls_skip_w3lib_with_the_same_result(scheme, host, path, slash, tail):
    """The fast path (`_PLAIN`) gives what the full rules give, on URLs that take it and on
    near misses that must not (upper case, dot segments, queries, fragments, ports)."""
    url = f"{scheme}://{'.'.join(host)}" + "".join(f"/{s}" for s in path) + "/" * slash + tail
    assert canonical_url(url) == canonical_by_w3lib(url)


def test_canonical_urls_keep_what_makes_a_different_page():
    assert canonical_url(f"{BASE}/auth?b=2&a=1") == f"{BASE}/auth?a=1&b=2"
    assert canonical_url(f"{BASE}/auth?page=2") != canonical_url(f"{BASE}/auth?page=3")
    assert canonical_url(f"{BASE}/Auth") != canonical_url(
        f"{BASE}/auth"
    )  # paths are case-sensitive
    assert canonical_url("https://docs.example.com") == "https://docs.example.com/"
    assert canonical_url("") == ""


def test_chunks_carry_the_canonical_url():
    run = run_pages(page(guide(1), url=f"{BASE}/auth/?utm_campaign=x#top"))
    assert {c.metadata.source_url for c in run.chunks} == {f"{BASE}/auth"}


# -- aliases: one page under several URLs ----------------------------------------------


def test_the_plan_marks_a_page_served_at_other_urls_too():
    """Identical markdown at two URLs is one page (a single-page app) whose URLs name its
    sections; the same URL crawled twice is not."""
    pages = crawl(
        page(guide(1), url=f"{BASE}/insert"),
        page(guide(1), url=f"{BASE}/upsert"),
        page(guide(2), url=f"{BASE}/auth"),
        page(guide(2), url=f"{BASE}/auth/"),
    ).data
    planned = plan.plan_crawl(pages)
    inputs = plan.page_inputs(pages, planned, planned.to_chunk)
    assert [(p.index, p.many_urls) for p in inputs] == [(0, True), (2, False)]


def test_identical_pages_are_chunked_once_with_the_other_urls_as_aliases():
    body = guide(1)
    run = run_pages(
        page(body, url=f"{BASE}/auth"),
        page(body, url=f"{BASE}/auth/?utm_source=x"),
        page(body, url=f"{BASE}/login"),
    )
    single = run_pages(page(body, url=f"{BASE}/auth"))
    lines = {line for c in single.chunks for line in c.data.text.splitlines()}
    assert {line for c in run.chunks for line in c.data.text.splitlines()} == lines
    assert len(run.report.duplicates) == len(single.report.duplicates) == 0
    expected = [f"{BASE}/auth/?utm_source=x", f"{BASE}/login"]
    assert all(c.metadata.aliases == expected for c in run.chunks)
    assert run.report.aliases == {f"{BASE}/auth": expected}
    assert [p.status for p in run.pages] == ["chunked", "alias", "alias"]
    assert {p.alias_of for p in run.pages[1:]} == {f"{BASE}/auth"}
    assert (run.report.pages_in, run.report.pages_chunked, run.report.pages_aliased) == (3, 1, 2)
    assert run.report.duplicate_chunks_dropped == 0  # aliases are not counted as duplicates


def test_the_page_with_the_smallest_url_stands_for_its_aliases_whatever_the_order():
    body = guide(2)
    one = run_pages(page(body, url=f"{BASE}/b"), page(body, url=f"{BASE}/a"))
    two = run_pages(page(body, url=f"{BASE}/a"), page(body, url=f"{BASE}/b"))
    assert {c.metadata.source_url for c in one.chunks} == {f"{BASE}/a"}
    assert [c.chunk_id for c in one.chunks] == [c.chunk_id for c in two.chunks]


def test_flattened_code_variants_of_one_page_are_one_page():
    def variant(markers: list[str]) -> str:
        code = "\n".join(
            f"{m}\n{line}"
            for m, line in zip(
                markers, ["import os", "client = make()", "client.run()"], strict=True
            )
        )
        return f"# API\n\n{sentences(150, 3)}\n\n`\n{code}\n`\n\nDone with words here."

    run = run_pages(
        page(variant(["_10", "_10", "_10"]), url=f"{BASE}/python/a"),
        page(variant(["1", "2", "3"]), url=f"{BASE}/python/b"),
    )
    assert [p.status for p in run.pages] == ["chunked", "alias"]
    [chunk] = run.chunks
    assert "```\nimport os\nclient = make()\nclient.run()\n```" in chunk.data.text
    assert chunk.metadata.aliases == [f"{BASE}/python/b"]


def test_pages_that_differ_are_both_chunked():
    run = run_pages(page(guide(1), url=f"{BASE}/a"), page(guide(2), url=f"{BASE}/b"))
    assert [p.status for p in run.pages] == ["chunked", "chunked"]
    assert run.report.aliases == {}


# -- duplicate chunks across pages ----------------------------------------------------


def test_a_chunk_repeated_on_another_page_is_dropped_and_counted():
    shared = f"## Shared footer\n\n{sentences(600, 9, 's')}"
    first = page(f"# One\n\n{sentences(600, 1)}\n\n{shared}", url=f"{BASE}/one")
    second = page(f"# Two\n\n{sentences(600, 2)}\n\n{shared}", url=f"{BASE}/two")
    run = run_pages(first, second)
    texts = [c.data.text for c in run.chunks]
    assert sum(shared in t for t in texts) == 1
    assert run.report.duplicate_chunks_dropped == 1
    [dropped] = run.report.duplicates
    kept = next(c for c in run.chunks if shared in c.data.text)
    assert dropped.source_url == f"{BASE}/two"
    assert dropped.duplicate_of == kept.chunk_id
    assert dropped.token_count == kept.metadata.token_count
    assert run.pages[1].chunk_count == 1
    assert len(set(texts)) == len(texts)
    # The kept chunk names the page whose copy was dropped, with that copy's breadcrumb.
    assert kept.to_json()["metadata"]["also_on"] == [
        {"url": f"{BASE}/two", "breadcrumb": ["Two", "Shared footer"]}
    ]


def test_duplicates_are_found_whatever_the_white_space():
    # A chunk repeated with other line breaks and spacing is the same text.
    text = sentences(600, 5, "d")
    first = page(f"# One\n\n{sentences(600, 1)}\n\n## Note\n\n{text}", url=f"{BASE}/one")
    spaced = text.replace(". ", ".\n", 3).replace(" ", "  ", 2)
    second = page(f"# Two\n\n{sentences(600, 2)}\n\n## Note\n\n{spaced}", url=f"{BASE}/two")
    assert run_pages(first, second).report.duplicate_chunks_dropped == 1


# -- chunk ids --------------------------------------------------------------------------


def many_pages(n: int = 12) -> list[dict]:
    return [page(guide(i, f"Guide {i}"), url=f"{BASE}/page-{i}") for i in range(n)]


def test_chunk_ids_are_uuid5_and_unique():
    run = run_pages(*many_pages(4))
    ids = [c.chunk_id for c in run.chunks]
    assert all(uuid.UUID(i).version == 5 for i in ids)
    assert len(set(ids)) == len(ids)


def test_chunk_ids_are_stable_across_reruns_and_worker_counts(monkeypatch):
    monkeypatch.setattr(plan, "MIN_CHARS_PER_WORKER", 1)  # a pool even for small pages
    pages = many_pages()
    one = chunk_crawl(crawl(*pages), workers=1)
    again = chunk_crawl(crawl(*pages), workers=1)
    two = chunk_crawl(crawl(*pages), workers=2)
    ids = [c.chunk_id for c in one.chunks]
    assert ids == [c.chunk_id for c in again.chunks] == [c.chunk_id for c in two.chunks]
    assert [c.to_json() for c in one.chunks] == [c.to_json() for c in two.chunks]
    assert one.quarantine == two.quarantine


def test_small_work_is_not_worth_a_second_worker():
    small = [PageInput(i, f"u{i}", "t", "x" * 1000) for i in range(10)]
    large = [PageInput(i, f"u{i}", "t", "x" * plan.MIN_CHARS_PER_WORKER) for i in range(3)]
    assert plan.useful_workers(small, 2) == 1
    assert plan.useful_workers(large, 2) == 2
    assert plan.useful_workers(large, 8) == 3
    assert plan.useful_workers([], 4) == 1


@pytest.mark.parametrize(
    ("pages", "size", "workers", "expected"),
    [
        (100, 1_000, 1, 2),  # two per worker
        (100, 1_000, 2, 4),
        (100, 1_000_000, 1, 13),  # 100 MB: no batch above MAX_BATCH_CHARS (8 MB)
        (100, 1_000_000, 2, 14),  # ... and a multiple of the workers
    ],
)
def test_batches_are_two_per_worker_unless_that_makes_them_too_large(
    monkeypatch, pages, size, workers, expected
):
    inputs = [PageInput(i, f"u{i}", "t", "x" * size) for i in range(pages)]
    batches = list(plan.make_batches(iter(inputs), workers, plan.characters(inputs)))
    assert len(batches) == expected
    assert [page for batch in batches for page in batch] == inputs
    assert max(sum(len(p.markdown) for p in batch) for batch in batches) <= 8_000_000


class CountedBatches:
    """Batches of one small page each, counting how many were taken: with the results
    received, how many were in flight at most."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.taken = 0
        self.most_in_flight = 0

    def __iter__(self):
        for index in range(self.count):
            self.taken += 1
            yield [PageInput(index, f"{BASE}/{index}", "t", guide(index))]

    def received(self, results: int) -> None:
        self.most_in_flight = max(self.most_in_flight, self.taken - results)


@pytest.mark.parametrize(
    ("executor", "bound"),
    [
        (executors.in_process, 1),
        (executors.process_pool(1), 2),  # the first two taken: is there more than one?
        (executors.process_pool(2), executors.QUEUED_PER_WORKER * 2),
        (executors.process_pool(3), executors.QUEUED_PER_WORKER * 3),
    ],
)
def test_an_executor_takes_the_batches_a_few_at_a_time(executor, bound):
    batches = CountedBatches(24)
    indexes = []
    for outcomes in executor(batches, DEFAULT_ENCODING, ChunkerOptions()):
        batches.received(len(indexes))
        indexes += [outcome.index for outcome in outcomes]
    assert sorted(indexes) == list(range(24))  # every batch, in any order
    assert 1 <= batches.most_in_flight <= bound


def test_a_chunk_id_depends_on_its_url_and_its_text():
    body = f"# Guide\n\n{sentences(600, 3, 'a')}\n\n## Step\n\n{sentences(600, 3, 'b')}"
    base = run_pages(page(body, url=f"{BASE}/x")).chunks
    moved = run_pages(page(body, url=f"{BASE}/y")).chunks
    edited = run_pages(page(body.replace("## Step", "## Next step"), url=f"{BASE}/x")).chunks
    assert base[0].chunk_id != moved[0].chunk_id
    assert base[0].chunk_id == edited[0].chunk_id  # same first chunk text
    assert base[1].chunk_id != edited[1].chunk_id


def test_url_spelling_does_not_change_ids():
    body = guide(4)
    plain = run_pages(page(body, url=f"{BASE}/x")).chunks
    spelled = run_pages(page(body, url=f"{BASE}/x/?utm_source=a#frag")).chunks
    assert [c.chunk_id for c in plain] == [c.chunk_id for c in spelled]


# -- quarantine -------------------------------------------------------------------------

BAD_PAGES = {
    "empty": "",
    "blank": "  \n\n\t\n",
    "header-only": "# Title\n\nSub title\n---------\n\n## Nothing here [\\#](\\#nothing)",
    "binary": "PK\x03\x04\x00\x00binary\x00zip",
    "html": "<!DOCTYPE html>\n<html><head><title>x</title></head><body>Hi</body></html>",
}
REASONS = {
    "empty": "empty",
    "blank": "empty",
    "header-only": "header-only",
    "binary": "binary",
    "html": "html",
}


def test_bad_pages_are_quarantined_with_their_reason_and_the_run_carries_on():
    good = guide(7)
    pages = [page(good, url=f"{BASE}/good-1")]
    pages += [page(md, url=f"{BASE}/{name}", title=name) for name, md in BAD_PAGES.items()]
    pages += [page(None, url=f"{BASE}/none"), page(guide(8), url=f"{BASE}/good-2")]
    run = run_pages(*pages)
    reasons = {q.url.rsplit("/", 1)[-1]: q.reason for q in run.quarantine}
    assert reasons == {**REASONS, "none": "not-text"}
    assert {c.metadata.source_url for c in run.chunks} == {f"{BASE}/good-1", f"{BASE}/good-2"}
    assert run.report.pages_quarantined == len(BAD_PAGES) + 1
    assert run.report.pages_chunked == 2
    statuses = {p.url.rsplit("/", 1)[-1]: p.status for p in run.pages}
    assert statuses["good-1"] == statuses["good-2"] == "chunked"
    assert all(statuses[name] == "quarantined" for name in reasons)
    record = next(q for q in run.quarantine if q.reason == "html")
    assert record.page_title == "html" and record.markdown_chars == len(BAD_PAGES["html"])


def test_a_deeply_nested_quote_is_chunked_and_later_pages_parse_right():
    # mistletoe parses a quote's insides by recursion, once per level: 3000 levels raised
    # RecursionError with setext headings switched off, and they stayed off for the rest
    # of the process. Only the top level is parsed now, so the page is chunked.
    deep = "> " * 3000 + "too deep for the parser"
    later = f"Setext title\n============\n\n{sentences(150, 1)}"
    run = run_pages(page(deep, url=f"{BASE}/deep"), page(later, url=f"{BASE}/later"))
    assert run.quarantine == [] and run.pages[0].status == "chunked"
    texts = [c.data.text for c in run.chunks if c.metadata.source_url == f"{BASE}/deep"]
    assert texts[0].startswith("> > > ") and texts[-1].endswith("too deep for the parser")
    [chunk] = [c for c in run.chunks if c.metadata.source_url == f"{BASE}/later"]
    assert chunk.data.headers.h1 == "Setext title"
    assert [h.text for h in run.pages[1].headings] == ["Setext title"]


class _Unreadable(str):
    """Text whose line endings cannot be normalised: stands for a bug in the chunker."""

    def replace(self, *args, **kwargs):
        raise ValueError("cannot read this text")


def chunk_batch(pages: list[PageInput]) -> list[StoredOutcome]:
    """The worker's outcomes for `pages`, unpacked."""
    packed = chunk_pages(pages, "cl100k_base", ChunkerOptions())
    return [StoredOutcome.from_payload(outcome.index, outcome.payload) for outcome in packed]


def test_a_page_the_chunker_fails_on_becomes_a_parse_error_and_the_batch_carries_on():
    pages = [PageInput(0, "u0", "t", _Unreadable(guide(1))), PageInput(1, "u1", "t", guide(2))]
    failed, chunked = chunk_batch(pages)
    assert (failed.reason, failed.detail) == ("parse-error", "ValueError: cannot read this text")
    assert failed.drafts == []
    assert chunked.reason is None and chunked.drafts


def test_non_utf8_pages_are_quarantined_when_read_from_a_crawl_file(tmp_path):
    junk = bytes(random.Random(0).randrange(128, 256) for _ in range(4000))
    good = json.dumps(guide(1)).encode()
    document = (
        b'{"status": "completed", "data": ['
        b'{"markdown": "' + junk + b'", "metadata": {"sourceURL": "' + BASE.encode() + b'/junk"}},'
        b'{"markdown": ' + good + b', "metadata": {"sourceURL": "' + BASE.encode() + b'/good"}}]}'
    )
    path = tmp_path / "crawl.json"
    path.write_bytes(document)
    run = chunk_crawl(read_crawl(path))
    assert [(q.url, q.reason) for q in run.quarantine] == [(f"{BASE}/junk", "not-utf8")]
    assert {c.metadata.source_url for c in run.chunks} == {f"{BASE}/good"}


def test_lone_surrogates_in_a_crawl_file_become_replacement_characters(tmp_path):
    # JSON may escape half of a surrogate pair; as Python text it cannot be encoded to
    # UTF-8, which ids, hashes and every output need. It used to fail the whole run.
    markdown = guide(1).replace("now.", "now \ud800.", 1)
    metadata = {"sourceURL": f"{BASE}/a\udfff", "title": "T\ud83d"}
    document = json.dumps({"data": [{"markdown": markdown, "metadata": metadata}]})
    assert "\\ud800" in document  # written as JSON escapes, as a crawl file can hold them
    path = tmp_path / "crawl.json"
    path.write_text(document)
    run = chunk_crawl(read_crawl(path))
    assert run.quarantine == [] and run.chunks
    assert "now \ufffd." in run.chunks[0].data.text
    assert run.chunks[0].metadata.page_title == "T\ufffd"
    assert run.chunks[0].metadata.source_url.endswith("/a%EF%BF%BD")


def _as_read_whole(raw: bytes) -> list[dict]:
    """A crawl file's pages as the whole file parsed at once gives them: the reference."""
    document = json.loads(raw.decode("utf-8", errors="replace"))
    pages = document if isinstance(document, list) else document["data"]
    return [CrawledPage.model_validate(item).model_dump() for item in pages]


STREAMED_FILES = {
    "status-after-data": (
        b'{"data": [{"markdown": "# A", "metadata": {"sourceURL": "https://x.test/a",'
        b' "n": [1, 2.5, {"deep": null}]}}, {"markdown": "# B"}], "status": "completed",'
        b' "total": 2}'
    ),
    "bare-list": b'[{"markdown": "# A", "metadata": null}, {"markdown": 42}]',
    "not-utf8": b'{"data": [{"markdown": "# A \xff\xfe", "metadata": {"title": "T\xc3"}}]}',
    "lone-surrogate": (
        b'{"data": [{"markdown": "# A \\ud800.", "metadata": {"title": "T\\udfff"}}]}'
    ),
    "surrogate-pair": b'{"data": [{"markdown": "# A \\ud83d\\ude00"}], "status": "completed"}',
}


@pytest.mark.parametrize("name", STREAMED_FILES)
def test_a_crawl_file_read_a_page_at_a_time_gives_the_pages_of_the_whole_file(tmp_path, name):
    raw = STREAMED_FILES[name]
    path = tmp_path / "crawl.json"
    path.write_bytes(raw)
    expected = _as_read_whole(raw)
    reader = CrawlReader(path, allow_partial=False)
    assert [page.model_dump() for page in reader] == expected
    assert [page.model_dump() for page in reader] == expected  # and again, the same
    assert reader.summary is not None and reader.summary.status == "completed"
    assert [page.model_dump() for page in read_crawl(path).data] == expected
    replaced = name in ("not-utf8", "lone-surrogate")
    assert ("\ufffd" in expected[0]["markdown"]) == replaced  # the bytes, half a pair


def test_a_status_after_the_pages_still_refuses_a_partial_crawl(tmp_path):
    path = tmp_path / "crawl.json"
    path.write_text(json.dumps({"data": [page(guide(1), url=f"{BASE}/a")], "status": "scraping"}))
    with pytest.raises(CrawlFileError, match="'scraping', not 'completed'"):
        list(CrawlReader(path, allow_partial=False))
    assert len(read_crawl(path).data) == 1


def test_a_crawl_read_again_must_be_the_crawl_planned():
    pages = crawl(*(page(guide(i), url=f"{BASE}/{i}") for i in range(3))).data
    planned = plan.plan_crawl(pages)
    assert [p.index for p in plan.page_inputs(pages, planned, planned.to_chunk)] == [0, 1, 2]
    for other in (pages[:2], [pages[0], pages[2], pages[1]], [*pages, pages[0]]):
        with pytest.raises(CrawlFileError, match="changed while it was chunked"):
            list(plan.page_inputs(other, planned, planned.to_chunk))


def test_markdown_that_is_not_text_in_a_crawl_file_quarantines_that_page_only(tmp_path):
    pages = [
        {"markdown": 42, "metadata": {"sourceURL": f"{BASE}/number"}},
        {"markdown": {"html": "<p>"}, "metadata": {"sourceURL": f"{BASE}/object"}},
        {"markdown": guide(1), "metadata": {"sourceURL": f"{BASE}/good"}},
    ]
    path = tmp_path / "crawl.json"
    path.write_text(json.dumps({"data": pages}))
    run = chunk_crawl(read_crawl(path))
    reasons = {q.url.rsplit("/", 1)[-1]: q.reason for q in run.quarantine}
    assert reasons == {"number": "not-text", "object": "not-text"}
    assert {c.metadata.source_url for c in run.chunks} == {f"{BASE}/good"}


def test_metadata_sent_as_lists_or_null_is_read_as_firecrawl_py_reads_it(tmp_path):
    # Firecrawl sends a list when a page repeats a meta tag (firecrawl/firecrawl#1071).
    pages = [
        {
            "markdown": guide(1),
            "metadata": {"title": ["Auth", "Supabase"], "sourceURL": [f"{BASE}/a", f"{BASE}/b"]},
        },
        {"markdown": guide(2), "metadata": {"title": ["Only"], "url": f"{BASE}/c"}},
        {"markdown": guide(3), "metadata": None},
    ]
    path = tmp_path / "crawl.json"
    path.write_text(json.dumps({"data": pages}))
    run = chunk_crawl(read_crawl(path))
    assert [(p.url, p.page_title) for p in run.pages[:2]] == [
        (f"{BASE}/a", "Auth, Supabase"),
        (f"{BASE}/c", "Only"),
    ]
    # The page with no metadata has no URL its chunks could cite: it costs that page only.
    assert run.report.pages_chunked == 2
    assert [(q.url, q.reason) for q in run.quarantine] == [("", "no-url")]


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("", "no-url"),
        ("https://docs.example.com:99999/guides/x", "bad-url"),  # port out of range
        ("https://[::1/guides/x", "bad-url"),  # unclosed IPv6 literal
        ("ftp://docs.example.com/guides/x", "bad-url"),
        ("/guides/x", "bad-url"),  # no scheme, no host
    ],
)
def test_a_page_without_a_usable_url_is_quarantined_and_the_rest_chunked(url, reason):
    run = run_pages(page(guide(1), url=url), page(guide(2), url=f"{BASE}/good"))
    assert [(q.url, q.reason) for q in run.quarantine] == [(url, reason)]
    assert {c.metadata.source_url for c in run.chunks} == {f"{BASE}/good"}
    assert url == "" or url in run.quarantine[0].detail


def test_a_few_replacement_characters_do_not_quarantine_a_page():
    markdown = guide(2).replace("now.", "now \ufffd.", 2)
    run = run_markdown(markdown)
    assert run.quarantine == [] and run.chunks


def test_chunk_batch_turns_any_markdown_object_into_an_outcome():
    pages = [PageInput(0, "u0", "t", b"bytes"), PageInput(1, "u1", "t", ["list"])]
    outcomes = chunk_batch(pages + [PageInput(2, "u2", "t", guide(1))])
    assert [o.reason for o in outcomes] == ["not-text", "not-text", None]
    assert outcomes[2].drafts


# -- page-level behaviour through the run ------------------------------------------------


def test_an_unclosed_fence_is_closed_and_reported_and_its_text_kept():
    code = "\n".join(f"const v{i} = {i}" for i in range(5))
    run = run_markdown(f"# T\n\nIntro text is here.\n\n```js\n{code}")
    [chunk] = run.chunks
    assert chunk.data.text.endswith(f"```js\n{code}\n```")
    [warning] = run.report.warnings
    assert "unclosed code fence" in warning and warning.startswith(BASE)


def test_a_giant_page_of_prose_is_chunked_within_the_limits():
    rng = random.Random(0)
    vocabulary = [
        "client",
        "table",
        "policy",
        "bucket",
        "function",
        "query",
        "token",
        "session",
        "row",
    ]
    paragraphs, size = [], 0
    while size < 2_000_000:
        paragraph = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(40, 200))) + "."
        paragraphs.append(paragraph)
        size += len(paragraph) + 2
    markdown = "# Giant\n\n" + "\n\n".join(paragraphs)
    run = run_markdown(markdown)
    assert run.quarantine == []
    tokens = [c.metadata.token_count for c in run.chunks]
    assert max(tokens) <= 1000
    assert sum(t < 100 for t in tokens) <= 1
    assert sum(tokens) >= count(markdown) - len(tokens) * 2  # nothing of note left out
    assert run.report.chunk_tokens.p100 == max(tokens)


def test_headers_metadata_is_clean_text():
    markdown = (
        "# The `supabase_auth_admin` role [\\#](\\#role)\n\n"
        f"{sentences(600, 1)}\n\n"
        "## **Sign in** with _magic_ [links](https://example.com) [\\#](\\#sign-in)\n\n"
        f"{sentences(600, 2)}"
    )
    chunks = run_markdown(markdown).chunks
    assert [(c.data.headers.h1, c.data.headers.h2) for c in chunks] == [
        ("The supabase_auth_admin role", None),
        ("The supabase_auth_admin role", "Sign in with magic links"),
    ]
    assert chunks[1].metadata.breadcrumb == [
        "The supabase_auth_admin role",
        "Sign in with magic links",
    ]
    assert "[\\#]" not in chunks[1].data.text  # the anchor is debris in the text too
    headings = [(h.level, h.text, h.line) for h in run_markdown(markdown).pages[0].headings]
    assert headings == [(1, "The supabase_auth_admin role", 1), (2, "Sign in with magic links", 5)]


def test_setext_and_atx_headings_both_make_headers():
    markdown = (
        f"Setext title\n============\n\n{sentences(600, 1)}\n\n"
        f"## Atx section\n\n{sentences(600, 2)}\n\n"
        f"Setext section\n--------------\n\n{sentences(600, 3)}"
    )
    chunks = run_markdown(markdown).chunks
    assert [(c.data.headers.h1, c.data.headers.h2) for c in chunks] == [
        ("Setext title", None),
        ("Setext title", "Atx section"),
        ("Setext title", "Setext section"),
    ]


def test_page_title_falls_back_to_the_url_and_h1_to_the_title():
    run = run_pages(page(f"{sentences(150, 1)}", url=f"{BASE}/untitled", title=None))
    [chunk] = run.chunks
    assert chunk.metadata.page_title == f"{BASE}/untitled"
    titled = run_pages(page(f"{sentences(150, 1)}", url=f"{BASE}/t", title="Nice title")).chunks[0]
    assert titled.data.headers.h1 == "Nice title"


def test_token_counts_are_exact_and_the_report_adds_up():
    pages = [page(guide(i) + "\n\nLoading...\n\nPIPConda\n", url=f"{BASE}/p{i}") for i in range(3)]
    run = run_pages(*pages)
    for chunk in run.chunks:
        assert chunk.metadata.token_count == count(chunk.data.text)
    report = run.report
    assert report.chunks_out == len(run.chunks)
    assert report.tokens_in_chunks == sum(c.metadata.token_count for c in run.chunks)
    assert report.cleanup_tokens_removed == {
        "loading": 3 * count("Loading..."),
        "tab_labels": 3 * count("PIPConda"),
        "blank_lines": 3 * count("\n\n"),  # the three that held them, at the page's end
    }
    assert report.tokens_before_cleanup == report.tokens_after_cleanup + sum(
        report.cleanup_tokens_removed.values()
    )
    for record in run.pages:
        assert record.chunk_tokens == sum(
            c.metadata.token_count
            for c in run.chunks
            if c.metadata.source_url == record.canonical_url
        )


def test_chunk_metadata_points_back_to_the_page():
    markdown = guide(5)
    chunks = run_markdown(markdown).chunks
    lines = markdown.split("\n")
    assert [c.metadata.chunk_index for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        first, last = chunk.metadata.source_lines
        text_lines = chunk.data.text.split("\n")
        assert lines[first - 1] == text_lines[0]
        assert lines[last - 1] == text_lines[-1]
    assert chunks[0].metadata.page_title == "Page"


@pytest.mark.parametrize("workers", [1, 2])
def test_a_page_over_its_time_budget_is_quarantined_and_the_rest_chunked(workers):
    slow = "\n\n".join(guide(seed) for seed in range(2500))  # about half a second
    options = ChunkerOptions(page_seconds=0.1)
    run = run_pages(
        page(slow, url=f"{BASE}/slow"),
        page(guide(1), url=f"{BASE}/good"),
        workers=workers,
        options=options,
    )
    assert [(q.url, q.reason) for q in run.quarantine] == [(f"{BASE}/slow", "timeout")]
    assert "0.1 s" in run.quarantine[0].detail
    assert {c.metadata.source_url for c in run.chunks} == {f"{BASE}/good"}
