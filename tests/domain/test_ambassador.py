"""The Richese Ambassador purchase (RULES 4), in the domain, with no storage."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dune_ledger.domain.ambassador import TerritoryEntered
from dune_ledger.domain.errors import LayoutError, Rejection
from dune_ledger.domain.layout import build_room, parse_layout
from dune_ledger.domain.rules import Tx, apply
from dune_ledger.domain.state import RoomState
from dune_ledger.domain.territories import STRONGHOLDS, TERRITORIES
from dune_ledger.domain.views import public_view, seat_view
from tests.rules_support import (
    ALL_CARDS,
    BOX,
    HARK,
    enter,
    trigger,
)
from tests.rules_support import ambassador_layout as layout
from tests.rules_support import ambassador_room as room
from tests.rules_support import ambassador_seats as seats
from tests.support import Counting, rejected, run, types


def window(state: RoomState) -> str:
    assert state.control.response is not None
    return state.control.response.event


def answer(state: RoomState, seat: str, card: str | None = None) -> Tx:
    cmd: dict[str, Any] = {"type": "respond", "event": window(state),
                           "action": "karama" if card else "pass"}
    if card:
        cmd["card"] = card
    return run(state, seat, cmd)


def asked(state: RoomState) -> list[str]:
    return list(public_view(state)["response"]["waiting"])


def allow(state: RoomState, but: tuple[str, ...] = ()) -> Tx:
    """Every seat the open window waits for passes (RULES 4.4: everyone with a card
    is asked), except `but`; the last pass's Tx."""
    tx = None
    for seat in [s for s in asked(state) if s not in but]:
        tx = answer(state, seat)
        state = tx.state
    assert tx is not None
    return tx


def conserved(state: RoomState, spice: int) -> None:
    held = Counter(cid for zone in state.zones().values() for cid in zone)
    assert held == Counter(ALL_CARDS)
    assert state.total_spice() == spice


def view_text(view: dict[str, Any]) -> str:
    return json.dumps(view, sort_keys=True)


# --- entry and trigger ------------------------------------------------------------


def test_entry_opens_ecaz_decision_and_the_entry_is_never_replayed():
    state = room()
    tx = run(state, "atreides", {"type": "enter_territory", "territory": "arrakeen",
                                 "via": "shipment"})
    assert types(tx) == ["TerritoryEntered", "AmbassadorOffered"]
    d = tx.state.control.decision
    assert d is not None and (d.kind, d.player, d.event) == ("ambassador", "ecaz", "e3")
    assert tx.state.ambassadors.entry.entrant == "atreides"
    assert public_view(tx.state)["decision"]["token"] == "richese"


@pytest.mark.parametrize("who, where", [
    ("ecaz", "arrakeen"), ("harkonnen", "arrakeen"), ("richese", "arrakeen"),
    ("atreides", "carthag"),
])
def test_no_decision_for_ecaz_its_ally_the_tokens_faction_or_an_empty_territory(who, where):
    state = room(seats=seats(richese={"spice": 5, "hand": []}))
    tx = run(state, who, {"type": "enter_territory", "territory": where, "via": "movement"})
    assert types(tx) == ["TerritoryEntered"]
    assert tx.state.control.decision is None and tx.state.ambassadors.entry is None


def test_decline_leaves_the_token_and_resumes_a_worm_once():
    state = enter(room(), via="worm")
    d = state.control.decision
    tx = run(state, "ecaz", {"type": "ambassador_decide", "event": d.event, "trigger": False})
    assert types(tx) == ["AmbassadorDeclined", "AmbassadorEntryClosed", "WormResumed"]
    after = tx.state
    assert after.ambassadors.placed["arrakeen"] == "richese"
    assert after.ambassadors.used == [] and after.ambassadors.entry is None
    assert after.control.decision is None
    assert rejected(after, "ecaz", {"type": "ambassador_decide", "event": d.event,
                                    "trigger": False}).code == "stale_event"


def test_wrong_actor_stale_event_and_bad_beneficiary_change_nothing():
    state = enter(room())
    event = state.control.decision.event
    cmd = {"type": "ambassador_decide", "event": event, "trigger": True, "beneficiary": "ecaz"}
    assert rejected(state, "harkonnen", cmd).code == "not_your_decision"
    assert rejected(state, "ecaz", {**cmd, "event": "e99"}).code == "stale_event"
    assert rejected(state, "ecaz", {**cmd, "beneficiary": "emperor"}).code == "not_eligible"
    assert rejected(state, "ecaz", {**cmd, "beneficiary": None}).code == "invalid_command"
    # Another entry waits for this one.
    assert rejected(state, "emperor", {"type": "enter_territory", "territory": "tueks-sietch",
                                       "via": "movement"}).code == "decision_pending"


# --- territories (issue 36) --------------------------------------------------------------


