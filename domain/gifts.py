"""Richese gifts: a card offered to the ally, who accepts or declines (RULES 5).

The open offer is the room's `response` (kind "gift", its `event`, the ally
waiting), so a Box search saves and restores it as parent control like any
other response. It has no deadline: it waits for the ally's answer. It
commits the card while it is open (`custody.check_own_card` refuses a card
under offer). The card's identity is shown only to the giver and the ally;
everyone sees that an offer is open.

An offer recorded before gifts were responses (GiftOffered v1) replays as it
was recorded: in `state.gift`, beside the response slot.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from dune_ledger.domain import commands as c
from dune_ledger.domain.catalog import CARDS, Faction
from dune_ledger.domain.commands import CardId, Command, EventId
from dune_ledger.domain.custody import check_own_card
from dune_ledger.domain.effect import Disclosure, Effect, Offer
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.events import Event
from dune_ledger.domain.responses import WindowKind, window_view
from dune_ledger.domain.rules import Tx
from dune_ledger.domain.state import GiftFacts, GiftOffer, ResponseWindow, RoomState
from dune_ledger.domain.words import faction

GIVER = "richese"
KIND = "gift"


class OfferGift(Command):
    type: Literal["offer_gift"]
    card: CardId
    to: Faction


class AnswerGift(Command):
    type: Literal["answer_gift"]
    event: EventId
    accept: bool


def offer_of(state: RoomState) -> ResponseWindow | None:
    """The open offer as a response window: the room's response, or a v1 offer."""
    w = state.control.response
    if w is not None and w.kind == KIND:
        return w
    g = state.gift
    if g is None:
        return None
    return ResponseWindow(kind=KIND, event=g.event, turn=g.turn, phase=g.phase,
                          data={"giver": g.giver, "to": g.to, "card": g.card,
                                "public": {"giver": g.giver, "to": g.to}})


def _ally(state: RoomState, window: ResponseWindow) -> list[str]:
    return [window.data["to"]]


def _never_resolved(tx: Tx, window: ResponseWindow, cancelled_by: str | None) -> None:
    raise AssertionError("a gift offer is answered with answer_gift")


def _card_shown(state: RoomState, window: ResponseWindow, seat: str | None) -> dict[str, Any]:
    """The offered card, for the giver and the ally only."""
    if seat not in (window.data["giver"], window.data["to"]):
        return {}
    return {"card": CARDS[window.data["card"]].public()}


def _answers(state: RoomState, window: ResponseWindow, seat: str) -> Iterator[c.Candidate]:
    if state.gift is None or state.gift.event != window.event:  # else as a v1 offer
        for accept in (True, False):
            yield {"type": "answer_gift", "event": window.event, "accept": accept}, {}


WINDOW = WindowKind(
    KIND, _never_resolved, asked=_ally, command="answer_gift", expire=None, answers=_answers,
    says="Accepting puts the offered card in your hand; refusing leaves it with Richese.",
    shown=_card_shown)


def _clear(state: RoomState, event: str) -> None:
    w = state.control.response
    if w is not None and w.kind == KIND and w.event == event:
        state.control.response = None
    else:
        state.gift = None


class GiftOffered(Event):
    """v2: the offer is the room's response (v1: `state.gift`, kept for old streams)."""

    schema_version = 2
    event: str  # this event's own id: the answer quotes it
    giver: str
    to: str
    card: str  # private to the giver and the ally
    turn: int
    phase: int
    legacy: bool = False  # recorded as v1

    @classmethod
    def upcast(cls, data: dict[str, Any], from_version: int) -> dict[str, Any]:
        if from_version == 1:
            return {**data, "legacy": True}
        return super().upcast(data, from_version)

    def apply(self, state: RoomState) -> None:
        if self.legacy:
            state.gift = GiftOffer(
                event=self.event, giver=self.giver, to=self.to, card=self.card,
                turn=self.turn, phase=self.phase,
                public=GiftFacts(event=self.event, giver=self.giver, to=self.to))
            return
        state.control.response = ResponseWindow(
            kind=KIND, event=self.event, turn=self.turn, phase=self.phase,
            data={"giver": self.giver, "to": self.to, "card": self.card,
                  "public": {"giver": self.giver, "to": self.to}},
        )

    def public(self) -> dict[str, Any]:
        return {"event": self.event, "giver": self.giver, "to": self.to}

    def text(self) -> str:
        return f"{faction(self.giver)} offered a card to {faction(self.to)}"


