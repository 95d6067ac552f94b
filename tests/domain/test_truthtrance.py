"""Truthtrance (RULES 5, 3.1): the public question, answer-first, and promises."""

from __future__ import annotations

import pytest

from dune_ledger.domain.truthtrance import SAYS as TRUTHTRANCE_SAYS
from dune_ledger.domain.views import public_view, seat_view
from tests.rules_support import (
    BOX,
    assert_lock_round_trip,
    close_search,
    code,
    layout,
    open_search,
    run,
    state_of,
    types,
)

TT = "truthtrance-1"


def base(**changes):
    raw = layout(**changes)
    raw["seats"][1]["hand"] = ["karama-1", TT]
    return raw


def ask(state, target="richese", question="Will you search the pile?"):
    return run(state, "emperor", {"type": "ask_truthtrance", "card": TT, "target": target,
                                  "question": question})


def answer(state, promise=None, actor="richese", answer_="yes"):
    return run(state, actor, {"type": "answer_truthtrance", "event": state.truthtrance.event,
                              "answer": answer_, "promise": promise})


def test_asking_discards_the_card_and_publishes_the_question():
    state = state_of(base())
    tx = ask(state)
    assert types(tx) == ["CardDiscarded", "TruthtranceAsked"]
    after = tx.state
    assert after.discard[-1] == TT and TT not in after.seat("emperor").hand
    assert after.truthtrance.target == "richese"
    assert after.truthtrance.event == f"e{after.version}"
    for view in (public_view(after), seat_view(after, "harkonnen"), seat_view(after, "richese")):
        assert view["truthtrance"] == {"event": after.truthtrance.event, "asker": "emperor",
                                       "target": "richese", "card": TT,
                                       "question": "Will you search the pile?",
                                       "says": TRUTHTRANCE_SAYS}
    log = tx.events[-1].public()
    assert log["question"] == "Will you search the pile?"


@pytest.mark.parametrize(("why", "changes", "command", "expected"), [
    ("unknown card", {}, {"card": "nope"}, "unknown_card"),
    ("not in hand", {}, {"card": "truthtrance-2"}, "not_in_hand"),
    ("not a truthtrance", {}, {"card": "karama-1"}, "not_a_truthtrance"),
    ("queued truthtrance", {"commitments": [{"card": TT, "kind": "truthtrance"}]}, {},
     "card_committed"),
    ("target not seated", {}, {"target": "fremen"}, "unknown_seat"),
    ("asking oneself", {}, {"target": "emperor"}, "invalid_target"),
])
def test_every_ask_refusal_changes_nothing(why, changes, command, expected):
    state = state_of(base(**changes))
    full = {"type": "ask_truthtrance", "card": TT, "target": "richese", "question": "?"}
    full.update(command)
    assert code(state, "emperor", full) == expected


def test_a_second_question_waits_for_the_first_answer():
    raw = base()
    raw["seats"][2]["hand"] = ["truthtrance-2"]
    state = ask(state_of(raw)).state
    assert code(state, "harkonnen", {"type": "ask_truthtrance", "card": "truthtrance-2",
                                     "target": "richese", "question": "?"}) == \
        "truthtrance_pending"


@pytest.mark.parametrize("command", [
    {"type": "begin_search", "card": BOX},
    {"type": "discard", "card": "crysknife"},
    {"type": "draw"},
    {"type": "offer_gift", "card": "crysknife", "to": "emperor"},
    {"type": "distrans", "card": "distrans", "give": "crysknife", "to": "emperor"},
    {"type": "guild_stop", "card": "karama-2"},
    {"type": "semuta", "event": "e1", "action": "pass"},
], ids=lambda c: c["type"])
def test_answer_first_refuses_everything_else(command):
    state = ask(state_of(base())).state
    for seat in ("richese", "emperor", "harkonnen"):
        assert code(state, seat, command) == "truthtrance_pending"
    # Seat control stays available, and the Box's own control says why it waits.
    tx = run(state, "harkonnen", {"type": "set_autopilot", "enabled": True, "profile": "easy"})
    assert types(tx) == ["AutopilotSet"]
    assert seat_view(state, "richese")["nullentropy"]["blocked"] == "truthtrance_pending"


def test_the_answer_unblocks_the_box():
    state = answer(ask(state_of(base())).state, answer_="no").state
    assert state.truthtrance is None
    tx = run(state, "richese", {"type": "begin_search", "card": BOX})
    assert types(tx)[:2] == ["FeePaid", "SearchOpened"]


