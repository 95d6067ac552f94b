"""The Bidding round (RULES 10): the auction where most Treachery cards and spice
change hands.

The flow of one round, every step an event:

    open_bidding (operator) -> BiddingOpened
      Richese with a cache card: its answer first (richese_sale)
      -> CardsDealt (one card per eligible seat, one more with the Ixians seated)
      Ixians seated: ix_set_aside -> CardSetAside, AuctionShuffled
      -> CardUp -> bid / pass_bid / karama_buy ... -> CardSold -> the purchase's
         child stages (domain/purchase.py: income, bonus, replacement) -> CardUp ...
      everyone passed: CardsReturned; the auction empty: BiddingClosed

The round lives in its own part of the state (`ROUND`), not in `state.control`: a
Box search opened during a round leaves it where it was, and the payment's windows
and decisions are `state.control`'s, which a search saves and restores.

Hidden information (RULES 10.6): the auction's cards are nobody's to see named, but
the Atreides seat's for the card up for bid and the Ixians' while they choose. Bids,
passes, the high bidder, the turn and the support set are public; a bid's refusal
reads only the bidder's own spice and reservations and the public support.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import Field

from dune_ledger.domain import commands as c
from dune_ledger.domain import purchase
from dune_ledger.domain.catalog import CARDS, Faction
from dune_ledger.domain.commands import SPICE_MAX, Amount, CardId, Command
from dune_ledger.domain.custody import DiscardReshuffled, check_own_card, discard_card, shuffle_late
from dune_ledger.domain.effect import Disclosure, Effect, Offer, Part, ViewShapes
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.events import RNG_SHOWN, Event, RngField, rng_public
from dune_ledger.domain.responses import karama_cards
from dune_ledger.domain.rules import Tx
from dune_ledger.domain.shapes import CardFace, FreeAmount, Shape
from dune_ledger.domain.state import Commitment, Model, Receipt, Reservation, RoomState
from dune_ledger.domain.words import card as card_name
from dune_ledger.domain.words import faction

BIDDING_PHASE = 4
ATREIDES = "atreides"
IXIANS = "ixians"
RICHESE = "richese"
EMPEROR = "emperor"
SUPPORT = "bid_support"  # the reason of a support's reservation
BID = "bid"  # the reason of a standing high bid's reservation of the bidder's own spice
KARAMA_BID = "karama_bid"  # the kind of a Karama's commitment while its bid stands


# --- the state --------------------------------------------------------------------


class High(Model):
    seat: str
    amount: int
    karama: str | None = None  # the Karama committed to the bid: private to the bidder


class Up(Model):
    """The card up for bid (the first of the auction)."""

    index: int  # counted from 1 over the round
    starter: str
    turn: str
    high: High | None = None
    passed: list[str] = Field(default_factory=list)  # since the last bid


class Sale(Model):
    """Richese's cache sale (RULES 10.5), once Richese has named the card."""

    card: str  # public: Richese named it
    auction: Literal["once_around", "silent"]
    bidders: list[str]  # who bids, in turn (once around: Richese last)
    turn: str | None = None  # once around: whose turn it is
    acted: list[str] = Field(default_factory=list)  # once around: who bid or passed
    high: High | None = None  # once around: the high bid
    sealed: dict[str, int] = Field(default_factory=dict)  # silent: private until all are in
    revealed: dict[str, int] | None = None  # silent: every amount, once all are in


class Round(Model):
    event: str  # BiddingOpened's id
    order: list[str]
    # richese: waiting for Richese's answer; ixians: for the Ixians' choice; bidding:
    # a card is up; sale: Richese's cache sale; payment: a purchase's child stages.
    stage: Literal["richese", "ixians", "bidding", "sale", "payment"]
    auction: list[str] = Field(default_factory=list)  # top (the card up) first
    dealt: list[str] = Field(default_factory=list)  # what the Ixians choose from
    up: Up | None = None
    index: int = 0  # cards put up so far
    starter: str | None = None  # the last card's starter
    support: dict[str, int] = Field(default_factory=dict)  # supporter -> amount set
    spent: dict[str, int] = Field(default_factory=dict)  # supporter -> paid from it
    receipt: str | None = None  # the purchase being paid
    sale_when: Literal["first", "last"] | None = None  # a cache sale still to come
    sale: Sale | None = None  # the cache sale under way


class Bidding(Model):
    turn: int  # the turn the last round was opened in: one round a turn
    round: Round | None = None


ROUND = Part("bidding", Bidding)


def round_of(state: RoomState) -> Round | None:
    b = ROUND.of(state)
    return None if b is None else b.round


def _round(state: RoomState) -> Round:
    r = round_of(state)
    assert r is not None
    return r


def eligible(state: RoomState, seat: str) -> bool:
    """RULES 10.1: below its hand limit (a public count)."""
    s = state.seat(seat)
    return len(s.hand) < s.limit


def eligible_seats(state: RoomState, order: list[str]) -> list[str]:
    return [f for f in order if eligible(state, f)]


def next_eligible(state: RoomState, order: list[str], after: str) -> str | None:
    """The first eligible seat after `after` in `order`, round the table (`after`
    itself last)."""
    i = order.index(after)
    for f in order[i + 1:] + order[:i + 1]:
        if eligible(state, f):
            return f
    return None


def can_pay(state: RoomState, seat: str) -> int:
    """What a seat can bid: its own spice less its reservations, plus the support its
    ally set and has not spent (public, and the bidder's own purchases)."""
    r = _round(state)
    support = sum(amount - r.spent.get(s, 0) for s, amount in r.support.items()
                  if state.seat(s).ally == seat)
    return max(0, state.free_spice(seat)) + max(0, support)


# --- commands -----------------------------------------------------------------------


