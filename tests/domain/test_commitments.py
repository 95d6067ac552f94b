"""Commitments (RULES 3.1): a committed card is not played, given or promised.

Layouts stage them (battle plan, prescience, accepted Ixian replacement,
unsold Black Market offer, retained loser cards, queued Truthtrance); an open
gift offer commits its card too.
"""

from __future__ import annotations

import pytest

from dune_ledger.domain.state import COMMITMENT_KINDS
from dune_ledger.domain.views import seat_view
from tests.rules_support import (
    BOX,
    assert_lock_round_trip,
    code,
    layout,
    run,
    state_of,
    types,
)


def committed(kind, card=BOX):
    raw = layout(commitments=[{"card": card, "kind": kind}])
    raw["seats"][0]["hand"] = [BOX, "crysknife", "distrans"]
    raw["seats"][0]["ally"] = "emperor"
    raw["seats"][1]["ally"] = "richese"
    raw["seats"][1]["hand"] = ["karama-1", "truthtrance-1"]
    return raw


def test_the_kinds_are_the_ones_rules_name():
    assert set(COMMITMENT_KINDS) == {"battle_plan", "prescience", "ixian_replacement",
                                     "black_market", "retained_loser", "truthtrance"}


@pytest.mark.parametrize("kind", COMMITMENT_KINDS)
def test_a_committed_box_cannot_activate(kind):
    state = state_of(committed(kind))
    err_code = code(state, "richese", {"type": "begin_search", "card": BOX})
    assert err_code == "card_committed"
    assert seat_view(state, "richese")["nullentropy"]["blocked"] == "card_committed"


@pytest.mark.parametrize("kind", COMMITMENT_KINDS)
@pytest.mark.parametrize("command", [
    {"type": "discard", "card": BOX},
    {"type": "distrans", "card": "distrans", "give": BOX, "to": "harkonnen"},
    {"type": "offer_gift", "card": BOX, "to": "emperor"},
], ids=lambda c: c["type"])
def test_a_committed_card_is_not_discarded_given_or_offered(kind, command):
    assert code(state_of(committed(kind)), "richese", command) == "card_committed"


@pytest.mark.parametrize("kind", COMMITMENT_KINDS)
def test_a_committed_box_cannot_be_promised(kind):
    state = run(state_of(committed(kind)), "emperor", {
        "type": "ask_truthtrance", "card": "truthtrance-1", "target": "richese",
        "question": "Will you search?"}).state
    assert code(state, "richese", {"type": "answer_truthtrance",
                                   "event": state.truthtrance.event, "answer": "yes",
                                   "promise": {"box": BOX}}) == "card_committed"


@pytest.mark.parametrize("kind", COMMITMENT_KINDS)
def test_a_commitment_of_another_card_does_not_block_the_box(kind):
    state = state_of(committed(kind, card="crysknife"))
    assert types(run(state, "richese", {"type": "begin_search", "card": BOX}))[:2] == \
        ["FeePaid", "SearchOpened"]
    assert code(state, "richese", {"type": "distrans", "card": "distrans", "give": "crysknife",
                                   "to": "harkonnen"}) == "card_committed"


def test_a_committed_distrans_or_truthtrance_is_not_played():
    state = state_of(committed("battle_plan", card="distrans"))
    assert code(state, "richese", {"type": "distrans", "card": "distrans", "give": "crysknife",
                                   "to": "harkonnen"}) == "card_committed"
    state = state_of(committed("truthtrance", card="truthtrance-1"))
    assert code(state, "emperor", {"type": "ask_truthtrance", "card": "truthtrance-1",
                                   "target": "richese", "question": "?"}) == "card_committed"


def test_a_gift_offer_commits_the_box():
    state = run(state_of(committed("battle_plan", card="crysknife")), "richese",
                {"type": "offer_gift", "card": BOX, "to": "emperor"}).state
    assert code(state, "richese", {"type": "begin_search", "card": BOX}) == "card_committed"
    assert code(state, "richese", {"type": "distrans", "card": "distrans", "give": BOX,
                                   "to": "harkonnen"}) == "card_committed"


@pytest.mark.parametrize("kind", COMMITMENT_KINDS)
def test_commitments_survive_a_search_exactly(kind):
    raw = committed(kind, card="crysknife")
    closed = assert_lock_round_trip(state_of(raw), "richese", {"type": "discard",
                                                               "card": "crysknife"})
    assert [c.model_dump() for c in closed.commitments] == [{"card": "crysknife", "kind": kind}]
