"""Response windows (RULES 4.4): the generic machinery, one kind at a time.

A window lives in `state.control.response`, so a Box search suspends and
restores it with its passes. Who may still respond is read from the current
hands every time (a search may have handed someone a Karama), never frozen
when the window opens. A window with nobody left to respond closes by
itself; what closing means is up to its kind, registered with `register`.

The Karama kinds are answered with `respond`; another kind (a Semuta
reaction, say) registers its own eligibility and command name and reuses
the passes, the waiting list and the automatic close.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from domain import commands as c
from domain.catalog import CARDS
from domain.custody import check_own_card, discard_card
from domain.errors import Rejection
from domain.events import Event
from domain.rules import Tx, continuation, handles
from domain.state import ResponseWindow, RoomState

# cancelled_by: the seat that cancelled the advantage, or None when allowed
Resolve = Callable[[Tx, ResponseWindow, str | None], None]
MayRespond = Callable[[RoomState, ResponseWindow, str], bool]


def karama_cards(state: RoomState, faction: str) -> list[str]:
    """The cards this seat may cancel with now: a printed Karama, or in advanced
    mode a worthless card held by the Bene Gesserit. Committed cards do not count."""
    seat = state.seat(faction)
    gifted = state.gift.get("card") if state.gift else None
    out = []
    for cid in seat.hand:
        if state.committed(cid) is not None or cid == gifted:
            continue
        cd = CARDS[cid]
        bg_worthless = (state.mode == "advanced" and faction == "bene_gesserit"
                        and cd.is_worthless)
        if cd.is_karama or bg_worthless:
            out.append(cid)
    return out


def karama_responder(state: RoomState, window: ResponseWindow, faction: str) -> bool:
    """The seat whose advantage is at stake never cancels it itself."""
    if faction in window.data.get("excluded", []):
        return False
    return bool(karama_cards(state, faction))


@dataclass(frozen=True, slots=True)
class WindowKind:
    name: str
    resolve: Resolve
    may_respond: MayRespond = karama_responder
    command: str = "respond"  # the command type that answers this kind


KINDS: dict[str, WindowKind] = {}


def register(kind: WindowKind) -> WindowKind:
    if kind.name in KINDS:
        raise TypeError(f"response window kind {kind.name} registered twice")
    KINDS[kind.name] = kind
    return kind


def waiting(state: RoomState, window: ResponseWindow) -> list[str]:
    """The seats that may still respond, in seating order."""
    kind = KINDS.get(window.kind)
    if kind is None:
        return []
    return [s.faction for s in state.seats
            if s.faction not in window.passes and kind.may_respond(state, window, s.faction)]


def open_window(tx: Tx, kind: str, data: dict[str, Any]) -> str:
    """Open a window bound to the event that opens it; returns that event id."""
    if kind not in KINDS:
        raise ValueError(f"unknown response window kind {kind}")
    if tx.state.control.response is not None:
        # Callers refuse to start a flow while another window is open; never overwrite one.
        raise ValueError("a response window is already open")
    event = tx.next_event_id()
    tx.emit(ResponseWindowOpened(event=event, kind=kind, turn=tx.state.turn,
                                 phase=tx.state.phase, data=data))
    return event


def bound_window(state: RoomState, actor: str, event: str, command: str) -> ResponseWindow:
    """The open window a command quotes, checked for event, turn, phase and kind."""
    w = state.control.response
    if w is None or w.event != event:
        raise Rejection("stale_event", "that response window is not open")
    if (state.turn, state.phase) != (w.turn, w.phase):
        raise Rejection("stale_event", "that response window belongs to another turn or phase")
    kind = KINDS.get(w.kind)
    if kind is None or kind.command != command:
        raise Rejection("not_eligible", f"this window is not answered with '{command}'")
    if actor in w.passes:
        raise Rejection("not_eligible", "you have already passed in this window")
    if actor not in waiting(state, w):
        raise Rejection("not_eligible", "you may not respond in this window")
    return w


@handles(c.Respond)
def respond(tx: Tx, actor: str, cmd: c.Respond) -> None:
    state = tx.state
    w = bound_window(state, actor, cmd.event, "respond")
    if cmd.action == "pass":
        if cmd.card is not None:
            raise Rejection("invalid_command", "a pass names no card")
        tx.emit(ResponsePassed(event=w.event, seat=actor))
        return  # the automatic close runs when nobody is left
    if cmd.card is None:
        raise Rejection("invalid_command", "name the card you cancel with")
    check_own_card(state, actor, cmd.card)
    if cmd.card not in karama_cards(state, actor):
        raise Rejection("not_eligible", f"'{cmd.card}' cannot cancel this advantage")
    # Discarded while this window still holds the slot: a Semuta reaction to the
    # Karama queues behind the flow instead of being overwritten by its next window.
    discard_card(tx, actor, cmd.card)
    tx.emit(ResponseCancelled(event=w.event, kind=w.kind, seat=actor, card=cmd.card))
    KINDS[w.kind].resolve(tx, w, actor)


@continuation
def close_unanswered(tx: Tx) -> bool:
    """Everyone still eligible has passed (or nobody ever was): the advantage stands."""
    w = tx.state.control.response
    if w is None:
        return False
    kind = KINDS.get(w.kind)
    if kind is None or waiting(tx.state, w):
        return False
    tx.emit(ResponseWindowClosed(event=w.event, kind=w.kind))
    kind.resolve(tx, w, None)
    return True


# --- events -----------------------------------------------------------------------


class ResponseWindowOpened(Event):
    event: str
    kind: str
    turn: int
    phase: int
    data: dict[str, Any]

    def apply(self, state: RoomState) -> None:
        state.control.response = ResponseWindow(
            kind=self.kind, event=self.event, turn=self.turn, phase=self.phase,
            data=dict(self.data),
        )

    def public(self) -> dict[str, Any]:
        return {"event": self.event, "kind": self.kind, **self.data.get("public", {})}

    def text(self) -> str:
        return f"A response window opened ({self.kind})"


class ResponsePassed(Event):
    event: str
    seat: str

    def apply(self, state: RoomState) -> None:
        w = state.control.response
        assert w is not None and w.event == self.event
        w.passes.append(self.seat)  # type: ignore[arg-type]

    def public(self) -> dict[str, Any]:
        return {"event": self.event, "seat": self.seat}

    def text(self) -> str:
        return f"{self.seat} passed"


class ResponseCancelled(Event):
    """A seat cancelled the advantage with this card (played face up)."""

    event: str
    kind: str
    seat: str
    card: str

    def apply(self, state: RoomState) -> None:
        w = state.control.response
        assert w is not None and w.event == self.event
        state.control.response = None

    def public(self) -> dict[str, Any]:
        return {"event": self.event, "kind": self.kind, "seat": self.seat, "card": self.card}

    def text(self) -> str:
        return f"{self.seat} cancelled it with {self.card}"


class ResponseWindowClosed(Event):
    """Nobody cancelled: the advantage is allowed."""

    event: str
    kind: str

    def apply(self, state: RoomState) -> None:
        w = state.control.response
        assert w is not None and w.event == self.event
        state.control.response = None

    def public(self) -> dict[str, Any]:
        return {"event": self.event, "kind": self.kind}

    def text(self) -> str:
        return f"Nobody cancelled ({self.kind}): it is allowed"
