"""Fixtures shared by the test files that run Prefect flows or use the vector database."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

import pytest


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


@pytest.fixture
def migrated_prefect_home(prefect_api, tmp_path) -> Path:
    """A Prefect home whose database is already migrated (a copy of the test server's): a
    fresh one takes 20-30 s to migrate as the command's temporary API starts."""
    home = tmp_path / "prefect-home"
    home.mkdir()
    copy_prefect_database(home)
    return home


def copy_prefect_database(home: Path) -> None:
    """The test server's database copied to `home`/prefect.db (replacing one there)."""
    from prefect.settings import PREFECT_SERVER_DATABASE_CONNECTION_URL

    url = PREFECT_SERVER_DATABASE_CONNECTION_URL.value()
    prefix = "sqlite+aiosqlite:///"
    if not url or not url.startswith(prefix):
        pytest.skip(f"the test server's database is not a SQLite file: {url}")
    with (
        sqlite3.connect(url.removeprefix(prefix)) as source,
        sqlite3.connect(home / "prefect.db") as copy,
    ):
        source.backup(copy)


@pytest.fixture(scope="session")
def model():
    """The real local embedder, loaded once."""
    from firechunk.embedders import local_embedder

    return local_embedder()


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
