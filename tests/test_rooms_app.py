"""The rooms application on real storage: memory:// and SQLite."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest

import dune_ledger.application.rooms as rooms_module
from dune_ledger.application.audit import audit_room, state_hash
from dune_ledger.application.stream import Recorded
from dune_ledger.domain.custody import Draw
from dune_ledger.domain.effect import HOUSE
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.rules import replay
from dune_ledger.infrastructure.settings import Settings
from dune_ledger.infrastructure.storage import RoomMapper, open_rooms
from tests.support import Factory, layout

BOX = "nullentropy-box"


@pytest.fixture(params=["memory", "sqlite"])
def app(request, tmp_path):
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/rooms.db"
    factory = Factory()
    with open_rooms(url, randomness_factory=factory) as rooms:
        rooms.factory_under_test = factory  # type: ignore[attr-defined]
        yield rooms


def fingerprint(app, room):
    loaded = app.load(room)
    s = loaded.state
    return (loaded.version, s.bank, [(x.faction, x.spice, list(x.hand)) for x in s.seats],
            list(s.discard), list(s.deck))


def test_create_then_search_then_select(app):
    created = app.create_room(layout())
    room = created["room"]
    assert created["version"] == 1 and set(created["seats"]) == {"richese", "emperor",
                                                                  "harkonnen"}
    opened = app.execute(room, "richese", {"type": "begin_search", "card": BOX})
    assert opened["ok"] and opened["version"] == 3
    assert [e["type"] for e in opened["events"]] == ["FeePaid", "SearchOpened"]
    search = opened["events"][1]["search"]
    done = app.execute(room, "richese", {"type": "select_card", "search": search,
                                         "card": "baliset"})
    assert done["ok"]
    assert "baliset" not in orjson.dumps(done).decode()  # the result is public-only
    assert audit_room(app, room)["ok"]


@pytest.mark.parametrize(("actor", "command", "code"), [
    ("richese", {"type": "begin_search", "card": "nope"}, "unknown_card"),
    ("richese", {"type": "begin_search", "card": "crysknife"}, "not_a_box"),
    ("emperor", {"type": "begin_search", "card": BOX}, "not_in_hand"),
    ("richese", {"type": "begin_search"}, "invalid_command"),
    ("richese", {"type": "begin_search", "card": BOX, "extra": 1}, "invalid_command"),
    ("richese", {"type": "teleport"}, "invalid_command"),
    ("richese", {"type": "begin_search", "card": BOX, "expected_version": 7}, "conflict"),
    ("atreides", {"type": "draw"}, "unknown_seat"),
])
def test_rejections_append_nothing_and_draw_nothing(app, actor, command, code):
    room = app.create_room(layout())["room"]
    before = fingerprint(app, room)
    draws = app.factory_under_test.draws
    result = app.execute(room, actor, command)
    assert not result["ok"] and result["error"]["code"] == code
    assert fingerprint(app, room) == before
    assert app.factory_under_test.draws == draws


def test_rejected_select_keeps_the_search_and_draws_nothing(app):
    room = app.create_room(layout())["room"]
    search = app.execute(room, "richese", {"type": "begin_search", "card": BOX})["events"][1]
    before = fingerprint(app, room)
    draws = app.factory_under_test.draws
    for actor, card in (("emperor", "baliset"), ("richese", "stunner")):
        result = app.execute(room, actor, {"type": "select_card", "search": search["search"],
                                           "card": card})
        assert not result["ok"]
    assert fingerprint(app, room) == before and app.factory_under_test.draws == draws
    assert app.load(room).state.search is not None


def test_command_id_repeats_return_the_first_result(app):
    room = app.create_room(layout())["room"]
    first = app.execute(room, "richese", {"type": "begin_search", "card": BOX,
                                          "command_id": "c1"})
    search = first["events"][1]["search"]
    select = {"type": "select_card", "search": search, "card": "baliset", "command_id": "c2"}
    done = app.execute(room, "richese", select)
    version = app.load(room).version
    assert app.execute(room, "richese", select) == done
    assert app.execute(room, "richese", {"type": "begin_search", "card": BOX,
                                         "command_id": "c1"}) == first
    assert app.load(room).version == version
    assert app.load(room).state.seat("richese").spice == 8


def test_unknown_room(app):
    result = app.execute("not-a-room", "richese", {"type": "draw"})
    assert result["error"]["code"] == "unknown_room"
    result = app.execute("8c0f1c56-8a86-4c4c-9d0e-5b0ab3f6b0a1", "richese", {"type": "draw"})
    assert result["error"]["code"] == "unknown_room"


def test_seeded_rooms_repeat(tmp_path):
    outcomes = []
    for i in range(2):
        with open_rooms(f"sqlite:///{tmp_path}/r{i}.db") as rooms:
            room = rooms.create_room(layout(seed=99))["room"]
            ev = rooms.execute(room, "richese", {"type": "begin_search", "card": BOX})
            rooms.execute(room, "richese", {"type": "select_card",
                                            "search": ev["events"][1]["search"],
                                            "card": "baliset"})
            s = rooms.load(room).state
            outcomes.append((s.deck, s.discard))
    assert outcomes[0] == outcomes[1]


def test_snapshots_give_the_same_state_as_a_full_replay(tmp_path):
    url = f"sqlite:///{tmp_path}/snap.db"
    with open_rooms(url, settings=Settings(snapshot_interval=3)) as rooms:
        room = rooms.create_room(layout())["room"]
        ev = rooms.execute(room, "richese", {"type": "begin_search", "card": BOX})
        card = rooms.seat_view(room, "richese")["nullentropy"]["search"]["cards"][0]["id"]
        assert rooms.execute(room, "richese", {"type": "select_card", "card": card,
                                               "search": ev["events"][1]["search"]})["ok"]
        for _ in range(4):
            assert rooms.execute(room, "emperor", {"type": "draw"})["ok"]
            drawn = rooms.seat_view(room, "emperor")["me"]["hand"][-1]["id"]
            assert rooms.execute(room, "emperor", {"type": "discard", "card": drawn})["ok"]
        assert rooms.snapshots is not None
        assert list(rooms.snapshots.get(rooms.load(room).id))
        # The room kept after those commands is the same room too.
        uid = rooms.load(room).id
        kept = rooms.kept.rooms[uid]
        full = replay(r.fact for r in rooms.records(uid))
        assert state_hash(kept.state) == state_hash(full)
        assert kept.head_hash() == rooms.records(uid)[-1].hash()
        assert kept.commands == rooms.load(room).commands
    with open_rooms(url, settings=Settings(snapshot_interval=3)) as rooms:
        loaded = rooms.load(room)
        full = replay(r.fact for r in rooms.records(loaded.id))
        assert state_hash(loaded.state) == state_hash(full)
        assert loaded.head_hash() == rooms.records(loaded.id)[-1].hash()
        assert audit_room(rooms, room)["ok"]


def test_mapper_round_trip():
    with open_rooms("memory://") as rooms:
        room = rooms.create_room(layout())["room"]
        rooms.execute(room, "richese", {"type": "begin_search", "card": BOX,
                                        "command_id": "x"})
        mapper = rooms.mapper
        assert isinstance(mapper, RoomMapper)
        for rec in rooms.records(rooms.load(room).id):
            stored = mapper.to_stored_event(rec)
            assert stored.topic == rec.type
            back = mapper.to_domain_event(stored)
            assert isinstance(back, Recorded)
            assert back.payload() == rec.payload() and back.hash() == rec.hash()
            # Rebuilt without validation, yet what validation would have built.
            assert back.fact == type(back.fact).model_validate(back.fact.model_dump())
            assert back.fact.model_fields_set == set(type(back.fact).model_fields)
            assert mapper.stream(back.originator_id, [(stored.originator_version,
                                                       stored.topic, stored.state)]
                                 )[0].payload() == rec.payload()


def tamper(path, sql, *params):
    with sqlite3.connect(path) as db:
        db.execute(sql, params)


def test_audit_detects_an_edited_dropped_or_reordered_event(tmp_path):
    path = tmp_path / "chain.db"
    with open_rooms(f"sqlite:///{path}") as rooms:
        room = rooms.create_room(layout())["room"]
        ev = rooms.execute(room, "richese", {"type": "begin_search", "card": BOX})
        rooms.execute(room, "richese", {"type": "select_card",
                                        "search": ev["events"][1]["search"], "card": "baliset"})
        assert audit_room(rooms, room)["checks"]["chain_intact"]["ok"]

    with sqlite3.connect(path) as db:
        (state,) = db.execute("SELECT state FROM stored_events WHERE originator_version = 2"
                              ).fetchone()
    edited = orjson.loads(state)
    edited["fact"]["amount"] = 1
    tamper(path, "UPDATE stored_events SET state = ? WHERE originator_version = 2",
           orjson.dumps(edited))
    with open_rooms(f"sqlite:///{path}") as rooms:
        report = audit_room(rooms, room)
        assert report["checks"]["chain_intact"]["ok"] is False
        assert report["ok"] is False

    # Reordered: versions 4 and 5 swap places.
    tamper(path, "UPDATE stored_events SET state = ? WHERE originator_version = 2", state)
    with sqlite3.connect(path) as db:
        rows = dict(db.execute("SELECT originator_version, topic || '|' || hex(state) "
                               "FROM stored_events WHERE originator_version IN (4, 5)"))
        for version, other in ((4, 5), (5, 4)):
            topic, data = rows[other].split("|")
            db.execute("UPDATE stored_events SET topic = ?, state = ? "
                       "WHERE originator_version = ?", (topic, bytes.fromhex(data), version))
    with open_rooms(f"sqlite:///{path}") as rooms:
        assert audit_room(rooms, room)["checks"]["chain_intact"]["ok"] is False

    tamper(path, "DELETE FROM stored_events WHERE originator_version = 5")
    with open_rooms(f"sqlite:///{path}") as rooms:
        assert audit_room(rooms, room)["checks"]["chain_intact"]["ok"] is False


def test_a_room_that_keeps_changing_gives_busy_and_stores_nothing(app, monkeypatch):
    from eventsourcing.persistence import IntegrityError

    room = app.create_room(layout())["room"]

    def always_beaten(*args, **kwargs):
        raise IntegrityError("another writer won")

    monkeypatch.setattr(app, "save", always_beaten)
    pauses: list[float] = []
    monkeypatch.setattr(rooms_module.time, "sleep", pauses.append)
    result = app.execute(room, "emperor", {"type": "draw"})
    assert result == {"ok": False, "version": 1,
                      "error": {"code": "busy", "message": "the room kept changing; try again"}}
    assert app.load(room).version == 1
    # Between lost races it waits a random while, the bound doubling each time (two
    # writers in lockstep otherwise keep beating each other), and not after the last.
    assert len(pauses) == rooms_module.RETRIES - 1
    assert all(0 <= p <= rooms_module.RETRY_PAUSE * 2 ** i for i, p in enumerate(pauses))


# --- kept rooms: a process reuses the room it saved last, other processes write too ---


@pytest.fixture
def two_processes(tmp_path):
    url = f"sqlite:///{tmp_path}/rooms.db"
    with open_rooms(url, randomness_factory=Factory()) as a, \
            open_rooms(url, randomness_factory=Factory()) as b:
        yield a, b


def test_a_stale_kept_room_is_caught_by_the_save_and_then_caught_up_first(two_processes,
                                                                         monkeypatch):
    """A process decides on the room it kept without reading first; when another
    process wrote meanwhile, the save is refused, the command is decided again on
    the room as stored, and from then on that room is caught up before deciding."""
    a, b = two_processes
    room = a.create_room(layout())["room"]
    assert a.kept.rooms  # a keeps the room it created
    assert b.execute(room, "emperor", {"type": "draw"})["version"] == 2
    saves: list[int] = []
    reads: list[int] = []
    save, records = a.save, a.stored_records
    monkeypatch.setattr(a, "save", lambda *objs: saves.append(1) or save(*objs))
    monkeypatch.setattr(a, "stored_records",
                        lambda *args, **kw: reads.append(1) or records(*args, **kw))
    drawn = a.execute(room, "emperor", {"type": "draw"})  # a's kept room is at version 1
    assert drawn["ok"] and drawn["version"] == 3
    assert saves == [1, 1] and reads == []  # refused at version 2, then a load, then saved
    assert a.kept.rooms[a.load(room).id].written_elsewhere

    assert b.execute(room, "harkonnen", {"type": "draw"})["version"] == 4
    saves.clear()
    drawn = a.execute(room, "harkonnen", {"type": "draw"})
    assert drawn["ok"] and drawn["version"] == 5
    assert saves == [1] and reads == [1]  # caught up with one read, saved once
    assert [r.originator_version for r in records(a.load(room).id)] == [1, 2, 3, 4, 5]
    hands = a.load(room).state
    assert (len(hands.seat("emperor").hand), len(hands.seat("harkonnen").hand)) == (3, 4)
    assert audit_room(a, room)["ok"]


def test_a_room_only_this_process_writes_is_decided_on_without_a_read(tmp_path, monkeypatch):
    with open_rooms(f"sqlite:///{tmp_path}/rooms.db") as app:
        room = app.create_room(layout())["room"]
        monkeypatch.setattr(app, "stored_records", None)  # any read of events would fail
        monkeypatch.setattr(app, "load", None)
        for version in (2, 3, 4):
            assert app.execute(room, "emperor", {"type": "draw"})["version"] == version


def test_a_save_that_loses_a_race_drops_the_kept_room_and_decides_again(two_processes):
    a, b = two_processes
    room = a.create_room(layout())["room"]
    to_decide_on = a._room_to_decide_on

    def b_writes_first(room_id):
        found, as_stored = to_decide_on(room_id)
        if found.version == 1:
            assert b.execute(room, "emperor", {"type": "draw"})["version"] == 2
        return found, as_stored

    a._room_to_decide_on = b_writes_first  # type: ignore[method-assign]
    drawn = a.execute(room, "emperor", {"type": "draw"})
    assert drawn["ok"] and drawn["version"] == 3
    assert a.kept.rooms[a.load(room).id].version == 3
    assert audit_room(a, room)["ok"]


def test_a_stale_kept_room_never_rejects_what_the_stored_room_allows(two_processes):
    a, b = two_processes
    room = a.create_room(layout())["room"]
    opened = b.execute(room, "richese", {"type": "begin_search", "card": BOX})
    search = opened["events"][1]["search"]
    # On a's kept room (version 1) there is no search and version 3 is in the future.
    chosen = a.execute(room, "richese", {"type": "select_card", "search": search,
                                         "card": "baliset", "expected_version": 3})
    assert chosen["ok"], chosen
    assert "baliset" in a.load(room).state.seat("richese").hand


def test_a_stale_kept_room_still_answers_a_repeated_command_once(two_processes):
    a, b = two_processes
    room = a.create_room(layout())["room"]
    first = b.execute(room, "emperor", {"type": "draw", "command_id": "d1"})
    again = a.execute(room, "emperor", {"type": "draw", "command_id": "d1"})
    assert again == first
    assert a.load(room).version == 2


def test_the_room_cache_can_be_turned_off(tmp_path):
    url = f"sqlite:///{tmp_path}/rooms.db"
    with open_rooms(url, settings=Settings(room_cache=0)) as rooms:
        room = rooms.create_room(layout())["room"]
        assert rooms.execute(room, "emperor", {"type": "draw"})["ok"]
        assert not rooms.kept.rooms


@pytest.mark.parametrize("command", [
    {"type": "begin_search", "card": BOX},  # not in the emperor's hand
    {"type": "draw", "expected_version": 9},
])
def test_a_refused_command_keeps_the_room_as_stored(tmp_path, command):
    with open_rooms(f"sqlite:///{tmp_path}/rooms.db") as rooms:
        room = rooms.create_room(layout())["room"]
        assert not rooms.execute(room, "emperor", command)["ok"]
        kept = rooms.kept.rooms[rooms.load(room).id]
        assert state_hash(kept.state) == state_hash(rooms.load(room).state)
        assert kept.version == 1 and not kept.pending
        assert rooms.execute(room, "emperor", {"type": "draw"})["version"] == 2


def refuse_after_drawing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `draw` refuse after its card was drawn: a handler that emits, then refuses
    (in the rules, only a Respond on a damaged window does so)."""
    draw = HOUSE.handlers[Draw]

    def refused(tx, actor, command):
        draw(tx, actor, command)
        raise Rejection("not_allowed", "refused after drawing")

    monkeypatch.setitem(HOUSE.handlers, Draw, refused)