class OpenBidding(Command):
    type: Literal["open_bidding"]
    order: Annotated[list[Faction], Field(min_length=1, max_length=12)]


class Bid(Command):
    written = {"amount": FreeAmount}
    type: Literal["bid"]
    amount: Annotated[int, Field(ge=1, le=SPICE_MAX)]
    karama: CardId | None = None


class PassBid(Command):
    type: Literal["pass_bid"]


class KaramaBuy(Command):
    type: Literal["karama_buy"]
    karama: CardId


class BidSupport(Command):
    written = {"amount": FreeAmount}
    type: Literal["bid_support"]
    amount: Amount


class IxSetAside(Command):
    type: Literal["ix_set_aside"]
    card: CardId
    where: Literal["top", "bottom"]


class IxReplace(Command):
    type: Literal["ix_replace"]
    event: c.EventId
    accept: bool


class RicheseSale(Command):
    type: Literal["richese_sale"]
    when: Literal["first", "last", "none"]


class RicheseOffer(Command):
    type: Literal["richese_offer"]
    card: CardId
    auction: Literal["once_around", "silent"]


class SealedBid(Command):
    written = {"amount": FreeAmount}
    type: Literal["sealed_bid"]
    amount: Amount


def open_bidding(tx: Tx, actor: str, cmd: OpenBidding) -> None:
    state = tx.state
    seats = [s.faction for s in state.seats]
    if sorted(cmd.order) != sorted(seats) or len(set(cmd.order)) != len(cmd.order):
        raise Rejection("invalid_command", "order must name every seat of the room once")
    if state.phase != BIDDING_PHASE:
        raise Rejection("not_eligible", "a round is opened in the Bidding phase (4)")
    b = ROUND.of(state)
    if b is not None and b.round is not None:
        raise Rejection("not_eligible", "a bidding round is already open")
    if b is not None and b.turn == state.turn:
        raise Rejection("not_eligible", "a bidding round was already opened this turn")
    if state.control.decision is not None or state.control.response is not None:
        raise Rejection("decision_pending", "the game is waiting for another decision")
    waits = state.has_seat(RICHESE) and bool(state.cache)
    tx.emit(BiddingOpened(event=tx.next_event_id(), turn=state.turn, order=list(cmd.order),
                          richese=waits))
    if not waits:
        _deal(tx, sale=False)


def _deal(tx: Tx, *, sale: bool) -> None:
    """RULES 10.1: one card per eligible seat (less one for a cache sale), one more with
    the Ixians seated; the pile is shuffled into an empty deck as on any draw."""
    state = tx.state
    r = _round(state)
    count = len(eligible_seats(state, r.order)) - (1 if sale else 0)
    ixians = state.has_seat(IXIANS) and count > 0
    need = count + (1 if ixians else 0)
    while need > 0:
        if not tx.state.deck:
            if not tx.state.discard:
                break
            order = tx.shuffle(list(tx.state.discard))
            tx.emit(DiscardReshuffled(order=order, rng=tx.drawn()))
        else:
            shuffle_late(tx)
        cards = tx.state.deck[:need]
        tx.emit(CardsDealt(cards=cards))
        need -= len(cards)
    if ixians and len(_round(tx.state).auction) > 1:
        tx.emit(IxiansChoosing(seat=IXIANS))
        return
    _after_deal(tx)


def _after_deal(tx: Tx) -> None:
    if _round(tx.state).sale_when == "first":
        tx.emit(SaleOpened(seat=RICHESE))
        return
    _next_card(tx)


def _next_card(tx: Tx) -> None:
    """Put the next card up, or close the round when none is left or nobody can bid."""
    state = tx.state
    r = _round(state)
    if not r.auction:
        if r.sale_when == "last":
            tx.emit(SaleOpened(seat=RICHESE))
            return
        tx.emit(BiddingClosed(event=r.event))
        return
    if r.starter is None:
        start = next(iter(eligible_seats(state, r.order)), None)
    else:
        start = next_eligible(state, r.order, r.starter)
    if start is None:
        tx.emit(CardsReturned(cards=list(r.auction)))
        tx.emit(BiddingClosed(event=r.event))
        return
    tx.emit(CardUp(index=r.index + 1, starter=start))


def _my_turn(state: RoomState, actor: str) -> Up:
    r = round_of(state)
    if r is None:
        raise Rejection("no_round", "no bidding round is open")
    if r.stage != "bidding" or r.up is None:
        raise Rejection("round_waiting", "the round is waiting: no card is up for bid now")
    if r.up.turn != actor:
        raise Rejection("not_your_turn", f"it is {faction(r.up.turn)}'s turn to bid")
    return r.up


def _room_in_hand(state: RoomState, actor: str) -> None:
    if not eligible(state, actor):
        raise Rejection("hand_over_limit", "your hand is full: you may only pass")


def _check_karama(state: RoomState, actor: str, card_id: str) -> None:
    check_own_card(state, actor, card_id)
    if card_id not in karama_cards(state, actor):
        raise Rejection("not_eligible", "that card does not count as a Karama")


def bid(tx: Tx, actor: str, cmd: Bid) -> None:
    state = tx.state
    r = round_of(state)
    if r is not None and r.sale is not None:
        sale_bid(tx, actor, cmd.amount, cmd.karama)
        return
    up = _my_turn(state, actor)
    _room_in_hand(state, actor)
    high = 0 if up.high is None else up.high.amount
    if cmd.amount <= high:
        raise Rejection("bid_too_low", f"a bid must be above the high bid of {high}")
    if cmd.karama is not None:
        _check_karama(state, actor, cmd.karama)
    elif cmd.amount > can_pay(state, actor):
        raise Rejection("insufficient_spice",
                        "that bid is above your spice, less your reservations, plus the "
                        "support your ally set")
    r = _round(state)
    after = next_eligible(state, r.order, actor)
    # The bidder's own spice first, kept for the bid while it stands; its ally's support
    # (reserved already) pays the rest.
    own = 0 if cmd.karama is not None else min(cmd.amount, max(0, state.free_spice(actor)))
    tx.emit(BidPlaced(seat=actor, amount=cmd.amount, karama=cmd.karama,
                      turn=after or actor, reserved=own))
    if after == actor:  # nobody else can bid: the turn is back at the high bidder
        _sell(tx)


