"""A canary API key never appears in anything written under the data dir, in logs or outputs.

The key is really used (the server refuses requests without it), and the runs go through
retries, errors and a replay, with firecrawl-py's own logging turned up to DEBUG.
"""

from __future__ import annotations

import logging

import pytest
from typer.testing import CliRunner

from firechunk.cli import app
from firechunk.crawl import run_crawl
from firechunk.crawl.errors import JobNotFoundError
from schemas.job import CrawlTarget
from tests.crawl_fixtures import (
    CANARY_KEY,
    FAST_CLI,
    fast_settings,
    page_size_for,
    run_cli,
    served_pages,
)
from tests.firecrawl_server import FakeFirecrawl, Fault

URL = "https://docs.example.com/"


def _files_holding(root, secret: str) -> list[str]:
    needle = secret.encode()
    return [str(path) for path in root.rglob("*") if path.is_file() and needle in path.read_bytes()]


def test_canary_key_stays_out_of_files_and_cli_output(tmp_path):
    pages = served_pages()
    data_dir = tmp_path / "data"
    outputs: list[str] = []
    with FakeFirecrawl(pages, api_key=CANARY_KEY, page_size=page_size_for(pages)) as server:
        common = [URL, *FAST_CLI, "--api-url", server.base_url]
        server.add_faults("start", Fault(status=429, retry_after="0"))
        server.add_faults("status", Fault(status=500))
        server.add_faults("page", Fault(status=503))
        ok = run_cli(data_dir, *common, "--name", "ok")
        server.add_faults("start", Fault(status=500))
        unknown_start = run_cli(data_dir, *common, "--name", "unknown-start")
        start_calls, unauthorized = server.start_calls, server.unauthorized
    replay = CliRunner().invoke(  # in-process: the server is gone and there is no key
        app, ["crawl", *common, "--name", "ok", "--data-dir", str(data_dir)]
    )
    for result in (ok, unknown_start, replay):
        outputs += [result.stdout, result.stderr]

    assert ok.returncode == 0 and "failed (HTTP 429" in ok.stderr  # retries were logged
    assert unknown_start.returncode == 1 and "may or may not" in unknown_start.stderr
    assert replay.exit_code == 0 and replay.stdout.strip().endswith("crawl.json")
    assert start_calls == 1 and unauthorized == 0  # the key was sent, and accepted
    assert not [text for text in outputs if CANARY_KEY in text]
    assert not _files_holding(tmp_path, CANARY_KEY)


def test_canary_key_stays_out_of_logs_and_errors(tmp_path, caplog):
    pages = served_pages()
    caplog.set_level(logging.DEBUG)  # every logger, firecrawl-py's included
    with FakeFirecrawl(pages, api_key=CANARY_KEY, page_size=page_size_for(pages)) as server:
        server.add_faults("status", Fault(status=429, retry_after="0"), Fault(drop=True))

        def expire_after_first_batch(line: str) -> None:
            logging.getLogger("firechunk.crawl").info(line)
            if line.startswith("saved "):
                server.expire(next(iter(server.jobs)))

        with pytest.raises(JobNotFoundError) as raised:
            run_crawl(
                CrawlTarget(url=URL),
                api_key=CANARY_KEY,
                data_dir=tmp_path,
                settings=fast_settings(server.base_url),
                report=expire_after_first_batch,
            )
    error_texts = [str(raised.value), repr(raised.value), str(raised.value.__cause__)]
    assert "HTTP 429" in caplog.text  # the logs did capture the retries
    assert CANARY_KEY not in caplog.text
    assert not [text for text in error_texts if CANARY_KEY in text]
    assert not _files_holding(tmp_path, CANARY_KEY)