@pytest.mark.parametrize("where", ["Narnia", "arakeen", "Arrakeen", "arrakeen ", "polar_sink"])
def test_a_territory_off_the_map_is_refused_naming_the_field_not_the_text(where):
    """A typo would skip the token it meant: refused, with nothing appended."""
    rej = rejected(room(), "atreides", {"type": "enter_territory", "territory": where,
                                        "via": "movement"})
    assert rej.code == "invalid_command"
    assert rej.message.startswith("territory: not a territory of the printed map")
    assert where.strip() not in rej.message


@pytest.mark.parametrize("where", ["polar-sink", "the-great-flat", "tueks-sietch"])
def test_every_territory_of_the_map_is_entered_and_logged_by_its_name(where):
    tx = run(room(), "atreides", {"type": "enter_territory", "territory": where,
                                  "via": "movement"})
    assert types(tx)[0] == "TerritoryEntered"
    assert tx.events[0].text() == "Atreides entered " + TERRITORIES[where] + " by moving"


def test_the_seat_is_offered_the_map_s_territories():
    [entry] = [a for a in seat_view(room(), "atreides")["actions"]
               if a["type"] == "enter_territory"]
    assert entry["free"]["territory"] == {"kind": "choice", "options": list(TERRITORIES)}
    assert len(TERRITORIES) == 42 and set(STRONGHOLDS) <= set(TERRITORIES)


@pytest.mark.parametrize("where", ["Narnia", "Arrakeen", "polar-sink"])
def test_a_layout_places_an_ambassador_in_a_stronghold_only(where):
    tokens = {"placed": [{"token": "fremen", "territory": "carthag"},
                         {"token": "guild", "territory": where}]}
    with pytest.raises(LayoutError) as info:
        parse_layout(layout(ambassadors=tokens))
    assert str(info.value).startswith(
        "invalid layout: ambassadors.placed.1.territory: not a stronghold")


def test_a_stored_entry_of_free_text_still_replays_and_reads():
    """Streams recorded before territories were checked keep what they named."""
    state = room()
    events = [TerritoryEntered.trusted({"seat": "atreides", "territory": "Narnia",
                                        "via": "shipment"}),
              TerritoryEntered.trusted({"seat": "emperor", "territory": "tueks_sietch",
                                        "via": "worm"})]
    for event in events:
        apply(state, event)
    assert [e.text() for e in events] == ["Atreides entered Narnia by shipment",
                                          "Emperor entered Tueks Sietch riding a worm"]


def test_an_unimplemented_token_is_refused_not_pretended():
    state = enter(room(), where="tueks-sietch")
    rej = rejected(state, "ecaz", {"type": "ambassador_decide",
                                   "event": state.control.decision.event, "trigger": True,
                                   "beneficiary": "ecaz"})
    assert rej.code == "not_implemented" and "fremen" in rej.message
    tx = run(state, "ecaz", {"type": "ambassador_decide", "event": state.control.decision.event,
                             "trigger": False})
    assert tx.state.ambassadors.placed["tueks-sietch"] == "fremen"


# --- the purchase -------------------------------------------------------------------


def test_self_purchase_pays_three_draws_the_top_card_and_stages_the_receipt():
    state = enter(room(seats=seats(emperor=None)))
    top = state.deck[0]
    spice = state.total_spice()
    tx = trigger(state, "ecaz")
    assert types(tx) == ["AmbassadorTriggered", "PurchasePaid", "CardDrawn", "ReceiptStaged",
                         "AmbassadorEntryClosed"]
    after = tx.state
    assert after.seat("ecaz").spice == 7 and after.bank == state.bank + 3
    assert after.seat("ecaz").hand == [top]
    receipt = after.receipts[0]
    assert (receipt.buyer, receipt.card, receipt.amount, receipt.emperor, receipt.stage) == (
        "ecaz", top, 3, None, "finish")
    assert after.ambassadors.used == ["richese"] and "arrakeen" not in after.ambassadors.placed
    assert after.ambassadors.cohort == state.ambassadors.cohort  # not complete yet
    assert seat_view(after, "ecaz")["receipts"][0]["card"] == top
    staged = next(e for e in tx.events if e.type == "ReceiptStaged")
    assert "card" not in staged.public()
    conserved(after, spice)


def test_ally_purchase_stays_private_to_the_ally():
    state = enter(room())
    tx = trigger(state, "harkonnen")
    after = tx.state
    bought = after.receipts[0].card
    assert after.receipts[0].buyer == "harkonnen" and bought in after.seat("harkonnen").hand
    assert after.seat("harkonnen").spice == 7 and after.seat("ecaz").spice == 10
    for seat in ("ecaz", "emperor", "atreides"):
        text = view_text(seat_view(after, seat))
        assert bought not in text and "crysknife" not in text
        assert seat_view(after, seat)["receipts"] == []
    assert bought not in view_text(public_view(after))
    assert all(bought not in json.dumps(e.public()) for e in tx.events)
    assert seat_view(after, "harkonnen")["receipts"][0]["card"] == bought
    amb = public_view(after)["ambassador"]["entry"]
    assert (amb["payer"], amb["amount"], amb["cards"]) == ("harkonnen", 3, 1)


