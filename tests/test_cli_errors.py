"""Every failure a user can cause or meet is one line, with its documented exit code and no
traceback; `--debug` shows the traceback. Network failures are made with real sockets: a
name that cannot resolve, a closed port, a server that never answers, and the local
Firecrawl-compatible server for HTTP statuses.

The cases closest to the user (the DNS failure, `rebuild` without a key, `--debug`) run
the installed `firechunk` in a subprocess; the others run the same app in this process.
What a subprocess did before it said its line (the processes it started, the hosts it
looked up, the connections it made) is recorded in it by an audit hook (`Audit`) and
asserted, rather than how long it took.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import SecretStr
from typer.testing import CliRunner

from firechunk.cli import app
from firechunk.commands.exits import ExitCode, classify
from firechunk.crawl.errors import CrawlError, MissingApiKeyError
from firechunk.crawlfile import CrawlFileError, read_crawl
from firechunk.run.memory import chunk_crawl
from tests.crawl_fixtures import CANARY_KEY, served_pages
from tests.disks import mounts_unavailable, on_small_disk
from tests.firecrawl_server import FakeFirecrawl, Fault

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample" / "crawl.json"
FIRECHUNK = Path(sys.executable).with_name("firechunk")
SITE = "https://docs.example.com/"

pytestmark = pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20")


def _env(tmp_path: Path, key: str | None = CANARY_KEY) -> dict[str, str]:
    """No inherited Firecrawl or Prefect settings; a Prefect home of the test's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FIRECRAWL_", "PREFECT_"))}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    env.pop("FIRECHUNK_DATA_DIR", None)
    if key is not None:
        env["FIRECRAWL_API_KEY"] = key
    return env


# Installed in each Python the command runs (its own, and any it starts) by a sitecustomize
# on PYTHONPATH: appends to the log each event (PEP 578) that starts a process, looks up a
# host or connects a socket, one JSON line each, from whichever process; and "python" from
# any Python the command started, however it was started.
_AUDIT_HOOK = """\
import json, os, sys

_LOG = os.environ.get("FIRECHUNK_TEST_AUDIT_LOG")
_PROCESSES = {"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn",
              "os.system", "os.exec"}


def _write(event, detail):
    with open(_LOG, "a", encoding="utf-8") as log:
        log.write(json.dumps([event, detail]) + "\\n")


def _record(event, args):
    if event == "socket.getaddrinfo":
        _write(event, str(args[0]))  # the host
    elif event == "socket.connect" and isinstance(args[1], tuple):
        _write(event, repr(args[1]))  # an address on the network, not a Unix socket's path
    elif event in _PROCESSES:
        _write(event, repr(args[0]) if args else "")  # the program, when there is one


if _LOG:
    if os.environ.get("FIRECHUNK_TEST_AUDIT_FIRST"):
        _write("python", f"pid {os.getpid()}, parent {os.getppid()}")
    else:
        os.environ["FIRECHUNK_TEST_AUDIT_FIRST"] = str(os.getpid())
    sys.addaudithook(_record)
"""


@dataclass(frozen=True)
class Audit:
    """What the subprocesses run with `env()` did: the events `_AUDIT_HOOK` logged."""

    directory: Path

    @property
    def log(self) -> Path:
        return self.directory / "events.jsonl"

    def env(self, env: dict[str, str]) -> dict[str, str]:
        """`env` with the hook installed; the log emptied, so it holds one command's."""
        self.log.unlink(missing_ok=True)
        path = os.pathsep.join(filter(None, [str(self.directory), env.get("PYTHONPATH")]))
        return {**env, "PYTHONPATH": path, "FIRECHUNK_TEST_AUDIT_LOG": str(self.log)}

    def events(self) -> list[tuple[str, str]]:
        if not self.log.exists():
            return []
        return [tuple(json.loads(line)) for line in self.log.read_text().splitlines()]

    def processes(self) -> list[str]:
        """Each process started (a server, a worker, any program), as `event program`."""
        return [f"{e} {d}" for e, d in self.events() if not e.startswith("socket.")]

    def lookups(self) -> list[str]:
        """The host of each name lookup, in order."""
        return [d for e, d in self.events() if e == "socket.getaddrinfo"]

    def network(self) -> list[str]:
        """Every name lookup and connection, as `event host-or-address`."""
        return [f"{e} {d}" for e, d in self.events() if e.startswith("socket.")]


