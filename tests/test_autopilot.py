"""Autopilot (RULES 3.7): bound selections and Semuta choices from the seat's own view,
passes in response windows, normal pacing, restarts and racing workers."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from dune_ledger.application import autopilot
from dune_ledger.application.audit import audit_room
from dune_ledger.domain import views
from dune_ledger.domain.effect import HOUSE
from dune_ledger.domain.responses import WindowKind
from dune_ledger.infrastructure.storage import open_rooms
from dune_ledger.infrastructure.worker import play_autopilots
from tests.rules_support import BOX, layout, open_search, state_of

PILE = ["baliset", "karama-2", "shield-1", "maula-pistol", "lasgun"]
# Richese holds a weapon (crysknife) and no defense.
EXPECTED_SELECTION = {"medium": "lasgun", "hard": "karama-2", "brutal": "shield-1"}
ROOT = Path(__file__).resolve().parent.parent

TEST_KIND = "autopilot_test_window"


def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'rooms.db'}"


def searching_room(rooms, profile: str, **changes) -> str:
    raw = layout(discard=list(PILE), **changes)
    room = rooms.create_room(raw)["room"]
    on = rooms.execute(room, "richese", {"type": "set_autopilot", "enabled": True,
                                         "profile": profile})
    assert on["ok"], on
    opened = rooms.execute(room, "richese", {"type": "begin_search", "card": BOX})
    assert opened["ok"], opened
    return room


def retrieved(rooms, room: str) -> list[str]:
    return [r.fact.card for r in rooms.records(rooms.load(room).id)
            if r.type == "CardRetrieved"]


@pytest.mark.parametrize("profile", ["easy", "medium", "hard", "brutal"])
def test_each_profile_selects_on_a_restarted_worker(tmp_path, profile):
    with open_rooms(url(tmp_path)) as first:
        room = searching_room(first, profile)
        version = first.load(room).version
        assert autopilot.tick(first, pace=3600) == 0  # not yet time
        state = first.load(room).state
        cards = [c["id"] for c in views.seat_view(state, "richese")["nullentropy"]["search"]
                 ["cards"]]
    # A new application on the same file: the worker restarted.
    with open_rooms(url(tmp_path)) as worker:
        assert autopilot.tick(worker, pace=0) == 1
        expected = EXPECTED_SELECTION.get(profile) or autopilot.rng_for(
            11, version, "richese").choice(cards)
        assert retrieved(worker, room) == [expected]
        after = worker.load(room)
        assert after.state.search is None and expected in after.state.seat("richese").hand
        last = worker.records(after.id)
        chosen = next(r for r in last if r.type == "CardRetrieved")
        assert chosen.seat == "richese" and chosen.command_id == f"autopilot:{profile}:{version}"
        assert autopilot.tick(worker, pace=0) == 0  # one selection, then nothing to do
        report = audit_room(worker, room)
        assert not [k for k, v in report["checks"].items() if v["ok"] is False]


def test_the_four_profiles_choose_differently():
    cards = sorted(PILE)
    view_cards = [{"id": c} for c in cards]
    view = {"me": {"faction": "richese", "hand": [{"id": "crysknife"}, {"id": BOX}]},
            "nullentropy": {"search": {"event": "e3", "cards": view_cards}}}
    picks = {p: autopilot.choose(p, view, autopilot.rng_for(1, 3, "richese"))["card"]
             for p in ("medium", "hard", "brutal")}
    assert picks == EXPECTED_SELECTION
    # easy is uniform: over many draws it picks more than one card.
    easy = {autopilot.choose("easy", view, autopilot.rng_for(1, v, "richese"))["card"]
            for v in range(40)}
    assert len(easy) > 1


def test_the_chooser_receives_only_the_seats_own_view(tmp_path):
    seen = []

    def spy(profile, view, rng):
        seen.append((profile, view))
        return autopilot.choose(profile, view, rng)

    with open_rooms(url(tmp_path)) as rooms:
        room = searching_room(rooms, "hard")
        state = rooms.load(room).state
        assert autopilot.tick(rooms, pace=0, chooser=spy) == 1
    assert seen == [("hard", views.seat_view(state, "richese"))]
    view = seen[0][1]
    # Nothing of another seat's hand, and no pile order, is in what it saw.
    assert "chaumas" not in str(view) and "shield-2" not in str(view)
    assert "karama-1" not in str(view)
    # Candidates come in the stable display order, not the physical pile order.
    assert [c["id"] for c in view["nullentropy"]["search"]["cards"]] == \
        ["shield-1", "karama-2", "lasgun", "maula-pistol", "baliset"]


@pytest.mark.parametrize("profile", ["easy", "medium", "hard", "brutal"])
def test_hidden_information_does_not_change_the_choice(profile):
    plain = state_of(layout(discard=list(PILE)))
    other = layout(discard=list(reversed(PILE)))
    other["seats"][2]["hand"] = ["snooper-1", "hajr", "stunner"]
    other["seats"][1]["hand"] = ["karama-1", "gom-jabbar"]
    hidden = state_of(other)
    a, b = open_search(plain), open_search(hidden)
    va, vb = views.seat_view(a, "richese"), views.seat_view(b, "richese")
    assert va["nullentropy"] == vb["nullentropy"]
    ca = autopilot.choose(profile, va, autopilot.rng_for(5, 9, "richese"))
    cb = autopilot.choose(profile, vb, autopilot.rng_for(5, 9, "richese"))
    assert ca == cb


def test_two_workers_racing_make_one_selection(tmp_path):
    with open_rooms(url(tmp_path)) as setup:
        room = searching_room(setup, "easy", seed=None)
    with open_rooms(url(tmp_path)) as a, open_rooms(url(tmp_path)) as b:
        now = autopilot.datetime.now(autopilot.UTC)
        move_a = autopilot.plan_room(a, room, pace=0, now=now)
        move_b = autopilot.plan_room(b, room, pace=0, now=now)
        assert move_a is not None and move_b is not None
        first = a.execute(move_a.room, move_a.seat, move_a.command)
        second = b.execute(move_b.room, move_b.seat, move_b.command)
        assert first["ok"]
        # Same command id: the first result, nothing new (or a conflict, never a second pick).
        assert second == first or second["error"]["code"] == "conflict"
        assert len(retrieved(a, room)) == 1
        assert a.load(room).version == first["version"]


def test_two_worker_processes_racing_make_one_selection(tmp_path):
    with open_rooms(url(tmp_path)) as setup:
        room = searching_room(setup, "medium")
    go = tmp_path / "go"
    script = textwrap.dedent(f"""
        import os, sys, time
        from dune_ledger.application import autopilot
        from dune_ledger.infrastructure.storage import open_rooms
        with open_rooms({url(tmp_path)!r}) as rooms:
            list(rooms.room_ids())
            while not os.path.exists({str(go)!r}):
                time.sleep(0.01)
            print(autopilot.tick(rooms, pace=0))
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    workers = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    go.touch()
    outputs = [w.communicate(timeout=120) for w in workers]
    for w, (out, err) in zip(workers, outputs, strict=True):
        assert w.returncode == 0, err
        assert out.strip() in ("0", "1")  # each worker sent at most one command
    with open_rooms(url(tmp_path)) as rooms:
        assert retrieved(rooms, room) == ["lasgun"]
        assert rooms.load(room).state.search is None


