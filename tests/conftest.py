"""Fixtures shared by the test files that run Prefect flows or use the vector database, and
the marks that keep `make test-fast` fast.

A test is fast unless it is marked `slow`, and `make test-fast` runs `-m "not slow"`: a new
test file is in the fast set until something marks it. Each mark names where a test's cost
comes from (pyproject.toml lists them), and any of them implies `slow`:

- the expensive fixtures below mark every test that uses them, directly or through
  another fixture (`FIXTURE_MARKS`);
- `MODULE_MARKS`: the modules whose tests start servers or processes of their own, or
  validate whole runs;
- `TEST_MARKS`: the few such tests in modules that are otherwise fast.

A test left unmarked that takes more than `SLOW_SECONDS` is named at the end of the run, so
the marks keep up with the tests.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

# The fixtures that cost seconds to minutes, and the mark each gives its tests.
FIXTURE_MARKS = {
    "prefect_api": "prefect",  # a Prefect server: 20-30 s to start
    "server": "database",  # the embedded Postgres
    "db": "database",
    "model": "embedder",  # the real local embedder
    "chunked_sample": "validation",  # `firechunk chunk` in a process of its own
}
MODULE_MARKS = {
    "test_embedded_postgres": ("database", "processes"),  # its own servers, killed on purpose
    "test_collections": ("database",),  # the tests without `db` start servers of their own
    "test_interrupts": ("processes",),  # commands interrupted in process groups of their own
    "test_leftovers": ("processes",),
    "test_cli_chunk": ("validation",),  # `firechunk chunk`, whole runs
    "test_incremental": ("validation",),
    "test_doc_sets": ("validation",),
    "test_set_aside": ("validation",),
    "test_changes_trust": ("validation",),
    "test_publish": ("validation",),
    "test_validation": ("validation",),
    "test_hostile": ("validation",),
}
# Node id (after "tests/") up to the test's name, or into its parameters.
TEST_MARKS = {
    "test_cli_errors.py::test_a_crawl_job_that_never_completes": ("prefect", "processes"),
    "test_cli_errors.py::test_a_real_full_disk_during_chunk": ("processes", "validation"),
    "test_cli_errors.py::test_a_run_whose_reader_went_away": ("processes", "validation"),
    "test_database.py::test_a_failed_or_unfinished_run_is_never_loaded": ("validation",),
    "test_settings.py::test_a_run_with_other_token_limits": ("validation",),
    "test_verdict.py::test_a_failed_validation_names": ("validation",),
    "test_settings.py::test_the_suite_checks_a_run_against_its_own": ("validation",),
    "test_crawl_resume.py::test_sigkill_while_polling": ("processes",),
    "test_crawl_secrets.py::test_canary_key_stays_out_of_files_and_cli": ("processes",),
    "test_embedders.py::test_local_agrees_with_the_shipped_graph": ("embedder",),
    "test_embedders.py::test_local_first_load_memory": ("embedder", "processes"),
    "test_embedders.py::test_cluster_embedder_spreads": ("embedder", "processes"),
    "test_embedders.py::test_openai_retries_a_timeout": ("slow",),  # waits out a timeout
    "test_crawl_faults.py::test_transient_fault_is_retried_to_success[read timeout": ("slow",),
}
# Each of these makes a test slow.
COSTS = ("prefect", "database", "embedder", "processes", "validation", "deployment", "corpus")
SLOW_SECONDS = 5.0


def pytest_collection_modifyitems(config, items):
    """Marks each test with what it costs, then `slow` on any test so marked."""
    for item in items:
        marks: list[str] = []
        info = getattr(item, "_fixtureinfo", None)
        for name in getattr(item, "fixturenames", ()):
            definitions = info.name2fixturedefs.get(name, ()) if info else ()
            # The fixture defined here, not a module's own of the same name.
            if name in FIXTURE_MARKS and definitions and _defined_here(definitions[-1]):
                marks.append(FIXTURE_MARKS[name])
        marks += MODULE_MARKS.get(item.path.stem, ())
        node = item.nodeid.removeprefix("tests/")
        for start, test_marks in TEST_MARKS.items():
            if node.startswith(start):
                marks += test_marks
        for mark in dict.fromkeys(marks):
            item.add_marker(mark)
        if any(item.get_closest_marker(cost) for cost in COSTS):
            item.add_marker("slow")


def _defined_here(definition) -> bool:
    return getattr(definition.func, "__module__", None) == __name__


_seconds: dict[str, float] = {}
_unmarked_slow: list[tuple[float, str]] = []


def pytest_runtest_logreport(report):
    """Adds up an unmarked test's set-up, call and tear-down (its fixtures count)."""
    if "slow" in report.keywords:
        return
    seconds = _seconds.pop(report.nodeid, 0.0) + report.duration
    if report.when != "teardown":
        _seconds[report.nodeid] = seconds
    elif seconds > SLOW_SECONDS:
        _unmarked_slow.append((seconds, report.nodeid))