@pytest.fixture
def audit(tmp_path: Path) -> Audit:
    directory = tmp_path / "audit"
    directory.mkdir()
    (directory / "sitecustomize.py").write_text(_AUDIT_HOOK, encoding="utf-8")
    return Audit(directory)


def _run(tmp_path: Path, *args: str, key: str | None = CANARY_KEY, audit: Audit | None = None):
    command = [str(FIRECHUNK)] if FIRECHUNK.exists() else [sys.executable, "-m", "firechunk.cli"]
    env = _env(tmp_path, key)
    return subprocess.run(
        command + list(args),
        env=audit.env(env) if audit else env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,  # bounds a hang only
    )


def _invoke(*args: str, key: str | None = CANARY_KEY):
    env = {"FIRECRAWL_API_KEY": key or "", "FIRECHUNK_DATA_DIR": ""}
    return CliRunner().invoke(app, list(args), env=env)


def _one_line(stderr: str) -> str:
    """The command's only line on stderr: the error, with no traceback around it."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def _last_line(stderr: str) -> str:
    """The error line after progress lines (a crawl reports its retries first)."""
    assert "Traceback" not in stderr, stderr
    return stderr.strip().splitlines()[-1]


# -- checks before work --------------------------------------------------------------------


@pytest.fixture
def unwritable_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory this process cannot create files in. Permission bits do not stop root,
    so root gets sysfs, where no one can create a file."""
    if os.geteuid() == 0:
        if not os.path.isdir("/sys/kernel") or os.access("/sys/kernel", os.W_OK) is False:
            pytest.skip("no directory root cannot write to")
        yield Path("/sys/kernel")
        return
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    yield locked
    locked.chmod(0o755)


@pytest.mark.parametrize("command", ["crawl", "chunk"])
def test_an_unwritable_data_directory_is_refused_before_any_work(command, unwritable_dir):
    data_dir = unwritable_dir / "data"
    args = [SITE] if command == "crawl" else [str(SAMPLE)]
    result = _invoke(command, *args, "--data-dir", str(data_dir))
    assert result.exit_code == ExitCode.BAD_INPUT
    line = _one_line(result.stderr)
    assert f"the data directory {data_dir}" in line and "not writable" in line, line


def test_a_data_directory_that_is_a_file_is_refused(tmp_path: Path):
    afile = tmp_path / "data"
    afile.write_text("")
    result = _invoke("chunk", str(SAMPLE), "--data-dir", str(afile))
    assert result.exit_code == ExitCode.BAD_INPUT
    assert "is a file, not a directory" in _one_line(result.stderr)


FULL_DATA_DIR = (
    "error: the data directory {data_dir} is on a full disk (No space left on device); free "
    "space there or choose another with --data-dir or FIRECHUNK_DATA_DIR, then run again"
)


def test_a_disk_that_fills_up_during_chunk_is_exit_3_naming_the_data_directory(
    monkeypatch, tmp_path: Path
):
    """Every write under the data directory fails as a full disk fails it: at the fsync
    that makes a file durable (`firechunk.atomic`)."""
    data_dir = tmp_path / "data"
    real_fsync = os.fsync

    def full(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(data_dir)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full)
    result = _invoke("chunk", str(SAMPLE), "--data-dir", str(data_dir), "--workers", "1")
    assert result.exit_code == ExitCode.NETWORK, result.output
    assert _one_line(result.stderr) == FULL_DATA_DIR.format(data_dir=data_dir)