def pass_bid(tx: Tx, actor: str, cmd: PassBid) -> None:
    state = tx.state
    r = round_of(state)
    if r is not None and r.sale is not None:
        sale_bid(tx, actor, None, None)
        return
    _my_turn(state, actor)
    r = _round(state)
    after = next_eligible(state, r.order, actor) or actor
    tx.emit(BidPassed(seat=actor, turn=after))
    up = _round(tx.state).up
    assert up is not None
    if up.high is not None:
        if after == up.high.seat:
            _sell(tx)
        return
    if all(f in up.passed for f in eligible_seats(tx.state, r.order)):
        tx.emit(CardsReturned(cards=list(_round(tx.state).auction)))
        tx.emit(BiddingClosed(event=r.event))


def karama_buy(tx: Tx, actor: str, cmd: KaramaBuy) -> None:
    state = tx.state
    _my_turn(state, actor)
    _room_in_hand(state, actor)
    _check_karama(state, actor, cmd.karama)
    tx.emit(KaramaBought(seat=actor, karama=cmd.karama))
    _sell(tx)


def _sell(tx: Tx) -> None:
    """RULES 10.3: the card to the high bidder, the price to the Bank (a winning
    Karama discarded instead), then the purchase's child stages."""
    state = tx.state
    r = _round(state)
    up = r.up
    assert up is not None and up.high is not None
    buyer, amount, karama = up.high.seat, up.high.amount, up.high.karama
    own = support = 0
    supporter = None
    if karama is None:
        own, support, supporter = _split(state, r, buyer, amount)
    paid = 0 if karama is not None else amount
    emperor = purchase.emperor_for(state, buyer) if paid else None
    receipt = tx.next_event_id()
    tx.emit(CardSold(event=receipt, seat=buyer, card=r.auction[0], amount=paid,
                     karama=karama, own=own, support=support, supporter=supporter,
                     emperor=emperor))
    if karama is not None:
        discard_card(tx, buyer, karama)
    purchase.advance(tx, SOURCE, "purchase")


def _split(state: RoomState, r: Round, buyer: str, amount: int
           ) -> tuple[int, int, str | None]:
    """How a price is paid (RULES 10.2): the buyer's own spice its bid holds first, then
    what its ally's support has left; (own, support, the supporter)."""
    own = sum(x.amount for x in state.reservations if x.faction == buyer and x.reason == BID)
    ally = next((s for s in r.support if state.seat(s).ally == buyer), None)
    if ally is None or amount <= own:
        return own, 0, None
    return own, min(amount - own, r.support[ally] - r.spent.get(ally, 0)), ally


def finish(tx: Tx) -> None:
    """The purchase's last step: the next card comes up."""
    r = _round(tx.state)
    assert r.receipt is not None
    tx.emit(purchase.ReceiptAdvanced(event=r.receipt, stage="finish"))
    if r.sale is not None:
        _sale_over(tx)
        return
    _next_card(tx)


def current_receipt(state: RoomState) -> Receipt | None:
    r = round_of(state)
    return None if r is None or r.receipt is None else purchase.receipt_of(state, r.receipt)


def replaces(state: RoomState, receipt: Receipt) -> bool:
    """RULES 10.3, advanced: the Ixians' ally that bought may replace the card."""
    r = round_of(state)
    if r is not None and r.sale is not None:
        return False  # not for a cache sale
    return (state.mode == "advanced" and state.has_seat(IXIANS) and receipt.buyer != IXIANS
            and state.seat(IXIANS).ally == receipt.buyer)


SOURCE = purchase.Source(
    name="bidding", income="bidding_income", bonus="bidding_bonus", current=current_receipt,
    finish=finish, replaces=replaces)


def bid_support(tx: Tx, actor: str, cmd: BidSupport) -> None:
    state = tx.state
    r = round_of(state)
    if r is None:
        raise Rejection("no_round", "no bidding round is open")
    ally = state.seat(actor).ally
    if ally is None:
        raise Rejection("not_eligible", "only a seat with an ally supports its bids")
    spent = r.spent.get(actor, 0)
    held = r.support.get(actor, 0) - spent
    if cmd.amount < spent:
        raise Rejection("not_eligible", f"{spent} spice of your support is already spent")
    if cmd.amount == r.support.get(actor, 0):
        raise Rejection("unchanged", "your support is already set to that amount")
    if cmd.amount - spent > state.free_spice(actor) + held:
        raise Rejection("insufficient_spice", "that support is above your free spice")
    up = r.up
    if up is not None and up.high is not None and up.high.seat == ally \
            and cmd.amount < r.support.get(actor, 0):
        raise Rejection("not_eligible", "your ally holds the high bid: its support stands")
    tx.emit(SupportSet(seat=actor, ally=ally, amount=cmd.amount))


def ix_set_aside(tx: Tx, actor: str, cmd: IxSetAside) -> None:
    state = tx.state
    r = round_of(state)
    if r is None:
        raise Rejection("no_round", "no bidding round is open")
    if r.stage != "ixians" or actor != IXIANS:
        raise Rejection("not_eligible", "the Ixians set a card aside when the cards are dealt")
    if cmd.card not in r.dealt:
        raise Rejection("unknown_card", "that card was not dealt into the auction")
    tx.emit(CardSetAside(seat=actor, card=cmd.card, where=cmd.where))
    rest = list(_round(tx.state).auction)
    order = tx.shuffle(rest)
    tx.emit(AuctionShuffled(order=order, rng=tx.drawn()))
    _after_deal(tx)


