"""The read-model tables carry a schema version; tables of another version (or of
none, as before it was recorded) are dropped and rebuilt from the event log, with
progress in the log, by whichever process opens them first."""

from __future__ import annotations

import io
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from dune_ledger.infrastructure.storage import open_rooms
from dune_ledger.projections.store import READ_MODEL_VERSION
from tests.support import database, layout


@pytest.fixture
def logged() -> Iterator[io.StringIO]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    logger = logging.getLogger("dune_ledger.read_models")
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.INFO)
    yield out
    logger.removeHandler(handler)
    logger.setLevel(old)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, object]]:
    """A store URL, and how to run SQL on its database directly."""
    if request.param == "sqlite":
        path = tmp_path / "rooms.db"

        def sql_sqlite(statement: str) -> list[tuple[object, ...]]:
            with sqlite3.connect(path) as db:
                return db.execute(statement).fetchall()

        yield f"sqlite:///{path}", sql_sqlite
        return
    with database("dl_schema") as url:

        def sql_pg(statement: str) -> list[tuple[object, ...]]:
            with psycopg.connect(url, autocommit=True) as db:
                cur = db.execute(statement)
                return cur.fetchall() if cur.description else []

        yield url, sql_pg


def played(url: str) -> tuple[str, dict[str, object], list[object]]:
    with open_rooms(url) as app:
        room = app.create_room(layout())["room"]
        for _ in range(3):
            assert app.execute(room, "emperor", {"type": "draw"})["ok"]
        return room, app.seat_view(room, "emperor"), app.public_log(room)


@pytest.mark.parametrize("old", ["older version", "no version"])
def test_tables_of_another_schema_version_are_rebuilt_by_themselves(store, logged, old):
    url, sql = store
    room, view, log = played(url)
    assert sql("SELECT version FROM dl_schema") == [(READ_MODEL_VERSION,)]
    # A database of an older version: its rows are of another shape (here: spoiled).
    sql("UPDATE dl_seat_views SET view = '{\"old\": true}'")
    sql("UPDATE dl_public_log SET entry = '{\"old\": true}'")
    if old == "no version":
        sql("DROP TABLE dl_schema")
    else:
        sql(f"UPDATE dl_schema SET version = {READ_MODEL_VERSION - 1}")
    with open_rooms(url) as app:
        # Read without catching up: the rows were rebuilt when the store was opened.
        assert app.read_models is not None
        assert app.read_models.position() == app.read_models.head()
        assert app.seat_view(room, "emperor") == view
        assert app.public_log(room) == log
    assert sql("SELECT version FROM dl_schema") == [(READ_MODEL_VERSION,)]
    text = logged.getvalue()
    found = 0 if old == "no version" else READ_MODEL_VERSION - 1
    assert f"schema version {found} found, {READ_MODEL_VERSION} expected" in text
    assert "events applied" in text and "rebuilt" in text
    # The next process finds the tables current: nothing is dropped again.
    before = logged.tell()
    with open_rooms(url) as app:
        assert app.seat_view(room, "emperor") == view
    assert "rebuilding" not in logged.getvalue()[before:]


def test_an_older_version_refuses_the_read_models_of_a_newer_one(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'rooms.db'}"
    played(url)
    with sqlite3.connect(tmp_path / "rooms.db") as db:
        db.execute(f"UPDATE dl_schema SET version = {READ_MODEL_VERSION + 1}")
    from dune_ledger.projections.store import ReadModelsTooNew

    with pytest.raises(ReadModelsTooNew, match="newer"):
        open_rooms(url)
    with sqlite3.connect(tmp_path / "rooms.db") as db:  # nothing was dropped
        assert db.execute("SELECT count(*) FROM dl_seat_views").fetchone()[0] > 0
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "dune_ledger", "--db", url, "room",
                           "log", "x"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "newer" in done.stderr and "Traceback" not in done.stderr
