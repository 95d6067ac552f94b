"""The Bidding round (RULES 10), in the domain, with no storage."""

from __future__ import annotations

from typing import Any

import pytest

from dune_ledger.domain.actions import actions
from dune_ledger.domain.bidding import round_of
from dune_ledger.domain.game import OPERATOR, zones
from dune_ledger.domain.state import RoomState
from dune_ledger.domain.views import public_view, seat_view
from tests.rules_support import close_search, open_search, without_search
from tests.support import layout, rejected, run, state_of, types

ORDER = ["emperor", "atreides", "harkonnen", "fremen"]


def seats(**over: dict[str, Any]) -> list[dict[str, Any]]:
    base = {
        "emperor": {"faction": "emperor", "spice": 10, "hand": ["karama-1"]},
        "atreides": {"faction": "atreides", "spice": 10, "hand": []},
        "harkonnen": {"faction": "harkonnen", "spice": 10, "hand": ["shield-1"]},
        # At its limit of 4: not eligible.
        "fremen": {"faction": "fremen", "spice": 3,
                   "hand": ["shield-2", "shield-3", "shield-4", "snooper-1"]},
    }
    for name, fields in over.items():
        base[name] = {**base.get(name, {"faction": name, "spice": 5, "hand": []}), **fields}
    return list(base.values())


def room(**kw: Any) -> RoomState:
    raw = layout(**{"expansions": ["choam_richese"], "phase": 4, "turn": 3,
                    "seats": seats(), "discard": ["baliset", "jubba-cloak"], **kw})
    return state_of(raw)


def opened(state: RoomState, order: list[str] | None = None) -> RoomState:
    order = order or [s.faction for s in state.seats]
    return run(state, OPERATOR, {"type": "open_bidding", "order": order}).state


def code(state: RoomState, actor: str, command: dict[str, Any]) -> str:
    return rejected(state, actor, command).code


def bidding(state: RoomState, seat: str | None = None) -> dict[str, Any]:
    view = public_view(state) if seat is None else seat_view(state, seat)
    return view["bidding"]  # type: ignore[no-any-return]


def pass_windows(state: RoomState) -> RoomState:
    """Every seat an open response window waits for passes."""
    while state.control.response is not None:
        seat = public_view(state)["response"]["waiting"][0]
        state = run(state, seat, {"type": "respond", "event": state.control.response.event,
                                  "action": "pass"}).state
    return state


def test_opening_deals_one_card_per_eligible_seat_into_the_auction():
    state = room()
    deck = list(state.deck)
    tx = run(state, OPERATOR, {"type": "open_bidding", "order": ORDER})
    assert types(tx) == ["BiddingOpened", "CardsDealt", "CardUp"]
    r = round_of(tx.state)
    assert r is not None and r.auction == deck[:3]  # fremen is full: three cards
    assert tx.state.deck == deck[3:]
    assert zones(tx.state)["auction"] == deck[:3]
    view = bidding(tx.state)
    assert view["eligible"] == ["emperor", "atreides", "harkonnen"]
    assert view["up"] == {"index": 1, "starter": "emperor", "turn": "emperor", "high": None,
                          "passed": []}
    assert view["cards_left"] == 3
    # Prescience: Atreides sees the card up; nobody else sees any auction card.
    assert bidding(tx.state, "atreides")["up"]["card"]["id"] == deck[0]
    for seat in ("emperor", "harkonnen", "fremen"):
        assert "card" not in bidding(tx.state, seat)["up"]
    assert tx.events[1].public() == {"count": 3}


@pytest.mark.parametrize("order", [
    ["emperor", "atreides", "harkonnen"],  # misses a seat
    ["emperor", "atreides", "harkonnen", "fremen", "fremen"],  # repeats one
    ["emperor", "atreides", "atreides", "fremen"],
    ["emperor", "atreides", "harkonnen", "ecaz"],  # not seated
])
def test_an_order_that_misses_or_repeats_a_seat_is_refused(order: list[str]):
    assert code(room(), OPERATOR, {"type": "open_bidding", "order": order}) == "invalid_command"