def test_empty_deck_recycles_the_pile_once_and_stores_the_order():
    state = enter(room(deck=[], discard=["baliset", "shield-1", "kulon"],
                       seats=seats(emperor=None)))
    rng = Counting(3)
    tx = run(state, "ecaz", {"type": "ambassador_decide", "event": state.control.decision.event,
                             "trigger": True, "beneficiary": "ecaz"}, rng)
    assert rng.draws == 1
    reshuffle = next(e for e in tx.events if e.type == "DiscardReshuffled")
    assert sorted(reshuffle.order) == ["baliset", "kulon", "shield-1"]
    assert tx.state.seat("ecaz").hand == [reshuffle.order[0]]
    assert tx.state.discard == [] and tx.state.deck == reshuffle.order[1:]
    # Replaying the events draws nothing and lands on the same card.
    again = state.model_copy(deep=True)
    for e in tx.events:
        apply(again, e)
    assert again == tx.state


@pytest.mark.parametrize("case", ["empty_pool", "two_spice", "full_hand", "reserved"])
def test_an_impossible_purchase_is_one_generic_committed_no_op(case):
    kw: dict[str, Any] = {}
    harkonnen: dict[str, Any] = {"spice": 10, "hand": ["crysknife"], "ally": "ecaz"}
    if case == "empty_pool":
        kw = {"deck": [], "discard": []}
    elif case == "two_spice":
        harkonnen["spice"] = 2
    elif case == "full_hand":
        harkonnen["hand"] = ["crysknife", "stunner", "chaumas", "chaumurky", "ellaca-drug",
                             "gom-jabbar", "lasgun", "slip-tip"]
    else:
        kw = {"reservations": [{"faction": "harkonnen", "amount": 8, "reason": "auction"}]}
    state = enter(room(seats=seats(harkonnen=harkonnen), **kw))
    spice = state.total_spice()
    rng = Counting()
    tx = run(state, "ecaz", {"type": "ambassador_decide", "event": state.control.decision.event,
                             "trigger": True, "beneficiary": "harkonnen"}, rng)
    assert types(tx) == ["AmbassadorTriggered", "AmbassadorNoEffect", "AmbassadorEntryClosed"]
    assert rng.draws == 0
    after = tx.state
    assert after.seat("harkonnen") == state.seat("harkonnen") and after.bank == state.bank
    assert after.receipts == [] and after.ambassadors.used == ["richese"]
    assert "arrakeen" not in after.ambassadors.placed
    # Every failure reads the same in public: nothing says which condition failed.
    assert [(e.type, e.public()) for e in tx.events][1] == (
        "AmbassadorNoEffect", {"event": state.control.decision.event})
    conserved(after, spice)


# --- child stages ---------------------------------------------------------------------


def test_emperor_income_allowed_pays_from_the_bank_without_charging_twice():
    state = enter(room(seats=seats(atreides=["karama-2"])))
    tx = trigger(state, "ecaz")
    mid = tx.state
    w = mid.control.response
    assert w is not None and w.kind == "ambassador_income"
    assert mid.receipts[0].stage == "income"
    # Every seat with a card but the Emperor, whose advantage is at stake.
    assert asked(mid) == ["ecaz", "harkonnen", "atreides"]
    tx = allow(mid)
    assert "EmperorIncomePaid" in types(tx)
    after = tx.state
    assert after.seat("emperor").spice == 13 and after.seat("ecaz").spice == 7
    assert after.bank == state.bank and after.receipts[0].stage == "finish"
    assert after.control.response is None and after.ambassadors.entry is None


def test_emperor_income_cancelled_by_a_printed_karama_leaves_the_payment_in_the_bank():
    state = enter(room(seats=seats(atreides=["karama-2"])))
    mid = trigger(state, "ecaz").state
    tx = answer(mid, "atreides", "karama-2")
    assert "EmperorIncomePaid" not in types(tx)
    after = tx.state
    assert after.seat("emperor").spice == 10 and after.bank == state.bank + 3
    assert after.discard[-1] == "karama-2" and after.seat("ecaz").spice == 7
    assert after.seat("ecaz").hand == [mid.receipts[0].card]  # the purchase stands


