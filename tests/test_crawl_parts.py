"""The crawl stage's parts: retry rules, the page log, names, replay, the CLI contract."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest
import requests
import tenacity
from firecrawl.v2.types import Document
from firecrawl.v2.utils.normalize import normalize_document_input
from typer.testing import CliRunner

from firechunk.cli import app
from firechunk.crawl import CrawlError, RetryPolicy, run_crawl
from firechunk.crawl.client import StatusPage, firecrawl_page
from firechunk.crawl.download import PageLog, download_results
from firechunk.crawl.errors import CrawlInUseError, TargetMismatchError
from firechunk.crawl.jobstate import crawl_lock, default_name
from firechunk.crawl.retry import (
    _WaitBackoffOrRetryAfter,
    is_transient,
    never_reached_firecrawl,
    retry_after_seconds,
)
from firechunk.crawlfile import read_crawl, write_crawl
from firechunk.schemas.job import CrawlJobState, CrawlTarget
from firechunk.schemas.page import CrawledPage, CrawlResult
from tests.crawl_fixtures import (
    CANARY_KEY,
    ROOT,
    fast_settings,
    page_size_for,
    read_pages,
    served_pages,
    urls_of,
)
from tests.firecrawl_server import FakeFirecrawl

CORPUS = ROOT.parent / "shared" / "corpus"
TARGET = CrawlTarget(url="https://docs.example.com/")


def _http_error(status: int, headers: dict[str, str] | None = None) -> requests.HTTPError:
    response = requests.Response()
    response.status_code = status
    response.headers.update(headers or {})
    return requests.HTTPError(f"status {status}", response=response)


# -- retry rules --------------------------------------------------------------------------


def test_retry_after_in_seconds_and_as_http_date():
    assert retry_after_seconds(_http_error(429, {"Retry-After": "7"})) == 7.0
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=120), usegmt=True)
    assert 100 < retry_after_seconds(_http_error(429, {"Retry-After": later})) <= 120
    assert retry_after_seconds(_http_error(429)) is None
    assert retry_after_seconds(_http_error(429, {"Retry-After": "soon"})) is None


def test_wait_is_never_shorter_than_retry_after_and_stays_bounded():
    policy = RetryPolicy(initial_wait=0.01, max_wait=0.05, jitter=0.0, max_retry_after=30)
    wait = _WaitBackoffOrRetryAfter(policy)

    def wait_after(error: BaseException) -> float:
        state = tenacity.RetryCallState(tenacity.Retrying(), fn=None, args=(), kwargs={})
        state.set_exception((type(error), error, None))
        return wait(state)

    assert wait_after(_http_error(500)) == pytest.approx(0.01)
    assert wait_after(_http_error(429, {"Retry-After": "7"})) == 7.0
    assert wait_after(_http_error(429, {"Retry-After": "86400"})) == 30  # bounded


def test_which_errors_are_retried():
    for status in (429, 500, 502, 503, 504):
        assert is_transient(_http_error(status))
    for status in (400, 401, 402, 403, 404):
        assert not is_transient(_http_error(status))
    assert is_transient(requests.ReadTimeout()) and is_transient(requests.ConnectionError())


def test_start_is_resent_only_when_no_job_can_exist():
    assert never_reached_firecrawl(_http_error(429))
    assert never_reached_firecrawl(_http_error(503))
    assert never_reached_firecrawl(requests.ConnectTimeout())
    for ambiguous in (_http_error(500), _http_error(504), requests.ReadTimeout()):
        assert not never_reached_firecrawl(ambiguous)
    with FakeFirecrawl([], api_key=CANARY_KEY) as server:
        closed = server.base_url
    with pytest.raises(requests.ConnectionError) as refused:
        requests.get(closed, timeout=5)
    assert never_reached_firecrawl(refused.value)


# -- pages as firecrawl-py hands them over -------------------------------------------------


def _through_client(page: dict) -> dict:
    return firecrawl_page(Document(**normalize_document_input(page)))


def test_pages_keep_firecrawls_shape_through_the_client():
    pages = served_pages()
    assert [_through_client(page) for page in pages] == pages


@pytest.mark.corpus
def test_corpus_pages_keep_firecrawls_shape_through_the_client():
    files = sorted(CORPUS.glob("*.json")) if CORPUS.is_dir() else []
    if not files:
        pytest.skip(f"corpus not found at {CORPUS}")
    for path in files:
        pages = json.loads(path.read_text(encoding="utf-8"))["data"]
        assert [_through_client(page) for page in pages] == pages, path.name


# -- the page log: a crash between append and state save ----------------------------------


def test_batch_appended_but_not_committed_is_dropped_and_downloaded_again(tmp_path):
    pages = served_pages()
    size = page_size_for(pages)
    batches = [pages[i : i + size] for i in range(0, len(pages), size)]
    cursors = [f"next?skip={i}" for i in range(size, len(pages), size)] + [None]
    by_cursor = {
        cursor: StatusPage("completed", len(pages), len(pages), 0, cursors[n], batches[n])
        for n, cursor in enumerate([None, *cursors[:-1]])
    }
    fetched: list[str | None] = []

    def fetch(cursor):
        fetched.append(cursor)
        return by_cursor[cursor]

    committed: list[CrawlJobState] = []

    def save_then_die_on_second(state: CrawlJobState) -> None:
        if len(committed) == 1:
            raise SystemExit("killed after appending batch 2, before saving the state")
        committed.append(copy.deepcopy(state))

    start = CrawlJobState(
        name="t", api_version="v2", api_url="x", target=TARGET, job_id="j", status="downloading"
    )
    log = PageLog(tmp_path / "pages.jsonl")
    with pytest.raises(SystemExit):
        download_results(start, log, lambda: fetch(None), fetch, save_then_die_on_second, print)
    assert len(read_pages(log.path)) == 2 * size  # batch 2 reached the file...
    resumed = committed[-1]
    assert resumed.pages_saved == size  # ...but the state only vouches for batch 1

    fetched.clear()
    download_results(resumed, log, lambda: fetch(None), fetch, lambda state: None, print)
    assert urls_of(read_pages(log.path)) == urls_of(pages)  # no page stored twice
    assert fetched == cursors[:-1]  # went on from the saved cursor: batch 1 not fetched again


def test_an_empty_result_page_ends_the_download_even_with_a_next_link(tmp_path):
    pages = served_pages()
    answers = {
        None: StatusPage("completed", len(pages), len(pages), 0, "next?skip=2", pages[:2]),
        "next?skip=2": StatusPage("completed", len(pages), len(pages), 0, "next?skip=9", []),
    }
    state = CrawlJobState(
        name="t", api_version="v2", api_url="x", target=TARGET, job_id="j", status="downloading"
    )
    log = PageLog(tmp_path / "pages.jsonl")
    download_results(state, log, lambda: answers[None], answers.get, lambda s: None, print)
    assert state.status == "downloaded" and state.cursor is None
    assert read_pages(log.path) == pages[:2]  # the runner's count check then reports the gap


def test_page_log_shorter_than_the_state_says_is_refused(tmp_path):
    log = PageLog(tmp_path / "pages.jsonl")
    log.append([{"markdown": "a", "metadata": {}}])
    with pytest.raises(CrawlError, match="changed outside firechunk"):
        log.cut_back_to(10_000)


# -- names, locks, options ----------------------------------------------------------------


def test_default_name_is_readable_and_differs_with_the_options():
    name = default_name(TARGET)
    assert name.startswith("docs-example-com-")
    assert default_name(TARGET) == name
    assert default_name(CrawlTarget(url=TARGET.url, limit=5)) != name


def test_unsafe_names_are_refused(tmp_path):
    with pytest.raises(CrawlError, match="not usable as a file name"):
        run_crawl(TARGET, api_key=None, data_dir=tmp_path, name="../escape")


def test_a_crawl_in_use_by_another_process_is_refused(tmp_path):
    held = crawl_lock(tmp_path / "jobs" / "docs.lock")
    with held, pytest.raises(CrawlInUseError, match="another process"):
        run_crawl(TARGET, api_key=CANARY_KEY, data_dir=tmp_path, name="docs")


# -- replay and option changes on a finished crawl ----------------------------------------


@pytest.fixture
def finished_crawl(tmp_path):
    pages = served_pages()
    with FakeFirecrawl(pages, api_key=CANARY_KEY, page_size=page_size_for(pages)) as server:
        settings = fast_settings(server.base_url)
        outcome = run_crawl(TARGET, api_key=CANARY_KEY, data_dir=tmp_path, settings=settings)
    return outcome, settings  # the server is gone from here on


def test_finished_crawl_replays_with_no_key_and_no_network(tmp_path, finished_crawl):
    outcome, settings = finished_crawl
    replay = run_crawl(TARGET, api_key=None, data_dir=tmp_path, settings=settings)
    assert replay.replayed and replay.crawl_file == outcome.crawl_file

    outcome.crawl_file.unlink()  # even the crawl file is rebuilt from pages.jsonl offline
    rebuilt = run_crawl(TARGET, api_key=None, data_dir=tmp_path, settings=settings)
    assert [page.url for page in read_crawl(rebuilt.crawl_file).data] == urls_of(served_pages())


def test_other_options_under_the_same_name_are_refused(tmp_path, finished_crawl):
    outcome, settings = finished_crawl
    other = CrawlTarget(url=TARGET.url, include_paths=["guides/.*"])
    with pytest.raises(TargetMismatchError, match="--recrawl"):
        run_crawl(other, api_key=None, data_dir=tmp_path, settings=settings, name=outcome.name)


# -- the command line ---------------------------------------------------------------------


def test_cli_prints_the_crawl_file_and_sends_the_options(tmp_path):
    pages = served_pages()
    with FakeFirecrawl(pages, api_key=CANARY_KEY, page_size=page_size_for(pages)) as server:
        result = CliRunner().invoke(
            app,
            ["crawl", TARGET.url, "--include", "guides/.*", "--exclude", "x/.*", "--limit", "5"]
            + ["--api-url", server.base_url, "--data-dir", str(tmp_path), "--poll-interval", "0"],
            env={"FIRECRAWL_API_KEY": CANARY_KEY},
        )
        body = server.start_bodies[0]
        job_pages = next(iter(server.jobs.values())).pages  # what the server chose to crawl
    assert result.exit_code == 0, result.output
    assert body["includePaths"] == ["guides/.*"] and body["excludePaths"] == ["x/.*"]
    assert body["limit"] == 5
    crawl_file = Path(result.stdout.strip().splitlines()[-1])
    assert 0 < len(job_pages) <= 5
    assert [page.url for page in read_crawl(crawl_file).data] == urls_of(job_pages)


def test_cli_without_a_key_says_how_to_give_one(tmp_path):
    result = CliRunner().invoke(
        app, ["crawl", TARGET.url, "--data-dir", str(tmp_path)], env={"FIRECRAWL_API_KEY": ""}
    )
    assert result.exit_code == 2  # bad input: the key is missing
    assert "FIRECRAWL_API_KEY" in result.output


@pytest.mark.parametrize("line", [b"{not json\n", b"[1, 2]\n", b"[" * 50_000 + b"\n"])
def test_a_damaged_page_log_line_is_an_error_naming_the_line(tmp_path, line):
    log = PageLog(tmp_path / "pages.jsonl")
    log.append([{"markdown": "# A", "metadata": {"sourceURL": "https://d.example.com/a"}}])
    with open(log.path, "ab") as handle:
        handle.write(line)
    with pytest.raises(CrawlError, match=r"pages\.jsonl, line 2: not a page"):
        list(log.pages())


@pytest.mark.parametrize("pages", [0, 1, 3])
def test_crawl_json_written_a_page_at_a_time_is_what_the_whole_crawl_dumps(tmp_path, pages):
    log = PageLog(tmp_path / "pages.jsonl")
    log.append(
        {
            "markdown": f"# Page {n}\n\nnaïve \u200b text\u001b",
            "metadata": {"sourceURL": f"https://d.example.com/{n}", "statusCode": 200},
            "links": [f"https://d.example.com/{n + 1}"],
        }
        for n in range(pages)
    )
    assert log.count() == pages
    head = CrawlResult(completed=pages, total=pages, credits_used=pages)
    path = write_crawl(
        tmp_path / "crawl.json", head, (CrawledPage.model_validate(p) for p in log.pages())
    )
    whole = head.model_copy(update={"data": [CrawledPage.model_validate(p) for p in log.pages()]})
    dumped = json.dumps(whole.to_firecrawl_json(), ensure_ascii=False, indent=2) + "\n"
    assert path.read_text(encoding="utf-8") == dumped
    assert [page.url for page in read_crawl(path).data] == [
        f"https://d.example.com/{n}" for n in range(pages)
    ]
