"""Every scripted Firecrawl fault ends as documented: retried to success, or a clear error
with the job state kept. The real firecrawl-py client talks to the local server.

    fault                                         outcome
    job `scraping` for several polls              polled with backoff until completed
    results over >= 3 result pages                every `next` followed, count == total
    429 + Retry-After on a poll                   retried no sooner than Retry-After
    429 / 503 / refused connection on start       retried; one job
    500 / 502 / 503 / 504 on polls and pages      retried
    read timeout, dropped connection              retried
    500 on start                                  not resent (may have made a job): clear
                                                  error, state `starting`; --recrawl starts
    500 on every attempt of a page                clear error, state `downloading` + cursor;
                                                  a rerun finishes with no new job
    401 on start (bad key)                        clear error, no job, no state left
    401 / 402 / 403 on start or a poll            AccessRefusedError: no rerun gets past it,
                                                  so the flow's crawl task is not retried
    job ends `failed`                             clear error, its pages kept, no crawl.json
    job expired (404) while polling / downloading clear error saying so, pages kept;
                                                  --recrawl starts a new job
    job still running after --max-wait            clear error, state `polling`; a rerun
                                                  resumes, --recrawl cancels it first
    fewer pages than `total`                      clear error; a rerun downloads again
"""

from __future__ import annotations

import pytest

from firechunk.crawl import CrawlError, run_crawl
from firechunk.crawl.errors import (
    AccessRefusedError,
    DownloadError,
    JobFailedError,
    JobNotFoundError,
    PollTimeoutError,
    StartOutcomeUnknownError,
)
from firechunk.crawlfile import read_crawl
from firechunk.schemas.job import CrawlTarget
from tests.crawl_fixtures import (
    CANARY_KEY,
    fast_settings,
    page_size_for,
    read_pages,
    read_state,
    served_pages,
    urls_of,
)
from tests.firecrawl_server import FakeFirecrawl, Fault

# firecrawl-py's v1 client still calls pydantic's deprecated `.dict()`; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20")

TARGET = CrawlTarget(url="https://docs.example.com/")
NAME = "docs"
PAGES = served_pages()
SIZE = page_size_for(PAGES)


def _server(**options) -> FakeFirecrawl:
    return FakeFirecrawl(PAGES, api_key=CANARY_KEY, page_size=SIZE, **options)


def _crawl(server, data_dir, version="v2", recrawl=False, on_line=None, **changes):
    """Run the crawl against `server`; its progress lines are returned, and each is also
    handed to `on_line` as it comes (a test acts on the server mid-crawl there)."""
    lines: list[str] = []

    def report(line: str) -> None:
        lines.append(line)
        if on_line is not None:
            on_line(line)

    outcome = run_crawl(
        TARGET,
        api_key=CANARY_KEY,
        data_dir=data_dir,
        settings=fast_settings(server.base_url, version, **changes),
        name=NAME,
        recrawl=recrawl,
        report=report,
    )
    return outcome, lines


# fault -> (kind of request, scripted faults, what the retry report names)
# A result page answered this late trips the client's timeout (fast_settings: 5 s), which
# every other request of the test, answered at once, stays far within on a loaded machine.
LATE = 30.0
RETRIED_FAULTS = {
    "429 on start": ("start", [Fault(status=429, retry_after="0")], "HTTP 429"),
    "503 on start": ("start", [Fault(status=503)], "HTTP 503"),
    "500 twice on a poll": ("status", [Fault(status=500), Fault(status=500)], "HTTP 500"),
    "502 on a poll": ("status", [Fault(status=502)], "HTTP 502"),
    "504 on a poll": ("status", [Fault(status=504)], "HTTP 504"),
    "dropped connection on a poll": ("status", [Fault(drop=True)], "ConnectionError"),
    "503 then 503 on a result page": ("page", [Fault(status=503), Fault(status=503)], "HTTP 503"),
    "429 on a result page": ("page", [Fault(status=429, retry_after="0")], "HTTP 429"),
    "read timeout on a result page": ("page", [Fault(delay=LATE)], "ReadTimeout"),
    "dropped connection on a result page": ("page", [Fault(drop=True)], "ConnectionError"),
}


