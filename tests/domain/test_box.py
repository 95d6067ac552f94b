"""The Nullentropy Box rules (RULES 3.1-3.4), in the domain, with no storage."""

from __future__ import annotations

import pytest

from dune_ledger.domain import catalog
from dune_ledger.domain.catalog import Card
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.state import Question, QuestionFacts, RoomState
from dune_ledger.domain.views import public_view, seat_view
from tests.support import Counting, layout, rejected, run, state_of

BOX = "nullentropy-box"


def begin(state: RoomState, actor: str = "richese", card: str = BOX):
    return run(state, actor, {"type": "begin_search", "card": card})


def test_begin_pays_once_and_opens_a_search_without_shuffling():
    state = state_of(layout())
    rng = Counting()
    tx = run(state, "richese", {"type": "begin_search", "card": BOX}, rng)
    assert [e.type for e in tx.events] == ["FeePaid", "SearchOpened"]
    assert rng.draws == 0
    after = tx.state
    assert after.seat("richese").spice == 8 and after.bank == state.bank + 2
    assert after.search is not None and after.search.discard == state.discard
    assert after.discard == state.discard and BOX in after.seat("richese").hand
    assert after.control.decision is not None
    assert after.control.decision.kind == "nullentropy"
    assert after.control.decision.player == "richese"


def test_select_one_fee_one_shuffle_box_on_top():
    state = begin(state_of(layout())).state
    rng = Counting()
    tx = run(state, "richese",
             {"type": "select_card", "search": state.search.event, "card": "maula-pistol"}, rng)
    assert [e.type for e in tx.events] == [
        "CardRetrieved", "PileShuffled", "BoxDiscarded", "SearchClosed"]
    assert rng.draws == 1
    after = tx.state
    assert after.discard[-1] == BOX
    assert sorted(after.discard[:-1]) == ["baliset", "shield-1"]
    assert after.seat("richese").hand == ["crysknife", "maula-pistol"]
    assert after.seat("richese").spice == 8  # no second fee
    assert after.search is None


@pytest.mark.parametrize("card", ["crysknife", "ellaca-drug", "lasgun", "shield-3", "snooper-1",
                                  "cheap-hero-1", "karama-2", "truthtrance-1", "la-la-la",
                                  "family-atomics", "poison-tooth", "artillery-strike"])
def test_every_non_box_category_is_selectable(card):
    raw = layout(discard=[card, "kulon"])
    raw["seats"][0]["hand"] = [BOX]
    state = begin(state_of(raw)).state
    tx = run(state, "richese", {"type": "select_card", "search": state.search.event,
                                "card": card})
    assert card in tx.state.seat("richese").hand


@pytest.fixture
def extra_boxes(monkeypatch):
    """Two more Boxes, one by name and one by effect: the rule excludes every Box."""
    by_name = Card("nullentropy-box-2", "Nullentropy Box", "special", None, None,
                   ("choam_richese",), "cache")
    by_effect = Card("nullentropy-replica", "Replica", "special", None, "nullentropy_box",
                     ("choam_richese",), "cache")
    monkeypatch.setitem(catalog.CARDS, by_name.id, by_name)
    monkeypatch.setitem(catalog.CARDS, by_effect.id, by_effect)
    catalog.room_cards.cache_clear()
    yield
    catalog.room_cards.cache_clear()


def test_every_box_is_excluded(extra_boxes):
    raw = layout(discard=["nullentropy-box-2", "kulon", "nullentropy-replica", "baliset"])
    state = begin(state_of(raw)).state
    view = seat_view(state, "richese")
    offered = {c["id"] for c in view["nullentropy"]["search"]["cards"]}
    assert offered == {"kulon", "baliset"}
    for box in ("nullentropy-box-2", "nullentropy-replica"):
        err = rejected(state, "richese",
                       {"type": "select_card", "search": state.search.event, "card": box})
        assert err.code == "not_eligible"


def test_a_pile_of_only_boxes_is_refused_before_payment(extra_boxes):
    state = state_of(layout(discard=["nullentropy-box-2", "nullentropy-replica"]))
    assert rejected(state, "richese", {"type": "begin_search", "card": BOX}).code == \
        "no_eligible_card"


def test_single_eligible_card_selects_in_the_same_command():
    state = state_of(layout(discard=["kulon"]))
    tx = begin(state)
    assert [e.type for e in tx.events] == [
        "FeePaid", "SearchOpened", "CardRetrieved", "PileShuffled", "BoxDiscarded",
        "SearchClosed"]
    assert tx.state.seat("richese").spice == 8
    assert tx.state.discard == [BOX]
    assert "kulon" in tx.state.seat("richese").hand


