"""Several OS processes serving the same room on one PostgreSQL database.

Each racer is a separate process with its own connection pool; barriers
make every racer decide on the same version before any of them saves, so
their saves always collide on the room's version. The
store's compare-and-set decides the winner; a loser reloads and decides
again against the new state, so it either succeeds on top of the winner or
gets a clear rejection. Nothing is applied twice and nothing is lost.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import time
from collections import Counter
from typing import Any

import pytest

from dune_ledger.application.audit import audit_room
from dune_ledger.infrastructure.storage import open_rooms
from scripts.throwaway import throwaway_database
from tests.support import HANG, layout

CTX = mp.get_context("spawn")  # no pool threads or sockets inherited from the test process


def racer(url: str, room: str, seat: str, command: dict[str, Any], barrier: Any,
          collide: Any, results: Any) -> None:
    from eventsourcing.persistence import IntegrityError

    app = open_rooms(url)
    conflicts = 0
    save, first = app.save, [True]

    def colliding_save(*args: Any, **kw: Any) -> Any:
        # Every racer has decided on the same version before anyone saves: all but one
        # of the first saves must fail, whatever the scheduler does.
        nonlocal conflicts
        if first[0]:
            first[0] = False
            collide.wait(timeout=HANG)
        try:
            return save(*args, **kw)
        except IntegrityError:
            conflicts += 1
            raise

    app.save = colliding_save  # type: ignore[method-assign]
    try:
        app.load(room)  # warm the pool so the race is about the save, not the connect
        barrier.wait(timeout=HANG)
        results.put((app.execute(room, seat, command), conflicts))
    finally:
        app.close()


def collected(procs: list[Any], results: Any, barriers: list[Any]) -> list[Any]:
    """Every process's result, however long they take to start on a loaded machine; one
    that exits before sending its result fails the test at once (and releases the others
    from the barriers). Each must then end: a racer whose app had closed once hung at its
    exit (infrastructure/postgres.py `Notifier.close`)."""
    out: list[Any] = []
    deadline = time.monotonic() + HANG
    while len(out) < len(procs):
        try:
            out.append(results.get(timeout=0.2))
        except queue.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead or time.monotonic() > deadline:
                for barrier in barriers:
                    barrier.abort()
                pytest.fail(f"a process exited with {dead[0]} before its result" if dead
                            else f"no result after {HANG:g} s")
    for p in procs:
        p.join(timeout=HANG)
        assert p.exitcode == 0
    return out


def race(url: str, room: str, jobs: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Run each (seat, command) in its own process; every one decides on the same version."""
    barrier, collide, results = CTX.Barrier(len(jobs)), CTX.Barrier(len(jobs)), CTX.Queue()
    procs = [CTX.Process(target=racer, args=(url, room, seat, cmd, barrier, collide, results))
             for seat, cmd in jobs]
    for p in procs:
        p.start()
    out = collected(procs, results, [barrier, collide])
    # The store, not the scheduler, decided: every loser's first save was refused.
    assert sum(conflicts for _, conflicts in out) >= len(jobs) - 1
    return [result for result, _ in out]


def event_types(app: Any, room: str) -> Counter[str]:
    return Counter(rec.type for rec in app.records(app.load(room).id))


def assert_clean(app: Any, room: str) -> None:
    report = audit_room(app, room)
    assert report["ok"], report["checks"]


@pytest.fixture
def app(pg_url: str):  # type: ignore[no-untyped-def]
    rooms = open_rooms(pg_url)
    yield rooms
    rooms.close()


@pytest.mark.parametrize("racers", [2, 8])
def test_racing_begins_pay_one_fee_and_open_one_search(app: Any, pg_url: str,
                                                       racers: int) -> None:
    room = app.create_room(layout())["room"]
    jobs = [("richese", {"type": "begin_search", "card": "nullentropy-box",
                         "command_id": f"begin-{i}"}) for i in range(racers)]
    results = race(pg_url, room, jobs)

    winners = [r for r in results if r["ok"]]
    losers = [r for r in results if not r["ok"]]
    assert len(winners) == 1
    assert [r["error"]["code"] for r in losers] == ["locked"] * (racers - 1)
    assert all(r["version"] == winners[0]["version"] for r in losers)
    types = event_types(app, room)
    assert types["FeePaid"] == 1 and types["SearchOpened"] == 1
    assert app.load(room).state.seat("richese").spice == 8
    assert_clean(app, room)


