"""Distrans (RULES 5): give one free card to a seat with room, then discard Distrans."""

from __future__ import annotations

import pytest

from dune_ledger.domain.views import public_view
from tests.rules_support import (
    BOX,
    assert_lock_round_trip,
    code,
    layout,
    rejected,
    run,
    state_of,
    types,
)

DISTRANS = "distrans"


def holding(**changes):
    raw = layout(**changes)
    raw["seats"][0]["hand"] = [BOX, "crysknife", DISTRANS]
    return raw


def give(state, card="crysknife", to="emperor", actor="richese", distrans=DISTRANS):
    return run(state, actor, {"type": "distrans", "card": distrans, "give": card, "to": to})


def test_distrans_gives_the_card_then_discards_itself():
    state = state_of(holding())
    tx = give(state)
    assert types(tx) == ["CardGiven", "CardDiscarded"]
    after = tx.state
    assert after.seat("richese").hand == [BOX]
    assert after.seat("emperor").hand == ["karama-1", "crysknife"]
    assert after.discard[-1] == DISTRANS
    # Only the two seats learn which card moved; Distrans itself is discarded face up.
    assert "crysknife" not in str(tx.events[0].public())
    assert tx.events[1].public() == {"seat": "richese", "card": DISTRANS}
    assert "crysknife" not in str(public_view(after))


def test_distrans_can_give_a_box_that_is_not_searching():
    tx = give(state_of(holding()), card=BOX)
    assert BOX in tx.state.seat("emperor").hand


@pytest.mark.parametrize(("why", "changes", "kwargs", "expected"), [
    ("unknown distrans", {}, {"distrans": "nope"}, "unknown_card"),
    ("distrans not held", {}, {"actor": "emperor", "card": "karama-1", "to": "richese"},
     "not_in_hand"),
    ("not a distrans", {}, {"distrans": "crysknife", "card": BOX}, "not_a_distrans"),
    ("distrans committed", {"commitments": [{"card": DISTRANS, "kind": "battle_plan"}]}, {},
     "card_committed"),
    ("giving distrans itself", {}, {"card": DISTRANS}, "invalid_command"),
    ("unknown card", {}, {"card": "nope"}, "unknown_card"),
    ("card not held", {}, {"card": "stunner"}, "not_in_hand"),
    ("the cache", {}, {"card": "semuta-drug"}, "not_in_hand"),
    ("battle plan", {"commitments": [{"card": "crysknife", "kind": "battle_plan"}]}, {},
     "card_committed"),
    ("unsold black market", {"commitments": [{"card": "crysknife", "kind": "black_market"}]},
     {}, "card_committed"),
    ("to nobody", {}, {"to": "fremen"}, "unknown_seat"),
    ("to oneself", {}, {"to": "richese"}, "invalid_target"),
])
def test_every_distrans_refusal_changes_nothing(why, changes, kwargs, expected):
    state = state_of(holding(**changes))
    kwargs = dict(kwargs)
    actor = kwargs.pop("actor", "richese")
    command = {"type": "distrans", "card": kwargs.pop("distrans", DISTRANS),
               "give": kwargs.pop("card", "crysknife"), "to": kwargs.pop("to", "emperor")}
    assert code(state, actor, command) == expected


def test_the_receiver_needs_room():
    raw = holding()
    raw["seats"][1]["hand"] = ["karama-1", "stunner", "kulon", "hajr"]
    state = state_of(raw)
    err = code(state, "richese", {"type": "distrans", "card": DISTRANS,
                                "give": "crysknife", "to": "emperor"})
    assert err == "hand_over_limit"
    # Harkonnen's limit is 8: four cards leave room.
    raw["seats"][2]["hand"] = ["shield-2", "chaumas", "snooper-1", "snooper-2"]
    assert types(give(state_of(raw), to="harkonnen")) == ["CardGiven", "CardDiscarded"]


def test_a_card_under_gift_offer_is_reserved():
    raw = holding()
    raw["seats"][0]["ally"] = "emperor"
    raw["seats"][1]["ally"] = "richese"
    state = state_of(raw)
    state = run(state, "richese", {"type": "offer_gift", "card": "crysknife",
                                   "to": "emperor"}).state
    assert code(state, "richese", {"type": "distrans", "card": DISTRANS, "give": "crysknife",
                                   "to": "harkonnen"}) == "card_committed"


def test_distrans_under_the_search_lock():
    raw = holding()
    state = state_of(raw)
    closed = assert_lock_round_trip(state, "richese", {
        "type": "distrans", "card": DISTRANS, "give": "crysknife", "to": "emperor"})
    # The reserved Box left with the search; the other cards are where they were.
    assert closed.seat("richese").hand[:2] == ["crysknife", DISTRANS]
    assert types(give(closed)) == ["CardGiven", "CardDiscarded"]


def test_one_message_for_a_card_not_in_hand_wherever_it_is():
    """Issue 24.15: a card in the Richese cache, in another hand or in the deck is
    refused alike, and the message never repeats the card sent."""
    state = state_of(holding())
    refusals = {}
    for where, card in (("cache", "semuta-drug"), ("hand", "karama-1"), ("deck", "lasgun")):
        assert card in (state.cache if where == "cache" else state.deck if where == "deck"
                        else state.seat("emperor").hand)
        r = rejected(state, "richese", {"type": "distrans", "card": DISTRANS, "give": card,
                                        "to": "emperor"})
        assert card not in r.message
        refusals[where] = (r.code, r.message)
    assert len(set(refusals.values())) == 1 and refusals["cache"][0] == "not_in_hand"