REJECTIONS = [
    # (why, layout changes, actor, card, code)
    ("unknown card", {}, "richese", "no-such-card", "unknown_card"),
    ("not a box", {}, "richese", "crysknife", "not_a_box"),
    ("box in another hand", {}, "emperor", BOX, "not_in_hand"),
    ("empty pile", {"discard": []}, "richese", BOX, "no_eligible_card"),
    ("poor", {"seat0": {"spice": 1}}, "richese", BOX, "insufficient_spice"),
    ("reserved", {"reservations": [{"faction": "richese", "amount": 9, "reason": "auction"}]},
     "richese", BOX, "insufficient_spice"),
    ("over limit", {"seat0": {"hand": [BOX, "crysknife", "stunner", "kulon", "hajr"]}},
     "richese", BOX, "hand_over_limit"),
    ("battle plan", {"commitments": [{"card": BOX, "kind": "battle_plan"}]}, "richese", BOX,
     "card_committed"),
    ("truthtrance", {"truthtrance": True}, "richese", BOX, "truthtrance_pending"),
]


@pytest.mark.parametrize(("why", "changes", "actor", "card", "code"), REJECTIONS,
                         ids=[r[0] for r in REJECTIONS])
def test_every_begin_rejection_changes_nothing(why, changes, actor, card, code):
    raw = layout()
    seat0 = changes.pop("seat0", None) if changes else None
    changes = dict(changes)
    truthtrance = changes.pop("truthtrance", False)
    seat0 = seat0 or {}
    raw["seats"][0].update(seat0)
    raw.update(changes)
    state = state_of(raw)
    if truthtrance:
        facts = QuestionFacts(event="e9", asker="emperor", target="richese", question="?",
                              card="truthtrance-1")
        state.truthtrance = Question(**dict(facts), turn=2, phase=6, public=facts)
    err = rejected(state, actor, {"type": "begin_search", "card": card})
    assert err.code == code
    assert "shield-1" not in err.message and "maula" not in err.message


def test_box_in_the_cache_is_not_in_hand():
    raw = layout()
    raw["seats"][0]["hand"] = ["crysknife"]
    state = state_of(raw)
    assert BOX in state.cache
    assert rejected(state, "richese", {"type": "begin_search", "card": BOX}).code == \
        "not_in_hand"


def test_full_hand_exchange_at_the_limit():
    raw = layout()
    raw["seats"][0]["hand"] = [BOX, "crysknife", "stunner", "kulon"]
    state = state_of(raw)
    view = seat_view(state, "richese")["nullentropy"]
    assert view["blocked"] is None and view["full_hand_exchange"] is True
    assert "provisional" in view["notice"]
    state = begin(state).state
    assert seat_view(state, "richese")["nullentropy"]["full_hand_exchange"] is True
    tx = run(state, "richese", {"type": "select_card", "search": state.search.event,
                                "card": "baliset"})
    assert len(tx.state.seat("richese").hand) == 4


def test_promise_of_this_box_does_not_block_its_own_fee():
    raw = layout(reservations=[{"faction": "richese", "amount": 2, "reason": "truthtrance",
                                "box": BOX}])
    raw["seats"][0]["spice"] = 2
    tx = begin(state_of(raw))
    assert [e.type for e in tx.events][:3] == ["FeePaid", "PromiseFulfilled", "SearchOpened"]
    assert tx.state.reservations == []
    assert tx.state.seat("richese").spice == 0


def test_parent_control_restored_byte_for_byte():
    control = {
        "decision": {"kind": "ambassador_trigger", "event": "e1", "player": "ecaz", "turn": 2,
                     "phase": 6, "data": {"token": "richese", "territory": "arrakeen"}},
        "response": {"kind": "emperor_income", "event": "e1", "turn": 2, "phase": 6,
                     "passes": ["harkonnen"], "data": {"buyer": "richese"}},
        "pending_karama": {"card": "karama-1", "by": "emperor"},
        "phase_opening": {"phase": 6, "opened": True},
    }
    state = state_of(layout(control=control))
    before = state.control.model_dump_json()
    opened = begin(state).state
    assert opened.control.response is None and opened.control.pending_karama is None
    assert opened.search.parent.model_dump_json() == before
    closed = run(opened, "richese", {"type": "select_card", "search": opened.search.event,
                                     "card": "shield-1"}).state
    assert closed.control.model_dump_json() == before


LOCKED_COMMANDS = [
    {"type": "draw"},
    {"type": "discard", "card": "karama-1"},
    {"type": "begin_search", "card": BOX},
    {"type": "distrans", "card": "distrans", "give": "crysknife", "to": "emperor"},
    {"type": "offer_gift", "card": "crysknife", "to": "emperor"},
    {"type": "ask_truthtrance", "card": "truthtrance-1", "target": "emperor", "question": "?"},
    {"type": "enter_territory", "territory": "arrakeen", "via": "shipment"},
    {"type": "respond", "event": "e1", "action": "pass"},
    {"type": "guild_stop", "card": "karama-2"},
]


@pytest.mark.parametrize("seat", ["richese", "emperor", "harkonnen"])
@pytest.mark.parametrize("command", LOCKED_COMMANDS, ids=[c["type"] for c in LOCKED_COMMANDS])
def test_the_lock_refuses_every_gameplay_command_from_every_seat(seat, command):
    state = begin(state_of(layout())).state
    err = rejected(state, seat, command)
    assert err.code == "locked"


