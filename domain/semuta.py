"""Semuta Drug: take a card another seat just discarded, then discard Semuta (RULES 3.6).

After a single-seat discard (ordinary `custody.discard_card`, and the Box's
final discard in `nullentropy.settle_search`) every other seat holding a
free Semuta Drug gets a reaction window: a `ResponseWindow` of kind
"semuta" bound to that discard event and its physical cards. Retrieving a
card by a Box is not a discard and a shuffle is not a series of discards,
so a window never names the retrieved card and never re-runs a search.

The window lives in `state.control.response`, so a Box search suspends and
restores it (passes included) like any other window. Only one response
window can be open: when another window (a Karama window, or an earlier
Semuta window) holds `control.response`, the new Semuta window waits in
`state.semuta["queue"]` (first in, first out) and opens when the slot is
free. Every reaction goes through the queue and a continuation opens it,
so with a free slot it opens in the same append as the discard, and a
window another rules module opens later in the same command is never
overwritten. Interpretation: the seeds leave concurrent reaction priority open, so
the queue only preserves discard order; it claims no printed ordering.

Eligibility is read from current hands, like Karama windows: a seat other
than the discarder, holding a Semuta Drug that is not committed or under a
gift offer, which has not passed, while a card of the window is still in the
pile. A window with nobody eligible, or whose cards have all left the pile,
closes by itself. Taking moves the card from the pile to the taker's hand
(an exchange: Semuta leaves at once, so the hand size does not change) and
discards Semuta (itself a discard: windows for others may follow).

Hidden information: the window's existence is public (it says someone else
may react); a pass is recorded in the window's private data and never
published, so passes do not name the Semuta holder. A take is public.
"""

from __future__ import annotations

from typing import Any

from domain import commands as c
from domain.catalog import CARDS
from domain.custody import check_own_card, discard_card
from domain.errors import Rejection
from domain.events import Event
from domain.rules import Tx, continuation, handles
from domain.state import ResponseWindow, RoomState

KIND = "semuta"


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


def queue(state: RoomState) -> list[dict[str, Any]]:
    return list((state.semuta or {}).get("queue", []))


def takeable(state: RoomState, window: ResponseWindow) -> list[str]:
    return [cid for cid in window.data["cards"] if cid in state.discard]


def eligible(state: RoomState, window: ResponseWindow, faction: str) -> bool:
    return (
        faction != window.data["discarder"]
        and faction not in window.data["passed"]
        and free_semuta(state, faction) is not None
        and bool(takeable(state, window))
    )


def anyone_eligible(state: RoomState, window: ResponseWindow) -> bool:
    return any(eligible(state, window, s.faction) for s in state.seats)


# --- events -------------------------------------------------------------------


class SemutaReactionQueued(Event):
    """A discard another seat may take with Semuta: its window waits for the slot."""

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
        state.semuta = {"queue": [*queue(state), window.model_dump(mode="json")]}

    def public(self) -> dict[str, Any]:
        return {"event": self.event, "discarder": self.discarder, "cards": list(self.cards)}

    def text(self) -> str:
        return f"Semuta may react to {self.discarder}'s discard"


class SemutaWindowOpened(Event):
    """The response slot is free: the oldest waiting Semuta window opens."""

    event: str

    def apply(self, state: RoomState) -> None:
        waiting = queue(state)
        assert waiting and waiting[0]["event"] == self.event
        state.control.response = ResponseWindow.model_validate(waiting[0])
        state.semuta = {"queue": waiting[1:]} if waiting[1:] else None

    def public(self) -> dict[str, Any]:
        return {"event": self.event}

    def text(self) -> str:
        return "A Semuta window opened"


class SemutaPassed(Event):
    event: str
    seat: str

    def apply(self, state: RoomState) -> None:
        w = state.control.response
        assert w is not None and w.kind == KIND and w.event == self.event
        w.data["passed"] = [*w.data["passed"], self.seat]

    def public(self) -> None:
        return None  # a pass would name the Semuta holder

    def text(self) -> str:
        return f"{self.seat} passed on Semuta"


class SemutaTaken(Event):
    event: str
    seat: str
    card: str  # from the face-up pile: public

    def apply(self, state: RoomState) -> None:
        state.discard.remove(self.card)
        state.seat(self.seat).hand.append(self.card)
        state.control.response = None

    def public(self) -> dict[str, Any]:
        return {"event": self.event, "seat": self.seat, "card": self.card}

    def text(self) -> str:
        return f"{self.seat} took {self.card} from the discard pile with Semuta Drug"


class SemutaWindowClosed(Event):
    event: str

    def apply(self, state: RoomState) -> None:
        w = state.control.response
        assert w is not None and w.kind == KIND and w.event == self.event
        state.control.response = None

    def public(self) -> dict[str, Any]:
        return {"event": self.event}

    def text(self) -> str:
        return "The Semuta window closed"


# --- the hook after a discard ---------------------------------------------------


def after_discard(tx: Tx, discarder: str, cards: list[str], event: str) -> None:
    """Open (or queue) a window for `event` when another seat holds a free Semuta."""
    state = tx.state
    if not any(free_semuta(state, s.faction) for s in state.seats if s.faction != discarder):
        return
    # Always through the queue: the continuation opens it once the response slot
    # is free, so a window another rules module opens later in the same command
    # (a Karama stage resolving) never overwrites it.
    tx.emit(SemutaReactionQueued(
        event=event, discarder=discarder, cards=list(cards), turn=state.turn,
        phase=state.phase))


@continuation
def settle_semuta(tx: Tx) -> bool:
    state = tx.state
    w = open_window(state)
    if w is not None and not anyone_eligible(state, w):
        tx.emit(SemutaWindowClosed(event=w.event))
        return True
    waiting = queue(state)
    if state.control.response is None and waiting:
        tx.emit(SemutaWindowOpened(event=waiting[0]["event"]))
        return True
    return False


# --- the command ------------------------------------------------------------------


@handles(c.Semuta)
def semuta(tx: Tx, actor: str, cmd: c.Semuta) -> None:
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
    choices = takeable(state, w)
    chosen = cmd.card
    if chosen is None:
        if len(choices) != 1:
            raise Rejection("invalid_command", "name the discarded card you take")
        chosen = choices[0]
    if chosen not in w.data["cards"]:
        raise Rejection("not_eligible", f"'{chosen}' was not discarded in this window's discard")
    if chosen not in choices:
        raise Rejection("stale_event", f"'{chosen}' has left the discard pile")
    drug = free_semuta(state, actor)
    assert drug is not None  # eligible() checked it
    tx.emit(SemutaTaken(event=w.event, seat=actor, card=chosen))
    discard_card(tx, actor, drug)


def semuta_view(state: RoomState, faction: str | None) -> dict[str, Any] | None:
    """The public Semuta part; a seat's own view also says whether it may react."""
    w = open_window(state)
    waiting = queue(state)
    if w is None and not waiting:
        return None
    part: dict[str, Any] = {
        "event": None if w is None else w.event,
        "discarder": None if w is None else w.data["discarder"],
        "cards": [] if w is None else [CARDS[cid].public() for cid in takeable(state, w)],
        "queued": len(waiting),
    }
    if faction is not None:
        part["eligible"] = w is not None and eligible(state, w, faction)
    return part
