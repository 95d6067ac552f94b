"""Richese gifts (RULES 5, 3.1): offer, answer, the committed card, the search lock.

The open offer is the room's `response` (kind gift, the ally waiting)."""

from __future__ import annotations

import pytest

from dune_ledger.domain.gifts import WINDOW
from dune_ledger.domain.views import public_view, seat_view
from tests.rules_support import (
    BOX,
    close_search,
    code,
    layout,
    open_search,
    run,
    snapshot,
    state_of,
    types,
)


def allied(**changes):
    raw = layout(**changes)
    raw["seats"][0]["ally"] = "emperor"
    raw["seats"][1]["ally"] = "richese"
    return raw


def offer(state, card="crysknife", to="emperor"):
    return run(state, "richese", {"type": "offer_gift", "card": card, "to": to})


def the_offer(state):
    w = state.control.response
    assert w is not None and w.kind == "gift"
    return w


def reply(state, accept, actor="emperor"):
    return run(state, actor, {"type": "answer_gift", "event": the_offer(state).event,
                              "accept": accept})


def test_offer_commits_the_card_and_shows_it_only_to_the_two_seats():
    tx = offer(state_of(allied()))
    assert types(tx) == ["GiftOffered"]
    state = tx.state
    w = the_offer(state)
    assert w.data["card"] == "crysknife" and w.event == f"e{state.version}"
    assert "crysknife" in state.seat("richese").hand
    for seat in ("richese", "emperor"):
        assert seat_view(state, seat)["response"]["card"]["id"] == "crysknife"
    for view in (seat_view(state, "harkonnen"), public_view(state)):
        assert view["response"] == {"kind": "gift", "event": w.event, "passes": [],
                                    "waiting": ["emperor"], "deadline": None,
                                    "seconds": None, "name": "A gift from Richese",
                                    "says": WINDOW.says,
                                    "giver": "richese", "to": "emperor"}
        assert "crysknife" not in str(view)
    assert "crysknife" not in str(tx.events[0].public())
    # Committed while the offer is open: not discarded, not given, not offered again.
    assert code(state, "richese", {"type": "discard", "card": "crysknife"}) == "card_committed"


def test_accepting_moves_the_card():
    state = offer(state_of(allied())).state
    tx = reply(state, True)
    assert types(tx) == ["GiftAccepted"]
    assert "crysknife" in tx.state.seat("emperor").hand
    assert "crysknife" not in tx.state.seat("richese").hand
    assert tx.state.control.response is None
    assert "crysknife" not in str(tx.events[0].public())


def test_declining_leaves_the_card_with_richese():
    state = offer(state_of(allied())).state
    tx = reply(state, False)
    assert types(tx) == ["GiftDeclined"]
    assert tx.state.control.response is None
    assert tx.state.seats == state.seats
    run(tx.state, "richese", {"type": "discard", "card": "crysknife"})  # free again


@pytest.mark.parametrize(("why", "actor", "changes", "command", "expected"), [
    ("not richese", "emperor", {}, {"card": "karama-1", "to": "richese"}, "not_eligible"),
    ("not the ally", "richese", {}, {"to": "harkonnen"}, "not_ally"),
    ("unseated", "richese", {}, {"to": "fremen"}, "not_ally"),
    ("unknown card", "richese", {}, {"card": "nope"}, "unknown_card"),
    ("not in hand", "richese", {}, {"card": "stunner"}, "not_in_hand"),
    ("cache card", "richese", {}, {"card": "semuta-drug"}, "not_in_hand"),
    ("committed", "richese", {"commitments": [{"card": "crysknife", "kind": "battle_plan"}]},
     {}, "card_committed"),
])
def test_every_offer_refusal_changes_nothing(why, actor, changes, command, expected):
    state = state_of(allied(**changes))
    full = {"type": "offer_gift", "card": "crysknife", "to": "emperor", **command}
    assert code(state, actor, full) == expected


def test_no_ally_means_no_offer():
    assert code(state_of(layout()), "richese",
                {"type": "offer_gift", "card": "crysknife", "to": "emperor"}) == "not_ally"


def test_one_offer_at_a_time():
    state = offer(state_of(allied())).state
    assert code(state, "richese", {"type": "offer_gift", "card": BOX, "to": "emperor"}) == \
        "gift_pending"


@pytest.mark.parametrize(("why", "actor", "event", "expected"), [
    ("stale", "emperor", "e99", "stale_event"),
    ("not the ally", "harkonnen", None, "not_your_decision"),
    ("the giver", "richese", None, "not_your_decision"),
])
def test_every_answer_refusal_changes_nothing(why, actor, event, expected):
    state = offer(state_of(allied())).state
    assert code(state, actor, {"type": "answer_gift", "event": event or the_offer(state).event,
                               "accept": True}) == expected


def test_accepting_needs_room_but_declining_does_not():
    raw = allied()
    raw["seats"][1]["hand"] = ["karama-1", "stunner", "kulon", "hajr"]
    state = offer(state_of(raw)).state
    assert code(state, "emperor", {"type": "answer_gift", "event": the_offer(state).event,
                                   "accept": True}) == "hand_over_limit"
    assert types(reply(state, False)) == ["GiftDeclined"]


def test_answer_after_the_offer_is_gone_is_stale():
    state = offer(state_of(allied())).state
    event = the_offer(state).event
    done = reply(state, True).state
    assert code(done, "emperor", {"type": "answer_gift", "event": event, "accept": True}) == \
        "stale_event"


def test_a_box_under_offer_cannot_be_activated():
    state = offer(state_of(allied()), card=BOX).state
    assert code(state, "richese", {"type": "begin_search", "card": BOX}) == "card_committed"
    assert seat_view(state, "richese")["nullentropy"]["blocked"] == "card_committed"


def test_a_search_during_an_offer_of_another_card_restores_the_offer_exactly():
    state = offer(state_of(allied())).state
    gift = the_offer(state).model_dump()
    searching = open_search(state)
    for actor, command in [
        ("emperor", {"type": "answer_gift", "event": gift["event"], "accept": True}),
        ("richese", {"type": "offer_gift", "card": "crysknife", "to": "emperor"}),
    ]:
        assert code(searching, actor, command) == "locked"
    # Saved as the search's parent control, like any response (RULES 5), and still
    # committing its card.
    assert searching.control.response is None
    assert searching.search.parent.response.model_dump() == gift
    closed = close_search(searching, "shield-1").state
    assert the_offer(closed).model_dump() == gift
    assert "crysknife" in closed.seat("richese").hand
    after = reply(closed, True).state
    assert "crysknife" in after.seat("emperor").hand


def test_a_declined_offer_changes_no_other_part_of_the_state():
    state = offer(state_of(allied())).state
    before = snapshot(state)
    after = snapshot(reply(state, False).state)
    before.pop("control"), after.pop("control"), before.pop("version"), after.pop("version")
    assert before == after


def test_no_offer_while_another_response_window_is_open():
    other = {"kind": "ambassador_income", "event": "e1", "turn": 2, "phase": 6, "passes": [],
             "data": {}}
    state = state_of(allied(control={"response": other}))
    assert code(state, "richese", {"type": "offer_gift", "card": "crysknife",
                                   "to": "emperor"}) == "response_pending"