def test_pacing_waits_for_the_last_event_to_age(tmp_path):
    with open_rooms(url(tmp_path)) as rooms:
        room = searching_room(rooms, "hard")
        last = rooms.records(rooms.load(room).id)[-1].timestamp
        before = rooms.load(room).version
        assert autopilot.tick(rooms, pace=10, now=last + timedelta(seconds=9)) == 0
        assert rooms.load(room).version == before
        assert autopilot.tick(rooms, pace=10, now=last + timedelta(seconds=11)) == 1


@pytest.mark.parametrize(("pace", "acted"), [("3600", 0), ("0", 1)])
def test_the_worker_plays_at_the_pace_the_settings_give(monkeypatch, tmp_path, pace, acted):
    monkeypatch.setenv("DUNE_LEDGER_AUTOPILOT_PACE", pace)
    with open_rooms(url(tmp_path)) as rooms:
        searching_room(rooms, "hard")
        assert play_autopilots(rooms) == acted


def semuta_room(rooms, profile: str, card: str) -> str:
    raw = layout()
    raw["seats"][1]["hand"] = ["karama-1", "semuta-drug"]
    raw["seats"][2]["hand"] = [card]
    room = rooms.create_room(raw)["room"]
    assert rooms.execute(room, "emperor", {"type": "set_autopilot", "enabled": True,
                                           "profile": profile})["ok"]
    assert rooms.execute(room, "harkonnen", {"type": "discard", "card": card})["ok"]
    return room


