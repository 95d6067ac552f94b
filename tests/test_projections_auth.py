"""Read models are derived, never trusted (RULES 8; issue 24 item 11): every row carries
a tag under a key derived from the key file. A row edited in the database (the
Emperor's view with 999 spice and a Lasgun) is never served, over the CLI, HTTP or the
stream: the room is folded again from its verified stream, and the audit reports the
row. SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

from dune_ledger.application.audit import audit_room
from dune_ledger.domain.errors import Rejection
from dune_ledger.infrastructure.http import create_app
from dune_ledger.infrastructure.settings import Settings
from tests.support import ADMIN, auth, drawn, layout, opened, room_key, stored, tables, update


def editor(url: str) -> Callable[[str, tuple[Any, ...]], list[Any]]:
    """Someone with the database but not the key file: runs SQL on the read models."""
    def run(sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        if url.startswith("sqlite"):
            with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
                return db.execute(sql, params).fetchall()
        import psycopg

        with psycopg.connect(url, autocommit=True) as db:
            cur = db.execute(sql.replace("?", "%s"), params)
            return cur.fetchall() if cur.description else []
    return run


def forged(text: str) -> str:
    """The Emperor's view as an editor would want it: 999 spice, a Lasgun in hand, and
    the row's tag kept in front (an editor cannot make a new one)."""
    tag, view = text[:65], orjson.loads(text[65:])
    view["me"]["spice"] = 999
    view["me"]["hand"].append({"id": "lasgun", "name": "Lasgun", "category": "weapon"})
    return tag + orjson.dumps(view).decode()


@pytest.mark.parametrize("how", ["edited", "plain", "moved"])
def test_an_edited_seat_view_row_is_never_served(url: str, how: str) -> None:
    sql = editor(url)
    with opened(url) as app:
        room = str(app.create_room(layout())["room"])
        assert app.execute(room, "richese", {"type": "draw"})["ok"]
        app.read_models.catch_up()
        ((stored,),) = sql("SELECT view FROM dl_seat_views WHERE room = ? AND seat = 'emperor'",
                           (room,))
        assert stored.startswith("!")  # tagged
        if how == "edited":
            new = forged(stored)
        elif how == "plain":  # an editor writing the bare JSON, as before the tags
            new = forged(stored)[65:]
        else:  # Richese's own authentic row, moved to the Emperor's seat
            ((new,),) = sql("SELECT view FROM dl_seat_views WHERE room = ? "
                            "AND seat = 'richese'", (room,))
        sql("UPDATE dl_seat_views SET view = ? WHERE room = ? AND seat = 'emperor'",
            (new, room))

        view = app.seat_view(room, "emperor")
        assert view["seat"] == "emperor" and view["me"]["spice"] == 10
        assert [c["id"] for c in view["me"]["hand"]] == ["karama-1"]
        assert orjson.loads(app.room_rows(room)[1]["emperor"]) == view  # the stream's read

        check = audit_room(app, room)["checks"]["read_models_match"]
        assert check["ok"] is False
        assert any("fails authentication" in d and ":emperor:" in d for d in check["details"])

        # The other seats' rows still verify and are served as stored.
        assert app.seat_view(room, "richese")["seat"] == "richese"


def test_a_room_folded_in_place_of_a_failed_row_is_walked_by_the_chain(url: str) -> None:
    """A row that fails its tag sends the read to the room's own events: an edit behind
    the latest snapshot (which loads never read) is found there, and nothing of the
    edited stream is served."""
    sql = editor(url)
    with opened(url, settings=Settings(snapshot_interval=4)) as app:
        room = drawn(app)
        events, _ = tables(app)
        text = stored(url, f"SELECT state FROM {events} WHERE originator_id = ? "
                           "AND originator_version = 3", room_key(url, room))
        update(url, app, room, 3, "state", bytes(text).replace(b'"cmd":null', b'"cmd":"x"'))
        app.read_models.catch_up()
        ((row,),) = sql("SELECT view FROM dl_seat_views WHERE room = ? AND seat = 'emperor'",
                        (room,))
        sql("UPDATE dl_seat_views SET view = ? WHERE room = ? AND seat = 'emperor'",
            (forged(row), room))
        with pytest.raises(Rejection) as refused:
            app.seat_view(room, "emperor")
        assert refused.value.code == "room_damaged"


def test_an_edited_public_log_entry_is_never_served(url: str) -> None:
    sql = editor(url)
    with opened(url) as app:
        room = str(app.create_room(layout())["room"])
        assert app.execute(room, "emperor", {"type": "draw"})["ok"]
        app.read_models.catch_up()
        honest = app.public_log(room)
        ((seq, entry),) = sql("SELECT seq, entry FROM dl_public_log WHERE room = ? "
                              "ORDER BY seq DESC LIMIT 1", (room,))
        sql("UPDATE dl_public_log SET entry = ? WHERE room = ? AND seq = ?",
            (entry.replace("emperor", "harkonnen"), room, seq))
        assert app.public_log(room) == honest
        assert app.public_view(room)["version"] == 2
        check = audit_room(app, room)["checks"]["read_models_match"]
        assert check["ok"] is False
        assert any("dl_public_log" in d for d in check["details"])


def test_the_seat_view_over_http_is_the_verified_one(url: str) -> None:
    sql = editor(url)
    with opened(url) as app, TestClient(create_app(app, admin_token=ADMIN)) as client:
        created = client.post("/rooms", json=layout(), headers=auth(ADMIN)).json()
        room, token = created["room"], created["seats"]["emperor"]
        app.read_models.catch_up()
        ((stored,),) = sql("SELECT view FROM dl_seat_views WHERE room = ? AND seat = 'emperor'",
                           (room,))
        sql("UPDATE dl_seat_views SET view = ? WHERE room = ? AND seat = 'emperor'",
            (forged(stored), room))
        view = client.get(f"/rooms/{room}/view", headers=auth(token)).json()
        assert view["me"]["spice"] == 10 and "lasgun" not in str(view)


def test_room_view_on_the_command_line_refuses_a_room_whose_chain_broke(
        url: str, capfd: pytest.CaptureFixture[str]) -> None:
    """The read models were built before the events were edited: they still look fine,
    and `room view` must not serve them (HTTP refuses at its token check)."""
    from dune_ledger.infrastructure.cli import main

    with opened(url) as app:
        room, other = drawn(app), drawn(app)
        app.read_models.catch_up()
        update(url, app, room, 2, "state", b"{truncated")
    for view in (["--as", "emperor"], ["--public"]):
        assert main(["--db", url, "room", "view", room, *view]) == 1
        assert main(["--db", url, "room", "view", other, *view]) == 0
    assert main(["--db", url, "room", "log", room]) == 1  # nor does `room log`
    assert main(["--db", url, "room", "log", other]) == 0
    err = capfd.readouterr().err
    assert "Traceback" not in err and err.count("room_damaged") == 3
