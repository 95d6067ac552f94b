"""Distrans: give one card from your hand to another seat with room, then discard
Distrans (RULES 5).

The given card must be physically in the giver's hand (never the Richese
cache: refused like any card not in the hand, with one message) and free:
not committed elsewhere, not under a gift offer, and not Distrans itself.
The search lock refuses the whole command while a Box search is open, so the
Box reserved by a search can never be given. The discard of Distrans is an
ordinary single-seat discard: Semuta may react.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from dune_ledger.domain import commands as c
from dune_ledger.domain.catalog import CARDS, Faction
from dune_ledger.domain.commands import CardId, Command
from dune_ledger.domain.custody import check_own_card, discard_card
from dune_ledger.domain.effect import Effect, Offer
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.events import Event
from dune_ledger.domain.rules import Tx
from dune_ledger.domain.state import RoomState
from dune_ledger.domain.words import card, faction


class Distrans(Command):
    type: Literal["distrans"]
    card: CardId
    give: CardId
    to: Faction


def is_distrans(card_id: str) -> bool:
    return card_id in CARDS and CARDS[card_id].effect == "distrans"


class CardGiven(Event):
    seat: str
    to: str
    card: str  # private to the two seats
    via: str  # the card whose effect moved it

    def apply(self, state: RoomState) -> None:
        state.seat(self.seat).hand.remove(self.card)
        state.seat(self.to).hand.append(self.card)

    def public(self) -> dict[str, Any]:
        return {"seat": self.seat, "to": self.to, "via": self.via}

    def text(self) -> str:
        return f"{faction(self.seat)} gave a card to {faction(self.to)} with {card(self.via)}"


def distrans(tx: Tx, actor: str, cmd: Distrans) -> None:
    state = tx.state
    check_own_card(state, actor, cmd.card)
    if not is_distrans(cmd.card):
        raise Rejection("not_a_distrans", "that card is not Distrans")
    if cmd.give == cmd.card:
        raise Rejection("invalid_command", "Distrans gives another card, not itself")
    check_own_card(state, actor, cmd.give)
    if not state.has_seat(cmd.to):
        raise Rejection("unknown_seat", "that faction has no seat in this room")
    if cmd.to == actor:
        raise Rejection("invalid_target", "Distrans gives a card to another seat")
    receiver = state.seat(cmd.to)
    # Hand counts are public: naming the full hand reveals nothing hidden.
    if len(receiver.hand) >= receiver.limit:
        raise Rejection("hand_over_limit", "the receiver's hand has no room")
    tx.emit(CardGiven(seat=actor, to=cmd.to, card=cmd.give, via=cmd.card))
    discard_card(tx, actor, cmd.card)


# --- the actions (domain/actions.py keeps those the rules accept) ---------------------


def action_candidates(state: RoomState, seat: str) -> Iterator[c.Candidate]:
    hand = state.seat(seat).hand
    others = [s.faction for s in state.seats if s.faction != seat]
    for cid in hand:
        if is_distrans(cid):
            for give in hand:
                if give != cid:
                    for to in others:
                        yield {"type": "distrans", "card": cid, "give": give, "to": to}, {}


EFFECT = Effect(
    name="distrans",
    order=30,
    commands=(Distrans,),
    handlers={Distrans: distrans},
    events=(CardGiven,),
    offers=(Offer("move", action_candidates),),
)