@pytest.mark.skipif(mounts_unavailable() is not None, reason=str(mounts_unavailable()))
def test_a_real_full_disk_during_chunk_is_exit_3_naming_the_data_directory(tmp_path: Path):
    """A tmpfs of 1 MB: the run's first files fit, validation's do not."""
    disk = tmp_path / "disk"
    disk.mkdir()
    data_dir = disk / "data"
    command = [sys.executable, "-m", "firechunk.cli", "chunk", str(SAMPLE), "--data-dir"]
    result = subprocess.run(
        on_small_disk(disk, "1m", [*command, str(data_dir)]),
        env=_env(tmp_path), cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == ExitCode.NETWORK, result.stderr
    assert _last_line(result.stderr) == FULL_DATA_DIR.format(data_dir=data_dir)


@pytest.mark.parametrize(
    ("error", "code", "said"),
    [
        (OSError(errno.ENOSPC, "No space left on device", "/d/runs/r/chunks.json"),
         ExitCode.NETWORK, "the directory /d/runs/r is on a full disk"),
        (OSError(errno.EDQUOT, "Disk quota exceeded"),
         ExitCode.NETWORK, "a directory firechunk writes to is on a full disk"),
        (OSError(errno.EROFS, "Read-only file system", "/d/postgres/.firechunk.lock"),
         ExitCode.BAD_INPUT, "the directory /d/postgres is not writable"),
    ],
)  # fmt: skip
def test_a_full_or_read_only_disk_is_said_with_its_exit_code(error, code, said):
    """Raised where no command said which directory it writes (a flow's task, a
    library call): the line names the failing file's directory, when the error has one."""
    from firechunk.commands.exits import environment_failure

    failure = environment_failure(error)
    assert failure is not None and failure.code == code
    assert str(failure).startswith(said), str(failure)
    assert environment_failure(OSError(errno.ENOENT, "No such file or directory")) is None


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("docs.example.com", "must start with http:// or https://"),
        ("ftp://docs.example.com/", "must start with http:// or https://"),
        ("https://", "has no host name"),
        ("https://docs.example.com:port/", "not a well-formed URL"),
    ],
)
def test_a_malformed_site_url_is_refused(tmp_path: Path, url: str, said: str):
    result = _invoke("crawl", url, "--data-dir", str(tmp_path))
    assert result.exit_code == ExitCode.BAD_INPUT
    line = _one_line(result.stderr)
    assert "site URL" in line and said in line, line
    assert not (tmp_path / "jobs").exists()


def test_rebuild_refuses_a_malformed_site_or_api_url(tmp_path: Path):
    site = _invoke("rebuild", "--site", "supabase.com/docs", "--data-dir", str(tmp_path))
    assert site.exit_code == ExitCode.BAD_INPUT
    assert "site URL 'supabase.com/docs'" in _one_line(site.stderr)
    api = _invoke("rebuild", "--api-url", "http:///v2", "--data-dir", str(tmp_path))
    assert api.exit_code == ExitCode.BAD_INPUT
    assert "Firecrawl API URL" in _one_line(api.stderr)


def test_pages_jsonl_and_a_directory_name_the_crawl_json_meant(tmp_path: Path):
    raw = tmp_path / "raw" / "job"
    raw.mkdir(parents=True)
    pages = raw / "pages.jsonl"
    pages.write_text('{"markdown": "a"}\n{"markdown": "b"}\n')  # several lines: not JSON
    (raw / "crawl.json").write_text(SAMPLE.read_text())
    for given, said in [
        (pages, f"use crawl.json beside it ({raw / 'crawl.json'}, it is there)"),
        (raw, f"is a directory, not a crawl file: give its crawl.json ({raw / 'crawl.json'})"),
    ]:
        result = _invoke("chunk", str(given), "--out", str(tmp_path / "out"))
        assert result.exit_code == ExitCode.BAD_INPUT
        assert said in _one_line(result.stderr)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ('{"data": ["a page?", 3]}', "not Firecrawl's crawl shape: data[0]: Input should be"),
        ('{"pages": []}', "expected Firecrawl's crawl shape with a 'data' list"),
    ],
)
def test_a_file_not_in_the_crawl_shape_is_one_line(tmp_path: Path, content: str, said: str):
    path = tmp_path / "crawl.json"
    path.write_text(content)
    result = _invoke("chunk", str(path), "--out", str(tmp_path / "out"))
    assert result.exit_code == ExitCode.BAD_INPUT
    assert said in _one_line(result.stderr)


def _crawl_without_markdown(tmp_path: Path, keep: int) -> Path:
    """The sample crawl with all but `keep` pages' markdown swapped for html, as a crawl
    run with `formats: ["html"]` returns them."""
    crawl = json.loads(SAMPLE.read_text())
    for page in crawl["data"][keep:]:
        page["html"] = f"<p>{page.pop('markdown')[:40]}</p>"
    path = tmp_path / f"crawl-{keep}.json"
    path.write_text(json.dumps(crawl))
    return path


