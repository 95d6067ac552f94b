"""Semuta Drug: take a card another seat just discarded, then discard Semuta (RULES 3.6).

After a single-seat discard (ordinary `custody.discard_card`, and the Box's
final discard in `nullentropy.settle_search`) a reaction window opens unless
Semuta Drug is publicly out of reach (in the Richese cache, in the discard
pile, removed, or not in the room): whether it opens never tells anyone who
holds Semuta (RULES 7). It is a `ResponseWindow` of kind "semuta" bound to
that discard event and its physical cards, and it lists as waiting every
seat other than the discarder that has a card in hand (a public count).
Only the Semuta holder can take; the others can only pass. It closes when
the holder takes, when every waiting seat has passed, or at its deadline.
Retrieving a card by a Box is not a discard and a shuffle is not a series of
discards, so a window never names the retrieved card and never re-runs a
search.

The window lives in `state.control.response`, so a Box search suspends and
restores it (passes and remaining time included) like any other window. Only
one response window can be open: when another window holds the slot, the
new Semuta window waits in `state.semuta.queue` (first in, first out) and
opens when the slot is free. Every reaction goes through the queue and a
continuation opens it, so with a free slot it opens in the same append as
the discard. Interpretation: the seeds leave concurrent reaction priority
open, so the queue only preserves discard order; it claims no printed ordering.

The cards a window is bound to are not Box candidates while it is open,
suspended or queued (`bound_cards`), so they leave the pile only by public
events (a take, a refund, a reshuffle): what is takeable is public. A take is
public, and so is a pass (everyone is asked, so a pass names nobody's cards).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from dune_ledger.domain import commands as c
from dune_ledger.domain.catalog import CARDS, Faction, card_objects
from dune_ledger.domain.commands import CardId, Command, EventId
from dune_ledger.domain.custody import check_own_card, discard_card
from dune_ledger.domain.effect import Effect, ViewShapes
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.events import DeadlineSinceV2, Event
from dune_ledger.domain.responses import WindowKind, holding_cards
from dune_ledger.domain.rules import Tx
from dune_ledger.domain.shapes import CardFace, Shape
from dune_ledger.domain.state import ResponseWindow, RoomState, SemutaQueue
from dune_ledger.domain.words import card, faction

KIND = "semuta"


class Semuta(Command):
    type: Literal["semuta"]
    event: EventId
    action: Literal["pass", "take"]
    card: CardId | None = None


def is_semuta(card_id: str) -> bool:
    return card_id in CARDS and CARDS[card_id].effect == "semuta_drug"


def free_semuta(state: RoomState, faction: str) -> str | None:
    """The seat's Semuta Drug that it may play now, if any."""
    for cid in state.seat(faction).hand:
        if not is_semuta(cid):
            continue
        try:
            check_own_card(state, faction, cid)
        except Rejection:
            continue
        return cid
    return None


def open_window(state: RoomState) -> ResponseWindow | None:
    w = state.control.response
    return w if w is not None and w.kind == KIND else None


def queue(state: RoomState) -> list[ResponseWindow]:
    return [] if state.semuta is None else list(state.semuta.queue)


def takeable(state: RoomState, window: ResponseWindow) -> list[str]:
    return [cid for cid in window.data["cards"] if cid in state.discard]


def asked(state: RoomState, window: ResponseWindow) -> list[str]:
    """Every seat but the discarder with a card in hand, less those that passed."""
    return [f for f in holding_cards(state, [window.data["discarder"]])
            if f not in window.data["passed"]]


def eligible(state: RoomState, window: ResponseWindow, faction: str) -> bool:
    """Whether this seat is still asked (it may pass; only a holder may take)."""
    return faction in asked(state, window)


def bound_cards(state: RoomState) -> set[str]:
    """The cards every Semuta window is bound to: the open one, the one a search
    suspended, and those queued behind the slot. They stay out of a Box search
    (RULES 3.6), so a take never depends on what a search took. Interpretation: a
    queued window counts too, since it opens on the same cards once the slot frees."""
    windows = [w.data for w in (
        state.control.response,
        state.search.parent.response if state.search is not None else None)
        if w is not None and w.kind == KIND]
    return {cid for data in [*windows, *(q.data for q in queue(state))]
            for cid in data["cards"]}


