"""Guild shipping-cost provenance and the Guild's special stop (RULES 3.5, advanced).

A Karama spent to pay for a shipment lies in the discard pile as that
shipment's cost, with a record (card, creator, beneficiary, price, claimed).
The stop refunds that exact card to its creator's hand only while the record
is unclaimed and the card is still in the pile. A Box retrieving the card
marks the record claimed through a private field of its CardRetrieved
(`claims`, asked by `nullentropy.settle_search`); price, creator and beneficiary never
change, and a later rediscard does not make it refundable again. A Box
retrieving any other card leaves the record as it was.

Whether a stop is accepted depends only on public facts (RULES 3.5): a stop
while the creator's hand is at its limit is refused whether or not the record
was claimed (hand counts are public). Interpretations (the seeds are silent):
each record can be stopped once; a stop of a claimed record, or of a record
whose card has left the pile, is accepted and refunds nothing, which is public
by the rules. No spice moves: the record's price is the shipment's price, kept
as evidence.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from dune_ledger.domain import commands as c
from dune_ledger.domain.commands import CardId, Command
from dune_ledger.domain.effect import Effect, Offer
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.events import Event
from dune_ledger.domain.rules import Tx
from dune_ledger.domain.state import RoomState, ShippingCost
from dune_ledger.domain.words import card, faction

GUILD = "guild"


class GuildStop(Command):
    type: Literal["guild_stop"]
    card: CardId


def record(state: RoomState, card_id: str) -> ShippingCost | None:
    return next((r for r in state.shipping_costs if r.card == card_id), None)


class ShippingCostClaimed(Event):
    """A Box retrieved the exact cost card: its refund is spent for ever. Only in
    streams recorded before CardRetrieved v2 carried the claim; never emitted now."""

    card: str
    search: str

    def apply(self, state: RoomState) -> None:
        rec = record(state, self.card)
        assert rec is not None
        rec.claimed = True

    def public(self) -> None:
        # Which card a search took stays private to its owner (RULES 3.4).
        return None

    def text(self) -> str:
        return "A shipping cost was claimed"


class ShipmentStopped(Event):
    card: str
    creator: str
    refunded: bool

    def apply(self, state: RoomState) -> None:
        rec = record(state, self.card)
        assert rec is not None
        rec.stopped = True

    def public(self) -> dict[str, Any]:
        return {"card": self.card, "creator": self.creator, "refunded": self.refunded}

    def text(self) -> str:
        outcome = "its cost is refunded" if self.refunded else "nothing is refunded"
        return (f"The Guild stopped {faction(self.creator)}'s shipment paid with "
                f"{card(self.card)}: {outcome}")


class ShippingCostRefunded(Event):
    card: str
    creator: str

    def apply(self, state: RoomState) -> None:
        rec = record(state, self.card)
        assert rec is not None
        state.discard.remove(self.card)
        state.seat(self.creator).hand.append(self.card)
        rec.claimed = True

    def public(self) -> dict[str, Any]:
        # The card left the face-up pile: public, like every discard.
        return {"card": self.card, "creator": self.creator}

    def text(self) -> str:
        return f"{card(self.card)} went back from the discard pile to {faction(self.creator)}"


def refundable(state: RoomState, rec: ShippingCost) -> bool:
    return not rec.claimed and rec.card in state.discard


def guild_stop(tx: Tx, actor: str, cmd: GuildStop) -> None:
    state = tx.state
    if state.mode != "advanced":
        raise Rejection("not_advanced", "the Guild's special stop is an advanced rule")
    if actor != GUILD:
        raise Rejection("not_eligible", "only the Guild stops a shipment")
    rec = record(state, cmd.card)
    if rec is None:
        raise Rejection("unknown_card", "no shipment was paid with that card")
    if rec.stopped:
        raise Rejection("already_stopped", "that shipment was already stopped")
    # RULES 3.5: decided on public facts first. Hand counts are public, so the
    # capacity check runs whether or not a Box claimed the record: a refused stop
    # never tells the Guild what a search took.
    creator = state.seat(rec.creator)
    if len(creator.hand) >= creator.limit:
        raise Rejection("hand_over_limit", "the creator's hand has no room for the refund")
    # Public by the rules themselves (RULES 7): a stop that refunds moves the card to
    # its creator's hand for all to count, so whether the record was still unclaimed
    # shows in the events' number and in `refunded`. An accepted stop of a claimed
    # record refunds nothing and still spends the stop. The printed game wins here.
    refund = refundable(state, rec)
    tx.emit(ShipmentStopped(card=rec.card, creator=rec.creator, refunded=refund))
    if refund:
        tx.emit(ShippingCostRefunded(card=rec.card, creator=rec.creator))


def claims(state: RoomState, card_id: str) -> bool:
    """Whether a Box retrieving this card claims an unclaimed shipping cost: the
    private `claimed` field of its CardRetrieved (RULES 3.5, 7)."""
    rec = record(state, card_id)
    return rec is not None and not rec.claimed


# --- the actions (domain/actions.py keeps those the rules accept) ---------------------

COST_CARD = {"kind": "card", "of": "an unstopped shipping-cost record"}


def action_candidates(state: RoomState, seat: str) -> Iterator[c.Candidate]:
    """Whether some record can be stopped is public (the costs were paid face up and every
    stop is public); which card it is may not be any more: the card is asked of each
    record and never listed."""
    if seat == GUILD and state.mode == "advanced":
        for rec in state.shipping_costs:
            if not rec.stopped:
                yield {"type": "guild_stop", "card": rec.card}, {"card": COST_CARD}


EFFECT = Effect(
    name="guild",
    order=90,
    commands=(GuildStop,),
    handlers={GuildStop: guild_stop},
    events=(ShippingCostClaimed, ShipmentStopped, ShippingCostRefunded),
    offers=(Offer("move", action_candidates),),
)