def richese_sale(tx: Tx, actor: str, cmd: RicheseSale) -> None:
    state = tx.state
    r = round_of(state)
    if r is None:
        raise Rejection("no_round", "no bidding round is open")
    if r.stage != "richese" or actor != RICHESE:
        raise Rejection("not_eligible", "Richese answers when the round opens")
    if cmd.when != "none" and not state.cache:
        raise Rejection("not_eligible", "the cache holds no card to sell")
    tx.emit(RicheseSaleChosen(seat=actor, when=cmd.when))
    _deal(tx, sale=cmd.when != "none")


def richese_offer(tx: Tx, actor: str, cmd: RicheseOffer) -> None:
    state = tx.state
    r = round_of(state)
    if r is None:
        raise Rejection("no_round", "no bidding round is open")
    if actor != RICHESE or r.stage != "sale" or r.sale is not None:
        raise Rejection("not_eligible", "Richese names its card when its sale comes up")
    if cmd.card not in CARDS:
        raise Rejection("unknown_card", "no card has that id")
    if cmd.card not in state.cache:
        raise Rejection("not_eligible", "that card is not in the Richese cache")
    eligible_now = eligible_seats(state, r.order)
    if cmd.auction == "once_around":
        i = r.order.index(RICHESE)
        bidders = [f for f in r.order[i + 1:] + r.order[:i + 1] if f in eligible_now]
    else:
        bidders = eligible_now
    tx.emit(SaleOffered(card=cmd.card, auction=cmd.auction, bidders=bidders))
    if not bidders:
        _unsold(tx)


def sale_bid(tx: Tx, actor: str, amount: int | None, karama: str | None) -> None:
    """A bid (`amount`) or a pass (None) once around (RULES 10.5)."""
    state = tx.state
    sale = _round(state).sale
    assert sale is not None
    if sale.auction != "once_around":
        raise Rejection("not_eligible", "a silent auction takes one sealed_bid from each seat")
    if sale.turn != actor:
        raise Rejection("not_your_turn", f"it is {faction(sale.turn)}'s turn to bid")
    if amount is None:
        after = _next_bidder(sale, actor)
        tx.emit(BidPassed(seat=actor, turn=after or ""))
    else:
        if karama is not None:
            raise Rejection("not_eligible", "no Karama in a cache sale")
        high = 0 if sale.high is None else sale.high.amount
        if amount <= high:
            raise Rejection("bid_too_low", f"a bid must be above the high bid of {high}")
        if amount > can_pay(state, actor):
            raise Rejection("insufficient_spice",
                            "that bid is above your spice, less your reservations, plus the "
                            "support your ally set")
        own = min(amount, max(0, state.free_spice(actor)))
        after = _next_bidder(sale, actor)
        tx.emit(BidPlaced(seat=actor, amount=amount, karama=None, turn=after or "",
                          reserved=own))
    if after is None:
        done = _round(tx.state).sale
        assert done is not None
        if done.high is None:
            _unsold(tx)
        else:
            _sell_cache(tx, done.high.seat, done.high.amount)


def _next_bidder(sale: Sale, actor: str) -> str | None:
    i = sale.bidders.index(actor)
    return sale.bidders[i + 1] if i + 1 < len(sale.bidders) else None


def sealed_bid(tx: Tx, actor: str, cmd: SealedBid) -> None:
    state = tx.state
    r = round_of(state)
    if r is None:
        raise Rejection("no_round", "no bidding round is open")
    sale = r.sale
    if sale is None or sale.auction != "silent" or sale.revealed is not None:
        raise Rejection("not_eligible", "sealed bids are for a silent cache sale")
    if actor not in sale.bidders:
        raise Rejection("not_eligible", "you are not asked in this sale")
    if actor in sale.sealed:
        raise Rejection("not_eligible", "you have already sent your sealed bid")
    if cmd.amount > can_pay(state, actor):
        raise Rejection("insufficient_spice",
                        "that bid is above your spice, less your reservations, plus the "
                        "support your ally set")
    own = min(cmd.amount, max(0, state.free_spice(actor)))
    tx.emit(SealedBidPlaced(seat=actor, amount=cmd.amount, reserved=own))
    sale = _round(tx.state).sale
    assert sale is not None
    if len(sale.sealed) < len(sale.bidders):
        return
    # All are in: every amount public at once; the highest wins, a tie the earliest.
    amounts = {f: sale.sealed[f] for f in sale.bidders}
    top = max(amounts.values())
    winner = next(f for f in sale.bidders if amounts[f] == top) if top else None
    tx.emit(SealedBidsRevealed(amounts=amounts, winner=winner))
    if winner is None:
        _unsold(tx)
    else:
        _sell_cache(tx, winner, top)


def _sell_cache(tx: Tx, buyer: str, amount: int) -> None:
    """The cache card to the buyer, the price to Richese (to the Bank when Richese buys
    its own), then the child stages: no income, the bonus as for any purchase."""
    state = tx.state
    r = _round(state)
    assert r.sale is not None
    own, support, supporter = _split(state, r, buyer, amount)
    receipt = tx.next_event_id()
    tx.emit(CacheCardSold(event=receipt, seat=buyer, card=r.sale.card, amount=amount,
                          own=own, support=support, supporter=supporter,
                          to="bank" if buyer == RICHESE else RICHESE))
    purchase.advance(tx, SOURCE, "purchase")