@pytest.mark.parametrize("mode, eligible", [("advanced", True), ("basic", False)])
def test_bene_gesserit_worthless_card_cancels_only_in_advanced(mode, eligible):
    state = enter(room(mode=mode, seats=seats(bene_gesserit=["kulon"])))
    mid = trigger(state, "ecaz").state
    # Asked either way: who is asked never depends on the cards held.
    assert asked(mid) == ["ecaz", "harkonnen", "bene_gesserit"]
    if not eligible:
        assert rejected(mid, "bene_gesserit", {"type": "respond", "event": window(mid),
                                               "action": "karama", "card": "kulon"}
                        ).code == "not_eligible"
        assert allow(mid).state.seat("emperor").spice == 13
        return
    after = answer(mid, "bene_gesserit", "kulon").state
    assert after.seat("emperor").spice == 10 and "kulon" in after.discard


def test_emperor_absent_or_buying_gets_no_income():
    absent = trigger(enter(room(seats=seats(emperor=None)))).state
    assert absent.receipts[0].emperor is None and absent.control.response is None
    allied = seats(emperor={"spice": 10, "hand": [], "ally": "ecaz"},
                   ecaz={"spice": 10, "hand": [], "ally": "emperor"},
                   harkonnen={"spice": 5, "hand": [], "ally": None})
    state = enter(room(seats=allied))
    tx = trigger(state, "emperor")
    assert "ResponseWindowOpened" not in types(tx) and "EmperorIncomePaid" not in types(tx)
    assert tx.state.receipts[0].emperor is None and tx.state.seat("emperor").spice == 7


@pytest.mark.parametrize("held, bought, bonus", [(6, True, True), (7, True, False),
                                                 (8, False, False)])
def test_harkonnen_at_six_seven_and_eight_cards(held, bought, bonus):
    state = enter(room(seats=seats(emperor=None, harkonnen=HARK[:held],
                                   atreides=["karama-2"])))
    tx = trigger(state, "harkonnen")
    after = tx.state
    opened = after.control.response
    assert (opened is not None) == bonus
    assert len(after.seat("harkonnen").hand) == held + (1 if bought else 0)
    assert bool(after.receipts) == bought
    if bonus:
        assert opened.kind == "ambassador_bonus" and after.receipts[0].stage == "bonus"
        after = answer(after, "atreides").state
        assert len(after.seat("harkonnen").hand) == 8
    if bought:
        assert after.receipts[0].stage == "finish" and after.seat("harkonnen").spice == 7


def test_harkonnen_bonus_window_closes_by_itself_and_draws_when_nobody_may_cancel():
    state = enter(room(seats=seats(emperor=None, harkonnen=HARK[:6], atreides=[])))
    tx = trigger(state, "harkonnen")
    assert types(tx).count("ResponseWindowOpened") == 1
    assert "HarkonnenBonusResolved" in types(tx)
    after = tx.state
    assert len(after.seat("harkonnen").hand) == 8 and after.seat("harkonnen").spice == 7
    assert after.receipts[0].bonus in after.seat("harkonnen").hand
    assert public_view(after)["ambassador"]["entry"] is None


def test_harkonnen_bonus_allowed_and_cancelled_with_a_printed_karama():
    state = enter(room(seats=seats(harkonnen=HARK[:5])))
    mid = trigger(state, "harkonnen").state
    assert asked(mid) == ["harkonnen"]  # income: the only other seat with a card
    mid = allow(mid).state
    assert mid.control.response is not None and mid.control.response.kind == "ambassador_bonus"
    assert mid.seat("emperor").spice == 13
    allowed = answer(mid, "emperor").state
    assert len(allowed.seat("harkonnen").hand) == 7 and allowed.receipts[0].bonus is not None
    cancelled = answer(mid, "emperor", "karama-1").state
    assert len(cancelled.seat("harkonnen").hand) == 6 and cancelled.receipts[0].bonus is None
    assert cancelled.discard[-1] == "karama-1" and cancelled.ambassadors.entry is None


@pytest.mark.parametrize("mode", ["advanced", "basic"])
def test_bonus_cancelled_by_bene_gesserit_worthless_card_only_in_advanced(mode):
    state = enter(room(mode=mode, seats=seats(harkonnen=HARK[:5], emperor=None,
                                              bene_gesserit=["trip-to-gamont"])))
    mid = trigger(state, "harkonnen").state
    assert mid.control.response.kind == "ambassador_bonus"
    if mode == "basic":
        after = answer(mid, "bene_gesserit").state  # it can only pass
        assert after.control.response is None and len(after.seat("harkonnen").hand) == 7
        assert after.receipts[0].bonus is not None
        return
    after = answer(mid, "bene_gesserit", "trip-to-gamont").state
    assert len(after.seat("harkonnen").hand) == 6 and after.receipts[0].bonus is None


