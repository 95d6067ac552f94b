"""Ordinary custody: drawing, discarding and seat control.

`draw_card` and `discard_card` are the only paths that move a card between
the deck, a hand and the discard pile outside the Box; every rules module
uses them. They refuse while a search is open (RULES 3.3, second line of
defence): the Box settlement path does not go through them. A committed
room's deck is shuffled at its first draw (`shuffle_late`, RULES 9); what a
discard sets off (a Semuta window) its effect declares (`Effect.after_discard`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal, get_args

from dune_ledger.domain import commands as c
from dune_ledger.domain.catalog import CARDS
from dune_ledger.domain.commands import CardId, Command
from dune_ledger.domain.effect import HOUSE, Disclosure, Effect, Offer
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.events import Event, RngField, rng_public
from dune_ledger.domain.rules import Tx
from dune_ledger.domain.state import Profile, RoomState
from dune_ledger.domain.words import card, faction


class SetAutopilot(Command):
    type: Literal["set_autopilot"]
    enabled: bool
    profile: Literal["easy", "medium", "hard", "brutal"] | None = None


class Discard(Command):
    type: Literal["discard"]
    card: CardId


class Draw(Command):
    type: Literal["draw"]


class DeckShuffled(Event):
    """A committed room's deck, shuffled late (RULES 9), top first: private."""

    order: list[str]
    rng: dict[str, Any] | None = RngField

    def apply(self, state: RoomState) -> None:
        state.deck = list(self.order)
        assert state.fairness is not None
        state.fairness.deck_shuffled = True

    def public(self) -> dict[str, Any]:
        return {"count": len(self.order), **rng_public(self.rng)}

    def text(self) -> str:
        return f"The deck was shuffled ({len(self.order)} cards)"


class CardDrawn(Event):
    seat: str
    card: str

    def apply(self, state: RoomState) -> None:
        assert state.deck[0] == self.card
        state.deck.pop(0)
        state.seat(self.seat).hand.append(self.card)

    def public(self) -> dict[str, Any]:
        return {"seat": self.seat}

    def text(self) -> str:
        return f"{faction(self.seat)} drew a card"


class DiscardReshuffled(Event):
    """The empty deck was refilled from the whole discard pile, in this order."""

    order: list[str]
    rng: dict[str, Any] | None = RngField

    def apply(self, state: RoomState) -> None:
        state.deck = list(self.order)
        state.discard = []
        if state.fairness is not None:
            state.fairness.deck_shuffled = True  # the deck is shuffled now: no late shuffle

    def public(self) -> dict[str, Any]:
        return {"count": len(self.order), **rng_public(self.rng)}

    def text(self) -> str:
        return f"The discard pile ({len(self.order)} cards) was shuffled into the empty deck"


class CardDiscarded(Event):
    seat: str
    card: str

    def apply(self, state: RoomState) -> None:
        state.seat(self.seat).hand.remove(self.card)
        state.discard.append(self.card)
        if self.card in state.pile_unseen:
            state.pile_unseen.remove(self.card)

    def public(self) -> dict[str, Any]:
        # A discard is played face up: the card is public from now on.
        return {"seat": self.seat, "card": self.card}

    def text(self) -> str:
        return f"{faction(self.seat)} discarded {card(self.card)}"


class AutopilotSet(Event):
    seat: str
    profile: str | None

    def apply(self, state: RoomState) -> None:
        state.seat(self.seat).autopilot = self.profile  # type: ignore[assignment]

    def public(self) -> dict[str, Any]:
        return {"seat": self.seat, "profile": self.profile}

    def text(self) -> str:
        if self.profile is None:
            return f"{faction(self.seat)} turned autopilot off"
        return f"{faction(self.seat)} turned autopilot on ({self.profile})"


def assert_unlocked(state: RoomState) -> None:
    if state.search is not None:
        raise Rejection("locked", "a Nullentropy Box search is open")


def can_draw(state: RoomState) -> bool:
    return bool(state.deck or state.discard)


def draw_card(tx: Tx, seat: str) -> str | None:
    """Draw the top card for `seat`, recycling the pile only into an empty deck.

    Returns the card drawn, or None when both deck and pile are empty.
    """
    assert_unlocked(tx.state)
    if not tx.state.deck:
        if not tx.state.discard:
            return None
        order = tx.shuffle(list(tx.state.discard))
        tx.emit(DiscardReshuffled(order=order, rng=tx.drawn()))
    else:
        shuffle_late(tx)
    top = tx.state.deck[0]
    tx.emit(CardDrawn(seat=seat, card=top))
    return top


def discard_card(tx: Tx, seat: str, card_id: str) -> None:
    assert_unlocked(tx.state)
    discarded = tx.next_event_id()
    tx.emit(CardDiscarded(seat=seat, card=card_id))
    for follow in HOUSE.after_discard:
        follow(tx, seat, [card_id], discarded)