def in_reach(state: RoomState) -> bool:
    """Whether a Semuta Drug may be in a hand by public knowledge: in the deck or a
    hand, or in the pile since a Box search could have taken it unseen. Out of reach:
    the cache, removed, or seen face up in the pile since the last such search."""
    return (any(is_semuta(cid) for cid in state.deck)
            or any(is_semuta(cid) for s in state.seats for cid in s.hand)
            or any(is_semuta(cid) for cid in state.pile_unseen if cid in state.discard))


def close(tx: Tx, window: ResponseWindow) -> None:
    tx.emit(SemutaWindowClosed(event=window.event))


def _never_resolved(tx: Tx, window: ResponseWindow, cancelled_by: str | None) -> None:
    raise AssertionError("a Semuta window closes through this module")


def _passes_shown(state: RoomState, window: ResponseWindow, seat: str | None) -> dict[str, Any]:
    """The window's passes (kept in its data); a v1 pass named a Semuta holder, so no
    view shows it (`SemutaPassed`)."""
    hidden = window.data.get("hidden_passes", [])
    return {"passes": [f for f in window.data.get("passed", []) if f not in hidden]}


def _answers(state: RoomState, window: ResponseWindow, seat: str) -> Iterator[c.Candidate]:
    yield {"type": "semuta", "event": window.event, "action": "pass"}, {}
    if free_semuta(state, seat) is not None:
        for cid in takeable(state, window):
            yield {"type": "semuta", "event": window.event, "action": "take", "card": cid}, {}


WINDOW = WindowKind(
    KIND, _never_resolved, asked=asked, command="semuta", expire=close, answers=_answers,
    says=("The holder of the Semuta Drug may take the discarded card and then discards "
          "Semuta; anyone else can only pass."),
    shown=_passes_shown, public={"discarder": Faction, "cards": list[str]})


# --- events -------------------------------------------------------------------


class SemutaReactionQueued(Event):
    """A discard another seat may take with Semuta: its window waits for the slot."""

    shown = ("event", "discarder", "cards")

    event: str  # the discard event it is bound to
    discarder: str
    cards: list[str]  # discarded face up: public
    turn: int
    phase: int

    def apply(self, state: RoomState) -> None:
        window = ResponseWindow(
            kind=KIND, event=self.event, turn=self.turn, phase=self.phase,
            data={"discarder": self.discarder, "cards": list(self.cards), "passed": [],
                  "public": {"discarder": self.discarder, "cards": list(self.cards)}},
        )
        state.semuta = SemutaQueue(queue=[*queue(state), window])

    def text(self) -> str:
        return f"Semuta may react to {faction(self.discarder)}'s discard"


class SemutaWindowOpened(DeadlineSinceV2, Event):
    """The response slot is free: the oldest waiting Semuta window opens. v2: with
    its deadline (v1 windows had none)."""

    shown = ("event", "deadline")

    schema_version = 2
    event: str
    deadline: str | None

    def apply(self, state: RoomState) -> None:
        window, *rest = queue(state)
        assert window.event == self.event
        window.deadline = self.deadline
        state.control.response = window
        state.semuta = SemutaQueue(queue=rest) if rest else None

    def text(self) -> str:
        return "A Semuta window opened"


class SemutaPassed(Event):
    """v2: public, since every seat with a card is asked. A v1 pass stays private:
    then only Semuta holders were asked, so it would name one."""

    shown = ("event", "seat")

    schema_version = 2
    event: str
    seat: str
    hidden: bool = False

    @classmethod
    def upcast(cls, data: dict[str, Any], from_version: int) -> dict[str, Any]:
        if from_version == 1:
            return {**data, "hidden": True}
        return super().upcast(data, from_version)

    def apply(self, state: RoomState) -> None:
        w = state.control.response
        assert w is not None and w.kind == KIND and w.event == self.event
        w.data["passed"] = [*w.data["passed"], self.seat]
        if self.hidden:  # a view never shows it either
            w.data["hidden_passes"] = [*w.data.get("hidden_passes", []), self.seat]

    def public(self) -> dict[str, Any] | None:
        return None if self.hidden else super().public()

    def text(self) -> str:
        return f"{faction(self.seat)} passed on Semuta"


class SemutaTaken(Event):
    shown = ("event", "seat", "card")

    event: str
    seat: str
    card: str  # from the face-up pile: public

    def apply(self, state: RoomState) -> None:
        state.discard.remove(self.card)
        state.seat(self.seat).hand.append(self.card)
        state.control.response = None

    def text(self) -> str:
        return f"{faction(self.seat)} took {card(self.card)} from the discard pile with Semuta Drug"