def test_the_lock_keeps_seat_control_available():
    state = begin(state_of(layout())).state
    tx = run(state, "emperor", {"type": "set_autopilot", "enabled": True, "profile": "hard"})
    assert [e.type for e in tx.events] == ["AutopilotSet"]
    assert tx.state.search == state.search


def test_custody_primitives_refuse_while_a_search_is_open():
    from dune_ledger.domain.custody import discard_card, draw_card
    from dune_ledger.domain.rules import Tx

    state = begin(state_of(layout())).state
    for act in (lambda tx: draw_card(tx, "emperor"),
                lambda tx: discard_card(tx, "emperor", "karama-1")):
        tx = Tx(state, Counting())
        with pytest.raises(Rejection):
            act(tx)
        assert tx.events == []


def test_select_refusals_keep_the_paid_search_open():
    state = begin(state_of(layout())).state
    search = state.search.event
    assert rejected(state, "emperor", {"type": "select_card", "search": search,
                                       "card": "shield-1"}).code == "not_your_decision"
    assert rejected(state, "richese", {"type": "select_card", "search": "e999",
                                       "card": "shield-1"}).code == "stale_event"
    assert rejected(state, "richese", {"type": "select_card", "search": search,
                                       "card": "stunner"}).code == "unknown_card"
    closed = run(state, "richese", {"type": "select_card", "search": search,
                                    "card": "shield-1"}).state
    # A duplicate select after completion never executes twice.
    assert rejected(closed, "richese", {"type": "select_card", "search": search,
                                        "card": "baliset"}).code == "stale_event"


def test_a_malformed_restored_search_fails_closed():
    state = begin(state_of(layout())).state
    state.discard.append("lasgun")  # the pile no longer matches what was paid for
    state.deck.remove("lasgun")
    view = seat_view(state, "richese")
    assert view["nullentropy"]["search"]["cards"] is None
    err = rejected(state, "richese", {"type": "select_card", "search": state.search.event,
                                      "card": "shield-1"})
    assert err.code == "search_invalid"


def test_views_hide_the_search_from_everyone_but_its_owner():
    state = state_of(layout(discard=["baliset", "maula-pistol", "shield-1"]))
    assert seat_view(state, "emperor")["nullentropy"] is None
    opened = begin(state).state
    owner = seat_view(opened, "richese")["nullentropy"]["search"]
    # A stable display order (category, name), not the physical pile order.
    assert [c["id"] for c in owner["cards"]] == ["shield-1", "maula-pistol", "baliset"]
    for seat in ("emperor", "harkonnen"):
        text = str(seat_view(opened, seat))
        assert "maula-pistol" not in text and "'cards'" not in text
        assert seat_view(opened, seat)["decision"]["player"] == "richese"
    public = str(public_view(opened))
    assert "maula-pistol" not in public and "crysknife" not in public
    closed = run(opened, "richese", {"type": "select_card", "search": opened.search.event,
                                     "card": "maula-pistol"}).state
    assert seat_view(closed, "richese")["nullentropy"] is None
    assert "maula-pistol" not in str(seat_view(closed, "emperor"))
    assert "maula-pistol" not in str(public_view(closed))


def test_blocked_is_null_exactly_when_begin_is_accepted():
    for spice in (0, 1, 2, 3):
        raw = layout()
        raw["seats"][0]["spice"] = spice
        state = state_of(raw)
        blocked = seat_view(state, "richese")["nullentropy"]["blocked"]
        try:
            begin(state)
            accepted = True
        except Rejection:
            accepted = False
        assert (blocked is None) == accepted


def test_draw_recycles_the_pile_only_into_an_empty_deck():
    raw = layout(deck=["lasgun"], discard=["shield-1", "kulon"], removed=[])
    raw["richese_cache"] = None
    # Put every other card out of the way so the deck can be staged.
    from dune_ledger.domain.catalog import room_cards

    placed = {"nullentropy-box", "crysknife", "karama-1", "shield-2", "chaumas", "lasgun",
              "shield-1", "kulon"}
    raw["removed"] = [c.id for c in room_cards(("choam_richese",))
                      if c.zone == "deck" and c.id not in placed]
    state = state_of(raw)
    rng = Counting()
    first = run(state, "emperor", {"type": "draw"}, rng)
    assert [e.type for e in first.events] == ["CardDrawn"] and rng.draws == 0
    second = run(first.state, "emperor", {"type": "draw"}, rng)
    assert [e.type for e in second.events] == ["DiscardReshuffled", "CardDrawn"]
    assert rng.draws == 1
    assert len(second.state.deck) == 1 and second.state.discard == []


def test_not_in_hand_says_the_same_wherever_the_box_is():
    in_cache = layout()
    in_cache["seats"][0]["hand"] = ["crysknife"]
    messages = {
        rejected(state_of(raw), "emperor", {"type": "begin_search", "card": BOX}).message
        for raw in (layout(), in_cache)
    }
    assert len(messages) == 1
