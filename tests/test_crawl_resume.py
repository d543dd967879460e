"""A crawl killed with SIGKILL while polling, and again while downloading, resumes its job.

The crawl runs as a real `firechunk crawl` process against the local Firecrawl server. The
server holds one chosen request until the test has killed the process, so each kill lands
at a known point: mid-poll, then mid-download with some result pages already saved.

What a rerun reads back is checked again: a job state whose job id was edited to lead out
of the data directory is refused with a one-line error, before anything is read there.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

import pytest
from prefect.states import Failed
from typer.testing import CliRunner

from firechunk.cli import app
from firechunk.crawl import run_crawl
from firechunk.crawl.errors import JobStateError
from firechunk.crawlfile import read_crawl
from firechunk.schemas.job import CrawlJobState, CrawlTarget
from firechunk.tasks.stages import crawl_worth_retrying
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
    # Generous: a loaded machine may take long to start the interpreter and reach it.
    assert gate.reached.wait(timeout=180), "the crawl never reached the held request"
    process.kill()  # SIGKILL: no clean-up code runs
    process.communicate(timeout=60)
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


# -- a job state file edited by hand ------------------------------------------------------

_opened: list[str] | None = None  # the files opened while a test watches, else None


def _record_open(event: str, args: tuple) -> None:
    if _opened is not None and event == "open" and isinstance(args[0], str | Path):
        _opened.append(os.path.realpath(args[0]))  # where it really is, past any symlink


sys.addaudithook(_record_open)  # audit hooks stay for the process; this one is idle unless watched


def _files_under(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _edited_state(data_dir: Path, job_id: str, pages_file: Path) -> None:
    """A job state whose pages are all downloaded, as if the crawl ended there; only its job
    id was edited, to point at `pages_file`'s folder."""
    count = len(read_pages(pages_file))
    state = CrawlJobState(
        name=NAME,
        api_version="v2",
        api_url=NOWHERE,
        target=CrawlTarget(url=URL),
        job_id=job_id,
        status="downloaded",
        firecrawl_status="completed",
        completed=count,
        total=count,
        pages_saved=count,
        saved_bytes=pages_file.stat().st_size,
    )
    (data_dir / "jobs").mkdir(parents=True)
    (data_dir / "jobs" / f"{NAME}.json").write_text(state.model_dump_json())


NOWHERE = "http://127.0.0.1:9"  # never reached: a downloaded crawl finishes offline
JOB_ID = "0f8fad5b-d9cb-469f-a165-70867728950e"


@pytest.mark.parametrize("edit", ["../../etc", "absolute path", "symlinked folder"])
def test_an_edited_job_id_is_refused_and_nothing_outside_the_data_dir_is_touched(tmp_path, edit):
    global _opened
    data_dir = tmp_path / "data"
    outside = tmp_path / "etc"  # data/raw/../../etc
    outside.mkdir()
    (outside / "pages.jsonl").write_text("".join(json.dumps(p) + "\n" for p in served_pages()))
    (data_dir / "raw").mkdir(parents=True)  # as after any crawl: `..` can climb out of it
    job_id = {"../../etc": "../../etc", "absolute path": str(outside)}.get(edit, JOB_ID)
    if edit == "symlinked folder":  # a well-formed id whose folder leads out of data/raw
        (data_dir / "raw" / JOB_ID).symlink_to(outside, target_is_directory=True)
    _edited_state(data_dir, job_id, outside / "pages.jsonl")
    before = _files_under(outside)

    _opened = []
    try:
        result = CliRunner().invoke(
            app,
            ["crawl", URL, "--name", NAME, "--api-url", NOWHERE, "--data-dir", str(data_dir)],
            env={"FIRECRAWL_API_KEY": ""},
        )
    finally:
        opened, _opened = _opened, None

    assert result.exit_code == 3, result.output  # a crawl error
    [message] = result.stderr.strip().splitlines()  # one line, no traceback
    # The file at fault is named: the job state, or the raw folder that is a symlink.
    at_fault = data_dir / ("raw" if edit == "symlinked folder" else "jobs")
    assert message.startswith(f"error: {at_fault}/") and "delete it" in message.lower(), message
    assert _files_under(outside) == before  # nothing written there
    assert not [path for path in opened if Path(path).is_relative_to(outside.resolve())]  # nor read
    assert [path for path in opened if Path(path).is_relative_to(tmp_path.resolve())]  # watched


def test_a_refused_job_state_is_not_retried_by_prefect():
    error = JobStateError("data/jobs/docs.json: edited")
    assert not crawl_worth_retrying(None, None, Failed(data=error))