def test_a_hand_changed_during_income_decides_the_bonus():
    # At 7 the purchase fills the hand; a discard during income makes room again.
    state = enter(room(seats=seats(harkonnen=HARK[:7], atreides=["karama-2"])))
    mid = trigger(state, "harkonnen").state
    assert mid.control.response.kind == "ambassador_income"
    mid = run(mid, "harkonnen", {"type": "discard", "card": "crysknife"}).state
    after = allow(mid).state
    assert after.control.response is not None and after.control.response.kind == (
        "ambassador_bonus")
    # At 6 the bonus would come, but a draw during income fills the hand first.
    state = enter(room(seats=seats(harkonnen=HARK[:6], atreides=["karama-2"])))
    mid = trigger(state, "harkonnen").state
    mid = run(mid, "harkonnen", {"type": "draw"}).state
    tx = allow(mid)
    assert "HarkonnenBonusResolved" not in types(tx) and tx.state.control.response is None
    assert tx.state.receipts[0].stage == "finish" and len(tx.state.seat("harkonnen").hand) == 8


def test_capacity_is_rechecked_when_the_bonus_window_resolves():
    state = enter(room(seats=seats(harkonnen=HARK[:6], emperor=None,
                                   atreides=["karama-2"])))
    mid = trigger(state, "harkonnen").state
    assert mid.control.response.kind == "ambassador_bonus"
    mid = run(mid, "harkonnen", {"type": "draw"}).state  # 7 -> 8 while the window is open
    tx = answer(mid, "atreides")
    resolved = next(e for e in tx.events if e.type == "HarkonnenBonusResolved")
    assert resolved.card is None and len(tx.state.seat("harkonnen").hand) == 8


def test_a_karama_spent_during_income_becomes_the_bonus_card():
    state = enter(room(deck=["shield-2"], discard=[],
                       seats=seats(harkonnen=HARK[:4], atreides=["karama-2"])))
    mid = trigger(state, "harkonnen").state
    assert mid.deck == [] and mid.discard == []
    mid = answer(mid, "atreides", "karama-2").state  # cancels the income
    assert mid.discard == ["karama-2"] and mid.control.response.kind == "ambassador_bonus"
    tx = answer(mid, "emperor")
    assert "DiscardReshuffled" in types(tx)
    after = tx.state
    assert "karama-2" in after.seat("harkonnen").hand
    assert after.receipts[0].bonus == "karama-2" and after.receipts[0].card == "shield-2"


def test_an_empty_bonus_pool_gives_nothing_and_the_purchase_stands():
    state = enter(room(deck=["shield-2"], discard=[], seats=seats(harkonnen=HARK[:4])))
    mid = allow(trigger(state, "harkonnen").state).state  # income
    tx = answer(mid, "emperor")
    resolved = next(e for e in tx.events if e.type == "HarkonnenBonusResolved")
    assert resolved.card is None and tx.state.seat("harkonnen").hand[-1] == "shield-2"


def test_responses_bind_to_the_open_window_and_eligible_seats():
    state = enter(room(seats=seats(atreides=["karama-2"])))
    mid = trigger(state, "ecaz").state
    event = window(mid)
    assert rejected(mid, "emperor", {"type": "respond", "event": event,
                                     "action": "pass"}).code == "not_eligible"
    # A seat without a Karama is asked all the same, and can only pass.
    assert rejected(mid, "harkonnen", {"type": "respond", "event": event, "action": "karama",
                                       "card": "crysknife"}).code == "not_eligible"
    assert run(mid, "harkonnen", {"type": "respond", "event": event, "action": "pass"})
    assert rejected(mid, "atreides", {"type": "respond", "event": "e1",
                                      "action": "pass"}).code == "stale_event"
    assert rejected(mid, "atreides", {"type": "respond", "event": event, "action": "karama",
                                      "card": "karama-1"}).code == "not_in_hand"
    # Messages never name another seat's cards or spice.
    rej = rejected(mid, "atreides", {"type": "respond", "event": event, "action": "karama",
                                     "card": "karama-1"})
    assert "emperor" not in rej.message


def test_duplicate_final_allowances_resolve_once():
    state = enter(room(seats=seats(harkonnen=HARK[:5], atreides=["karama-2"])), via="worm")
    mid = allow(trigger(state, "harkonnen").state).state  # income allowed
    assert asked(mid) == ["emperor", "atreides"]  # the bonus
    final = {"type": "respond", "event": window(mid), "action": "pass"}
    mid = run(mid, "atreides", final).state
    tx = run(mid, "emperor", final)
    done = tx.state
    assert rejected(done, "emperor", final).code == "stale_event"
    assert rejected(done, "atreides", final).code == "stale_event"
    assert rejected(mid, "atreides", final).code == "not_eligible"  # already passed
    assert types(tx).count("WormResumed") == 1 and types(tx).count("HarkonnenBonusResolved") == 1
    assert done.seat("emperor").spice == 13 and done.seat("harkonnen").spice == 7


# --- the BG copy and the cohort ------------------------------------------------------------

BG_TOKENS: dict[str, Any] = {
    "placed": [{"token": "bene_gesserit", "territory": "carthag"}],
    "cohort": ["bene_gesserit", "fremen", "guild", "ixians", "tleilaxu"],
    "used": ["fremen", "guild", "ixians", "tleilaxu"],
    "copy_pool": ["richese", "emperor", "choam"],
}


