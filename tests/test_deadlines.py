"""Window deadlines (RULES 4.4): stored by the opening event, kept across a search,
closed by the worker through a stored event; replay never reads a clock."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from dune_ledger.application.audit import audit_room
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.game import parse_command
from dune_ledger.domain.responses import WindowDeadline, expire_window
from dune_ledger.domain.rules import SYSTEM, decide
from dune_ledger.domain.views import public_view
from dune_ledger.infrastructure.randomness import Source
from dune_ledger.infrastructure.storage import open_rooms
from dune_ledger.infrastructure.worker import Worker, close_deadlines, run_worker
from tests.rules_support import BOX, layout, state_of

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SEMUTA = "semuta-drug"


def with_semuta(**changes):
    raw = layout(**changes)
    raw["seats"][1]["hand"] = ["karama-1", SEMUTA]
    return raw


def at(state, actor, command, when):
    return decide(state, actor, parse_command(command), Source(random.Random(1)), now=when)


def discarded(raw=None, when=T0):
    """Harkonnen discards: a Semuta window opens, asking Richese and the Emperor."""
    return at(state_of(raw or with_semuta()), "harkonnen",
              {"type": "discard", "card": "chaumas"}, when).state


def test_the_opening_event_stores_the_deadline_and_the_view_shows_it():
    state = discarded()
    w = state.control.response
    assert w.deadline == (T0 + timedelta(seconds=30)).isoformat()
    assert public_view(state)["response"]["deadline"] == w.deadline
    assert public_view(state)["response"]["waiting"] == ["richese", "emperor"]
    assert discarded(with_semuta(response_seconds=5)).control.response.deadline == (
        T0 + timedelta(seconds=5)).isoformat()
    assert discarded(with_semuta(response_seconds=0)).control.response.deadline is None


def test_a_window_closes_at_its_deadline_and_a_pass_before_it_counts():
    state = discarded()
    w = state.control.response
    state = at(state, "emperor", {"type": "semuta", "event": w.event, "action": "pass"},
               T0 + timedelta(seconds=29)).state
    assert expire_window(state, Source(random.Random(1)), T0 + timedelta(seconds=29)) is None
    tx = expire_window(state, Source(random.Random(1)), T0 + timedelta(seconds=31))
    assert tx is not None
    assert [e.type for e in tx.events] == ["ResponseDeadlinePassed", "SemutaWindowClosed"]
    assert tx.state.control.response is None
    assert state.control.response.data["passed"] == ["emperor"]  # counted before the close


def test_only_the_system_sends_the_deadline_and_never_before_it():
    state = discarded()
    w = state.control.response
    late = T0 + timedelta(seconds=60)
    with pytest.raises(Rejection) as from_a_seat:
        decide(state, "richese", WindowDeadline(event=w.event), Source(random.Random(1)),
               now=late)
    assert from_a_seat.value.code == "not_eligible"
    with pytest.raises(Rejection) as early:
        decide(state, SYSTEM, WindowDeadline(event=w.event), Source(random.Random(1)),
               now=T0 + timedelta(seconds=10))
    assert early.value.code == "not_eligible"
    with pytest.raises(Rejection) as typed:
        parse_command({"type": "window_deadline", "event": w.event})
    assert typed.value.code == "invalid_command"
    with pytest.raises(Rejection):
        decide(state, SYSTEM, parse_command({"type": "draw"}), Source(random.Random(1)))


def test_a_search_keeps_the_window_s_passes_and_remaining_time():
    state = discarded()
    w = state.control.response
    state = at(state, "emperor", {"type": "semuta", "event": w.event, "action": "pass"},
               T0 + timedelta(seconds=1)).state
    searching = at(state, "richese", {"type": "begin_search", "card": BOX},
                   T0 + timedelta(seconds=10)).state
    assert searching.search.parent.response.remaining == 20.0
    # The clock runs on during the search; the window is not there to expire.
    assert expire_window(searching, Source(random.Random(1)), T0 + timedelta(hours=1)) is None
    closed = at(searching, "richese", {"type": "select_card", "search": searching.search.event,
                                       "card": "shield-1"}, T0 + timedelta(seconds=100))
    restored = closed.state.control.response
    assert restored.event == w.event and restored.data["passed"] == ["emperor"]
    assert restored.deadline == (T0 + timedelta(seconds=120)).isoformat()
    assert restored.remaining is None
    stamped = next(e for e in closed.events if e.type == "SearchClosed")
    assert stamped.deadline == restored.deadline  # stored: replay reads no clock


def test_the_worker_closes_a_window_past_its_deadline_and_the_room_audits_clean():
    with open_rooms("memory://") as app:
        app.clock = lambda: T0
        room = app.create_room(with_semuta())["room"]
        assert app.execute(room, "harkonnen", {"type": "discard", "card": "chaumas"})["ok"]
        event = app.public_view(room)["response"]["event"]
        assert app.execute(room, "emperor", {"type": "semuta", "event": event,
                                             "action": "pass"})["ok"]
        version = app.load(room).version
        assert close_deadlines(app, T0 + timedelta(seconds=29)) == 0
        assert app.load(room).version == version
        app.clock = lambda: T0 + timedelta(seconds=31)
        Worker(app, ticks=[close_deadlines]).tick()
        assert app.public_view(room)["response"] is None
        log = [e["type"] for e in app.public_log(room)][-2:]
        assert log == ["ResponseDeadlinePassed", "SemutaWindowClosed"]
        assert close_deadlines(app) == 0  # closed once
        assert audit_room(app, room)["ok"]


def test_worker_once_closes_a_due_window(tmp_path):
    url = f"sqlite:///{tmp_path / 'rooms.db'}"
    with open_rooms(url) as app:
        app.clock = lambda: T0  # the window opened long before the worker's real clock
        room = app.create_room(with_semuta(response_seconds=1))["room"]
        assert app.execute(room, "harkonnen", {"type": "discard", "card": "chaumas"})["ok"]
        assert app.public_view(room)["response"] is not None
    assert run_worker(url, 0.1, once=True) == 0  # what `dune-ledger worker --once` runs
    with open_rooms(url) as app:
        assert app.public_view(room)["response"] is None
