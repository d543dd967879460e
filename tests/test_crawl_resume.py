"""A crawl killed with SIGKILL while polling, and again while downloading, resumes its job.

The crawl runs as a real `firechunk crawl` process against the local Firecrawl server. The
server holds one chosen request until the test has killed the process, so each kill lands
at a known point: mid-poll, then mid-download with some result pages already saved.
"""

from __future__ import annotations

from collections import Counter

from firechunk.crawl import run_crawl
from firechunk.crawlfile import read_crawl
from schemas.job import CrawlTarget
from tests.crawl_fixtures import (
    CANARY_KEY,
    FAST_CLI,
    fast_settings,
    page_size_for,
    read_pages,
    read_state,
    run_cli,
    served_pages,
    start_cli,
    urls_of,
)
from tests.firecrawl_server import FakeFirecrawl

URL = "https://docs.example.com/"
NAME = "docs"


def _kill_when_reached(process, gate) -> None:
    assert gate.reached.wait(timeout=30), "the crawl never reached the held request"
    process.kill()  # SIGKILL: no clean-up code runs
    process.communicate(timeout=30)
    gate.release.set()


def _uninterrupted_pages(tmp_path) -> list[dict]:
    pages = served_pages()
    with FakeFirecrawl(pages, api_key=CANARY_KEY, page_size=page_size_for(pages)) as server:
        outcome = run_crawl(
            CrawlTarget(url=URL),
            api_key=CANARY_KEY,
            data_dir=tmp_path / "baseline",
            settings=fast_settings(server.base_url),
        )
    return read_pages(outcome.pages_file)


def test_sigkill_while_polling_and_while_downloading_then_resume(tmp_path):
    pages = served_pages()
    size = page_size_for(pages)
    data_dir = tmp_path / "data"
    args = [URL, "--name", NAME, *FAST_CLI]
    with FakeFirecrawl(pages, api_key=CANARY_KEY, page_size=size, scraping_polls=4) as server:
        args += ["--api-url", server.base_url]
        mid_poll = server.gate("status", 2)  # the second status poll hangs
        mid_download = server.gate("page", 2)  # so does the second `next` result page

        first = start_cli(data_dir, *args)
        _kill_when_reached(first, mid_poll)
        after_first = read_state(data_dir, NAME)
        assert after_first.status == "polling" and after_first.job_id is not None

        second = start_cli(data_dir, *args)
        _kill_when_reached(second, mid_download)
        after_second = read_state(data_dir, NAME)
        assert after_second.job_id == after_first.job_id
        assert after_second.status == "downloading"
        assert after_second.pages_saved == 2 * size  # first page + one `next` page
        assert after_second.cursor is not None and after_second.cursor.endswith(f"skip={2 * size}")

        third = run_cli(data_dir, *args)
        assert third.returncode == 0, third.stderr
        assert "resuming Firecrawl job" in third.stderr

        start_calls = server.start_calls
        served_offsets = Counter(served.skip for served in server.served)

    state = read_state(data_dir, NAME)
    saved = read_pages(data_dir / "raw" / state.job_id / "pages.jsonl")
    baseline = _uninterrupted_pages(tmp_path)

    assert start_calls == 1
    assert state.status == "done" and state.pages_saved == len(pages)
    assert len(saved) == len(set(urls_of(saved))) == len(pages)  # no duplicates, none missing
    assert urls_of(saved) == urls_of(baseline)
    assert saved == baseline  # the same raw pages as a run that was never interrupted
    # No result page was served twice: the resumed download went on from the saved cursor.
    assert all(count == 1 for count in served_offsets.values()), served_offsets
    assert sorted(served_offsets) == list(range(0, len(pages), size))

    crawl = read_crawl(data_dir / "raw" / state.job_id / "crawl.json")
    assert [page.url for page in crawl.data] == urls_of(baseline)
    assert third.stdout.strip() == str(data_dir / "raw" / state.job_id / "crawl.json")