def test_opening_is_the_operators_in_phase_four_once_a_turn():
    assert code(room(phase=6), OPERATOR, {"type": "open_bidding", "order": ORDER}) \
        == "not_eligible"
    assert code(room(), "emperor", {"type": "open_bidding", "order": ORDER}) \
        == "invalid_command"  # not a seat's command
    state = opened(room(), ORDER)
    assert code(state, OPERATOR, {"type": "open_bidding", "order": ORDER}) == "not_eligible"
    closed = state
    for seat in ("emperor", "atreides", "harkonnen"):
        closed = run(closed, seat, {"type": "pass_bid"}).state
    assert round_of(closed) is None
    assert code(closed, OPERATOR, {"type": "open_bidding", "order": ORDER}) == "not_eligible"


def test_a_card_is_sold_when_the_turn_comes_back_to_the_high_bidder():
    state = opened(room(), ORDER)
    card = round_of(state).auction[0]  # type: ignore[union-attr]
    state = run(state, "emperor", {"type": "bid", "amount": 2}).state
    assert bidding(state)["up"]["turn"] == "atreides"
    state = run(state, "atreides", {"type": "pass_bid"}).state
    state = run(state, "harkonnen", {"type": "bid", "amount": 3}).state
    # Fremen is full: skipped.
    assert bidding(state)["up"]["turn"] == "emperor"
    assert bidding(state)["up"]["high"] == {"seat": "harkonnen", "amount": 3, "karama": False}
    state = run(state, "emperor", {"type": "pass_bid"}).state
    bank = state.bank
    tx = run(state, "atreides", {"type": "pass_bid"})
    assert types(tx) == ["BidPassed", "CardSold", "ReceiptAdvanced", "ResponseWindowOpened"]
    state = tx.state
    assert card in state.seat("harkonnen").hand
    assert state.seat("harkonnen").spice == 7 and state.bank == bank + 3
    assert tx.events[1].public() == {"event": tx.events[1].event, "seat": "harkonnen",
                                     "amount": 3, "karama": False, "emperor": "emperor"}
    assert public_view(state)["response"]["kind"] == "bidding_income"
    # The income, then the Harkonnen bonus, then the next card, started by the seat
    # after the last starter.
    state = pass_windows(state)
    assert state.seat("emperor").spice == 13
    assert len(state.seat("harkonnen").hand) == 3  # the bonus card
    assert bidding(state)["up"]["starter"] == "atreides"
    assert bidding(state)["cards_left"] == 2


def test_every_refusal_of_a_bid_changes_nothing():
    state = opened(room(), ORDER)
    assert code(state, "atreides", {"type": "bid", "amount": 1}) == "not_your_turn"
    assert code(state, "emperor", {"type": "bid", "amount": 11}) == "insufficient_spice"
    assert code(state, "emperor", {"type": "bid", "amount": 0}) == "invalid_command"
    assert code(state, "emperor", {"type": "bid", "amount": "2"}) == "invalid_command"
    assert code(state, "emperor", {"type": "bid", "amount": 1, "karama": "karama-2"}) \
        == "not_in_hand"
    state = run(state, "emperor", {"type": "bid", "amount": 4}).state
    assert code(state, "atreides", {"type": "bid", "amount": 4}) == "bid_too_low"
    assert code(state, "fremen", {"type": "pass_bid"}) == "not_your_turn"
    assert code(room(), "emperor", {"type": "pass_bid"}) == "no_round"
    assert code(room(), "emperor", {"type": "bid_support", "amount": 1}) == "no_round"


def test_everyone_passing_returns_the_cards_on_top_in_dealt_order():
    state = room()
    deck = list(state.deck)
    state = opened(state, ORDER)
    state = run(state, "emperor", {"type": "pass_bid"}).state
    state = run(state, "atreides", {"type": "pass_bid"}).state
    tx = run(state, "harkonnen", {"type": "pass_bid"})
    assert types(tx) == ["BidPassed", "CardsReturned", "BiddingClosed"]
    assert tx.state.deck == deck
    assert public_view(tx.state)["bidding"] is None
    assert round_of(tx.state) is None


def test_a_pass_does_not_end_a_seats_part_in_the_card():
    state = opened(room(), ORDER)
    state = run(state, "emperor", {"type": "pass_bid"}).state
    state = run(state, "atreides", {"type": "bid", "amount": 1}).state
    state = run(state, "harkonnen", {"type": "pass_bid"}).state
    state = run(state, "emperor", {"type": "bid", "amount": 2}).state
    assert bidding(state)["up"]["high"]["seat"] == "emperor"
    state = run(state, "atreides", {"type": "pass_bid"}).state
    tx = run(state, "harkonnen", {"type": "pass_bid"})
    assert "CardSold" in types(tx)


