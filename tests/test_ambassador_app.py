"""The Richese Ambassador purchase through RoomsApp, on memory:// and SQLite."""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

import orjson
import pytest

from dune_ledger.application.audit import audit_records, audit_room
from dune_ledger.infrastructure.storage import open_rooms
from tests.rules_support import BOX, HARK
from tests.rules_support import ambassador_layout as layout
from tests.rules_support import ambassador_seats as seats
from tests.support import Factory


@pytest.fixture(params=["memory", "sqlite"])
def url(request, tmp_path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/rooms.db"


@pytest.fixture
def app(url):
    factory = Factory()
    with open_rooms(url, randomness_factory=factory) as rooms:
        rooms.factory_under_test = factory  # type: ignore[attr-defined]
        yield rooms


def ok(result: dict[str, Any]) -> dict[str, Any]:
    assert result["ok"], result
    return result


def start(app, **kw: Any) -> tuple[str, str]:
    """A room where Atreides has just entered Arrakeen: Ecaz's decision is open."""
    room = app.create_room(layout(**kw))["room"]
    entered = ok(app.execute(room, "atreides", {"type": "enter_territory",
                                                "territory": "arrakeen", "via": "worm"}))
    offered = next(e for e in entered["events"] if e["type"] == "AmbassadorOffered")
    return room, offered["event"]


def decide(app, room: str, event: str, beneficiary: str, **extra: Any) -> dict[str, Any]:
    return app.execute(room, "ecaz", {"type": "ambassador_decide", "event": event,
                                      "trigger": True, "beneficiary": beneficiary, **extra})


def respond(app, room: str, seat: str, card: str | None = None, **extra: Any) -> dict[str, Any]:
    window = app.public_view(room)["response"]
    cmd: dict[str, Any] = {"type": "respond", "event": window["event"],
                           "action": "karama" if card else "pass", **extra}
    if card:
        cmd["card"] = card
    return app.execute(room, seat, cmd)


def pass_all(app, room: str, but: tuple[str, ...] = ()) -> None:
    """Every seat the open window waits for passes (RULES 4.4), except `but`."""
    for seat in app.public_view(room)["response"]["waiting"]:
        if seat not in but:
            ok(respond(app, room, seat))


def types(app, room: str) -> Counter[str]:
    return Counter(r.type for r in app.records(app.load(room).id))


def clean_audit(app, room: str) -> None:
    report = audit_room(app, room)
    failed = {k: v for k, v in report["checks"].items() if v["ok"] is False}
    assert not failed, failed


def test_ally_purchase_keeps_the_card_private_and_the_audit_clean(app):
    room, event = start(app, seats=seats(harkonnen=HARK[:5]))
    result = ok(decide(app, room, event, "harkonnen"))
    state = app.load(room).state
    bought = state.receipts[0].card
    assert bought not in json.dumps(result)
    assert bought not in json.dumps(app.public_log(room))
    assert bought not in json.dumps(app.public_view(room))
    for seat in ("ecaz", "emperor", "atreides"):
        view = app.seat_view(room, seat)
        assert bought not in json.dumps(view) and view["receipts"] == []
    mine = app.seat_view(room, "harkonnen")
    assert mine["receipts"][0]["card"] == bought
    assert bought in [c["id"] for c in mine["me"]["hand"]]
    assert app.public_view(room)["response"]["waiting"] == ["harkonnen"]  # income
    pass_all(app, room)
    entry = app.public_view(room)["ambassador"]["entry"]
    assert (entry["stage"], entry["payer"], entry["amount"]) == ("bonus", "harkonnen", 3)
    ok(respond(app, room, "emperor"))
    assert app.load(room).state.ambassadors.entry is None
    clean_audit(app, room)


def test_self_purchase_with_emperor_income(app):
    room, event = start(app)
    ok(decide(app, room, event, "ecaz"))
    assert app.public_view(room)["response"]["waiting"] == ["ecaz", "harkonnen"]
    ok(respond(app, room, "ecaz"))
    result = ok(respond(app, room, "harkonnen"))
    kinds = [e["type"] for e in result["events"]]
    assert "EmperorIncomePaid" in kinds and "WormResumed" in kinds
    state = app.load(room).state
    assert state.seat("ecaz").spice == 7 and state.seat("emperor").spice == 13
    assert app.seat_view(room, "ecaz")["receipts"][0]["stage"] == "finish"
    clean_audit(app, room)


def test_recycled_pile_gives_the_same_card_after_reload(url, tmp_path):
    factory = Factory()
    with open_rooms(url, randomness_factory=factory) as first:
        room, event = start(first, deck=[], discard=["baliset", "kulon", "shield-1"],
                            seats=seats(emperor=None))
        ok(decide(first, room, event, "ecaz"))
        card = first.load(room).state.receipts[0].card
        assert first.load(room).state.seat("ecaz").hand == [card]
        assert types(first, room)["DiscardReshuffled"] == 1
        if url.startswith("memory"):
            clean_audit(first, room)
            return
    with open_rooms(url, randomness_factory=Factory()) as second:
        state = second.load(room).state
        assert state.receipts[0].card == card and state.seat("ecaz").hand == [card]
        assert types(second, room)["DiscardReshuffled"] == 1
        clean_audit(second, room)


def test_wrong_actor_and_stale_event_change_nothing(app):
    room, event = start(app)
    version = app.load(room).version
    draws = app.factory_under_test.draws
    wrong = app.execute(
        room, "harkonnen", {"type": "ambassador_decide", "event": event, "trigger": True,
                            "beneficiary": "harkonnen"})
    assert wrong["error"]["code"] == "not_your_decision"
    stale = decide(app, room, "e2", "ecaz")
    assert stale["error"]["code"] == "stale_event"
    assert app.load(room).version == version and app.factory_under_test.draws == draws


def test_a_privately_impossible_purchase_reads_the_same_for_everyone(app):
    room, event = start(app, seats=seats(harkonnen={"spice": 2, "hand": [], "ally": "ecaz"}))
    result = ok(decide(app, room, event, "harkonnen"))
    assert [e["type"] for e in result["events"]] == [
        "AmbassadorTriggered", "AmbassadorNoEffect", "AmbassadorEntryClosed", "WormResumed"]
    assert "spice" not in json.dumps(result["events"])
    state = app.load(room).state
    assert state.seat("harkonnen").spice == 2 and state.ambassadors.used == ["richese"]


def test_duplicate_final_allowances_produce_one_of_everything(app):
    room, event = start(app, seats=seats(harkonnen=HARK[:5], atreides=["karama-2"]))
    ok(decide(app, room, event, "harkonnen"))
    pass_all(app, room)  # income allowed
    ok(respond(app, room, "atreides"))  # bonus: the Emperor is the last to answer
    window = app.public_view(room)["response"]["event"]
    final = {"type": "respond", "event": window, "action": "pass", "command_id": "last"}
    first = ok(app.execute(room, "emperor", final))
    again = app.execute(room, "emperor", final)
    assert again == first
    plain = app.execute(room, "emperor", {**final, "command_id": "other"})
    assert plain["error"]["code"] == "stale_event"
    counted = types(app, room)
    assert counted["PurchasePaid"] == 1 and counted["ReceiptStaged"] == 1
    assert counted["EmperorIncomePaid"] == 1 and counted["HarkonnenBonusResolved"] == 1
    assert counted["WormResumed"] == 1 and counted["AmbassadorEntryClosed"] == 1
    clean_audit(app, room)


def test_two_workers_racing_the_final_pass_resolve_it_once(tmp_path):
    url = f"sqlite:///{tmp_path}/race.db"
    tokens = {"placed": [{"token": "richese", "territory": "arrakeen"}],
              "cohort": ["richese", "fremen", "guild", "ixians", "tleilaxu"],
              "used": ["fremen", "guild", "ixians", "tleilaxu"], "copy_pool": []}
    with open_rooms(url, randomness_factory=Factory()) as a, \
            open_rooms(url, randomness_factory=Factory()) as b:
        room, event = start(a, ambassadors=tokens,
                            seats=seats(harkonnen=HARK[:6], emperor=None,
                                        atreides=["karama-2"]))
        ok(decide(a, room, event, "harkonnen"))
        window = a.public_view(room)["response"]["event"]
        results: list[dict[str, Any]] = []
        barrier = threading.Barrier(2)

        def worker(app, cid: str) -> None:
            barrier.wait()
            results.append(app.execute(room, "atreides", {"type": "respond", "event": window,
                                                          "action": "pass",
                                                          "command_id": cid}))

        threads = [threading.Thread(target=worker, args=(app, cid))
                   for app, cid in ((a, "w1"), (b, "w2"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(r["ok"] for r in results) == [False, True]
        assert [r["error"]["code"] for r in results if not r["ok"]] == ["stale_event"]
        counted = types(a, room)
        assert counted["HarkonnenBonusResolved"] == 1 and counted["PurchasePaid"] == 1
        assert counted["AmbassadorCohortDrawn"] == 1 and counted["WormResumed"] == 1
        clean_audit(b, room)


def test_a_box_search_interrupts_the_income_window_and_restores_its_passes(app):
    hands = seats(atreides=["karama-2"], bene_gesserit=["kulon"],
                  richese={"spice": 10, "hand": [BOX]}, emperor={"spice": 10, "hand": []})
    room, event = start(app, seats=hands, discard=["richese-karama", "shield-1"])
    ok(decide(app, room, event, "ecaz"))
    ok(respond(app, room, "atreides"))
    before = app.public_view(room)["response"]
    # Everyone with a card but the Emperor, whatever they hold: the searcher too.
    waiting = ["ecaz", "harkonnen", "bene_gesserit", "richese"]
    assert before["passes"] == ["atreides"] and before["waiting"] == waiting
    opened = ok(app.execute(room, "richese", {"type": "begin_search", "card": BOX}))
    search = next(e for e in opened["events"] if e["type"] == "SearchOpened")["search"]
    assert app.public_view(room)["response"] is None
    locked = app.execute(room, "bene_gesserit", {"type": "respond", "event": before["event"],
                                                 "action": "pass"})
    assert locked["error"]["code"] == "locked"
    ok(app.execute(room, "richese", {"type": "select_card", "search": search,
                                     "card": "richese-karama"}))
    after = app.public_view(room)["response"]
    assert after["event"] == before["event"] and after["passes"] == ["atreides"]
    assert after["waiting"] == waiting
    pass_all(app, room, but=("richese",))
    ok(respond(app, room, "richese", "richese-karama"))
    state = app.load(room).state
    assert state.seat("emperor").spice == 10 and state.ambassadors.entry is None
    clean_audit(app, room)


def test_every_version_conserves_cards_and_spice(app):
    hands = seats(harkonnen=HARK[:4], atreides=["karama-2"], bene_gesserit=["kulon"])
    room, event = start(app, seats=hands, deck=["shield-2"], discard=[])
    ok(decide(app, room, event, "harkonnen"))
    ok(respond(app, room, "atreides", "karama-2"))
    pass_all(app, room)
    state = app.load(room).state
    assert state.receipts[0].bonus == "karama-2"
    report, replayed = audit_records(room, app.records(app.load(room).id))
    for name in ("cards_conserved", "spice_conserved", "shuffles_are_permutations",
                 "hands_within_limits", "chain_intact"):
        assert report["checks"][name]["ok"], (name, report["checks"][name])
    assert replayed == state


def test_the_demo_runs_the_ambassador_room():
    from dune_ledger.infrastructure.demo import play_demo

    with open_rooms("memory://") as rooms:
        transcript = play_demo(rooms)
    assert transcript.ok
    out = orjson.dumps(transcript.as_json()).decode()
    assert "ReceiptStaged" in out and "ambassador_income" in out and "ambassador_bonus" in out
    assert "CardSold" in out and "CardSetAside" in out  # the Bidding round's scene
