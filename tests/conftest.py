"""Session fixtures: a throwaway PostgreSQL database on the real server.

The server is the one `scripts/services` starts (127.0.0.1:5432, user postgres, trust
authentication); `DUNE_LEDGER_TEST_PG` names another maintenance URL. Each
run creates `dl_test_<random>` and drops it at the end, so runs never see
each other's rooms. Nothing here mocks the database.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dune_ledger.infrastructure import settings
from scripts.throwaway import ADMIN_URL
from tests.support import database

# Every app a test opens signs with one key file of this run's own (never a
# `dune-ledger.key` in the checkout); subprocesses inherit it. A test that needs
# another key file names it.
KEY_DIR = tempfile.mkdtemp(prefix="dl-test-keys-")
os.environ.setdefault("DUNE_LEDGER_KEY_FILE", str(Path(KEY_DIR) / "dune-ledger.key"))


@pytest.fixture(autouse=True)
def settings_of_this_test() -> None:
    """The process's settings are read once (infrastructure/settings.py); each test reads
    them anew, from the environment it sets up (monkeypatch) before it opens anything."""
    settings.current.cache_clear()


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """The URL of a fresh PostgreSQL database for this test session."""
    with database("dl_test") as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A storage URL, once for a SQLite file and once for the session's PostgreSQL
    database (tests that use it run on both)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'rooms.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    return ADMIN_URL


CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium driven by Playwright, one for each page test module."""
    playwright_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            raise RuntimeError(f"{CHROMIUM} is missing: scripts/services installs it")
        pytest.skip(f"{CHROMIUM} is missing (apt-get install -y chromium)")
    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM)
        try:
            yield launched
        finally:
            launched.close()


def pytest_configure(config: pytest.Config) -> None:
    # FastAPI's TestClient still rides on httpx; the warning says nothing about our code.
    config.addinivalue_line("filterwarnings", "ignore:Using `httpx` with `starlette.testclient`")