@pytest.mark.parametrize(("profile", "card", "takes"), [
    ("easy", "lasgun", False),
    ("medium", "lasgun", True), ("medium", "karama-2", False),
    ("hard", "karama-2", True), ("hard", "kulon", False),
    ("brutal", "kulon", True), ("brutal", "karama-2", True),
])
def test_semuta_choices_by_profile(tmp_path, profile, card, takes):
    with open_rooms(url(tmp_path)) as rooms:
        room = semuta_room(rooms, profile, card)
        assert autopilot.tick(rooms, pace=0) == 1
        state = rooms.load(room).state
        assert (card in state.seat("emperor").hand) is takes
        if not takes:  # Richese is asked too (RULES 3.6), and passes by hand
            window = state.control.response
            assert rooms.execute(room, "richese", {"type": "semuta", "event": window.event,
                                                   "action": "pass"})["ok"]
        assert rooms.load(room).state.control.response is None
        assert autopilot.tick(rooms, pace=0) == 0


def test_semuta_waits_out_a_search_and_acts_on_the_restored_window(tmp_path):
    with open_rooms(url(tmp_path)) as rooms:
        raw = layout()
        raw["seats"][1]["hand"] = ["karama-1", "semuta-drug"]
        room = rooms.create_room(raw)["room"]
        assert rooms.execute(room, "emperor", {"type": "set_autopilot", "enabled": True,
                                               "profile": "brutal"})["ok"]
        assert rooms.execute(room, "harkonnen", {"type": "discard", "card": "chaumas"})["ok"]
        window = rooms.load(room).state.control.response
        assert rooms.execute(room, "richese", {"type": "begin_search", "card": BOX})["ok"]
        locked = rooms.load(room)
        assert autopilot.tick(rooms, pace=0) == 0  # the lock: nothing sent
        assert rooms.load(room).version == locked.version
        search = locked.state.search.event
        assert rooms.execute(room, "richese", {"type": "select_card", "search": search,
                                               "card": "shield-1"})["ok"]
        restored = rooms.load(room).state.control.response
        # Restored with its passes; its deadline is its remaining time from the restore.
        assert restored.model_dump(exclude={"deadline"}) == window.model_dump(
            exclude={"deadline"}) and restored.deadline is not None
        assert autopilot.tick(rooms, pace=0) == 1
        state = rooms.load(room).state
        assert "chaumas" in state.seat("emperor").hand
        # Semuta is spent: the Box's own queued window opens and closes with nobody left.
        assert state.control.response is None and state.semuta is None