@pytest.mark.parametrize("racers", [2, 8])
def test_racing_selects_take_one_card_and_shuffle_once(app: Any, pg_url: str,
                                                       racers: int) -> None:
    room = app.create_room(layout())["room"]
    begun = app.execute(room, "richese", {"type": "begin_search", "card": "nullentropy-box"})
    assert begun["ok"]
    search = app.seat_view(room, "richese")["nullentropy"]["search"]
    cards = [c["id"] for c in search["cards"]]
    jobs = [("richese", {"type": "select_card", "search": search["event"],
                         "card": cards[i % len(cards)]}) for i in range(racers)]
    results = race(pg_url, room, jobs)

    winners = [r for r in results if r["ok"]]
    assert len(winners) == 1
    assert [r["error"]["code"] for r in results if not r["ok"]] == ["stale_event"] * (racers - 1)
    types = event_types(app, room)
    assert (types["CardRetrieved"], types["PileShuffled"], types["BoxDiscarded"]) == (1, 1, 1)
    state = app.load(room).state
    assert state.search is None
    assert state.discard[-1] == "nullentropy-box"
    assert sum(c in state.seat("richese").hand for c in cards) == 1
    assert_clean(app, room)


def test_one_command_id_sent_by_many_processes_applies_once(app: Any, pg_url: str) -> None:
    room = app.create_room(layout())["room"]
    command = {"type": "begin_search", "card": "nullentropy-box", "command_id": "same"}
    results = race(pg_url, room, [("richese", command)] * 6)

    assert all(r["ok"] for r in results)
    assert len({(r["version"], str(r["events"])) for r in results}) == 1
    assert event_types(app, room)["FeePaid"] == 1
    assert app.load(room).state.seat("richese").spice == 8
    assert_clean(app, room)


def test_colliding_draws_are_redecided_and_all_land(app: Any, pg_url: str) -> None:
    room = app.create_room(layout())["room"]
    deck_before = len(app.load(room).state.deck)
    seats = ["richese", "emperor", "harkonnen"] * 2 + ["emperor", "harkonnen"]
    results = race(pg_url, room, [(s, {"type": "draw"}) for s in seats])

    assert all(r["ok"] for r in results), results
    assert sorted(r["version"] for r in results) == list(range(2, 2 + len(seats)))
    state = app.load(room).state
    assert len(state.deck) == deck_before - len(seats)
    assert event_types(app, room)["CardDrawn"] == len(seats)
    assert_clean(app, room)


def test_expected_version_mismatch_is_reported_not_retried(app: Any, pg_url: str) -> None:
    room = app.create_room(layout())["room"]
    seats = ["richese", "emperor", "harkonnen", "emperor"]
    results = race(pg_url, room, [(s, {"type": "draw", "expected_version": 1}) for s in seats])

    assert sum(r["ok"] for r in results) == 1
    assert [r["error"]["code"] for r in results if not r["ok"]] == ["conflict"] * 3
    assert event_types(app, room)["CardDrawn"] == 1
    assert_clean(app, room)


def opener(url: str, barrier: Any, results: Any) -> None:
    barrier.wait(timeout=HANG)
    app = open_rooms(url)  # the first use creates the tables
    try:
        results.put(app.create_room(layout())["room"])
    finally:
        app.close()


def test_processes_starting_on_a_fresh_database_create_the_tables_once(pg_admin_url: str) -> None:
    with throwaway_database(pg_admin_url, "dl_test_fresh") as url:
        barrier, results = CTX.Barrier(4), CTX.Queue()
        procs = [CTX.Process(target=opener, args=(url, barrier, results)) for _ in range(4)]
        for p in procs:
            p.start()
        rooms = set(collected(procs, results, [barrier]))
        app = open_rooms(url)
        try:
            assert {str(r) for r in app.room_ids()} == rooms
        finally:
            app.close()


