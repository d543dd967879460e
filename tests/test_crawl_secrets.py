"""A canary API key never appears in anything written under the data dir, in logs or outputs.

The key is really used (the server refuses requests without it), and the runs go through
retries, errors and a replay, with firecrawl-py's own logging turned up to DEBUG. The
server's error answers can echo the request's Authorization header: what firechunk keeps,
logs or raises from them is redacted, and no raised error chains the client's own.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from urllib.parse import quote, quote_plus

import cloudpickle
import pytest
from prefect.blocks.system import Secret
from typer.testing import CliRunner

from firechunk.cli import app
from firechunk.crawl import API_KEY_ENV, CrawlError, run_crawl
from firechunk.crawl.errors import JobNotFoundError, PollTimeoutError, StartOutcomeUnknownError
from firechunk.flows.rebuild import rebuild as rebuild_flow
from firechunk.schemas.job import CrawlTarget
from firechunk.settings import CrawlSettings
from tests.crawl_fixtures import (
    CANARY_KEY,
    FAST_CLI,
    fast_settings,
    page_size_for,
    run_cli,
    served_pages,
)
from tests.firecrawl_server import FakeFirecrawl, Fault
from tests.prefect_helpers import logs_of

# firecrawl-py's v1 client still calls pydantic's deprecated `.dict()`; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20")

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
    assert unknown_start.returncode == 3 and "may or may not" in unknown_start.stderr
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


# -- a server or proxy that echoes the Authorization header in its error answers -----------

# A key with characters that URL-encoding changes, and no `fc-` prefix: only the key itself
# can be matched, in each of its forms.
ODD_KEY = "sk.canary+7f3e/9a1d=5b2c~4e6f"

# scenario -> (kind of request, scripted faults, error raised, what the message still says)
ECHOED = {
    "start answered 500": ("start", [Fault(status=500)], StartOutcomeUnknownError, "HTTP 500"),
    "start refused 401": ("start", [Fault(status=401)], CrawlError, "HTTP 401"),
    "poll answered 403": ("status", [Fault(status=403)], CrawlError, "HTTP 403"),
    "poll answered 404": ("status", [Fault(status=404)], JobNotFoundError, "HTTP 404"),
    "poll 502 on every attempt": ("status", [Fault(status=502)] * 4, CrawlError, "HTTP 502"),
    "page 500 on every attempt": ("page", [Fault(status=500)] * 4, CrawlError, "HTTP 500"),
}


def _echoing(faults: list[Fault]) -> list[Fault]:
    return [replace(fault, echo_auth=True) for fault in faults]


def _forms_of(key: str) -> set[str]:
    return {key, quote(key, safe=""), quote_plus(key)}


def _chain(error: BaseException) -> list[BaseException]:
    """The error and every exception it chains, as a traceback or a debugger would reach."""
    found: list[BaseException] = []
    todo: list[BaseException | None] = [error]
    while todo:
        link = todo.pop()
        if link is not None and link not in found:
            found.append(link)
            todo += [link.__cause__, link.__context__]
    return found


def _leaks(error: BaseException, key: str) -> list[str]:
    """Where `key` shows in the error's chain: its text, its repr, or its pickled form (what
    Prefect stores as a failed task's result; an HTTP error pickles its request's headers)."""
    leaks = []
    for link in _chain(error):
        shown = (str(link), repr(link), cloudpickle.dumps(link).decode("latin-1"))
        leaks += [f"{type(link).__name__}: {text[:80]}" for text in shown if _holds(text, key)]
    return leaks


def _holds(text: str, key: str) -> bool:
    return any(form in text for form in _forms_of(key))


def _files_with_any_form(root, key: str) -> list[str]:
    return [p for form in _forms_of(key) for p in _files_holding(root, form)]


@pytest.mark.parametrize("key", [CANARY_KEY, ODD_KEY], ids=["fc-key", "odd-key"])
@pytest.mark.parametrize("version", ["v2", "v1"])
@pytest.mark.parametrize("scenario", list(ECHOED), ids=list(ECHOED))
def test_an_echoed_key_is_redacted_everywhere(tmp_path, caplog, capsys, scenario, version, key):
    kind, faults, error_class, named = ECHOED[scenario]
    pages = served_pages()
    caplog.set_level(logging.DEBUG)  # every logger, firecrawl-py's and urllib3's included
    lines: list[str] = []

    def report(line: str) -> None:
        lines.append(line)
        logging.getLogger("firechunk.crawl").info(line)

    with FakeFirecrawl(pages, api_key=key, page_size=page_size_for(pages)) as server:
        server.add_faults(kind, *_echoing(faults))
        with pytest.raises(error_class) as raised:
            run_crawl(
                CrawlTarget(url=URL),
                api_key=key,
                data_dir=tmp_path,
                settings=fast_settings(server.base_url, version),
                report=report,
            )
        answered = server.count(kind)
    captured = capsys.readouterr()

    assert not _leaks(raised.value, key)
    assert not [
        text for text in (*lines, caplog.text, captured.out, captured.err) if _holds(text, key)
    ]
    assert not _files_with_any_form(tmp_path, key)
    assert answered == len(faults)  # every echoing answer was received
    assert named in str(raised.value)  # the message still says what happened


def test_the_cli_never_prints_an_echoed_key(tmp_path):
    pages = served_pages()
    with FakeFirecrawl(pages, api_key=CANARY_KEY, page_size=page_size_for(pages)) as server:
        server.add_faults("status", *_echoing([Fault(status=503)] * 4))
        result = CliRunner().invoke(
            app,
            ["crawl", URL, *FAST_CLI, "--api-url", server.base_url, "--data-dir", str(tmp_path)],
            env={"FIRECRAWL_API_KEY": CANARY_KEY},
        )
    assert CANARY_KEY not in result.stdout + result.stderr
    assert not _files_holding(tmp_path, CANARY_KEY)
    assert result.exit_code == 3  # a crawl or network error
    assert result.stderr.count("failed (HTTP 503") == 3  # the retries were reported
    last = result.stderr.splitlines()[-1]
    assert last.startswith("error: Firecrawl job ") and "HTTP 503" in last
    assert "Authorization: [redacted]" in last  # the rest of the server's text is kept


# scenario -> (kind of request, the echoing fault); neither is retried by Prefect
FLOW_ECHOED = {
    "start answered 500": ("start", Fault(status=500, echo_auth=True)),
    "poll answered 404": ("status", Fault(status=404, echo_auth=True)),
}


@pytest.mark.parametrize("scenario", list(FLOW_ECHOED), ids=list(FLOW_ECHOED))
def test_the_rebuild_flow_never_shows_an_echoed_key(prefect_api, tmp_path, monkeypatch, scenario):
    kind, fault = FLOW_ECHOED[scenario]
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    Secret(value=CANARY_KEY).save("firechunk-echo-key", overwrite=True)
    pages = served_pages()
    data_dir = tmp_path / "data"
    with FakeFirecrawl(pages, api_key=CANARY_KEY, page_size=page_size_for(pages)) as server:
        server.add_faults(kind, fault)
        state = rebuild_flow(
            crawl=CrawlSettings(
                site_url=URL,
                api_url=server.base_url,
                secret_block="firechunk-echo-key",
                poll_interval=0.01,
            ),
            data_dir=data_dir,
            return_state=True,
        )
        answered = server.count(kind)

    error = state.result(raise_on_failure=False)
    logs = logs_of(state.state_details.flow_run_id)
    assert not _leaks(error, CANARY_KEY)
    assert CANARY_KEY not in (state.message or "")
    assert not [message for message in logs if CANARY_KEY in message]
    assert not _files_holding(tmp_path, CANARY_KEY)
    assert state.is_failed() and isinstance(error, CrawlError) and answered == 1
    assert any("HTTP 404" in m or "HTTP 500" in m for m in logs)  # the failure was logged


def test_recrawl_sends_the_key_only_to_the_api_it_was_given_for(tmp_path):
    """An edited job state cannot point the cancel call of --recrawl at another host."""
    pages = served_pages()
    size = page_size_for(pages)
    with (
        FakeFirecrawl(pages, api_key=CANARY_KEY, page_size=size, scraping_polls=50) as api,
        FakeFirecrawl(pages, api_key="not-the-key", page_size=size) as elsewhere,
    ):
        with pytest.raises(PollTimeoutError):
            run_crawl(
                CrawlTarget(url=URL),
                api_key=CANARY_KEY,
                data_dir=tmp_path,
                settings=fast_settings(api.base_url, max_wait=0.0),
                name="docs",
            )
        state_file = tmp_path / "jobs" / "docs.json"
        edited = json.loads(state_file.read_text())
        edited["api_url"] = elsewhere.base_url
        state_file.write_text(json.dumps(edited))
        api.scraping_polls = 0
        lines: list[str] = []
        outcome = run_crawl(
            CrawlTarget(url=URL),
            api_key=CANARY_KEY,
            data_dir=tmp_path,
            settings=fast_settings(api.base_url),
            name="docs",
            recrawl=True,
            report=lines.append,
        )
        sent_elsewhere = len(elsewhere.requests)
    assert sent_elsewhere == 0
    assert any("not cancelled" in line and elsewhere.base_url in line for line in lines), lines
    assert outcome.pages == len(pages)