def test_a_command_refused_after_its_events_were_applied_changes_nothing(tmp_path,
                                                                           monkeypatch):
    # Commands are decided in place on the room the process holds (no copy of the
    # state); a refusal that comes after some events were applied must not leave that
    # state behind for the next command.
    with open_rooms(f"sqlite:///{tmp_path}/rooms.db") as rooms:
        room = rooms.create_room(layout())["room"]
        assert rooms.execute(room, "emperor", {"type": "draw"})["version"] == 2
        stored = state_hash(rooms.load(room).state)
        with monkeypatch.context() as patched:
            refuse_after_drawing(patched)
            refused = rooms.execute(room, "emperor", {"type": "draw"})
        assert refused == {"ok": False, "version": 2, "error": {
            "code": "not_allowed", "message": "refused after drawing"}}
        # The room kept is the room as stored, read again: not the spoiled one.
        kept = rooms.kept.rooms[rooms.load(room).id]
        assert kept.version == 2 and state_hash(kept.state) == stored
        assert state_hash(rooms.load(room).state) == stored
        assert rooms.execute(room, "emperor", {"type": "draw"})["version"] == 3
        assert state_hash(rooms.current(room).state) == state_hash(rooms.load(room).state)
        assert audit_room(rooms, room)["ok"]


def test_a_stale_kept_room_refused_after_its_events_were_applied_is_read_again(
        two_processes, monkeypatch):
    a, b = two_processes
    room = a.create_room(layout())["room"]  # a keeps it at version 1
    assert b.execute(room, "emperor", {"type": "draw"})["version"] == 2
    with monkeypatch.context() as patched:
        refuse_after_drawing(patched)
        refused = a.execute(room, "emperor", {"type": "draw"})
    # Refused on the kept room, then read as stored and decided again: refused again.
    assert refused["error"]["code"] == "not_allowed" and refused["version"] == 2
    assert not a.kept.rooms
    assert a.execute(room, "emperor", {"type": "draw"})["version"] == 3
    assert state_hash(a.current(room).state) == state_hash(b.load(room).state)
    assert audit_room(a, room)["ok"]


