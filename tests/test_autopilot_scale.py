"""A worker among many rooms: the autopilot loads only rooms with an autopilot seat,
and the projections keep a bounded number of room states in memory."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dune_ledger.application import autopilot
from dune_ledger.infrastructure.settings import Settings
from dune_ledger.infrastructure.storage import open_rooms
from dune_ledger.projections.read_models import DEFAULT_CACHE, ReadModels
from tests.rules_support import BOX, layout
from tests.support import everything, example, fresh, play

BOX_LAYOUT = example("box")

PILE = ["baliset", "karama-2", "shield-1", "maula-pistol", "lasgun"]


def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'rooms.db'}"


def counting_loads(app: Any) -> list[str]:
    """Wraps `app.load` and returns the list of rooms it was asked for."""
    loaded: list[str] = []
    original = app.load

    def load(room_id: Any, version: int | None = None) -> Any:
        loaded.append(str(room_id))
        return original(room_id, version)

    app.load = load
    return loaded


def autopilot_search(rooms: Any) -> str:
    room = rooms.create_room(layout(discard=list(PILE)))["room"]
    assert rooms.execute(room, "richese", {"type": "set_autopilot", "enabled": True,
                                           "profile": "hard"})["ok"]
    assert rooms.execute(room, "richese", {"type": "begin_search", "card": BOX})["ok"]
    return room


@pytest.mark.parametrize("storage", ["memory", "sqlite"])
def test_a_tick_loads_only_the_room_with_an_autopilot_seat(tmp_path, storage):
    where = "memory://" if storage == "memory" else url(tmp_path)
    with open_rooms(where) as rooms:
        for _ in range(40):
            rooms.create_room(layout(discard=list(PILE)))
        room = autopilot_search(rooms)
        loaded = counting_loads(rooms)
        assert autopilot.tick(rooms, pace=0) == 1
        # plan_room loads it, execute loads it again to decide: nothing else is read.
        assert set(loaded) == {room}
        loaded.clear()
        # The selection is made: the seat is asked nothing, so nothing is loaded.
        assert autopilot.tick(rooms, pace=0) == 0
        assert loaded == []
        assert rooms.read_models.autopilot_rooms() == [room]


def test_a_seat_turned_off_leaves_the_index_and_a_new_one_joins(tmp_path):
    with open_rooms(url(tmp_path)) as rooms:
        first = autopilot_search(rooms)
        second = rooms.create_room(layout(discard=list(PILE)))["room"]
        assert rooms.read_models.autopilot_rooms() == []  # not caught up yet
        assert autopilot.candidate_rooms(rooms) == [first]  # its search waits for it
        assert rooms.execute(first, "richese", {"type": "set_autopilot", "enabled": False})["ok"]
        assert rooms.execute(second, "emperor", {"type": "set_autopilot", "enabled": True,
                                                 "profile": "easy"})["ok"]
        assert autopilot.candidate_rooms(rooms) == []  # emperor is asked nothing
        assert rooms.read_models.autopilot_rooms() == [second]
        loaded = counting_loads(rooms)
        assert autopilot.tick(rooms, pace=0) == 0
        assert loaded == []
        # A search of its own asks the seat again: the room is due.
        assert rooms.execute(first, "richese", {"type": "set_autopilot", "enabled": True,
                                                "profile": "medium"})["ok"]
        assert autopilot.candidate_rooms(rooms) == [first]


def test_the_index_survives_a_rebuild_and_fills_an_older_database(tmp_path):
    with open_rooms(url(tmp_path)) as rooms:
        made = play(rooms, rooms=3)  # each room turns atreides' autopilot on
        rooms.create_room(layout())
        due = autopilot_search(rooms)
        rooms.read_models.catch_up()
        assert sorted(rooms.read_models.autopilot_rooms()) == sorted([*made, due])
        assert autopilot.candidate_rooms(rooms) == [due]
        rooms.read_models.rebuild()
        assert sorted(rooms.read_models.autopilot_rooms()) == sorted([*made, due])
        assert autopilot.candidate_rooms(rooms) == [due]
    # A database whose read models were built before the index existed.
    with sqlite3.connect(tmp_path / "rooms.db") as conn:
        conn.execute("DROP TABLE dl_autopilot_rooms")
    with open_rooms(url(tmp_path)) as rooms:
        assert sorted(rooms.read_models.autopilot_rooms()) == sorted([*made, due])
        assert autopilot.candidate_rooms(rooms) == [due]


def test_without_read_models_the_tick_still_finds_its_rooms(tmp_path):
    with open_rooms(url(tmp_path)) as rooms:
        room = autopilot_search(rooms)
        rooms.read_models = None
        assert autopilot.candidate_rooms(rooms) == [room]
        assert autopilot.tick(rooms, pace=0) == 1


@pytest.mark.parametrize("storage", ["memory", "sqlite"])
def test_evicted_rooms_resume_exactly_from_their_stored_state(tmp_path, storage):
    where = "memory://" if storage == "memory" else url(tmp_path)
    with open_rooms(where) as rooms:
        small = ReadModels(rooms.recorder, rooms.mapper, rooms.read_models.store, batch=3,
                           cache_size=1)
        rooms.read_models = small
        reloaded: list[str] = []
        for projector in small.projectors:
            advance = projector.states.advance

            def counted(rec: Any, load: Any, advance: Any = advance) -> Any:
                def read_back(room: str) -> Any:
                    reloaded.append(room)
                    return load(room)
                return advance(rec, read_back)

            projector.states.advance = counted  # type: ignore[method-assign]
        made = [rooms.create_room({**BOX_LAYOUT, "seed": 3 + i})["room"] for i in range(3)]
        # Rooms interleave in the log and every batch touches more rooms than the cache
        # holds: each room is evicted and read back from its stored state.
        steps = [("emperor", {"type": "draw"}),
                 ("harkonnen", {"type": "discard", "card": "chaumas"}),
                 ("atreides", {"type": "set_autopilot", "enabled": True, "profile": "easy"}),
                 ("atreides", {"type": "draw"})]
        for seat, command in steps:
            for room in made:
                assert rooms.execute(room, seat, command)["ok"]
            small.catch_up()
        for projector in small.projectors:
            assert len(projector.states.cache) <= 1
        assert reloaded
        assert everything(small, made) == fresh(rooms, made)


def test_the_cache_bound_is_the_settings(monkeypatch):
    monkeypatch.setenv("DUNE_LEDGER_PROJECTION_CACHE", "7")
    with open_rooms("memory://") as rooms:
        assert all(p.states.size == 7 for p in rooms.read_models.projectors)
    with open_rooms("memory://", settings=Settings(projection_cache=DEFAULT_CACHE)) as rooms:
        assert all(p.states.size == DEFAULT_CACHE for p in rooms.read_models.projectors)


def test_the_index_on_postgresql(pg_url):
    with open_rooms(pg_url) as rooms:
        before = set(autopilot.candidate_rooms(rooms))
        room = autopilot_search(rooms)
        plain = rooms.create_room(layout())["room"]
        found = set(autopilot.candidate_rooms(rooms))
        assert room in found and plain not in found and found - before == {room}
        assert room in rooms.read_models.autopilot_rooms()
        loaded = counting_loads(rooms)
        assert autopilot.tick(rooms, pace=0) >= 1
        assert room in loaded and plain not in loaded