def test_a_karama_bid_wins_for_nothing_and_is_discarded():
    state = opened(room(), ORDER)
    tx = run(state, "emperor", {"type": "bid", "amount": 50, "karama": "karama-1"})
    assert tx.events[0].public()["karama"] is True
    state = tx.state
    assert state.committed("karama-1") == "karama_bid"
    assert code(state, "emperor", {"type": "discard", "card": "karama-1"}) == "card_committed"
    state = run(state, "atreides", {"type": "pass_bid"}).state
    tx = run(state, "harkonnen", {"type": "pass_bid"})
    state = tx.state
    assert types(tx)[:3] == ["BidPassed", "CardSold", "CardDiscarded"]
    assert state.seat("emperor").spice == 10 and "karama-1" in state.discard
    assert state.committed("karama-1") is None


def test_an_outbid_karama_is_freed():
    state = opened(room(), ORDER)
    state = run(state, "emperor", {"type": "bid", "amount": 1, "karama": "karama-1"}).state
    state = run(state, "atreides", {"type": "bid", "amount": 2}).state
    assert state.committed("karama-1") is None


def test_karama_buy_takes_the_card_at_once():
    state = opened(room(), ORDER)
    card = round_of(state).auction[0]  # type: ignore[union-attr]
    tx = run(state, "emperor", {"type": "karama_buy", "karama": "karama-1"})
    assert types(tx)[:3] == ["KaramaBought", "CardSold", "CardDiscarded"]
    assert card in tx.state.seat("emperor").hand
    assert code(state, "emperor", {"type": "karama_buy", "karama": "shield-1"}) == "not_in_hand"
    worthless = room(seats=seats(emperor={"hand": ["kulon"]}))
    worthless = opened(worthless, ORDER)
    assert code(worthless, "emperor", {"type": "karama_buy", "karama": "kulon"}) \
        == "not_eligible"


def test_ally_support_is_reserved_public_and_pays_after_the_buyers_own_spice():
    state = room(seats=seats(atreides={"spice": 2, "ally": "emperor"},
                             emperor={"ally": "atreides"}))
    state = opened(state, ORDER)
    tx = run(state, "emperor", {"type": "bid_support", "amount": 5})
    state = tx.state
    assert seat_view(state, "emperor")["me"]["reserved"] == 5
    assert bidding(state)["support"] == {"emperor": 5}
    assert code(state, "emperor", {"type": "bid", "amount": 6}) == "insufficient_spice"
    state = run(state, "emperor", {"type": "pass_bid"}).state
    assert code(state, "atreides", {"type": "bid", "amount": 8}) == "insufficient_spice"
    state = run(state, "atreides", {"type": "bid", "amount": 6}).state
    # Support stands while the ally holds the high bid.
    assert code(state, "emperor", {"type": "bid_support", "amount": 1}) == "not_eligible"
    state = run(state, "harkonnen", {"type": "pass_bid"}).state
    state = run(state, "emperor", {"type": "pass_bid"}).state
    assert state.seat("atreides").spice == 0  # its own 2 first
    assert state.seat("emperor").spice == 6  # then 4 of the support
    assert seat_view(state, "emperor")["me"]["reserved"] == 1
    # The round ends: support released.
    while round_of(state) is not None:
        state = pass_windows(state)
        r = round_of(state)
        if r is None:
            break
        assert r.up is not None
        state = run(state, r.up.turn, {"type": "pass_bid"}).state
    assert seat_view(state, "emperor")["me"]["reserved"] == 0


def test_a_seat_that_fills_up_is_skipped():
    state = room(seats=seats(harkonnen={"hand": ["shield-1", "chaumas", "crysknife",
                                                  "lasgun", "stunner", "slip-tip"]},
                             emperor={"spice": 0}))
    state = opened(state, ORDER)
    # Harkonnen at 6 buys a 7th and its bonus makes 8: full.
    state = run(state, "emperor", {"type": "pass_bid"}).state
    state = run(state, "atreides", {"type": "pass_bid"}).state
    state = run(state, "harkonnen", {"type": "bid", "amount": 1}).state
    state = run(state, "emperor", {"type": "pass_bid"}).state
    state = run(state, "atreides", {"type": "pass_bid"}).state
    state = pass_windows(state)
    assert len(state.seat("harkonnen").hand) == 8
    assert "harkonnen" not in bidding(state)["eligible"]
    up = bidding(state)["up"]
    assert up["starter"] == "atreides"
    state = run(state, "atreides", {"type": "pass_bid"}).state
    assert bidding(state)["up"]["turn"] == "emperor"