def test_the_autopilot_passes_in_response_windows(tmp_path, monkeypatch):
    monkeypatch.setitem(HOUSE.windows, TEST_KIND,
                        WindowKind(TEST_KIND, lambda tx, window, by: None))
    window = {"kind": TEST_KIND, "event": "e1", "turn": 2, "phase": 6, "passes": [],
              "data": {}}
    with open_rooms(url(tmp_path)) as rooms:
        room = rooms.create_room(layout(control={"response": window}))["room"]
        seats = ["richese", "emperor", "harkonnen"]
        for seat in seats:
            assert rooms.execute(room, seat, {"type": "set_autopilot", "enabled": True,
                                              "profile": "brutal"})["ok"]
        # Every seat with a card is asked (RULES 4.4), each answering for itself.
        assert views.seat_view(rooms.load(room).state, "emperor")["response"]["waiting"] == \
            seats
        assert sum(autopilot.tick(rooms, pace=0) for _ in seats) == 3
        types = [r.type for r in rooms.records(rooms.load(room).id)][-2:]
        assert types == ["ResponsePassed", "ResponseWindowClosed"]
        assert rooms.load(room).state.control.response is None


def test_no_autopilot_no_move(tmp_path):
    with open_rooms(url(tmp_path)) as rooms:
        room = rooms.create_room(layout(discard=list(PILE)))["room"]
        assert rooms.execute(room, "richese", {"type": "begin_search", "card": BOX})["ok"]
        assert autopilot.tick(rooms, pace=0) == 0
        assert rooms.load(room).state.search is not None


@pytest.mark.parametrize("profile", ["easy", "medium", "hard", "brutal"])
def test_autopilot_seats_play_a_whole_bidding_round_from_their_own_views(
        url: str, profile: str) -> None:
    """RULES 10, issue 35.5: every seat on autopilot; the worker's own loop plays the
    round to its end through the same handlers (the Ixians' choice, bids, passes,
    the income and bonus windows), each move chosen from the mover's view."""
    from dune_ledger.infrastructure.demo import example

    raw = example("bidding")
    with open_rooms(url) as rooms:
        room = rooms.create_room(raw)["room"]
        order = [s["faction"] for s in raw["seats"]]
        for seat in order:
            assert rooms.execute(room, seat, {"type": "set_autopilot", "enabled": True,
                                              "profile": profile})["ok"]
        assert rooms.execute(room, "operator", {"type": "open_bidding", "order": order})["ok"]
        for _ in range(300):
            if rooms.public_view(room)["bidding"] is None:
                break
            moved = autopilot.tick(rooms, pace=0, now=rooms.clock() + timedelta(seconds=5))
            view = rooms.public_view(room)
            assert moved, (view["bidding"], view["response"], view["decision"])
        assert rooms.public_view(room)["bidding"] is None
        types = [e["type"] for e in rooms.public_log(room)]
        assert "CardSetAside" in types and "BiddingClosed" in types
        assert audit_room(rooms, room)["ok"]


def test_autopilot_seats_answer_a_silent_cache_sale_from_their_own_views(url: str) -> None:
    """RULES 10.5: every seat asked sends one sealed bid, bounded by what it can pay."""
    from dune_ledger.infrastructure.demo import example

    raw = example("bidding")
    with open_rooms(url) as rooms:
        room = rooms.create_room(raw)["room"]
        order = [s["faction"] for s in raw["seats"]]
        assert rooms.execute(room, "operator", {"type": "open_bidding", "order": order})["ok"]
        assert rooms.execute(room, "richese", {"type": "richese_sale", "when": "first"})["ok"]
        dealt = rooms.seat_view(room, "ixians")["bidding"]["dealt"]
        assert rooms.execute(room, "ixians", {"type": "ix_set_aside", "card": dealt[0]["id"],
                                              "where": "top"})["ok"]
        assert rooms.execute(room, "richese", {"type": "richese_offer", "card": "ornithopter",
                                               "auction": "silent"})["ok"]
        for seat in order:
            assert rooms.execute(room, seat, {"type": "set_autopilot", "enabled": True,
                                              "profile": "hard"})["ok"]
        for _ in range(10):
            if "SealedBidsRevealed" in [e["type"] for e in rooms.public_log(room)]:
                break
            autopilot.tick(rooms, pace=0, now=rooms.clock() + timedelta(seconds=5))
        assert "SealedBidsRevealed" in [e["type"] for e in rooms.public_log(room)]