def test_a_crawl_run_without_the_markdown_format_is_one_sentence(tmp_path: Path):
    path = _crawl_without_markdown(tmp_path, keep=0)
    result = _invoke("chunk", str(path), "--out", str(tmp_path / "out"))
    assert result.exit_code == ExitCode.BAD_INPUT
    line = _one_line(result.stderr)
    assert "carry no 'markdown'" in line and 'formats: ["markdown"]' in line, line
    assert not (tmp_path / "out").exists()


def test_a_few_pages_without_markdown_stay_quarantines_of_their_own(tmp_path: Path):
    pages = len(json.loads(SAMPLE.read_text())["data"])
    crawl = read_crawl(_crawl_without_markdown(tmp_path, keep=pages - 1))  # one page lacks it
    run = chunk_crawl(crawl)
    assert [q.url for q in run.quarantine].count(crawl.data[-1].url) == 1
    assert run.chunks  # the other pages were chunked
    with pytest.raises(CrawlFileError, match="the markdown format"):
        read_crawl(_crawl_without_markdown(tmp_path, keep=pages // 3))


# -- the missing key -------------------------------------------------------------------------


def test_rebuild_without_a_key_names_the_secret_block_and_the_variable(
    tmp_path: Path, audit: Audit
):
    """Said before anything starts: no Prefect server, no process, not one packet."""
    result = _run(tmp_path, "rebuild", "--data-dir", str(tmp_path / "data"), key=None, audit=audit)
    assert result.returncode == ExitCode.BAD_INPUT, result.stderr
    line = _one_line(result.stderr)
    assert "'firecrawl-api-key'" in line and "Secret block" in line, line
    assert "FIRECRAWL_API_KEY" in line, line
    assert "temporary server" not in result.stdout + result.stderr  # Prefect never started
    assert audit.processes() == []  # no server, no worker
    assert audit.network() == []  # the key is checked before Firecrawl is asked anything
    assert not (tmp_path / "prefect-home" / "prefect.db").exists()  # no Prefect database
    assert not (tmp_path / "data" / "runs").exists()


def _rebuild_offline(tmp_path: Path, env: dict[str, str], *block: str):
    """`rebuild` with no key in the environment, crawling an API host that cannot resolve,
    so only the key check can get it started. `env` may carry an `Audit`'s hook."""
    command = [str(FIRECHUNK)] if FIRECHUNK.exists() else [sys.executable, "-m", "firechunk.cli"]
    args = ["rebuild", "--site", SITE, "--api-url", "http://no-such-host.invalid"]
    return subprocess.run(
        [*command, *args, "--data-dir", str(tmp_path / "data"), *block],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,  # a hang only
    )  # fmt: skip


def test_with_a_server_the_secret_block_is_asked_of_it_briefly(tmp_path: Path, prefect_api):
    from prefect.blocks.system import Secret
    from prefect.settings import PREFECT_API_URL

    Secret(value=SecretStr(CANARY_KEY)).save("firechunk-server-key", overwrite=True)
    env = {**_env(tmp_path, key=None), "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    missing = _rebuild_offline(tmp_path, env, "--secret-block", "no-such-block")
    assert missing.returncode == ExitCode.BAD_INPUT, missing.stderr
    assert "'no-such-block'" in _one_line(missing.stderr)
    found = _rebuild_offline(tmp_path, env, "--secret-block", "firechunk-server-key")
    assert found.returncode == ExitCode.NETWORK, found.stderr
    assert "DNS lookup of no-such-host.invalid failed" in _one_line(found.stderr)

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        port = closed.getsockname()[1]
        env["PREFECT_API_URL"] = f"http://127.0.0.1:{port}/api"
        unanswered = _rebuild_offline(tmp_path, env)
    assert unanswered.returncode == ExitCode.NETWORK, unanswered.stderr
    line = _one_line(unanswered.stderr)
    assert f"no answer from the Prefect API at http://127.0.0.1:{port}/api" in line, line

    # Briefly: asked once. A server that hangs up is one Prefect's client retries (five
    # times, with back-off) unless told not to.
    with _hanging_up() as (port, requests):
        env["PREFECT_API_URL"] = f"http://127.0.0.1:{port}/api"
        dropped = _rebuild_offline(tmp_path, env)
    assert dropped.returncode == ExitCode.NETWORK, dropped.stderr
    line = _one_line(dropped.stderr)
    assert f"no answer from the Prefect API at http://127.0.0.1:{port}/api" in line, line
    assert len(requests) == 1, requests
    assert "/block_documents/name/firecrawl-api-key" in requests[0], requests


@contextlib.contextmanager
def _hanging_up() -> Iterator[tuple[int, list[str]]]:
    """A port where every connection is accepted, its request line noted, and closed
    unanswered; the port and the request lines so far."""
    requests: list[str] = []
    done = threading.Event()
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        listening.settimeout(0.1)

        def serve() -> None:
            while not done.is_set():
                try:
                    connection, _ = listening.accept()
                except TimeoutError:
                    continue
                with connection:
                    connection.settimeout(None)
                    request = connection.recv(65536).split(b"\r\n", 1)[0]
                    requests.append(request.decode(errors="replace"))

        server = threading.Thread(target=serve, daemon=True)
        server.start()
        try:
            yield listening.getsockname()[1], requests
        finally:
            done.set()
            server.join()


# -- network failures ------------------------------------------------------------------------


def test_dns_failure_says_so_at_once(tmp_path: Path, audit: Audit):
    # Default retry settings: a DNS failure must not sit through 35 s of backoff.
    result = _run(
        tmp_path, "crawl", SITE, "--api-url", "http://no-such-host.invalid", "--data-dir", "data",
        audit=audit,
    )  # fmt: skip
    assert result.returncode == ExitCode.NETWORK, result.stderr
    line = _one_line(result.stderr)  # not retried: no retry lines either
    assert "could not reach Firecrawl" in line, line
    assert "DNS lookup of no-such-host.invalid failed" in line, line
    assert "refused" not in line, line
    assert audit.lookups() == ["no-such-host.invalid"]  # looked up once: not retried
    assert not (tmp_path / "data" / "jobs" / "docs-example-com.json").exists()


def test_rebuild_checks_the_api_host_before_prefect_starts(tmp_path: Path, audit: Audit):
    # The flow's crawl task is retried by Prefect for minutes; the name is checked first.
    result = _run(
        tmp_path, "rebuild", "--site", SITE, "--api-url", "http://no-such-host.invalid",
        "--data-dir", "data", audit=audit,
    )  # fmt: skip
    assert result.returncode == ExitCode.NETWORK, result.stderr
    line = _one_line(result.stderr)
    assert "DNS lookup of no-such-host.invalid failed" in line, line
    assert "temporary server" not in result.stdout + result.stderr  # Prefect never started
    assert audit.processes() == []  # no server, no worker, no flow run
    assert audit.lookups() == ["no-such-host.invalid"]  # checked once, not retried
    assert not (tmp_path / "prefect-home" / "prefect.db").exists()  # no Prefect database
    assert not (tmp_path / "data" / "runs").exists()


def test_debug_shows_the_traceback_with_the_same_exit_code(tmp_path: Path):
    result = _run(tmp_path, "--debug", "crawl", SITE, "--api-url", "http://no-such-host.invalid")
    assert result.returncode == ExitCode.NETWORK
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: could not reach Firecrawl")
    assert CANARY_KEY not in result.stderr + result.stdout


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_connection_refused_says_so(tmp_path: Path):
    port = _closed_port()
    url = f"http://127.0.0.1:{port}"
    result = _invoke(
        "crawl", SITE, "--api-url", url, "--data-dir", str(tmp_path), "--retry-wait", "0.01"
    )
    assert result.exit_code == ExitCode.NETWORK
    line = _last_line(result.stderr)
    assert f"connection to 127.0.0.1:{port} refused" in line and "nothing listens" in line, line
    assert not (tmp_path / "jobs" / "docs-example-com.json").exists()


def test_a_server_that_never_answers_is_a_timeout(tmp_path: Path):
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # the kernel accepts the connection; nobody ever answers
        port = silent.getsockname()[1]
        result = _invoke(
            "crawl", SITE, "--api-url", f"http://127.0.0.1:{port}", "--data-dir", str(tmp_path),
            "--request-timeout", "0.3",
        )  # fmt: skip
    assert result.exit_code == ExitCode.NETWORK
    line = _one_line(result.stderr)
    assert f"no answer from 127.0.0.1:{port} within 0.3 s (ReadTimeout)" in line, line
    assert "may or may not have created a job" in line, line  # the start call is not resent


@pytest.mark.parametrize(
    ("status", "advice"),
    [(401, "check the Firecrawl API key"), (402, "no credits left"), (404, "check the API URL")],
)
def test_an_http_status_is_named_with_its_code(tmp_path: Path, status: int, advice: str):
    with FakeFirecrawl(served_pages(), api_key=CANARY_KEY) as server:
        server.add_faults("start", Fault(status=status, echo_auth=True))
        result = _invoke("crawl", SITE, "--api-url", server.base_url, "--data-dir", str(tmp_path))
    assert result.exit_code == ExitCode.NETWORK
    line = _one_line(result.stderr)
    assert f"Firecrawl refused to start the crawl: HTTP {status}" in line and advice in line
    assert CANARY_KEY not in result.output  # the server echoed it; redacted


def test_a_failing_poll_names_the_status_and_keeps_the_job(tmp_path: Path):
    with FakeFirecrawl(served_pages(), api_key=CANARY_KEY, scraping_polls=1) as server:
        server.add_faults("status", *[Fault(status=500)] * 2)
        result = _invoke(
            "crawl", SITE, "--api-url", server.base_url, "--data-dir", str(tmp_path),
            "--retries", "2", "--retry-wait", "0.01", "--poll-interval", "0.01",
        )  # fmt: skip
    assert result.exit_code == ExitCode.NETWORK
    line = _last_line(result.stderr)
    assert "HTTP 500" in line and "run again to resume" in line, line


def test_search_where_nothing_was_loaded_points_at_the_demo_database(monkeypatch, tmp_path: Path):
    """Right after `make demo`, the README's `firechunk search` reads data/, and the
    database `make demo` loaded is data/demo's."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data" / "demo" / "postgres").mkdir(parents=True)
    (tmp_path / "data" / "demo" / "postgres" / "PG_VERSION").write_text("18\n")
    result = _invoke("search", "what happens to a message that keeps failing")
    assert result.exit_code == ExitCode.BAD_INPUT
    assert _one_line(result.stderr) == (
        "error: nothing has been loaded into the database in data/ yet: run `firechunk load` "
        "first, or add --data-dir data/demo for the one `make demo` loaded"
    )
    assert not (tmp_path / "data" / "postgres").exists()


# -- exit codes --------------------------------------------------------------------------------


def test_internal_errors_exit_4_and_save_their_traceback(monkeypatch, tmp_path: Path):
    def broken(*args, **kwargs):
        raise KeyError(f"bug with {CANARY_KEY} in it")

    monkeypatch.setattr("firechunk.crawl.run_crawl", broken)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the traceback is saved here
    result = _invoke("crawl", SITE, "--data-dir", str(tmp_path / "data"))
    assert result.exit_code == ExitCode.INTERNAL
    line = _one_line(result.stderr)
    assert line.startswith("internal error (a bug in firechunk): KeyError"), line
    saved = Path(line.rsplit("the traceback is in ", 1)[1])
    assert saved.parent == tmp_path
    assert "Traceback" in saved.read_text() and "broken" in saved.read_text()
    assert CANARY_KEY not in result.output + saved.read_text()

    shown = _invoke("--debug", "crawl", SITE, "--data-dir", str(tmp_path / "data"))
    assert shown.exit_code == ExitCode.INTERNAL and "Traceback" in shown.stderr


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (CrawlError("HTTP 503"), ExitCode.NETWORK),
        (MissingApiKeyError("no key"), ExitCode.BAD_INPUT),
        (CrawlFileError("not JSON"), ExitCode.BAD_INPUT),
        (ValueError("a bug"), None),
    ],
)
def test_known_errors_map_to_their_exit_codes(error, code):
    found = classify(error)
    assert (found[0] if found else None) == code


def test_validation_failure_and_refusals_exit_1():
    from firechunk.db.load import LoadRefused
    from firechunk.run.stages import RunSuperseded

    assert classify(LoadRefused("would delete 40 %"))[0] == ExitCode.FAILED
    assert classify(RunSuperseded("latest moved"))[0] == ExitCode.FAILED


def test_a_reader_that_went_away_ends_the_command_quietly(tmp_path: Path):
    """`firechunk runs | head -1`: the reader closed the pipe before the command wrote."""
    read, write = os.pipe()
    os.close(read)
    command = [str(FIRECHUNK)] if FIRECHUNK.exists() else [sys.executable, "-m", "firechunk.cli"]
    try:
        result = subprocess.run(
            [*command, "runs", "--data-dir", str(tmp_path / "data")],
            env=_env(tmp_path), cwd=tmp_path, stdout=write, stderr=subprocess.PIPE, text=True,
            timeout=120,
        )  # fmt: skip
    finally:
        os.close(write)
    assert result.returncode == ExitCode.BROKEN_PIPE == 141
    assert result.stderr == ""


def _to_a_closed_pipe(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`firechunk ARGS 2>&1 | head -0`: stdout and stderr into a pipe nobody reads."""
    read, write = os.pipe()
    os.close(read)
    command = [str(FIRECHUNK)] if FIRECHUNK.exists() else [sys.executable, "-m", "firechunk.cli"]
    try:
        return subprocess.run(
            [*command, *args], env=_env(tmp_path), cwd=tmp_path, stdout=write, stderr=write,
            text=True, timeout=300,
        )  # fmt: skip
    finally:
        os.close(write)


@pytest.mark.parametrize("args", [["--help"], ["runs", "--help"]])
def test_a_help_whose_reader_went_away_exits_141_not_1(tmp_path: Path, args):
    assert _to_a_closed_pipe(tmp_path, *args).returncode == ExitCode.BROKEN_PIPE


def test_a_run_whose_reader_went_away_still_ends_with_its_own_code(tmp_path: Path):
    """`firechunk chunk CRAWL 2>&1 | head -1`: the run goes on unheard and exits 0 when it
    passed, not 1 (a failed run's code) nor 141 half-way."""
    sample = Path(__file__).resolve().parents[1] / "data" / "sample" / "crawl.json"
    result = _to_a_closed_pipe(tmp_path, "chunk", str(sample), "--data-dir", "data")
    assert result.returncode == ExitCode.OK
    [status] = (tmp_path / "data" / "runs").glob("*/status.json")
    assert json.loads(status.read_text())["status"] == "passed"


def test_help_documents_the_exit_codes():
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for words in ["0 ok", "1 validation failed or publish refused", "2 bad input or usage"]:
        assert words in text
    assert "3 crawl or network" in text and "4 internal error" in text
    assert "130 interrupted" in text and "141 output pipe closed" in text


# -- a crawl job that never completes ---------------------------------------------------------


def test_a_crawl_job_that_never_completes_ends_the_rebuild_after_max_wait(tmp_path: Path):
    """The night ends with exit 3 and the job kept for the next run to resume, rather than
    polling for ever while every later night queues behind it; the crawl is never retried
    (its wait is spent). 90 s bounds `--max-wait 10` and the start-up."""
    with FakeFirecrawl(served_pages(), api_key=CANARY_KEY, scraping_polls=10**6) as server:
        started = time.monotonic()
        result = _run(
            tmp_path,
            "rebuild",
            "--site", SITE,
            "--api-url", server.base_url,
            "--max-wait", "10",
            "--data-dir", str(tmp_path / "data"),
        )  # fmt: skip
        seconds = time.monotonic() - started
        start_calls = server.start_calls
    assert result.returncode == ExitCode.NETWORK, result.stderr
    last = result.stderr.strip().splitlines()[-1]  # after the flow's log lines
    assert last.startswith("error: ") and "still 'scraping' after 10 s" in last, last
    assert "Traceback" not in result.stderr
    assert start_calls == 1
    [job] = (tmp_path / "data" / "jobs").glob("*.json")
    assert json.loads(job.read_text())["status"] == "polling"  # resumed by the next run
    assert seconds < 90, seconds