def test_the_ixians_see_the_dealt_cards_and_set_one_aside():
    state = room(seats=seats(ixians={"spice": 5, "hand": []}))
    order = ["emperor", "atreides", "harkonnen", "fremen", "ixians"]
    deck = list(state.deck)
    tx = run(state, OPERATOR, {"type": "open_bidding", "order": order})
    assert types(tx) == ["BiddingOpened", "CardsDealt", "IxiansChoosing"]
    state = tx.state
    assert [c["id"] for c in bidding(state, "ixians")["dealt"]] == deck[:5]
    assert "dealt" not in bidding(state, "atreides")
    assert code(state, "emperor", {"type": "bid", "amount": 1}) == "round_waiting"
    assert code(state, "ixians", {"type": "ix_set_aside", "card": deck[6],
                                  "where": "top"}) == "unknown_card"
    assert code(state, "emperor", {"type": "ix_set_aside", "card": deck[0],
                                   "where": "top"}) == "not_eligible"
    listed = [a for a in actions(state, "ixians") if a["type"] == "ix_set_aside"]
    assert len(listed) == 10
    tx = run(state, "ixians", {"type": "ix_set_aside", "card": deck[2], "where": "bottom"})
    assert types(tx) == ["CardSetAside", "AuctionShuffled", "CardUp"]
    assert tx.state.deck[-1] == deck[2]
    assert sorted(round_of(tx.state).auction) == sorted(deck[:2] + deck[3:5])  # type: ignore[union-attr]
    assert tx.events[0].public() == {"seat": "ixians", "where": "bottom"}


def test_the_ixians_ally_may_replace_the_card_it_bought():
    state = room(seats=seats(ixians={"spice": 5, "hand": [], "ally": "atreides"},
                             atreides={"ally": "ixians"}))
    order = ["atreides", "emperor", "harkonnen", "fremen", "ixians"]
    state = opened(state, order)
    r = round_of(state)
    assert r is not None
    state = run(state, "ixians", {"type": "ix_set_aside", "card": r.dealt[0],
                                  "where": "top"}).state
    card = round_of(state).auction[0]  # type: ignore[union-attr]
    state = run(state, "atreides", {"type": "bid", "amount": 1}).state
    for seat in ("emperor", "harkonnen", "ixians"):
        state = run(state, seat, {"type": "pass_bid"}).state
    state = pass_windows(state)  # the income
    decision = public_view(state)["decision"]
    assert decision["kind"] == "ix_replace" and decision["player"] == "atreides"
    assert code(state, "emperor", {"type": "ix_replace", "event": decision["event"],
                                   "accept": True}) == "not_your_decision"
    top = state.deck[0]
    tx = run(state, "atreides", {"type": "ix_replace", "event": decision["event"],
                                 "accept": True})
    assert card in tx.state.discard and top in tx.state.seat("atreides").hand
    assert "CardUp" in types(tx)


def test_a_search_during_a_round_suspends_it_and_restores_it_exactly():
    state = room(seats=seats(fremen={"hand": ["nullentropy-box"], "spice": 5}))
    state = opened(state, ORDER)
    state = run(state, "emperor", {"type": "bid", "amount": 2}).state
    searching = open_search(state, "fremen")
    assert code(searching, "atreides", {"type": "bid", "amount": 3}) == "locked"
    assert code(searching, "atreides", {"type": "pass_bid"}) == "locked"
    assert [a for a in actions(searching, "atreides") if a["type"] in ("bid", "pass_bid")] == []
    after = close_search(searching).state
    assert round_of(after) == round_of(state)
    assert without_search(after)["bidding"] == without_search(state)["bidding"]
    run(after, "atreides", {"type": "bid", "amount": 3})


def test_actions_offer_bids_bounded_by_what_the_seat_can_pay():
    state = opened(room(), ORDER)
    listed = actions(state, "emperor")
    bid = next(a for a in listed if a["type"] == "bid" and "karama" not in a)
    assert bid["free"]["amount"] == {"kind": "amount", "min": 1, "max": 10}
    assert {"type": "pass_bid"} in listed
    assert {"type": "karama_buy", "karama": "karama-1"} in listed
    assert not [a for a in actions(state, "atreides") if a["type"] in ("bid", "pass_bid")]