def test_bg_copy_of_richese_and_no_premature_cohort_replenishment():
    state = enter(room(ambassadors=BG_TOKENS, seats=seats(atreides=["karama-2"])),
                  where="carthag")
    tx = trigger(state, "harkonnen")
    assert types(tx) == ["AmbassadorTriggered", "AmbassadorCopyOffered"]
    offered = tx.state
    d = offered.control.decision
    assert (d.kind, d.player) == ("ambassador_copy", "harkonnen")
    assert offered.ambassadors.removed == ["bene_gesserit"]
    assert seat_view(offered, "harkonnen")["decision"]["options"] == ["choam", "emperor",
                                                                      "richese"]
    assert "options" not in seat_view(offered, "ecaz")["decision"]
    assert "options" not in public_view(offered)["decision"]
    copy = {"type": "ambassador_copy", "event": d.event, "token": "richese"}
    assert rejected(offered, "ecaz", copy).code == "not_your_decision"
    assert rejected(offered, "harkonnen", {**copy, "token": "fremen"}).code == "not_eligible"
    assert rejected(offered, "harkonnen", {**copy, "token": "emperor"}).code == (
        "not_implemented")
    mid = run(offered, "harkonnen", copy).state
    # The fifth token is spent, but the cohort waits for the child stages.
    assert mid.control.response.kind == "ambassador_income"
    assert mid.ambassadors.cohort == BG_TOKENS["cohort"]
    assert mid.ambassadors.placed == {} and mid.receipts[0].buyer == "harkonnen"
    mid = allow(mid).state
    assert mid.control.response.kind == "ambassador_bonus"
    assert mid.ambassadors.cohort == BG_TOKENS["cohort"]
    rng = Counting(2)
    tx = run(mid, "atreides", {"type": "respond", "event": window(mid), "action": "pass"}, rng)
    tx = run(tx.state, "emperor", {"type": "respond", "event": window(tx.state),
                                   "action": "pass"}, rng)
    drawn = [e for e in tx.events if e.type == "AmbassadorCohortDrawn"]
    assert len(drawn) == 1 and rng.draws == 1
    amb = tx.state.ambassadors
    assert len(amb.cohort) == 5 and "bene_gesserit" not in amb.cohort
    assert "ecaz" not in amb.cohort and amb.used == [] and amb.removed == ["bene_gesserit"]
    assert sorted(amb.cohort + amb.supply) == sorted(
        ["atreides", "choam", "emperor", "fremen", "guild", "harkonnen", "ixians",
         "richese", "tleilaxu"])


def test_a_fifth_richese_token_replenishes_only_at_finish():
    tokens = {"placed": [{"token": "richese", "territory": "arrakeen"}],
              "cohort": ["richese", "fremen", "guild", "ixians", "tleilaxu"],
              "used": ["fremen", "guild", "ixians", "tleilaxu"], "copy_pool": []}
    state = enter(room(ambassadors=tokens, seats=seats(atreides=["karama-2"])))
    mid = trigger(state, "ecaz").state
    assert mid.ambassadors.used[-1] == "richese" and mid.ambassadors.cohort == tokens["cohort"]
    tx = allow(mid)
    assert types(tx).count("AmbassadorCohortDrawn") == 1
    assert "richese" not in tx.state.ambassadors.used


# --- the Box interrupts a window ------------------------------------------------------------


def test_a_box_search_suspends_and_restores_a_window_with_its_passes():
    hands = seats(atreides=["karama-2"], bene_gesserit=["kulon"],
                  richese={"spice": 10, "hand": [BOX]}, emperor={"spice": 10, "hand": []})
    state = enter(room(seats=hands, discard=["richese-karama", "shield-1"]))
    mid = trigger(state, "ecaz").state
    w = mid.control.response
    assert w.kind == "ambassador_income"
    mid = answer(mid, "atreides").state
    before = mid.control.model_dump()
    assert before["response"]["passes"] == ["atreides"]
    opened = run(mid, "richese", {"type": "begin_search", "card": BOX}).state
    assert opened.control.response is None and opened.search is not None
    # While the search is open nothing in the ambassador flow advances.
    assert rejected(opened, "bene_gesserit", {"type": "respond", "event": w.event,
                                              "action": "pass"}).code == "locked"
    tx = run(opened, "richese", {"type": "select_card", "search": opened.search.event,
                                 "card": "richese-karama"})
    after = tx.state
    assert after.control.model_dump() == before
    # The searcher was asked before and after, whatever it took: by hand counts alone.
    waiting = ["ecaz", "harkonnen", "bene_gesserit", "richese"]
    assert asked(mid) == waiting and asked(after) == waiting
    after = allow(after, but=("richese",)).state
    after = answer(after, "richese", "richese-karama").state
    assert after.seat("emperor").spice == 10 and after.control.response is None