@pytest.mark.parametrize(("why", "actor", "event", "promise", "expected"), [
    ("stale event", "richese", "e99", None, "stale_event"),
    ("not the target", "harkonnen", None, None, "not_your_decision"),
    ("the asker", "emperor", None, None, "not_your_decision"),
    ("spice beyond the purse", "richese", None, {"spice": 11}, "insufficient_spice"),
    ("box that is not a box", "richese", None, {"box": "crysknife"}, "not_a_box"),
    ("unknown box", "richese", None, {"box": "nope"}, "unknown_card"),
    ("box not held", "harkonnen", None, None, "not_your_decision"),
])
def test_every_answer_refusal_changes_nothing(why, actor, event, promise, expected):
    state = ask(state_of(base())).state
    command = {"type": "answer_truthtrance", "event": event or state.truthtrance.event,
               "answer": "yes", "promise": promise}
    assert code(state, actor, command) == expected


def test_box_promises_need_the_box_in_hand_and_free():
    raw = base()
    raw["seats"][0]["hand"] = ["crysknife"]
    state = ask(state_of(raw)).state
    cmd = {"type": "answer_truthtrance", "event": state.truthtrance.event, "answer": "yes",
           "promise": {"box": BOX}}
    assert code(state, "richese", cmd) == "not_in_hand"
    committed = ask(state_of(base(commitments=[{"card": BOX, "kind": "battle_plan"}]))).state
    cmd["event"] = committed.truthtrance.event
    assert code(committed, "richese", cmd) == "card_committed"


def test_a_box_promise_needs_the_fee_free_of_reservations():
    raw = base(reservations=[{"faction": "richese", "amount": 9, "reason": "auction"}])
    state = ask(state_of(raw)).state
    assert code(state, "richese", {
        "type": "answer_truthtrance", "event": state.truthtrance.event, "answer": "yes",
        "promise": {"box": BOX}}) == "insufficient_spice"


def test_a_spice_promise_is_reserved_and_reduces_what_the_seat_can_pay():
    raw = base()
    raw["seats"][0]["spice"] = 3
    tx = answer(ask(state_of(raw)).state, promise={"spice": 2})
    assert types(tx) == ["TruthtranceAnswered"]
    state = tx.state
    assert state.reserved("richese") == 2
    assert seat_view(state, "richese")["me"]["reserved"] == 2
    assert code(state, "richese", {"type": "begin_search", "card": BOX}) == "insufficient_spice"
    assert seat_view(state, "richese")["nullentropy"]["blocked"] == "insufficient_spice"


def test_a_promised_box_fee_is_paid_even_from_a_purse_of_exactly_two():
    raw = base()
    raw["seats"][0]["spice"] = 2
    state = answer(ask(state_of(raw)).state, promise={"box": BOX}).state
    assert [(r.amount, r.box) for r in state.reservations] == [(2, BOX)]
    assert seat_view(state, "richese")["nullentropy"]["blocked"] is None
    tx = run(state, "richese", {"type": "begin_search", "card": BOX})
    assert types(tx)[:3] == ["FeePaid", "PromiseFulfilled", "SearchOpened"]
    assert tx.state.reservations == [] and tx.state.seat("richese").spice == 0


def test_a_box_promise_blocks_other_spending_and_a_second_promise_of_it():
    raw = base()
    raw["seats"][0]["spice"] = 3
    raw["seats"][2]["hand"] = ["truthtrance-2"]
    state = answer(ask(state_of(raw)).state, promise={"box": BOX}).state
    state = run(state, "harkonnen", {"type": "ask_truthtrance", "card": "truthtrance-2",
                                     "target": "richese", "question": "Again?"}).state
    event = state.truthtrance.event
    assert code(state, "richese", {"type": "answer_truthtrance", "event": event, "answer": "yes",
                                   "promise": {"spice": 2}}) == "insufficient_spice"
    assert code(state, "richese", {"type": "answer_truthtrance", "event": event, "answer": "yes",
                                   "promise": {"box": BOX}}) == "already_promised"
    ok = run(state, "richese", {"type": "answer_truthtrance", "event": event, "answer": "no",
                                "promise": {"spice": 1}})
    assert ok.state.reserved("richese") == 3


def test_truthtrance_under_the_search_lock():
    state = state_of(base())
    cmd = {"type": "ask_truthtrance", "card": TT, "target": "richese", "question": "?"}
    assert_lock_round_trip(state, "emperor", cmd)
    # A promise made before a search is exactly as it was after it closes.
    raw = base()
    raw["seats"][0]["spice"] = 6
    promised = answer(ask(state_of(raw)).state, promise={"spice": 3}).state
    searching = open_search(promised)
    assert code(searching, "richese", cmd) == "locked"
    closed = close_search(searching).state
    assert closed.reservations == promised.reservations
    assert closed.truthtrance is None