RICHESE_ORDER = ["emperor", "atreides", "harkonnen", "fremen", "richese"]


def with_richese(**over: dict[str, Any]) -> RoomState:
    return room(seats=seats(**{"richese": {"spice": 5, "hand": []}, **over}))


def test_richese_answers_first_and_the_round_waits():
    state = with_richese()
    tx = run(state, OPERATOR, {"type": "open_bidding", "order": RICHESE_ORDER})
    assert types(tx) == ["BiddingOpened"]
    state = tx.state
    assert code(state, "emperor", {"type": "bid", "amount": 1}) == "round_waiting"
    assert code(state, "emperor", {"type": "richese_sale", "when": "none"}) == "not_eligible"
    assert code(state, "richese", {"type": "sealed_bid", "amount": 1}) == "not_eligible"
    tx = run(state, "richese", {"type": "richese_sale", "when": "none"})
    assert types(tx) == ["RicheseSaleChosen", "CardsDealt", "CardUp"]
    assert len(round_of(tx.state).auction) == 4  # type: ignore[union-attr]


def sale_first(auction: str, **over: dict[str, Any]) -> RoomState:
    state = run(with_richese(**over), OPERATOR, {"type": "open_bidding",
                                                 "order": RICHESE_ORDER}).state
    tx = run(state, "richese", {"type": "richese_sale", "when": "first"})
    # One card fewer: the sale is one of the round's cards.
    assert types(tx) == ["RicheseSaleChosen", "CardsDealt", "SaleOpened"]
    assert len(round_of(tx.state).auction) == 3  # type: ignore[union-attr]
    state = tx.state
    assert code(state, "richese", {"type": "richese_offer", "card": "crysknife",
                                   "auction": auction}) == "not_eligible"
    tx = run(state, "richese", {"type": "richese_offer", "card": "ornithopter",
                                "auction": auction})
    assert tx.events[0].public()["card"] == "ornithopter"  # named: public
    return tx.state


def test_a_once_around_sale_goes_from_after_richese_round_to_richese_last():
    state = sale_first("once_around")
    sale = bidding(state)["sale"]
    assert sale["bidders"] == ["emperor", "atreides", "harkonnen", "richese"]
    assert sale["card"]["id"] == "ornithopter"
    assert code(state, "atreides", {"type": "bid", "amount": 1}) == "not_your_turn"
    assert code(state, "emperor", {"type": "bid", "amount": 1, "karama": "karama-1"}) \
        == "not_eligible"
    assert code(state, "emperor", {"type": "karama_buy", "karama": "karama-1"}) \
        == "round_waiting"
    state = run(state, "emperor", {"type": "bid", "amount": 2}).state
    state = run(state, "atreides", {"type": "pass_bid"}).state
    assert code(state, "harkonnen", {"type": "bid", "amount": 2}) == "bid_too_low"
    state = run(state, "harkonnen", {"type": "bid", "amount": 3}).state
    richese = state.seat("richese").spice
    tx = run(state, "richese", {"type": "pass_bid"})
    assert "CacheCardSold" in types(tx)
    state = tx.state
    assert "ornithopter" in state.seat("harkonnen").hand
    assert state.seat("richese").spice == richese + 3  # the price to Richese
    assert state.seat("harkonnen").spice == 7
    state = pass_windows(state)  # the Harkonnen bonus; no income for a sale
    assert bidding(state)["sale"] is None and bidding(state)["up"]["index"] == 1