def test_a_box_search_restores_the_ambassador_decision_and_bonus_window():
    state = enter(room(seats=seats(harkonnen=HARK[:5], emperor=None,
                                   atreides={"spice": 10, "hand": ["karama-2", BOX]}),
                       discard=["shield-1", "kulon"]))
    decision = state.control.model_dump()
    opened = run(state, "atreides", {"type": "begin_search", "card": BOX}).state
    assert rejected(opened, "ecaz", {"type": "ambassador_decide",
                                     "event": decision["decision"]["event"], "trigger": True,
                                     "beneficiary": "harkonnen"}).code == "locked"
    restored = run(opened, "atreides", {"type": "select_card", "search": opened.search.event,
                                        "card": "kulon"}).state
    assert restored.control.model_dump() == decision
    mid = trigger(restored, "harkonnen").state
    assert mid.control.response.kind == "ambassador_bonus"
    done = answer(mid, "atreides").state
    assert done.control.response is None and len(done.seat("harkonnen").hand) == 7


def test_a_box_search_suspends_a_bonus_window_and_the_purchase_is_not_repeated():
    hands = seats(harkonnen=HARK[:5], atreides=["karama-2"],
                  richese={"spice": 10, "hand": [BOX]})
    state = enter(room(seats=hands, discard=["shield-1", "kulon"]))
    mid = allow(trigger(state, "harkonnen").state).state  # income allowed
    assert mid.control.response.kind == "ambassador_bonus"
    mid = answer(mid, "emperor").state
    saved = mid.control.model_dump()
    receipts = [r.model_dump() for r in mid.receipts]
    opened = run(mid, "richese", {"type": "begin_search", "card": BOX}).state
    tx = run(opened, "richese", {"type": "select_card", "search": opened.search.event,
                                 "card": "kulon"})
    assert "ResponseWindowClosed" not in types(tx)
    restored = tx.state
    assert restored.control.model_dump() == saved and saved["response"]["passes"] == ["emperor"]
    assert [r.model_dump() for r in restored.receipts] == receipts
    done = allow(restored).state
    assert done.seat("harkonnen").spice == 7 and len(done.seat("harkonnen").hand) == 7
    assert done.bank == state.bank + 2 + 3 - 3  # fee, purchase, income


# --- layouts ----------------------------------------------------------------------------


@pytest.mark.parametrize("tokens, message", [
    ({"placed": [{"token": "sardaukar", "territory": "arrakeen"}]}, "unknown ambassador"),
    ({"cohort": ["ecaz", "fremen"]}, "own"),
    ({"cohort": ["fremen"], "used": ["guild"]}, "outside the cohort"),
    ({"cohort": ["fremen", "guild", "ixians", "tleilaxu", "choam", "emperor"]}, "at most"),
    ({"cohort": ["fremen"], "removed": ["guild"]}, "BG"),
    ({"cohort": ["fremen"], "copy_pool": ["fremen"]}, "copy pool"),
    ({"placed": [{"token": "fremen", "territory": "carthag"},
                 {"token": "guild", "territory": "carthag"}]}, "more than once"),
])
def test_layout_rejects_bad_tokens(tokens, message):
    with pytest.raises(LayoutError, match=message):
        build_room(parse_layout(layout(ambassadors=tokens)), "r", Counting())


def test_ecaz_requires_ambassadors_and_ambassadors_require_ecaz():
    raw = layout()
    raw["ambassadors"] = None
    with pytest.raises(LayoutError, match="needs its ambassadors"):
        build_room(parse_layout(raw), "r", Counting())
    raw = layout(seats=seats(ecaz=None, harkonnen={"spice": 1, "hand": []}))
    with pytest.raises(LayoutError, match="only when ecaz"):
        build_room(parse_layout(raw), "r", Counting())


def test_a_layout_without_a_cohort_draws_five_into_the_room_created_event():
    raw = layout(ambassadors={"placed": []})
    created = build_room(parse_layout(raw), "r", Counting(5))
    amb = created.state["ambassadors"]
    assert len(amb["cohort"]) == 5 and "ecaz" not in amb["cohort"]
    assert sorted(amb["cohort"] + amb["supply"]) == sorted(
        t for t in ("atreides", "bene_gesserit", "choam", "emperor", "fremen", "harkonnen",
                    "ixians", "richese", "guild", "tleilaxu"))
    assert "bene_gesserit" not in amb["copy_pool"]
    assert set(amb["copy_pool"]) <= set(amb["supply"])


# --- conservation under any interleaving ----------------------------------------------------