@pytest.mark.parametrize("version", ["v2", "v1"])
@pytest.mark.parametrize("fault", list(RETRIED_FAULTS), ids=list(RETRIED_FAULTS))
def test_transient_fault_is_retried_to_success(tmp_path, fault, version):
    kind, faults, named = RETRIED_FAULTS[fault]
    with _server(scraping_polls=3) as server:
        server.add_faults(kind, *faults)
        outcome, lines = _crawl(server, tmp_path, version)
        start_calls = server.start_calls

    assert start_calls == 1
    saved = read_pages(outcome.pages_file)
    assert urls_of(saved) == urls_of(PAGES)
    assert [page.url for page in read_crawl(outcome.crawl_file).data] == urls_of(PAGES)
    assert read_state(tmp_path, NAME).status == "done"
    retries = [line for line in lines if "failed (" in line]
    assert len(retries) == len(faults) and all(named in line for line in retries), retries


def test_job_scraping_for_several_polls_is_polled_until_done_with_progress(tmp_path):
    with _server(scraping_polls=5) as server:
        outcome, lines = _crawl(server, tmp_path)
        polls = server.count("status")

    assert polls == 6  # five `scraping` answers, then `completed` with the first page
    progress = [line for line in lines if line.startswith("scraping: ")]
    assert len(progress) == 5 and "credits used" in progress[-1]
    assert outcome.pages == len(PAGES) >= 3 * SIZE  # results spanned >= 3 result pages


def test_retry_after_is_honoured(tmp_path):
    with _server(scraping_polls=1) as server:
        server.add_faults("status", Fault(status=429, retry_after="1"))
        _crawl(server, tmp_path)
        times = [(at, status) for at, method, _path, status in server.requests if method == "GET"]

    limited = next(i for i, (_at, status) in enumerate(times) if status == 429)
    # The fast policy waits ~0.01 s; only Retry-After makes the next request wait 1 s.
    assert times[limited + 1][0] - times[limited][0] >= 1.0


def test_start_answered_500_is_not_resent_and_recrawl_starts_a_job(tmp_path):
    with _server() as server:
        server.add_faults("start", Fault(status=500))
        with pytest.raises(StartOutcomeUnknownError, match="may or may not have created a job"):
            _crawl(server, tmp_path)
        assert server.count("start") == 1  # not resent: Firecrawl may have made a job
        assert read_state(tmp_path, NAME).status == "starting"

        with pytest.raises(StartOutcomeUnknownError, match="--recrawl"):
            _crawl(server, tmp_path)  # a plain rerun does not guess either
        assert server.count("start") == 1

        outcome, _ = _crawl(server, tmp_path, recrawl=True)
        assert server.count("start") == 2
    assert read_state(tmp_path, NAME).status == "done" and outcome.pages == len(PAGES)


def test_refused_start_leaves_no_job_and_no_state(tmp_path):
    with _server() as server:
        server.add_faults("start", Fault(status=401))
        with pytest.raises(CrawlError, match="refused to start.*HTTP 401"):
            _crawl(server, tmp_path)
        assert server.start_calls == 0
    assert not (tmp_path / "jobs" / f"{NAME}.json").exists()


@pytest.mark.parametrize("status", [401, 402, 403])
@pytest.mark.parametrize("where", ["start", "status"])
def test_a_refused_key_or_account_is_an_error_no_rerun_gets_past(tmp_path, status, where):
    with _server() as server:
        server.add_faults(where, *[Fault(status=status)] * 6)
        with pytest.raises(AccessRefusedError, match=f"HTTP {status}"):
            _crawl(server, tmp_path)
        assert server.count(where) == 1  # not retried either


def test_unreachable_api_on_start_is_retried_then_reported(tmp_path):
    with _server() as server:
        dead_url = server.base_url
    with pytest.raises(CrawlError, match="could not reach.*refused.*ConnectionError"):
        run_crawl(
            TARGET,
            api_key=CANARY_KEY,
            data_dir=tmp_path,
            settings=fast_settings(dead_url),
            name=NAME,
            report=lambda line: None,
        )
    assert not (tmp_path / "jobs" / f"{NAME}.json").exists()


@pytest.mark.parametrize("version", ["v2", "v1"])
def test_page_failing_every_attempt_keeps_state_and_rerun_finishes(tmp_path, version):
    with _server() as server:
        server.add_faults("page", *[Fault(status=500)] * 4)  # all four attempts of one page
        with pytest.raises(CrawlError, match="run again to resume"):
            _crawl(server, tmp_path, version)
        state = read_state(tmp_path, NAME)
        assert state.status == "downloading" and state.pages_saved == SIZE
        assert state.cursor is not None and "HTTP 500" in state.error

        outcome, lines = _crawl(server, tmp_path, version)
        assert server.start_calls == 1
    assert any(line.startswith("resuming Firecrawl job") for line in lines)
    saved = read_pages(outcome.pages_file)
    assert urls_of(saved) == urls_of(PAGES)