def test_a_silent_sale_reveals_nothing_until_every_sealed_bid_is_in():
    state = sale_first("silent")
    assert bidding(state)["sale"]["bidders"] == ["emperor", "atreides", "harkonnen", "richese"]
    tx = run(state, "emperor", {"type": "sealed_bid", "amount": 4})
    assert tx.events[0].public() == {"seat": "emperor"}
    other = run(state, "emperor", {"type": "sealed_bid", "amount": 1})
    # What anyone sees does not depend on the amount.
    for seat in ("atreides", "harkonnen", "richese", "fremen"):
        assert seat_view(tx.state, seat)["bidding"] == seat_view(other.state, seat)["bidding"]
    assert public_view(tx.state) == public_view(other.state)
    state = tx.state
    assert code(state, "emperor", {"type": "sealed_bid", "amount": 2}) == "not_eligible"
    assert code(state, "atreides", {"type": "sealed_bid", "amount": 11}) == "insufficient_spice"
    assert code(state, "fremen", {"type": "sealed_bid", "amount": 1}) == "not_eligible"
    state = run(state, "atreides", {"type": "sealed_bid", "amount": 4}).state
    state = run(state, "harkonnen", {"type": "sealed_bid", "amount": 0}).state
    tx = run(state, "richese", {"type": "sealed_bid", "amount": 2})
    revealed = next(e for e in tx.events if e.type == "SealedBidsRevealed")
    # A tie goes to the earliest in order.
    assert revealed.public() == {"amounts": {"emperor": 4, "atreides": 4, "harkonnen": 0,
                                             "richese": 2}, "winner": "emperor"}
    assert "ornithopter" in tx.state.seat("emperor").hand
    assert seat_view(tx.state, "atreides")["me"]["reserved"] == 0


def test_an_unsold_cache_card_goes_to_richese_or_leaves_the_game():
    state = sale_first("silent")
    for seat in ("emperor", "atreides", "harkonnen", "richese"):
        tx = run(state, seat, {"type": "sealed_bid", "amount": 0})
        state = tx.state
    assert "SaleUnsold" in types(tx) and "ornithopter" in state.seat("richese").hand
    full = ["shield-2", "shield-3", "shield-4", "snooper-1"]
    state = sale_first("once_around", richese={"spice": 5, "hand": full},
                       fremen={"hand": ["snooper-2"]})
    for seat in ("emperor", "atreides", "harkonnen", "fremen"):
        tx = run(state, seat, {"type": "pass_bid"})
        state = tx.state
    assert "SaleUnsold" in types(tx) and "ornithopter" in state.removed


def test_a_sale_announced_last_comes_after_the_cards_and_not_after_everyone_passed():
    state = run(with_richese(), OPERATOR, {"type": "open_bidding",
                                           "order": RICHESE_ORDER}).state
    state = run(state, "richese", {"type": "richese_sale", "when": "last"}).state
    assert bidding(state)["sale"]["when"] == "last"
    passed = state
    for seat in ("emperor", "atreides", "harkonnen", "richese"):
        tx = run(passed, seat, {"type": "pass_bid"})
        passed = tx.state
    assert types(tx)[-1] == "BiddingClosed" and "ornithopter" in passed.cache
    # Every card sold: then the sale.
    for _ in range(3):
        up = bidding(state)["up"]
        state = run(state, up["turn"], {"type": "bid", "amount": 1}).state
        while bidding(state)["up"] is not None and bidding(state)["up"]["high"] is not None:
            state = run(state, bidding(state)["up"]["turn"], {"type": "pass_bid"}).state
        state = pass_windows(state)
    assert bidding(state)["stage"] == "sale"
    listed = [a for a in actions(state, "richese") if a["type"] == "richese_offer"]
    assert {"type": "richese_offer", "card": "ornithopter", "auction": "silent"} in listed


def test_an_empty_deck_is_refilled_from_the_pile_while_dealing():
    state = room()
    dump = state.model_dump()
    dump["discard"] = dump["discard"] + dump["deck"][1:]
    dump["deck"] = dump["deck"][:1]
    state = type(state).model_validate(dump)
    tx = run(state, OPERATOR, {"type": "open_bidding", "order": ORDER})
    assert types(tx) == ["BiddingOpened", "CardsDealt", "DiscardReshuffled", "CardsDealt",
                         "CardUp"]
    assert len(round_of(tx.state).auction) == 3  # type: ignore[union-attr]


def test_a_standing_high_bid_keeps_the_bidders_spice_until_outbid():
    state = opened(room(), ORDER)
    state = run(state, "emperor", {"type": "bid", "amount": 4}).state
    assert seat_view(state, "emperor")["me"]["reserved"] == 4
    # Spending elsewhere cannot take what the bid needs.
    assert state.free_spice("emperor") == 6
    state = run(state, "atreides", {"type": "bid", "amount": 5}).state
    assert seat_view(state, "emperor")["me"]["reserved"] == 0
    assert seat_view(state, "atreides")["me"]["reserved"] == 5
