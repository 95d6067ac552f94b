"""Richese gifts: a card offered to the ally, who accepts or declines (RULES 5).

The offer lives in `state.gift` and commits the card while it is open
(`custody.check_own_card` refuses a card under offer, so a Box under offer
cannot be activated, discarded or given). The offer is not part of
`state.control`: a Box search of another card leaves it exactly as it was,
and the search lock refuses the answer until the search closes. The card's
identity is shown only to the giver and the ally; everyone sees that an
offer is open.
"""

from __future__ import annotations

from typing import Any

from domain import commands as c
from domain.catalog import CARDS
from domain.custody import check_own_card
from domain.errors import Rejection
from domain.events import Event
from domain.rules import Tx, handles
from domain.state import RoomState

GIVER = "richese"


class GiftOffered(Event):
    event: str  # this event's own id: the answer quotes it
    giver: str
    to: str
    card: str  # private to the giver and the ally
    turn: int
    phase: int

    def apply(self, state: RoomState) -> None:
        state.gift = {
            "event": self.event, "giver": self.giver, "to": self.to, "card": self.card,
            "turn": self.turn, "phase": self.phase,
            "public": {"event": self.event, "giver": self.giver, "to": self.to},
        }

    def public(self) -> dict[str, Any]:
        return {"event": self.event, "giver": self.giver, "to": self.to}

    def text(self) -> str:
        return f"{self.giver} offered a card to {self.to}"


class GiftAccepted(Event):
    event: str
    giver: str
    to: str
    card: str  # private

    def apply(self, state: RoomState) -> None:
        state.seat(self.giver).hand.remove(self.card)
        state.seat(self.to).hand.append(self.card)
        state.gift = None

    def public(self) -> dict[str, Any]:
        return {"event": self.event, "giver": self.giver, "to": self.to}

    def text(self) -> str:
        return f"{self.to} accepted the card {self.giver} offered"


class GiftDeclined(Event):
    event: str
    giver: str
    to: str

    def apply(self, state: RoomState) -> None:
        state.gift = None

    def public(self) -> dict[str, Any]:
        return {"event": self.event, "giver": self.giver, "to": self.to}

    def text(self) -> str:
        return f"{self.to} declined the card {self.giver} offered"


@handles(c.OfferGift)
def offer_gift(tx: Tx, actor: str, cmd: c.OfferGift) -> None:
    state = tx.state
    if actor != GIVER:
        raise Rejection("not_eligible", "only Richese offers cards to its ally")
    if state.gift is not None:
        raise Rejection("gift_pending", "an offer is already open")
    if not state.has_seat(cmd.to) or state.seat(actor).ally != cmd.to:
        raise Rejection("not_ally", f"{cmd.to} is not your ally")
    check_own_card(state, actor, cmd.card)
    tx.emit(GiftOffered(event=tx.next_event_id(), giver=actor, to=cmd.to, card=cmd.card,
                        turn=state.turn, phase=state.phase))


@handles(c.AnswerGift)
def answer_gift(tx: Tx, actor: str, cmd: c.AnswerGift) -> None:
    state = tx.state
    gift = state.gift
    if gift is None or gift["event"] != cmd.event:
        raise Rejection("stale_event", "that offer is not open")
    if gift["to"] != actor:
        raise Rejection("not_your_decision", "only the ally offered the card answers")
    if (gift["turn"], gift["phase"]) != (state.turn, state.phase):
        raise Rejection("stale_event", "that offer belongs to another turn or phase")
    if not cmd.accept:
        tx.emit(GiftDeclined(event=gift["event"], giver=gift["giver"], to=actor))
        return
    if gift["card"] not in state.seat(gift["giver"]).hand:
        # The offer commits the card, so this only guards a malformed state.
        raise Rejection("gift_invalid", "the offered card is no longer in the giver's hand")
    seat = state.seat(actor)
    if len(seat.hand) >= seat.limit:
        raise Rejection("hand_over_limit", f"your hand is at its limit of {seat.limit}")
    tx.emit(GiftAccepted(event=gift["event"], giver=gift["giver"], to=actor, card=gift["card"]))


def gift_view(state: RoomState, faction: str | None) -> dict[str, Any] | None:
    """The open offer: public shape, plus the card for the giver and the ally."""
    gift = state.gift
    if gift is None:
        return None
    part = dict(gift.get("public", {}))
    if faction is not None and faction in (gift.get("giver"), gift.get("to")):
        part["card"] = CARDS[gift["card"]].public()
    return part