@pytest.mark.parametrize("storage", ["sqlite", "postgresql"])
def test_a_whole_stream_reads_as_the_library_reads_it(storage: str, tmp_path: Path,
                                                      request: pytest.FixtureRequest,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The lean read of a whole stream (plain rows: no StoredEvent, no UUID per row)
    gives the library's records: the same facts, upcasts included, and the exact
    stored bytes the chain hash covers. It leaves the collector as it found it."""
    import gc

    from dune_ledger.domain.custody import CardDrawn

    def fields(r: Recorded) -> tuple[object, ...]:
        return (type(r.originator_id), r.originator_id, r.originator_version, type(r.fact),
                r.fact.model_dump(), r.fact.model_fields_set, r.prev_hash, r.seat,
                r.command_id, r.append, r.at, r.meta, type(r.stored), r.stored)

    def unused(*args: object, **kwargs: object) -> None:
        raise AssertionError("a whole stream is read without StoredEvents")

    url = (request.getfixturevalue("pg_url") if storage == "postgresql"
           else f"sqlite:///{tmp_path}/rooms.db")
    app = open_rooms(url)
    try:
        room = app.create_room(layout())["room"]
        for seat in ("emperor", "harkonnen"):
            assert app.execute(room, seat, {"type": "draw"})["ok"]
        uid = app.load(room).id
        monkeypatch.setattr(CardDrawn, "schema_version", 2)
        monkeypatch.setattr(CardDrawn, "upcast", classmethod(
            lambda cls, data, v: {**data, "seat": f"{data['seat']}@v{v}"}))
        with monkeypatch.context() as m:
            m.setattr(app.recorder, "select_events", unused)
            lean = app.records(uid)
        library = [e for e in app.events.get(uid) if isinstance(e, Recorded)]
        assert len(lean) == 3 and [fields(r) for r in lean] == [fields(r) for r in library]
        drawn = [r.fact for r in lean if isinstance(r.fact, CardDrawn)]
        assert [fact.seat for fact in drawn] == ["emperor@v1", "harkonnen@v1"]
        assert all(b'"v":1' in r.body() for r in lean[1:])  # as stored, not as upcast
        assert all(after.prev_hash == before.hash()
                   for before, after in zip(lean, lean[1:], strict=False))
        assert [fields(r) for r in app.records(uid, gt=1)] == [fields(r) for r in lean[1:]]

        gc.disable()
        try:
            app.records(uid)
            assert not gc.isenabled()
        finally:
            gc.enable()
        app.records(uid)
        assert gc.isenabled()
    finally:
        app.close()