MOVES = st.lists(st.tuples(st.sampled_from(["pass", "karama", "draw", "discard", "box",
                                            "select"]),
                           st.sampled_from(["harkonnen", "emperor", "atreides",
                                            "bene_gesserit", "ecaz"])),
                 max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(moves=MOVES, beneficiary=st.sampled_from(["ecaz", "harkonnen"]),
       held=st.integers(min_value=0, max_value=7), deck=st.booleans())
def test_spice_and_cards_are_conserved_at_every_version(moves, beneficiary, held, deck):
    hands = seats(harkonnen=HARK[:held], atreides={"spice": 4, "hand": ["karama-2", BOX]},
                  bene_gesserit=["kulon"])
    kw: dict[str, Any] = {"deck": ["shield-2"], "discard": ["baliset"]} if deck else {}
    state = enter(room(seats=hands, **kw), via="worm")
    spice = state.total_spice()
    versions = [state]
    state = trigger(state, beneficiary).state
    versions.append(state)
    for action, seat in moves:
        try:
            s = state
            if action in ("pass", "karama") and s.control.response is not None:
                cards = [c for c in s.seat(seat).hand if c in ("karama-1", "karama-2", "kulon")]
                cmd: dict[str, Any] = {"type": "respond", "event": s.control.response.event,
                                       "action": "pass"}
                if action == "karama" and cards:
                    cmd.update(action="karama", card=cards[0])
            elif action == "draw":
                cmd = {"type": "draw"}
            elif action == "discard" and s.seat(seat).hand:
                cmd = {"type": "discard", "card": s.seat(seat).hand[-1]}
            elif action == "box":
                seat = "atreides"
                cmd = {"type": "begin_search", "card": BOX}
            elif action == "select" and s.search is not None:
                seat = s.search.owner
                pick = next(c for c in s.search.discard if c != BOX)
                cmd = {"type": "select_card", "search": s.search.event, "card": pick}
            else:
                continue
            tx = run(s, seat, cmd)
        except Rejection:
            continue
        # Every intermediate version too, by applying the events one at a time.
        step = state.model_copy(deep=True)
        for e in tx.events:
            apply(step, e)
            conserved(step, spice)
        state = tx.state
        versions.append(state)
    for v in versions:
        conserved(v, spice)
    receipts = state.receipts
    assert len(receipts) <= 1
    if receipts:
        assert receipts[0].amount == 3


def test_replay_of_the_whole_flow_draws_no_randomness():
    state = enter(room(seats=seats(harkonnen=HARK[:5], atreides=["karama-2"])), via="worm")
    events = []
    tx = trigger(state, "harkonnen")
    events += tx.events
    s = tx.state
    while s.control.response is not None:
        seat = public_view(s)["response"]["waiting"][0]
        tx = answer(s, seat)
        events += tx.events
        s = tx.state
    again = state.model_copy(deep=True)
    for e in events:
        apply(again, e)
    assert again == s


# --- copied-save mutations: a malformed or moved-on state fails closed --------------------


def test_a_window_or_decision_from_another_phase_is_stale():
    state = enter(room(seats=seats(atreides=["karama-2"])))
    moved = state.model_copy(deep=True)
    moved.phase = 7
    assert rejected(moved, "ecaz", {"type": "ambassador_decide",
                                    "event": state.control.decision.event, "trigger": True,
                                    "beneficiary": "ecaz"}).code == "stale_event"
    mid = trigger(state, "ecaz").state
    moved = mid.model_copy(deep=True)
    moved.turn = 4
    assert rejected(moved, "atreides", {"type": "respond", "event": window(mid),
                                        "action": "pass"}).code == "stale_event"


@pytest.mark.parametrize("damage", ["no_receipt", "other_entry", "wrong_stage"])
def test_a_window_that_no_longer_matches_its_receipt_fails_closed(damage):
    state = enter(room(seats=seats(atreides=["karama-2"])))
    mid = trigger(state, "ecaz").state
    broken = mid.model_copy(deep=True)
    if damage == "no_receipt":
        broken.receipts = []
    elif damage == "other_entry":
        broken.control.response.data["entry"] = "e1"
    else:
        broken.receipts[0].stage = "bonus"
    broken = allow(broken, but=("atreides",)).state  # the last pass closes the window
    rej = rejected(broken, "atreides", {"type": "respond", "event": window(mid),
                                        "action": "pass"})
    assert rej.code == "ambassador_invalid"


def test_a_semuta_reaction_to_the_spent_karama_waits_behind_the_purchase():
    hands = seats(harkonnen=HARK[:5], atreides=["karama-2"],
                  richese={"spice": 5, "hand": ["semuta-drug"]})
    state = enter(room(seats=hands))
    mid = trigger(state, "harkonnen").state
    tx = answer(mid, "atreides", "karama-2")  # cancels the income
    after = tx.state
    # The bonus window holds the slot; the Semuta window is queued, not overwritten.
    assert after.control.response.kind == "ambassador_bonus"
    assert after.semuta is not None and len(after.semuta.queue) == 1
    done = allow(after).state
    assert done.ambassadors.entry is None
    assert done.control.response is not None and done.control.response.kind == "semuta"