class GiftAccepted(Event):
    event: str
    giver: str
    to: str
    card: str  # private

    def apply(self, state: RoomState) -> None:
        state.seat(self.giver).hand.remove(self.card)
        state.seat(self.to).hand.append(self.card)
        _clear(state, self.event)

    def public(self) -> dict[str, Any]:
        return {"event": self.event, "giver": self.giver, "to": self.to}

    def text(self) -> str:
        return f"{faction(self.to)} accepted the card {faction(self.giver)} offered"


class GiftDeclined(Event):
    event: str
    giver: str
    to: str

    def apply(self, state: RoomState) -> None:
        _clear(state, self.event)

    def public(self) -> dict[str, Any]:
        return {"event": self.event, "giver": self.giver, "to": self.to}

    def text(self) -> str:
        return f"{faction(self.to)} declined the card {faction(self.giver)} offered"


def offer_gift(tx: Tx, actor: str, cmd: OfferGift) -> None:
    state = tx.state
    if actor != GIVER:
        raise Rejection("not_eligible", "only Richese offers cards to its ally")
    if offer_of(state) is not None:
        raise Rejection("gift_pending", "an offer is already open")
    if state.control.response is not None:
        raise Rejection("response_pending", "a response window is open: it closes first")
    if not state.has_seat(cmd.to) or state.seat(actor).ally != cmd.to:
        raise Rejection("not_ally", "that seat is not your ally")
    check_own_card(state, actor, cmd.card)
    tx.emit(GiftOffered(event=tx.next_event_id(), giver=actor, to=cmd.to, card=cmd.card,
                        turn=state.turn, phase=state.phase))


def answer_gift(tx: Tx, actor: str, cmd: AnswerGift) -> None:
    state = tx.state
    w = offer_of(state)
    if w is None or w.event != cmd.event:
        raise Rejection("stale_event", "that offer is not open")
    gift = w.data
    if gift["to"] != actor:
        raise Rejection("not_your_decision", "only the ally offered the card answers")
    if (w.turn, w.phase) != (state.turn, state.phase):
        raise Rejection("stale_event", "that offer belongs to another turn or phase")
    if not cmd.accept:
        tx.emit(GiftDeclined(event=w.event, giver=gift["giver"], to=actor))
        return
    if gift["card"] not in state.seat(gift["giver"]).hand:
        # The offer commits the card, so this only guards a malformed state.
        raise Rejection("gift_invalid", "the offered card is no longer in the giver's hand")
    seat = state.seat(actor)
    if len(seat.hand) >= seat.limit:
        raise Rejection("hand_over_limit", f"your hand is at its limit of {seat.limit}")
    tx.emit(GiftAccepted(event=w.event, giver=gift["giver"], to=actor, card=gift["card"]))


# --- the actions (domain/actions.py keeps those the rules accept) ---------------------


def answer_candidates(state: RoomState, seat: str) -> Iterator[c.Candidate]:
    """The answers to an offer recorded before gifts were responses (v1)."""
    gift = state.gift
    if gift is not None and gift.to == seat:
        for accept in (True, False):
            yield {"type": "answer_gift", "event": gift.event, "accept": accept}, {}


def action_candidates(state: RoomState, seat: str) -> Iterator[c.Candidate]:
    me = state.seat(seat)
    if seat == GIVER and me.ally is not None:
        for cid in me.hand:
            yield {"type": "offer_gift", "card": cid, "to": me.ally}, {}


# --- the view and what it discloses --------------------------------------------------


def view_part(state: RoomState, seat: str | None) -> dict[str, Any]:
    """An offer recorded before gifts were responses (v1) shows as the room's response."""
    if state.gift is None or state.control.response is not None:
        return {}
    return {"response": window_view(state, offer_of(state), seat)}


def gift_card(state: RoomState, seat: str) -> list[str]:
    """The offered card, for the giver and the ally."""
    gift = offer_of(state)
    if gift is not None and seat in (gift.data["giver"], gift.data["to"]):
        return [gift.data["card"]]
    return []


EFFECT = Effect(
    name="gifts",
    order=40,
    commands=(OfferGift, AnswerGift),
    handlers={OfferGift: offer_gift, AnswerGift: answer_gift},
    events=(GiftOffered, GiftAccepted, GiftDeclined),
    view=view_part,
    offers=(Offer("offer", answer_candidates), Offer("move", action_candidates)),
    windows=(WINDOW,),
    discloses=Disclosure(seat=gift_card),
)
