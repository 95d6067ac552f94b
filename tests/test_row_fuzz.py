"""Stored rows fuzzed as a hostile operator would edit them (RULES 8), on SQLite and on
PostgreSQL: every column of a row of each type (events, snapshots, each read-model
table, tracking) set to NULL, to a value of the wrong type, truncated, or swapped with
another room's (a tracking row: with the other projection's). The victim room may be
refused as damaged, its read models folded again from its verified stream; after each
case another room's views, log and commands, every room's audit and the worker go on,
and nothing logs a traceback. Each case is undone before the next (the row restored,
the read models rebuilt), and at the end every room audits clean.

A database that refuses a value (a column NOT NULL, or typed) refuses the case: it is
counted, and nothing was changed. The cases are a fixed list: a failure names its case.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest

from dune_ledger.application.audit import audit_all, audit_room
from dune_ledger.application.rooms import RoomsApp
from dune_ledger.domain.game import Rejection
from dune_ledger.infrastructure.settings import Settings
from dune_ledger.infrastructure.storage import open_rooms
from dune_ledger.infrastructure.worker import Worker
from dune_ledger.projections.read_models import ReadModels
from dune_ledger.projections.store import PUBLIC
from tests.support import database, drawn, tables

MUTATIONS = ("null", "wrong type", "truncated", "swapped")
# Each table's columns and their kind, and the columns that find its row.
COLUMNS: dict[str, dict[str, str]] = {
    "events": {"originator_id": "id", "originator_version": "int", "topic": "text",
               "state": "bytes"},
    "snapshots": {"originator_id": "id", "originator_version": "int", "topic": "text",
                  "state": "bytes"},
    "dl_public_log": {"room": "text", "seq": "int", "version": "int", "entry": "text"},
    "dl_seat_views": {"room": "text", "seat": "text", "version": "int", "view": "text"},
    "dl_log_rooms": {"room": "text", "version": "int", "state": "text"},
    "dl_view_rooms": {"room": "text", "version": "int", "state": "text"},
    "dl_autopilot_rooms": {"room": "text", "seats": "text", "due": "int"},
    "dl_token_rooms": {"token_hash": "text", "room": "text"},
    "dl_projection_tracking": {"projection": "text", "position": "int"},
}
KEYS = {"events": ("originator_id", "originator_version"),
        "snapshots": ("originator_id", "originator_version"),
        "dl_public_log": ("room", "seq"), "dl_seat_views": ("room", "seat"),
        "dl_log_rooms": ("room",), "dl_view_rooms": ("room",), "dl_autopilot_rooms": ("room",),
        "dl_token_rooms": ("token_hash",), "dl_projection_tracking": ("projection",)}


@dataclass
class Row:
    """One stored row to fuzz, by its table and key, and the row whose values a swap
    takes (the same row of the donor room)."""

    table: str
    key: dict[str, Any]
    donor: dict[str, Any]


class Db:
    """The rows behind the application's back, with the database's own client."""

    def __init__(self, url: str, app: RoomsApp) -> None:
        self.url = url
        self.sqlite = url.startswith("sqlite")
        events, snapshots = tables(app)
        self.names = {"events": events, "snapshots": snapshots}
        if self.sqlite:
            self.conn: Any = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=10,
                                             isolation_level=None)
        else:
            import psycopg

            self.conn = psycopg.connect(url, autocommit=True)
            # PostgreSQL's events carry their notification id as a column of their own.
            self.columns = {**COLUMNS, "events": {**COLUMNS["events"], "notification_id": "int"}}
        if self.sqlite:
            self.columns = COLUMNS

    def name(self, table: str) -> str:
        return self.names.get(table, table)

    def run(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if not self.sqlite:
            sql = sql.replace(" IS ?", " IS NOT DISTINCT FROM ?").replace("?", "%s")
        cursor = self.conn.execute(sql, params)
        return list(cursor.fetchall()) if cursor.description else []

    def where(self, key: dict[str, Any]) -> tuple[str, tuple[Any, ...]]:
        return " AND ".join(f"{k} IS ?" for k in key), tuple(key.values())

    def value(self, row: Row, key: dict[str, Any], column: str) -> Any:
        where, params = self.where(key)
        (found,) = self.run(f"SELECT {column} FROM {self.name(row.table)} WHERE {where}", params)
        return bytes(found[0]) if isinstance(found[0], memoryview) else found[0]

    def keys(self, table: str, **where: Any) -> list[dict[str, Any]]:
        cond = " AND ".join(f"{k} = ?" for k in where) or "1 = 1"
        names = KEYS[table]
        found = self.run(f"SELECT {', '.join(names)} FROM {self.name(table)} WHERE {cond} "
                         f"ORDER BY {', '.join(names)}", tuple(where.values()))
        return [dict(zip(names, r, strict=True)) for r in found]

    def set(self, row: Row, key: dict[str, Any], column: str, value: Any) -> bool:
        """Overwrite one column of one row; False when the database refuses the value."""
        where, params = self.where(key)
        try:
            self.run(f"UPDATE {self.name(row.table)} SET {column} = ? WHERE {where}",
                     (value, *params))
        except Exception as e:
            if not self.refused(e):
                raise
            return False
        return True

    def refused(self, e: Exception) -> bool:
        if self.sqlite:
            return isinstance(e, sqlite3.IntegrityError)
        import psycopg

        return isinstance(e, psycopg.errors.IntegrityError | psycopg.errors.DataError)

    def room_key(self, room: str) -> Any:
        return UUID(room).hex if self.sqlite else UUID(room)

    def close(self) -> None:
        self.conn.close()


def mutated(db: Db, row: Row, column: str, mutation: str, value: Any) -> Any:
    """The value `mutation` puts in place of `value`."""
    kind = db.columns[row.table][column]
    if mutation == "null":
        return None
    if mutation == "swapped":
        return db.value(row, row.donor, column)
    if mutation == "truncated":
        if kind == "int":
            return value // 10
        if kind == "id" and not db.sqlite:
            return UUID(value.hex[:16] + "0" * 16)
        return value[: len(value) // 2]
    # The wrong type: where SQLite keeps any type in any column, one of another type
    # (a blob in a text or integer column, text in a blob one); PostgreSQL's columns are
    # typed, so a value of the column's type but of the wrong kind for the reader.
    if db.sqlite:
        if kind == "bytes":
            return value.decode("utf-8", "replace")
        return str(value).encode()
    return {"int": -1, "text": "42", "bytes": b"42", "id": uuid4()}[kind]


@dataclass
class Rooms:
    victim: str
    donor: str
    bystander: str


def made(app: RoomsApp) -> Rooms:
    """The victim and the donor alike (so that every row of one has its twin in the
    other: snapshots at the same versions, the same seats), with an autopilot seat each;
    the bystander a room of its own."""
    rooms = []
    for _ in range(2):
        room = drawn(app)
        assert app.execute(room, "harkonnen", {"type": "set_autopilot", "enabled": True,
                                               "profile": "easy"})["ok"]
        assert app.execute(room, "emperor", {"type": "draw"})["ok"]
        rooms.append(room)
    return Rooms(rooms[0], rooms[1], drawn(app))


def targets(db: Db, rooms: Rooms) -> list[Row]:
    victim, donor = rooms.victim, rooms.donor
    rows: list[Row] = []
    ids = {"originator_id": db.room_key(victim)}, {"originator_id": db.room_key(donor)}
    for table, versions in (("events", (1, 4, 7)), ("snapshots", None)):
        mine, theirs = db.keys(table, **ids[0]), db.keys(table, **ids[1])
        assert len(mine) == len(theirs) and mine, table
        for key, other in zip(mine, theirs, strict=True):
            if versions is None or key["originator_version"] in versions:
                rows.append(Row(table, key, other))
    for table in ("dl_public_log", "dl_seat_views", "dl_log_rooms", "dl_view_rooms",
                  "dl_autopilot_rooms", "dl_token_rooms"):
        mine, theirs = db.keys(table, room=victim), db.keys(table, room=donor)
        assert len(mine) == len(theirs) and mine, table
        pairs = list(zip(mine, theirs, strict=True))
        if table == "dl_public_log":
            pairs = pairs[-1:]
        elif table == "dl_seat_views":
            pairs = [p for p in pairs if p[0]["seat"] in ("emperor", PUBLIC)]
        elif table == "dl_token_rooms":
            pairs = pairs[:1]
        rows += [Row(table, key, other) for key, other in pairs]
    tracked = db.keys("dl_projection_tracking")
    rows += [Row("dl_projection_tracking", key, other)
             for key, other in zip(tracked, tracked[::-1], strict=True)]
    return rows


def cases(db: Db, rows: list[Row]) -> Iterator[tuple[Row, str, str]]:
    for row in rows:
        for column in db.columns[row.table]:
            for mutation in MUTATIONS:
                yield row, column, mutation


@contextmanager
def fuzz_store(url: str, tmp_path: Path) -> Iterator[str]:
    if url == "sqlite":
        yield f"sqlite:///{tmp_path / 'rooms.db'}"
        return
    with database("dl_fuzz") as pg:
        yield pg


class Expect:
    """What another room's reads and commands must give: the bystander's version."""

    def __init__(self, app: RoomsApp, rooms: Rooms) -> None:
        self.app, self.rooms = app, rooms
        self.version = app.load(rooms.bystander).version
        self.turn = 0

    def bystander_goes_on(self, case: str) -> None:
        app, room = self.app, self.rooms.bystander
        assert app.seat_view(room, "emperor")["version"] == self.version, case
        assert app.public_view(room)["version"] == self.version, case
        assert app.public_log(room), case
        seat = ("emperor", "harkonnen")[self.turn % 2]
        hand = app.load(room).state.seat(seat).hand
        command = {"type": "discard", "card": hand[-1]} if len(hand) > 1 else {"type": "draw"}
        result = app.execute(room, seat, command)
        assert result["ok"], (case, result)
        self.turn += 1
        self.version = result["version"]
        assert app.seat_view(room, seat)["version"] == self.version, case


def failed(report: dict[str, Any]) -> dict[str, Any]:
    return {name: c["details"] for name, c in report["checks"].items() if c["ok"] is False}


def answered(case: str, read: Any) -> None:
    """A read of a fuzzed room: served, or refused with a code (never an exception)."""
    try:
        read()
    except Rejection as r:
        assert r.code in ("room_damaged", "unknown_room", "unknown_seat"), (case, r.code)


def fuzzed_room_answers(app: RoomsApp, room: str, case: str) -> None:
    answered(case, lambda: app.seat_view(room, "emperor"))
    answered(case, lambda: app.public_view(room))
    answered(case, lambda: app.public_log(room))
    result = app.execute(room, "emperor", {"type": "draw"})
    assert isinstance(result["ok"], bool), case
    report = audit_room(app, room) if result["ok"] or \
        result["error"]["code"] != "unknown_room" else None
    assert report is None or isinstance(report["ok"], bool), case


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_no_stored_row_breaks_another_room(backend: str, tmp_path: Path,
                                           caplog: pytest.LogCaptureFixture,
                                           capfd: pytest.CaptureFixture[str]) -> None:
    caplog.set_level(logging.WARNING)
    with fuzz_store(backend, tmp_path) as url:
        app = open_rooms(url, settings=Settings(snapshot_interval=3, room_cache=0))
        db = Db(url, app)
        follower = None
        try:
            rooms = made(app)
            models = app.read_models
            assert isinstance(models, ReadModels)
            models.catch_up()
            expect = Expect(app, rooms)
            rows = targets(db, rooms)
            if not db.sqlite:  # the worker's LISTEN/NOTIFY follower, running throughout
                from dune_ledger.projections.follow import subscription_runner

                follower = subscription_runner(app, models)
            tried = refused = 0
            for row, column, mutation in cases(db, rows):
                case = f"{row.table} {row.key} {column}: {mutation}"
                original = db.value(row, row.key, column)
                value = mutated(db, row, column, mutation, original)
                tried += 1
                if not db.set(row, row.key, column, value):
                    refused += 1
                    continue
                changed = {**row.key, column: value} if column in row.key else row.key
                expect.bystander_goes_on(case)
                for room in (rooms.victim, rooms.donor):
                    fuzzed_room_answers(app, room, case)
                reports = {r["room"]: r for r in audit_all(app)}
                assert reports[rooms.bystander]["ok"], (case, failed(reports[rooms.bystander]))
                Worker(app, subscribe=False).tick()
                if follower is not None:
                    assert not follower.is_interrupted.is_set(), case
                if not db.set(row, changed, column, original):  # the victim moved on
                    where, params = db.where(changed)
                    db.run(f"DELETE FROM {db.name(row.table)} WHERE {where}", params)
                models.rebuild()
            assert tried >= 150 and tried - refused >= 100, (tried, refused)
            for report in audit_all(app):
                assert report["ok"], failed(report)
        finally:
            if follower is not None:
                follower.__exit__(None, None, None)
            db.close()
            app.close()
    logged = [r for r in caplog.records if r.exc_info]
    assert not logged, logged[0].getMessage()
    out = capfd.readouterr()
    assert "Traceback" not in out.err + out.out