def pytest_terminal_summary(terminalreporter):
    """Names the tests not marked slow that took more than SLOW_SECONDS: said, not failed
    (a busy machine is slow); mark where their cost comes from (see above)."""
    if _unmarked_slow:
        terminalreporter.section(f"tests not marked slow that took over {SLOW_SECONDS:g} s")
        for seconds, nodeid in sorted(_unmarked_slow, reverse=True):
            terminalreporter.write_line(f"{seconds:5.1f} s  {nodeid}")


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory):
    """A temporary Prefect server and database, and a Prefect home of the tests' own.

    One for the whole session: on a fresh database it takes 20-30 s to start on a two-core
    machine.
    """
    from prefect.settings import PREFECT_HOME, PREFECT_SERVER_ANALYTICS_ENABLED, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    home = tmp_path_factory.mktemp("prefect-home")
    with (
        temporary_settings({PREFECT_HOME: home, PREFECT_SERVER_ANALYTICS_ENABLED: False}),
        prefect_test_harness(server_startup_timeout=180),
    ):
        yield


@pytest.fixture(scope="session")
def model():
    """The real local embedder, loaded once, each text embedded once (`RememberedVectors`)."""
    from firechunk.embedders import local_embedder

    return RememberedVectors(local_embedder())


class RememberedVectors:
    """The real embedder, keeping the vector of every text it has embedded this session.

    The database tests load the sample and its variants again and again, each time into a
    new database: embedding the same chunks every time was most of what they cost. The
    vectors are the model's own; remembering them relies only on the model giving a text the
    same vector in any batch, which tests/test_embedders.py checks on the embedder itself
    (test_local_is_deterministic_and_batches_change_nothing). Everything else (`model`,
    `dimensions`, `windows`) is the embedder's.
    """

    def __init__(self, embedder) -> None:
        self.embedder = embedder
        self._vectors: dict[str, object] = {}

    def __getattr__(self, name: str):
        return getattr(self.embedder, name)

    def embed(self, texts, progress=None):
        import numpy as np

        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        new = [text for text in dict.fromkeys(texts) if text not in self._vectors]
        if new:
            self._vectors.update(zip(new, self.embedder.embed(new), strict=True))
        vectors = np.zeros((len(texts), self.embedder.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            vectors[row] = self._vectors[text]
        if progress is not None:
            progress(len(texts))  # one batch: every text at once
        return vectors


@pytest.fixture(scope="session")
def chunked_sample(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The bundled sample crawl published by `firechunk chunk` in a process of its own, with
    one worker, into the data directory `data` named relative to the working directory: the
    data directory and the command's result. One for the session, as each such process
    imports and runs everything a user's does; copy the directory before changing it."""
    root = Path(__file__).resolve().parents[1]
    cwd = tmp_path_factory.mktemp("chunked-sample")
    command = ["chunk", str(root / "data" / "sample" / "crawl.json"), "--data-dir", "data"]
    result = subprocess.run(
        [sys.executable, "-m", "firechunk.cli", *command, "--workers", "1"],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return cwd / "data", result


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """The embedded Postgres + pgvector, one for the session."""
    from firechunk.db.connect import embedded_server

    with embedded_server(tmp_path_factory.mktemp("pg")) as url:
        yield url


@pytest.fixture
def db(server):
    """A new, empty database on the session's server."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"create database {name}")
    return server.replace("/postgres?", f"/{name}?")
