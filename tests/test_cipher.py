"""Encryption at rest: with a cipher key in the key file, what the database holds (the
SQLite file and its -wal; PostgreSQL's rows) names no hidden card."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from uuid import UUID

import orjson
import pytest

from dune_ledger.application.audit import audit_room
from dune_ledger.application.rooms import RoomsApp
from dune_ledger.domain.catalog import CARDS
from dune_ledger.infrastructure.keys import Keys
from dune_ledger.infrastructure.settings import Settings
from dune_ledger.infrastructure.storage import open_rooms
from tests.support import example, tables

BOX_LAYOUT = example("box")

BOX = "nullentropy-box"


@contextmanager
def opened(url: str, key_file: Path, settings: Settings | None = None) -> Iterator[RoomsApp]:
    app = open_rooms(url, key_file=str(key_file), settings=settings)
    try:
        yield app
    finally:
        app.close()


def searched(app: RoomsApp) -> str:
    """A room with draws, a Box search (its candidates and the pile's order are hidden)
    and a snapshot; its read models caught up."""
    room = str(app.create_room({**BOX_LAYOUT, "seed": 3})["room"])
    assert app.execute(room, "emperor", {"type": "draw"})["ok"]
    assert app.execute(room, "harkonnen", {"type": "draw"})["ok"]
    assert app.execute(room, "richese", {"type": "begin_search", "card": BOX})["ok"]
    assert app.read_models is not None
    app.read_models.catch_up()
    return room


def hidden_cards(app: RoomsApp, room: str) -> set[str]:
    """The cards of the deck, the hands and the open search that nothing public names."""
    state = app.load(room).state
    cards = set(state.deck)
    for seat in state.seats:
        cards.update(seat.hand)
    if state.search is not None:
        cards.update(state.search.discard)
    public = orjson.dumps([app.public_view(room), app.public_log(room)]).decode()
    return {c for c in cards if c not in public and c in CARDS}


def sqlite_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(path.parent.glob(path.name + "*")))


def postgres_bytes(url: str, app: RoomsApp, room: str) -> bytes:
    import psycopg

    events, snapshots = tables(app)
    with psycopg.connect(url) as db:
        rows = [*db.execute(f"SELECT state FROM {events} WHERE originator_id = %s",
                            (UUID(room),)),
                *db.execute(f"SELECT state FROM {snapshots} WHERE originator_id = %s",
                            (UUID(room),))]
        out = b"".join(bytes(r[0]) for r in rows)
        for table, column in (("dl_seat_views", "view"), ("dl_view_rooms", "state"),
                              ("dl_log_rooms", "state"), ("dl_public_log", "entry")):
            for (text,) in db.execute(f"SELECT {column} FROM {table} WHERE room = %s",
                                      (room,)):
                out += str(text).encode()
    return out


def stored_bytes(url: str, app: RoomsApp, room: str) -> bytes:
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        assert Path(f"{path}-wal").exists()  # the -wal is checked too, not only the file
        return sqlite_bytes(path)
    return postgres_bytes(url, app, room)


@pytest.mark.parametrize("cipher", [True, False], ids=["cipher key", "no cipher key"])
def test_the_store_names_no_hidden_card_with_a_cipher_key(url: str, tmp_path: Path,
                                                          cipher: bool) -> None:
    key = tmp_path / "server.key"
    Keys(key).create(cipher=cipher, announce=False)
    with opened(url, key, settings=Settings(snapshot_interval=3)) as app:
        room = searched(app)
        hidden = hidden_cards(app, room)
        assert len(hidden) > 10
        named = {c for c in hidden if c.encode() in stored_bytes(url, app, room)}
        if cipher:
            assert not named
            report = audit_room(app, room)
            assert report["ok"], report
            assert app.seat_view(room, "richese")["nullentropy"]["search"] is not None
        else:  # the check can fail: in plain text, the hidden cards are all there
            assert named == hidden


def test_without_the_cipher_key_an_encrypted_room_is_damaged_not_a_crash(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'rooms.db'}"
    key = tmp_path / "server.key"
    Keys(key).create(cipher=True, announce=False)
    with opened(url, key) as app:
        room = searched(app)
    plain = tmp_path / "plain.key"
    data = orjson.loads(key.read_bytes())
    del data["cipher_key"]
    plain.write_bytes(orjson.dumps(data))
    with opened(url, plain) as app:
        result = app.execute(room, "emperor", {"type": "draw"})
        assert result["error"]["code"] == "room_damaged"
        assert "cannot be read" in result["error"]["message"]
        with pytest.raises(Exception) as refused:
            app.seat_view(room, "emperor")
        assert getattr(refused.value, "code", None) == "room_damaged"


def test_turning_encryption_on_later_keeps_the_plain_rows_readable(tmp_path: Path) -> None:
    """Rows written before stay plain (and verified); rows written after are encrypted."""
    from eventsourcing.cryptography import AESCipher

    url = f"sqlite:///{tmp_path / 'rooms.db'}"
    key = tmp_path / "server.key"
    Keys(key).create(announce=False)
    with opened(url, key) as app:
        room = searched(app)
        events, _ = tables(app)
    data = orjson.loads(key.read_bytes())
    data["cipher_key"] = AESCipher.create_key(32)
    key.write_bytes(orjson.dumps(data))
    with opened(url, key) as app:
        search = app.load(room).state.search
        assert search is not None
        chosen = next(c for c in search.discard if not CARDS[c].is_box)
        assert app.execute(room, "richese", {"type": "select_card", "search": search.event,
                                             "card": chosen})["ok"]
        assert audit_room(app, room)["ok"]
    with sqlite3.connect(tmp_path / "rooms.db") as db:
        rows = [bytes(s) for (s,) in db.execute(
            f"SELECT state FROM {events} WHERE originator_id = ? "
            "ORDER BY originator_version", (UUID(room).hex,))]
    assert rows[0][:1] == b"{" and rows[-1][:1] != b"{"