def shuffle_late(tx: Tx) -> None:
    """RULES 9: a committed room's deck is shuffled at its first draw, so that the
    seeds set before play take part. Whether it is shuffled is public (first draw)."""
    f = tx.state.fairness
    if f is None or f.deck_shuffled or not tx.state.deck:
        return
    order = tx.shuffle(list(tx.state.deck))
    tx.emit(DeckShuffled(order=order, rng=tx.drawn()))


def check_own_card(state: RoomState, actor: str, card_id: str) -> None:
    """The card exists, is in the actor's hand and is not committed elsewhere."""
    if card_id not in CARDS:
        raise Rejection("unknown_card", "no card has that id")
    if card_id not in state.seat(actor).hand:
        raise Rejection("not_in_hand", "that card is not in your hand")
    kind = state.committed(card_id)
    if kind is not None:
        raise Rejection("card_committed", f"that card is committed ({kind})")
    if offered_card(state) == card_id:
        raise Rejection("card_committed", "that card is offered as a gift")


def offered_card(state: RoomState) -> str | None:
    """The card under an open gift offer: the room's `response` (kind gift), the
    response a search suspended, or an offer recorded before gifts were responses."""
    for w in (state.control.response,
              state.search.parent.response if state.search is not None else None):
        if w is not None and w.kind == "gift":
            return str(w.data["card"])
    return None if state.gift is None else state.gift.card


def draw(tx: Tx, actor: str, cmd: Draw) -> None:
    assert_unlocked(tx.state)
    seat = tx.state.seat(actor)
    if len(seat.hand) >= seat.limit:
        raise Rejection("hand_over_limit", f"your hand is at its limit of {seat.limit}")
    if not can_draw(tx.state):
        raise Rejection("no_card", "the deck and the discard pile are both empty")
    draw_card(tx, actor)


def discard(tx: Tx, actor: str, cmd: Discard) -> None:
    assert_unlocked(tx.state)
    check_own_card(tx.state, actor, cmd.card)
    discard_card(tx, actor, cmd.card)


def set_autopilot(tx: Tx, actor: str, cmd: SetAutopilot) -> None:
    # Seat control: accepted at any time, also during a search (RULES 3.7).
    if cmd.enabled and cmd.profile is None:
        raise Rejection("invalid_command", "profile is required to turn autopilot on")
    profile = cmd.profile if cmd.enabled else None
    if tx.state.seat(actor).autopilot == profile:
        raise Rejection("unchanged", "autopilot is already set that way")
    tx.emit(AutopilotSet(seat=actor, profile=profile))


# --- the actions (domain/actions.py keeps those the rules accept) ---------------------

# The profiles a seat may switch to, by its current one (None: off).
PROFILE_CHOICES: dict[str | None, dict[str, Any]] = {
    current: {"kind": "choice", "options": [p for p in get_args(Profile) if p != current]}
    for current in (None, *get_args(Profile))}


def seat_control(state: RoomState, seat: str) -> Iterator[c.Candidate]:
    """Accepted at any time (RULES 3.7)."""
    autopilot = state.seat(seat).autopilot
    if autopilot is not None:
        yield {"type": "set_autopilot", "enabled": False}, {}
    yield {"type": "set_autopilot", "enabled": True}, {"profile": PROFILE_CHOICES[autopilot]}


def action_candidates(state: RoomState, seat: str) -> Iterator[c.Candidate]:
    hand = state.seat(seat).hand
    yield {"type": "draw"}, {}
    for cid in hand:
        yield {"type": "discard", "card": cid}, {}


def reshuffled(event: DiscardReshuffled | DeckShuffled,
               before: RoomState | None) -> tuple[list[str], list[str], bool]:
    """A verifier's check of a shuffle into the deck: of the pile, or of the deck itself."""
    assert before is not None
    pile = before.discard if isinstance(event, DiscardReshuffled) else before.deck
    return list(pile), list(event.order), False


EFFECT = Effect(
    name="custody",
    order=20,
    commands=(SetAutopilot, Discard, Draw),
    any_time=(SetAutopilot,),  # seat control (RULES 3.7)
    handlers={SetAutopilot: set_autopilot, Discard: discard, Draw: draw},
    events=(DeckShuffled, CardDrawn, DiscardReshuffled, CardDiscarded, AutopilotSet),
    offers=(Offer("any_time", seat_control), Offer("move", action_candidates)),
    outcomes={DeckShuffled: reshuffled, DiscardReshuffled: reshuffled},
    # The deck's cards are nobody's to see named.
    discloses=Disclosure(hidden=lambda state, card_id: card_id in state.deck),
)