class SemutaWindowClosed(Event):
    shown = ("event",)

    event: str

    def apply(self, state: RoomState) -> None:
        w = state.control.response
        assert w is not None and w.kind == KIND and w.event == self.event
        state.control.response = None

    def text(self) -> str:
        return "The Semuta window closed"


# --- the hook after a discard ---------------------------------------------------


def after_discard(tx: Tx, discarder: str, cards: list[str], event: str) -> None:
    """Open (or queue) a window for `event` unless Semuta is publicly out of reach."""
    state = tx.state
    if not in_reach(state):
        return
    # Always through the queue: the continuation opens it once the response slot
    # is free, so a window another rules module opens later in the same command
    # (a Karama stage resolving) never overwrites it.
    tx.emit(SemutaReactionQueued(
        event=event, discarder=discarder, cards=list(cards), turn=state.turn,
        phase=state.phase))


def settle_semuta(tx: Tx) -> bool:
    state = tx.state
    w = open_window(state)
    if w is not None and (not asked(state, w) or not in_reach(state)):
        # Nobody left to ask, or Semuta went publicly out of reach (taken and discarded).
        close(tx, w)
        return True
    waiting = queue(state)
    if state.control.response is None and waiting:
        tx.emit(SemutaWindowOpened(event=waiting[0].event, deadline=tx.deadline()))
        return True
    return False


# --- the command ------------------------------------------------------------------


def semuta(tx: Tx, actor: str, cmd: Semuta) -> None:
    state = tx.state
    w = open_window(state)
    if w is None or w.event != cmd.event:
        raise Rejection("stale_event", "that Semuta window is not open")
    if (w.turn, w.phase) != (state.turn, state.phase):
        raise Rejection("stale_event", "that window belongs to another turn or phase")
    if not eligible(state, w, actor):
        raise Rejection("not_eligible", "you may not react in this Semuta window")
    if cmd.action == "pass":
        if cmd.card is not None:
            raise Rejection("invalid_command", "a pass names no card")
        tx.emit(SemutaPassed(event=w.event, seat=actor))
        return
    drug = free_semuta(state, actor)
    if drug is None:
        raise Rejection("not_eligible", "you hold no Semuta Drug you may play: you can only pass")
    chosen = cmd.card
    if chosen is None:
        if len(w.data["cards"]) != 1:
            raise Rejection("invalid_command", "name the discarded card you take")
        chosen = w.data["cards"][0]
    if chosen not in w.data["cards"]:
        raise Rejection("not_eligible", "that card was not discarded in this window's discard")
    if chosen not in takeable(state, w):
        raise Rejection("stale_event", "that card cannot be taken now")
    tx.emit(SemutaTaken(event=w.event, seat=actor, card=chosen))
    discard_card(tx, actor, drug)


# --- the view ----------------------------------------------------------------------


def view_part(state: RoomState, seat: str | None) -> dict[str, Any]:
    """The public Semuta part; a seat's own view also says whether it may react."""
    w = open_window(state)
    waiting = queue(state)
    if w is None and not waiting:
        return {"semuta": None}
    part: dict[str, Any] = {
        "event": None if w is None else w.event,
        "discarder": None if w is None else w.data["discarder"],
        # As discarded (public): no Box may take them while the window lasts.
        "cards": [] if w is None else card_objects(w.data["cards"]),
        "queued": len(waiting),
    }
    if seat is not None:
        part["eligible"] = w is not None and eligible(state, w, seat)
        # The seat's own hand: whether it may take, or only pass.
        part["can_take"] = part["eligible"] and free_semuta(state, seat) is not None
    return {"semuta": part}


class SemutaShown(Shape):
    event: str | None
    discarder: Faction | None
    cards: list[CardFace]
    queued: int


class SemutaSeatShown(SemutaShown):
    eligible: bool
    can_take: bool


EFFECT = Effect(
    name="semuta",
    order=80,
    commands=(Semuta,),
    autopilot={Semuta: None},
    handlers={Semuta: semuta},
    events=(SemutaReactionQueued, SemutaWindowOpened, SemutaPassed, SemutaTaken,
            SemutaWindowClosed),
    view=view_part,
    view_shapes=ViewShapes(public={"semuta": SemutaShown | None},
                           seat={"semuta": SemutaSeatShown | None}),
    windows=(WINDOW,),
    continuations=(settle_semuta,),
    after_discard=(after_discard,),
)