def _unsold(tx: Tx) -> None:
    r = _round(tx.state)
    assert r.sale is not None
    seat = tx.state.seat(RICHESE)
    tx.emit(SaleUnsold(card=r.sale.card, to=RICHESE if len(seat.hand) < seat.limit
                       else "removed"))
    _sale_over(tx)


def _sale_over(tx: Tx) -> None:
    """After the cache sale: the normal cards (a sale first), or the end (a sale last)."""
    tx.emit(SaleClosed(seat=RICHESE))
    _next_card(tx)


def ix_replace(tx: Tx, actor: str, cmd: IxReplace) -> None:
    purchase.replace(tx, SOURCE, actor, cmd.event, cmd.accept)


# --- events -------------------------------------------------------------------------


class BiddingOpened(Event):
    shown = ("event", "turn", "order", "richese")

    event: str
    turn: int
    order: list[str]
    richese: bool  # the round waits for Richese's answer on a cache sale

    def apply(self, state: RoomState) -> None:
        ROUND.set(state, Bidding(turn=self.turn, round=Round(
            event=self.event, order=list(self.order),
            stage="richese" if self.richese else "bidding")))

    def text(self) -> str:
        return ("The bidding round opens: " + ", ".join(faction(f) for f in self.order))


class RicheseSaleChosen(Event):
    shown = ("seat", "when")

    seat: str
    when: str

    def apply(self, state: RoomState) -> None:
        r = _round(state)
        r.stage = "bidding"
        r.sale_when = None if self.when == "none" else self.when  # type: ignore[assignment]

    def text(self) -> str:
        if self.when == "none":
            return f"{faction(self.seat)} sells no cache card this round"
        return f"{faction(self.seat)} sells a cache card {self.when} this round"


class CardsDealt(Event):
    """Cards dealt face down from the top of the deck into the auction: nobody's to see."""

    shown_as = {"count": int}

    cards: list[str]

    def apply(self, state: RoomState) -> None:
        assert state.deck[:len(self.cards)] == self.cards
        del state.deck[:len(self.cards)]
        _round(state).auction.extend(self.cards)

    def public(self) -> dict[str, Any]:
        return {"count": len(self.cards)}

    def text(self) -> str:
        return f"{len(self.cards)} cards were dealt face down into the auction"


class IxiansChoosing(Event):
    shown = ("seat",)

    seat: str

    def apply(self, state: RoomState) -> None:
        r = _round(state)
        r.stage = "ixians"
        r.dealt = list(r.auction)

    def text(self) -> str:
        return f"The {faction(self.seat)} look at the dealt cards and set one aside"


class CardSetAside(Event):
    shown = ("seat", "where")

    seat: str
    card: str  # private to the Ixians
    where: str

    def apply(self, state: RoomState) -> None:
        r = _round(state)
        r.auction.remove(self.card)
        r.dealt = []
        if self.where == "top":
            state.deck.insert(0, self.card)
        else:
            state.deck.append(self.card)

    def text(self) -> str:
        return f"The {faction(self.seat)} put a card on the {self.where} of the deck"


class AuctionShuffled(Event):
    """The cards left after the Ixians' choice, shuffled (an outcome): private."""

    shown_as = {"count": int, "rng": RNG_SHOWN}

    order: list[str]
    rng: dict[str, Any] | None = RngField

    def apply(self, state: RoomState) -> None:
        r = _round(state)
        assert sorted(r.auction) == sorted(self.order)
        r.auction = list(self.order)
        r.stage = "bidding"

    def public(self) -> dict[str, Any]:
        return {"count": len(self.order), **rng_public(self.rng)}

    def text(self) -> str:
        return f"The {len(self.order)} cards of the auction were shuffled"


class CardUp(Event):
    shown = ("index", "starter")

    index: int
    starter: str

    def apply(self, state: RoomState) -> None:
        r = _round(state)
        r.index, r.starter, r.stage, r.receipt = self.index, self.starter, "bidding", None
        r.up = Up(index=self.index, starter=self.starter,
                  turn=self.starter)

    def text(self) -> str:
        return f"Card {self.index} is up for bid: {faction(self.starter)} bids first"


def _release(state: RoomState, high: High | None) -> None:
    """An outbid high bid frees what it held: its Karama, its spice."""
    if high is None:
        return
    if high.karama is not None:
        state.commitments = [x for x in state.commitments if x.card != high.karama]
    state.reservations = [x for x in state.reservations
                          if not (x.faction == high.seat and x.reason == BID)]


def _pay(state: RoomState, buyer: str, own: int, supporter: str | None,
         support: int) -> None:
    """A price paid as `_split` made it: the buyer's own spice, its bid's hold released,
    and the supporter's spice out of what its support reserved."""
    r = _round(state)
    state.seat(buyer).spice -= own
    state.reservations = [x for x in state.reservations
                          if not (x.faction == buyer and x.reason == BID)]
    if supporter is not None:
        state.seat(supporter).spice -= support
        r.spent[supporter] = r.spent.get(supporter, 0) + support
        for res in state.reservations:
            if res.faction == supporter and res.reason == SUPPORT:
                res.amount -= support


