"""Spice Glass, a sample effect (no card of the printed game): its holder pays 1 spice to
the Spice Bank to look at the top card of the deck. What it saw is its own to see while
the card is still on top, and nobody else's.

The whole effect is this module and its card in the catalog (`domain/cards.json`):
a command, its handler, an event, a part of the room state and of the views, an action
and what it discloses, declared in one `EFFECT`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from dune_ledger.domain import commands as c
from dune_ledger.domain.catalog import CARDS
from dune_ledger.domain.commands import CardId, Command
from dune_ledger.domain.custody import check_own_card, shuffle_late
from dune_ledger.domain.effect import Disclosure, Effect, Offer, Part
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.events import Event
from dune_ledger.domain.rules import Tx
from dune_ledger.domain.state import RoomState
from dune_ledger.domain.words import card, faction

FEE = 1


class LookAtDeck(Command):
    type: Literal["spice_glass"]
    card: CardId


class Seen(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tops: dict[str, str] = Field(default_factory=dict)  # seat -> the top card it saw


SEEN = Part("spice_glass", Seen)


class DeckTopSeen(Event):
    seat: str
    card: str  # the Spice Glass used: public
    top: str  # the top card of the deck: private to the seat

    def apply(self, state: RoomState) -> None:
        state.seat(self.seat).spice -= FEE
        state.bank += FEE
        seen = SEEN.of(state) or Seen()
        seen.tops[self.seat] = self.top
        SEEN.set(state, seen)

    def public(self) -> dict[str, Any]:
        return {"seat": self.seat, "card": self.card}

    def text(self) -> str:
        return (f"{faction(self.seat)} paid {FEE} spice to look at the top card of the deck "
                f"with {card(self.card)}")


def is_glass(card_id: str) -> bool:
    return card_id in CARDS and CARDS[card_id].effect == "spice_glass"


def look(tx: Tx, actor: str, cmd: LookAtDeck) -> None:
    state = tx.state
    check_own_card(state, actor, cmd.card)
    if not is_glass(cmd.card):
        raise Rejection("not_eligible", "that card is not a Spice Glass")
    if state.free_spice(actor) < FEE:
        raise Rejection("insufficient_spice", f"a look costs {FEE} spice free of reservations")
    if not state.deck:
        raise Rejection("no_card", "the deck is empty")
    shuffle_late(tx)  # a committed room's deck is shuffled before anyone sees its top
    tx.emit(DeckTopSeen(seat=actor, card=cmd.card, top=tx.state.deck[0]))


def seen_top(state: RoomState, seat: str) -> list[str]:
    """The top card this seat saw, while it is still on top."""
    seen = SEEN.of(state)
    top = None if seen is None else seen.tops.get(seat)
    return [top] if top is not None and state.deck[:1] == [top] else []


def view_part(state: RoomState, seat: str | None) -> dict[str, Any]:
    shown = [] if seat is None else seen_top(state, seat)
    return {"spice_glass": {"top": CARDS[shown[0]].public()} if shown else None}


def offers(state: RoomState, seat: str) -> Iterator[c.Candidate]:
    for cid in state.seat(seat).hand:
        if is_glass(cid):
            yield {"type": "spice_glass", "card": cid}, {}


EFFECT = Effect(
    name="spice_glass",
    order=110,
    commands=(LookAtDeck,),
    handlers={LookAtDeck: look},
    events=(DeckTopSeen,),
    part=SEEN,
    view=view_part,
    offers=(Offer("move", offers),),
    discloses=Disclosure(seat=seen_top),
)
