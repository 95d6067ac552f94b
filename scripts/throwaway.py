"""Throwaway PostgreSQL databases, for the tests, the benchmarks and the drills.

`throwaway_database(ADMIN_URL, "dl_test")` creates `dl_test_<random>` through a
maintenance connection, yields its URL, and drops it afterwards, even when
connections are still open.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlparse

# The maintenance URL (README "Configuration": the tests' own setting, not the engine's).
DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
ADMIN_URL = os.environ.get("DUNE_LEDGER_TEST_PG", DEFAULT_ADMIN_URL)


@contextmanager
def throwaway_database(admin_url: str = ADMIN_URL, prefix: str = "dl_test") -> Iterator[str]:
    import psycopg

    name = f"{prefix}_{secrets.token_hex(5)}"
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    admin = urlparse(admin_url)
    try:
        yield f"{admin.scheme}://{admin.netloc}/{name}"
    finally:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