class BidPlaced(Event):
    shown_as = {"seat": str, "amount": int, "karama": bool, "turn": str}

    seat: str
    amount: int
    karama: str | None  # the Karama committed to the bid: private until it wins
    turn: str  # the seat whose turn it is now
    reserved: int  # the bidder's own spice kept for the bid: private

    def apply(self, state: RoomState) -> None:
        r = _round(state)
        if r.sale is not None:
            sale = r.sale
            _release(state, sale.high)
            if self.reserved:
                state.reservations.append(Reservation(faction=self.seat,
                                                      amount=self.reserved, reason=BID))
            sale.high = High(seat=self.seat, amount=self.amount)
            sale.acted.append(self.seat)
            sale.turn = self.turn or None
            return
        up = r.up
        assert up is not None
        _release(state, up.high)
        if self.reserved:
            state.reservations.append(Reservation(faction=self.seat, amount=self.reserved,
                                                  reason=BID))
        up.high = High(seat=self.seat, amount=self.amount,
                       karama=self.karama)
        if self.karama is not None:
            state.commitments.append(Commitment(card=self.karama, kind=KARAMA_BID))
        up.passed = []
        up.turn = self.turn

    def public(self) -> dict[str, Any]:
        return {"seat": self.seat, "amount": self.amount, "karama": self.karama is not None,
                "turn": self.turn}

    def text(self) -> str:
        with_karama = " with a Karama" if self.karama is not None else ""
        return f"{faction(self.seat)} bid {self.amount}{with_karama}"


class BidPassed(Event):
    shown = ("seat", "turn")

    seat: str
    turn: str

    def apply(self, state: RoomState) -> None:
        r = _round(state)
        if r.sale is not None:
            r.sale.acted.append(self.seat)
            r.sale.turn = self.turn or None
            return
        up = r.up
        assert up is not None
        up.passed.append(self.seat)
        up.turn = self.turn

    def text(self) -> str:
        return f"{faction(self.seat)} passed"


class KaramaBought(Event):
    """A Karama buys the card up at once, for nothing: it is the high bid now."""

    shown = ("seat",)

    seat: str
    karama: str  # private until it is discarded, in this append

    def apply(self, state: RoomState) -> None:
        up = _round(state).up
        assert up is not None
        _release(state, up.high)
        up.high = High(seat=self.seat, amount=0, karama=self.karama)
        state.commitments.append(Commitment(card=self.karama, kind=KARAMA_BID))

    def text(self) -> str:
        return f"{faction(self.seat)} buys the card with a Karama"


class CardSold(Event):
    """The card up goes to the buyer (private), the price to the Bank, paid from the
    buyer's own spice first and then from its ally's support (the split private)."""

    shown_as = {"event": str, "seat": str, "amount": int, "karama": bool,
                "emperor": str | None}

    event: str  # the purchase's receipt
    seat: str
    card: str
    amount: int
    karama: str | None
    own: int
    support: int
    supporter: str | None
    emperor: str | None

    def apply(self, state: RoomState) -> None:
        r = _round(state)
        assert r.auction[0] == self.card
        r.auction.pop(0)
        r.up, r.stage, r.receipt = None, "payment", self.event
        state.seat(self.seat).hand.append(self.card)
        _pay(state, self.seat, self.own, self.supporter, self.support)
        state.bank += self.own + self.support
        if self.karama is not None:
            state.commitments = [x for x in state.commitments if x.card != self.karama]
        state.receipts.append(Receipt(
            event=self.event, buyer=self.seat, card=self.card,
            amount=self.amount, emperor=self.emperor, stage="purchase"))

    def public(self) -> dict[str, Any]:
        return {"event": self.event, "seat": self.seat, "amount": self.amount,
                "karama": self.karama is not None, "emperor": self.emperor}

    def text(self) -> str:
        if self.karama is not None:
            return f"{faction(self.seat)} bought the card with a Karama"
        return f"{faction(self.seat)} bought the card for {self.amount} spice"


class CardsReturned(Event):
    """Everyone passed: the auction's cards go back on top of the deck, in the order
    they were dealt, the card up on top."""

    shown_as = {"count": int}

    cards: list[str]

    def apply(self, state: RoomState) -> None:
        r = _round(state)
        assert r.auction == self.cards
        state.deck[:0] = self.cards
        r.auction, r.up = [], None

    def public(self) -> dict[str, Any]:
        return {"count": len(self.cards)}

    def text(self) -> str:
        return f"Everyone passed: {len(self.cards)} cards go back on top of the deck"


class SupportSet(Event):
    shown = ("seat", "ally", "amount")

    seat: str
    ally: str
    amount: int

    def apply(self, state: RoomState) -> None:
        r = _round(state)
        spent = r.spent.get(self.seat, 0)
        state.reservations = [x for x in state.reservations
                              if not (x.faction == self.seat and x.reason == SUPPORT)]
        if self.amount:
            r.support[self.seat] = self.amount
            if self.amount - spent:
                state.reservations.append(Reservation(
                    faction=self.seat, amount=self.amount - spent,
                    reason=SUPPORT))
        else:
            r.support.pop(self.seat, None)

    def text(self) -> str:
        if not self.amount:
            return f"{faction(self.seat)} withdrew its support"
        return f"{faction(self.seat)} supports {faction(self.ally)}'s bids with {self.amount}"


class SaleOpened(Event):
    """Richese's cache sale comes up: Richese names the card and the auction."""

    shown = ("seat",)

    seat: str

    def apply(self, state: RoomState) -> None:
        r = _round(state)
        r.stage, r.up = "sale", None

    def text(self) -> str:
        return f"{faction(self.seat)}'s cache sale comes up"


class SaleOffered(Event):
    shown = ("card", "auction", "bidders")

    card: str  # named by Richese: public
    auction: str
    bidders: list[str]

    def apply(self, state: RoomState) -> None:
        r = _round(state)
        r.sale = Sale(card=self.card, auction=self.auction,
                      bidders=list(self.bidders),
                      turn=(self.bidders[0] if self.bidders and self.auction == "once_around"
                            else None))

    def text(self) -> str:
        how = "once around" if self.auction == "once_around" else "in a silent auction"
        return f"Richese offers {card_name(self.card)} from its cache, {how}"


