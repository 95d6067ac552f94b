"""Guild shipping-cost provenance and the special stop (RULES 3.5, advanced)."""

from __future__ import annotations

import pytest

from dune_ledger.domain.actions import actions
from dune_ledger.domain.nullentropy import candidates
from tests.rules_support import (
    BOX,
    close_search,
    code,
    layout,
    open_search,
    rejected,
    run,
    state_of,
    types,
)

COST = {"card": "karama-2", "creator": "atreides", "beneficiary": "atreides", "price": 5}


def shipped(**changes):
    raw = layout(**changes)
    raw["seats"] = [*raw["seats"], {"faction": "guild", "spice": 5, "hand": []},
                    {"faction": "atreides", "spice": 5, "hand": ["stunner"]}]
    raw["discard"] = ["shield-1", "karama-2", "baliset"]
    raw.setdefault("shipping_costs", [dict(COST)])
    return raw


def stop(state, card="karama-2", actor="guild"):
    return run(state, actor, {"type": "guild_stop", "card": card})


def record(state):
    return state.shipping_costs[0].model_dump()


def test_an_unclaimed_stop_refunds_the_exact_card_to_its_creator():
    state = state_of(shipped())
    tx = stop(state)
    assert types(tx) == ["ShipmentStopped", "ShippingCostRefunded"]
    after = tx.state
    assert after.seat("atreides").hand == ["stunner", "karama-2"]
    assert "karama-2" not in after.discard
    assert record(after) == {**COST, "claimed": True, "stopped": True}
    assert after.bank == state.bank  # no spice moves: the price is evidence


def test_retrieving_the_cost_card_claims_it_in_the_same_append_and_for_ever():
    state = open_search(state_of(shipped()))
    assert "karama-2" in (candidates(state, "richese") or [])  # never blacklisted
    tx = close_search(state, "karama-2")
    # RULES 7: the claim is a private field of CardRetrieved, so the events are those
    # of any other selection (in v1 an event of its own told everyone the card).
    assert types(tx) == ["CardRetrieved", "PileShuffled", "BoxDiscarded", "SearchClosed"]
    assert tx.events[0].claimed is True
    assert tx.events[0].public() == close_search(state, "shield-1").events[0].public()
    after = tx.state
    assert record(after) == {**COST, "claimed": True, "stopped": False}  # price etc. kept
    # A later rediscard does not make it refundable again.
    again = run(after, "richese", {"type": "discard", "card": "karama-2"}).state
    assert again.discard[-1] == "karama-2"
    tx = stop(again)
    assert types(tx) == ["ShipmentStopped"]
    assert tx.events[0].public()["refunded"] is False
    assert "karama-2" in tx.state.discard and tx.state.seat("atreides").hand == ["stunner"]


def test_retrieving_another_card_leaves_the_record_and_its_refund():
    state = open_search(state_of(shipped()))
    tx = close_search(state, "shield-1")
    assert tx.events[0].claimed is False
    assert record(tx.state) == {**COST, "claimed": False, "stopped": False}
    refunded = stop(tx.state)
    assert types(refunded) == ["ShipmentStopped", "ShippingCostRefunded"]
    assert "karama-2" in refunded.state.seat("atreides").hand


def test_a_record_claimed_in_the_layout_refunds_nothing():
    state = state_of(shipped(shipping_costs=[{**COST, "claimed": True}]))
    tx = stop(state)
    assert types(tx) == ["ShipmentStopped"]
    assert "karama-2" in tx.state.discard


@pytest.mark.parametrize(("why", "changes", "actor", "card", "expected"), [
    ("basic mode", {"mode": "basic"}, "guild", "karama-2", "not_advanced"),
    ("not the guild", {}, "atreides", "karama-2", "not_eligible"),
    ("no record", {}, "guild", "shield-1", "unknown_card"),
])
def test_every_stop_refusal_changes_nothing(why, changes, actor, card, expected):
    assert code(state_of(shipped(**changes)), actor, {"type": "guild_stop", "card": card}) == \
        expected


def test_a_shipment_is_stopped_once():
    state = stop(state_of(shipped())).state
    assert code(state, "guild", {"type": "guild_stop", "card": "karama-2"}) == "already_stopped"


def test_a_refund_needs_room_in_the_creators_hand():
    raw = shipped()
    raw["seats"][-1]["hand"] = ["stunner", "kulon", "hajr", "lasgun"]
    assert code(state_of(raw), "guild", {"type": "guild_stop", "card": "karama-2"}) == \
        "hand_over_limit"


def test_guild_stop_under_the_search_lock():
    state = state_of(shipped())
    searching = open_search(state)
    assert code(searching, "guild", {"type": "guild_stop", "card": "karama-2"}) == "locked"
    closed = close_search(searching, "shield-1").state
    assert closed.shipping_costs == state.shipping_costs
    assert types(stop(closed)) == ["ShipmentStopped", "ShippingCostRefunded"]
    assert closed.discard[-1] == BOX


def test_the_capacity_check_applies_whatever_the_box_took():
    """Issue 24.5: with the creator at its limit, the Guild learns nothing of the search
    (RULES 3.5): the same refusal and the same actions whichever card the Box took."""
    raw = shipped()
    raw["seats"][-1]["hand"] = ["stunner", "kulon", "hajr", "lasgun"]
    searching = open_search(state_of(raw))
    seen = []
    for pick in ("karama-2", "shield-1"):
        closed = close_search(searching, pick).state
        refusal = rejected(closed, "guild", {"type": "guild_stop", "card": "karama-2"})
        stops = [a for a in actions(closed, "guild") if a["type"] == "guild_stop"]
        seen.append((refusal.code, refusal.message, stops))
    assert seen[0] == seen[1] and seen[0][0] == "hand_over_limit" and seen[0][2] == []


def test_an_accepted_stop_of_a_claimed_record_refunds_nothing_and_spends_the_stop():
    claimed = close_search(open_search(state_of(shipped())), "karama-2").state
    tx = stop(claimed)
    assert types(tx) == ["ShipmentStopped"] and tx.events[0].public()["refunded"] is False
    assert code(tx.state, "guild", {"type": "guild_stop", "card": "karama-2"}) == \
        "already_stopped"
