"""Session fixtures: a throwaway PostgreSQL database on the real server.

The server is the one `.ci/run` starts (127.0.0.1:5432, user postgres, trust
authentication); `DUNE_LEDGER_TEST_PG` names another maintenance URL. Each
run creates `dl_test_<random>` and drops it at the end, so runs never see
each other's rooms. Nothing here mocks the database.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest

ADMIN_URL = os.environ.get("DUNE_LEDGER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


def _admin_connection():  # type: ignore[no-untyped-def]
    import psycopg

    return psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5)


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """The URL of a fresh PostgreSQL database for this test session."""
    import psycopg

    name = f"dl_test_{secrets.token_hex(6)}"
    try:
        with _admin_connection() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as e:
        pytest.fail(f"PostgreSQL is not reachable at {ADMIN_URL} (.ci/run starts it): {e}")
    admin = urlparse(ADMIN_URL)
    yield f"{admin.scheme}://{admin.netloc}/{name}"
    with _admin_connection() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    return ADMIN_URL


def pytest_configure(config: pytest.Config) -> None:
    # FastAPI's TestClient still rides on httpx; the warning says nothing about our code.
    config.addinivalue_line("filterwarnings", "ignore:Using `httpx` with `starlette.testclient`")