class SealedBidPlaced(Event):
    """A sealed bid: who sent it is public, the amount is not until all are in."""

    shown = ("seat",)

    seat: str
    amount: int  # private until SealedBidsRevealed
    reserved: int  # the bidder's own spice kept for it: private

    def apply(self, state: RoomState) -> None:
        sale = _round(state).sale
        assert sale is not None
        sale.sealed[self.seat] = self.amount
        if self.reserved:
            state.reservations.append(Reservation(faction=self.seat, amount=self.reserved,
                                                  reason=BID))

    def text(self) -> str:
        return f"{faction(self.seat)} sent a sealed bid"


class SealedBidsRevealed(Event):
    shown = ("amounts", "winner")

    amounts: dict[str, int]
    winner: str | None

    def apply(self, state: RoomState) -> None:
        sale = _round(state).sale
        assert sale is not None
        sale.revealed = dict(self.amounts)
        state.reservations = [x for x in state.reservations
                              if not (x.reason == BID and x.faction != self.winner)]

    def text(self) -> str:
        bids = ", ".join(f"{faction(f)} {n}" for f, n in self.amounts.items())
        return f"The sealed bids: {bids}"


class CacheCardSold(Event):
    """The cache card to the buyer, the price to Richese (the Bank when Richese buys its
    own), paid from the buyer's own spice first, then its ally's support (split private)."""

    shown = ("event", "seat", "card", "amount", "to")

    event: str
    seat: str
    card: str  # named by Richese when offered: public
    amount: int
    own: int
    support: int
    supporter: str | None
    to: str  # richese or bank

    def apply(self, state: RoomState) -> None:
        r = _round(state)
        state.cache.remove(self.card)
        state.seat(self.seat).hand.append(self.card)
        _pay(state, self.seat, self.own, self.supporter, self.support)
        if self.to == "bank":
            state.bank += self.own + self.support
        else:
            state.seat(self.to).spice += self.own + self.support
        r.stage, r.receipt = "payment", self.event
        state.receipts.append(Receipt(event=self.event, buyer=self.seat, card=self.card,
                                      amount=self.amount, emperor=None, stage="purchase"))

    def text(self) -> str:
        to = "the Spice Bank" if self.to == "bank" else faction(self.to)
        return (f"{faction(self.seat)} bought {card_name(self.card)} for {self.amount} "
                f"spice, paid to {to}")


class SaleUnsold(Event):
    shown = ("card", "to")

    card: str
    to: str  # richese (its hand) or removed

    def apply(self, state: RoomState) -> None:
        state.cache.remove(self.card)
        if self.to == "removed":
            state.removed.append(self.card)
        else:
            state.seat(self.to).hand.append(self.card)

    def text(self) -> str:
        if self.to == "removed":
            return f"Nobody bought {card_name(self.card)}: it leaves the game"
        return f"Nobody bought {card_name(self.card)}: it goes to {faction(self.to)}'s hand"


class SaleClosed(Event):
    shown = ("seat",)

    seat: str

    def apply(self, state: RoomState) -> None:
        r = _round(state)
        r.sale, r.sale_when, r.receipt, r.stage = None, None, None, "bidding"

    def text(self) -> str:
        return f"{faction(self.seat)}'s cache sale is over"


class BiddingClosed(Event):
    """The round is over: support released, nothing of it left but the log."""

    shown = ("event",)

    event: str

    def apply(self, state: RoomState) -> None:
        b = ROUND.of(state)
        assert b is not None and b.round is not None
        state.reservations = [x for x in state.reservations if x.reason not in (SUPPORT, BID)]
        state.commitments = [x for x in state.commitments if x.kind != KARAMA_BID]
        b.round = None

    def text(self) -> str:
        return "The bidding round is over"


# --- the view ----------------------------------------------------------------------


class HighShown(Shape):
    seat: Faction
    amount: int
    karama: bool


class UpShown(Shape):
    index: int
    starter: Faction
    turn: Faction
    high: HighShown | None
    passed: list[Faction]
    card: CardFace | None = None  # the Atreides seat's view only (prescience)


class SaleHighShown(Shape):
    seat: Faction
    amount: int


class SaleShown(Shape):
    when: Literal["first", "last"] | None
    card: CardFace | None
    auction: Literal["once_around", "silent"] | None
    bidders: list[Faction]
    turn: Faction | None
    high: SaleHighShown | None
    sealed: list[Faction]  # who has sent a sealed bid
    amounts: dict[str, int] | None  # every sealed amount, once all are in


class RoundShown(Shape):
    order: list[Faction]
    eligible: list[Faction]
    stage: str
    cards_left: int
    support: dict[str, int]
    up: UpShown | None
    sale: SaleShown | None
    dealt: list[CardFace] | None = None  # the Ixians' view only, while they choose


def view_part(state: RoomState, seat: str | None) -> dict[str, Any]:
    r = round_of(state)
    if r is None:
        return {"bidding": None}
    up = None
    if r.up is not None:
        high = r.up.high
        up = {"index": r.up.index, "starter": r.up.starter, "turn": r.up.turn,
              "high": None if high is None else {
                  "seat": high.seat, "amount": high.amount, "karama": high.karama is not None},
              "passed": list(r.up.passed)}
        if seat == ATREIDES:
            up["card"] = CARDS[r.auction[0]].public()
    view: dict[str, Any] = {
        "order": list(r.order), "eligible": eligible_seats(state, r.order),
        "stage": r.stage, "cards_left": len(r.auction), "support": dict(r.support),
        "up": up, "sale": _sale_view(r)}
    if seat == IXIANS and r.stage == "ixians":
        view["dealt"] = [CARDS[x].public() for x in r.dealt]
    return {"bidding": view}