@pytest.mark.parametrize("version", ["v2", "v1"])
def test_failed_job_keeps_its_pages_and_reports_them(tmp_path, version):
    with _server(fail_jobs=True) as server:
        with pytest.raises(JobFailedError, match="ended 'failed'") as raised:
            _crawl(server, tmp_path, version)
        state = read_state(tmp_path, NAME)
        saved = read_pages(tmp_path / "raw" / state.job_id / "pages.jsonl")
        assert saved == PAGES[: len(PAGES) // 2]  # what the failed job had scraped
        assert f"the {len(saved)} pages it returned are kept" in str(raised.value)
        assert state.status == "failed"
        assert not (tmp_path / "raw" / state.job_id / "crawl.json").exists()

        requests_before = len(server.requests)
        with pytest.raises(JobFailedError):  # a rerun reports it again, from disk
            _crawl(server, tmp_path, version)
        assert len(server.requests) == requests_before


def test_job_expired_while_polling_says_so_and_recrawl_starts_anew(tmp_path):
    with _server(scraping_polls=50) as server:
        polls = []

        def expire_on_second_poll(line: str) -> None:
            polls.append(line)
            if len(polls) == 3:  # "started ...", then two "scraping: ..." lines
                server.expire(next(iter(server.jobs)))

        with pytest.raises(JobNotFoundError, match="no longer knows job .* 404.*--recrawl"):
            _crawl(server, tmp_path, on_line=expire_on_second_poll)
        state = read_state(tmp_path, NAME)
        assert state.status == "expired" and "24 h" in state.error

        with pytest.raises(JobNotFoundError):  # a rerun says so again, without a new job
            _crawl(server, tmp_path)
        assert server.start_calls == 1

        server.scraping_polls = 1
        outcome, _ = _crawl(server, tmp_path, recrawl=True)
        assert server.start_calls == 2
    assert outcome.job_id != state.job_id and outcome.pages == len(PAGES)


def test_job_expired_while_downloading_keeps_the_pages_saved(tmp_path):
    with _server() as server:

        def expire_after_first_batch(line: str) -> None:
            if line == f"saved {SIZE}/{len(PAGES)} pages":
                server.expire(next(iter(server.jobs)))

        with pytest.raises(JobNotFoundError, match=f"The {SIZE} pages saved so far are kept"):
            _crawl(server, tmp_path, on_line=expire_after_first_batch)
    state = read_state(tmp_path, NAME)
    assert state.status == "expired"
    assert urls_of(read_pages(tmp_path / "raw" / state.job_id / "pages.jsonl")) == urls_of(
        PAGES[:SIZE]
    )


def test_fewer_pages_than_total_is_an_error_and_a_rerun_downloads_again(tmp_path):
    with _server() as server:
        server.lose_pages = 1  # the results hold one page fewer than `total` says
        with pytest.raises(DownloadError, match=f"held {len(PAGES) - 1} pages .* {len(PAGES)}"):
            _crawl(server, tmp_path)
        state = read_state(tmp_path, NAME)
        assert state.status == "downloading" and state.cursor is None and state.pages_saved == 0

        server.lose_pages = 0
        outcome, _ = _crawl(server, tmp_path)
        assert server.start_calls == 1
    assert urls_of(read_pages(outcome.pages_file)) == urls_of(PAGES)


def test_job_running_past_max_wait_is_resumed_or_cancelled_by_recrawl(tmp_path):
    with _server(scraping_polls=50) as server:
        with pytest.raises(PollTimeoutError, match="run again to go on waiting"):
            _crawl(server, tmp_path, max_wait=0.0)
        old = read_state(tmp_path, NAME)
        assert old.status == "polling" and old.firecrawl_status == "scraping"

        server.scraping_polls = 0
        outcome, lines = _crawl(server, tmp_path, recrawl=True)
        assert server.jobs[old.job_id].cancelled  # the replaced job stops spending credits
        assert server.start_calls == 2
    assert f"cancelled the job it replaces, {old.job_id}" in lines
    assert outcome.job_id != old.job_id and outcome.pages == len(PAGES)