def test_a_retried_draw_is_redecided_against_the_reshuffled_deck(app: Any, pg_url: str) -> None:
    from dune_ledger.domain.catalog import room_cards

    base = layout()
    held = {c for seat in base["seats"] for c in seat["hand"]}
    pile = [c.id for c in room_cards(("choam_richese",)) if c.zone == "deck" and c.id not in held]
    room = app.create_room(layout(deck=[], discard=pile))["room"]
    seats = ["richese", "emperor", "harkonnen", "emperor"]
    results = race(pg_url, room, [(s, {"type": "draw"}) for s in seats])

    assert all(r["ok"] for r in results), results
    records = app.records(app.load(room).id)
    shuffles = [r.fact for r in records if r.type == "DiscardReshuffled"]
    drawn = [r.fact.card for r in records if r.type == "CardDrawn"]  # type: ignore[attr-defined]
    # Only the first writer found the deck empty; the others drew from its shuffle.
    assert len(shuffles) == 1 and len(drawn) == len(seats)
    assert drawn == shuffles[0].order[: len(seats)]  # type: ignore[attr-defined]
    assert_clean(app, room)


@pytest.mark.parametrize("racers", [2, 8])
def test_racing_final_allowances_pay_once_and_finish_once(app: Any, pg_url: str,
                                                          racers: int) -> None:
    """The last pass of the bonus window, sent by many processes: one purchase, one
    income, one bonus, one cohort replenishment, one worm continuation."""
    from tests.rules_support import HARK, ambassador_layout
    from tests.rules_support import ambassador_seats as seats

    tokens = {"placed": [{"token": "richese", "territory": "arrakeen"}],
              "cohort": ["richese", "fremen", "guild", "ixians", "tleilaxu"],
              "used": ["fremen", "guild", "ixians", "tleilaxu"], "copy_pool": []}
    room = app.create_room(ambassador_layout(
        ambassadors=tokens, seats=seats(harkonnen=HARK[:6], atreides=["karama-2"])))["room"]
    entered = app.execute(room, "atreides", {"type": "enter_territory",
                                             "territory": "arrakeen", "via": "worm"})
    offer = next(e for e in entered["events"] if e["type"] == "AmbassadorOffered")["event"]
    assert app.execute(room, "ecaz", {"type": "ambassador_decide", "event": offer,
                                      "trigger": True, "beneficiary": "harkonnen"})["ok"]

    def allow() -> dict[str, Any]:
        return {"type": "respond", "event": app.public_view(room)["response"]["event"],
                "action": "pass"}

    # Income: every other seat with a card allows it; then the bonus window opens.
    assert app.public_view(room)["response"]["waiting"] == ["harkonnen", "atreides"]
    assert app.execute(room, "harkonnen", allow())["ok"]
    assert app.execute(room, "atreides", allow())["ok"]
    bonus = app.public_view(room)["response"]
    assert bonus["kind"] == "ambassador_bonus"
    assert sorted(bonus["waiting"]) == ["atreides", "emperor"]
    assert app.execute(room, "emperor", allow())["ok"]
    # The final allowance of the bonus, raced by every process.
    results = race(pg_url, room, [("atreides", allow())] * racers)

    assert sum(r["ok"] for r in results) == 1
    assert [r["error"]["code"] for r in results if not r["ok"]] == \
        ["stale_event"] * (racers - 1)
    counted = event_types(app, room)
    assert counted["PurchasePaid"] == 1 and counted["EmperorIncomePaid"] == 1
    assert counted["HarkonnenBonusResolved"] == 1 and counted["AmbassadorCohortDrawn"] == 1
    assert counted["WormResumed"] == 1
    assert app.public_view(room)["response"] is None
    assert_clean(app, room)