def _sale_view(r: Round) -> dict[str, Any] | None:
    """The cache sale, public: the card Richese named, who bids, whose turn, the high bid
    once around, who has sent a sealed bid, and every amount only once all are in."""
    if r.sale_when is None and r.sale is None:
        return None
    sale = r.sale
    if sale is None:
        return {"when": r.sale_when, "card": None, "auction": None, "bidders": [],
                "turn": None, "high": None, "sealed": [], "amounts": None}
    return {"when": r.sale_when, "card": CARDS[sale.card].public(), "auction": sale.auction,
            "bidders": list(sale.bidders), "turn": sale.turn,
            "high": None if sale.high is None else {"seat": sale.high.seat,
                                                     "amount": sale.high.amount},
            "sealed": [f for f in sale.bidders if f in sale.sealed],
            "amounts": None if sale.revealed is None else dict(sale.revealed)}


def seen(state: RoomState, seat: str) -> list[str]:
    """The cards a seat may see named: Atreides the card up, the Ixians the dealt cards
    while they choose, Richese its cache while it names the card it sells."""
    r = round_of(state)
    if r is None:
        return []
    out = []
    if seat == ATREIDES and r.up is not None and r.auction:
        out.append(r.auction[0])
    if seat == IXIANS and r.stage == "ixians":
        out.extend(r.dealt)
    if seat == RICHESE and r.stage == "sale" and r.sale is None:
        out.extend(state.cache)  # its own cache, to name the card it sells
    return out


def in_auction(state: RoomState, card_id: str) -> bool:
    r = round_of(state)
    return r is not None and card_id in r.auction


def zones(state: RoomState) -> dict[str, list[str]]:
    r = round_of(state)
    return {"auction": [] if r is None else list(r.auction)}


def shuffled(event: AuctionShuffled,
             before: RoomState | None) -> tuple[list[str], list[str], bool]:
    """A verifier's check of the auction's shuffle after the Ixians' choice."""
    assert before is not None
    return list(_round(before).auction), list(event.order), False


# --- the actions (domain/actions.py keeps those the rules accept) ---------------------


def action_candidates(state: RoomState, seat: str) -> Iterator[c.Candidate]:
    r = round_of(state)
    if r is None:
        return
    up = r.up
    if r.stage == "bidding" and up is not None and up.turn == seat:
        low = 1 + (0 if up.high is None else up.high.amount)
        top = can_pay(state, seat)
        if top >= low:
            yield {"type": "bid"}, {"amount": {"kind": "amount", "min": low, "max": top}}
        for k in karama_cards(state, seat):
            yield ({"type": "bid", "karama": k},
                   {"amount": {"kind": "amount", "min": low, "max": SPICE_MAX}})
        yield {"type": "pass_bid"}, {}
        for k in karama_cards(state, seat):
            yield {"type": "karama_buy", "karama": k}, {}
    if r.stage == "ixians" and seat == IXIANS:
        for x in r.dealt:
            for where in ("top", "bottom"):
                yield {"type": "ix_set_aside", "card": x, "where": where}, {}
    if r.stage == "richese" and seat == RICHESE:
        for when in ("first", "last", "none"):
            yield {"type": "richese_sale", "when": when}, {}
    sale = r.sale
    if r.stage == "sale" and sale is None and seat == RICHESE:
        for cid in state.cache:
            for auction in ("once_around", "silent"):
                yield {"type": "richese_offer", "card": cid, "auction": auction}, {}
    if sale is not None and sale.auction == "once_around" and sale.turn == seat:
        low = 1 + (0 if sale.high is None else sale.high.amount)
        top = can_pay(state, seat)
        if top >= low:
            yield {"type": "bid"}, {"amount": {"kind": "amount", "min": low, "max": top}}
        yield {"type": "pass_bid"}, {}
    if sale is not None and sale.auction == "silent" and seat in sale.bidders:
        yield {"type": "sealed_bid"}, {"amount": {"kind": "amount", "min": 0,
                                                  "max": can_pay(state, seat)}}
    me = state.seat(seat)
    if me.ally is not None:
        spent = r.spent.get(seat, 0)
        top = state.free_spice(seat) + r.support.get(seat, 0)
        yield {"type": "bid_support"}, {"amount": {"kind": "amount", "min": spent,
                                                   "max": max(spent, top)}}


EFFECT = Effect(
    name="bidding",
    order=120,
    commands=(Bid, PassBid, KaramaBuy, BidSupport, IxSetAside, IxReplace, RicheseSale,
              RicheseOffer, SealedBid),
    operator=(OpenBidding,),
    # Its bids, passes and the round's choices it is asked for (RULES 10).
    autopilot={Bid: None, PassBid: None, SealedBid: None, IxSetAside: None, IxReplace: None,
               RicheseSale: None},
    handlers={OpenBidding: open_bidding, Bid: bid, PassBid: pass_bid, KaramaBuy: karama_buy,
              BidSupport: bid_support, IxSetAside: ix_set_aside, IxReplace: ix_replace,
              RicheseSale: richese_sale, RicheseOffer: richese_offer,
              SealedBid: sealed_bid},
    events=(BiddingOpened, RicheseSaleChosen, CardsDealt, IxiansChoosing, CardSetAside,
            AuctionShuffled, CardUp, BidPlaced, BidPassed, KaramaBought, CardSold,
            CardsReturned, SupportSet, SaleOpened, SaleOffered, SealedBidPlaced,
            SealedBidsRevealed, CacheCardSold, SaleUnsold, SaleClosed, BiddingClosed),
    part=ROUND,
    view=view_part,
    view_shapes=ViewShapes(public={"bidding": RoundShown | None}),
    offers=(Offer("move", action_candidates),),
    windows=purchase.windows(SOURCE),
    zones=zones,
    outcomes={AuctionShuffled: shuffled},
    discloses=Disclosure(seat=seen, hidden=in_auction),
)
