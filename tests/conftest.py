"""Fixtures shared by the test files that run Prefect flows."""

from __future__ import annotations

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
