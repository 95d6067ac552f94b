"""Response windows (RULES 4.4): the generic machinery, one kind at a time.

A window lives in `state.control.response`, so a Box search suspends and
restores it with its passes and its remaining time. Who is waiting depends
only on public facts (RULES 7): every seat other than the one whose
advantage is at stake that has at least one card in hand, less those that
passed, never whether a seat holds a Karama. A seat without one can only
pass. A window closes when one cancels, when every waiting seat has passed
(an empty list closes it by itself), or at its deadline: the opening event
stores it (`response_seconds` after the caller's clock), and the worker
appends the close through `window_deadline`, a command only the system
sends, so replay never reads a clock.

The Karama kinds are answered with `respond`; another kind (a Semuta
reaction, the gift offer) says who it asks, its command name and what its
deadline does. Every kind says its words, what its view adds (`window_view`)
and the answers a seat may send (`answer_candidates`); the effect that owns a
kind declares it (`Effect.windows`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from dune_ledger.domain import commands as c
from dune_ledger.domain.catalog import CARDS
from dune_ledger.domain.commands import CardId, Command, EventId
from dune_ledger.domain.custody import check_own_card, discard_card, offered_card
from dune_ledger.domain.effect import HOUSE, Effect, Offer
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.events import DeadlineSinceV2, Event
from dune_ledger.domain.randomness import Randomness
from dune_ledger.domain.rules import SYSTEM, Tx, decide
from dune_ledger.domain.shapes import Shape, WindowShape, shape
from dune_ledger.domain.state import ResponseWindow, RoomState
from dune_ledger.domain.words import card, faction, window

# cancelled_by: the seat that cancelled the advantage, or None when allowed
Resolve = Callable[[Tx, ResponseWindow, str | None], None]
Asked = Callable[[RoomState, ResponseWindow], list[str]]
Expire = Callable[[Tx, ResponseWindow], None]
# What a kind adds to its window's view for a seat (None: the public view).
Shown = Callable[[RoomState, ResponseWindow, str | None], dict[str, Any]]
# The answers a seat may send to a window of this kind (domain/actions.py keeps those
# the rules accept).
Answers = Callable[[RoomState, ResponseWindow, str], Iterator[c.Candidate]]


def karama_cards(state: RoomState, faction: str) -> list[str]:
    """The cards this seat may cancel with now: a printed Karama, or in advanced
    mode a worthless card held by the Bene Gesserit. Committed cards do not count."""
    seat = state.seat(faction)
    gifted = offered_card(state)
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


def holding_cards(state: RoomState, excluded: list[str]) -> list[str]:
    """RULES 4.4: every seat not excluded that has at least one card in hand (a
    public count), in seating order; never chosen by which cards it holds."""
    return [s.faction for s in state.seats if s.hand and s.faction not in excluded]


def karama_asked(state: RoomState, window: ResponseWindow) -> list[str]:
    """The seat whose advantage is at stake never cancels it itself."""
    return holding_cards(state, list(window.data.get("excluded", [])))


def karama_answers(state: RoomState, window: ResponseWindow,
                   seat: str) -> Iterator[c.Candidate]:
    yield {"type": "respond", "event": window.event, "action": "pass"}, {}
    for cid in karama_cards(state, seat):
        yield {"type": "respond", "event": window.event, "action": "karama", "card": cid}, {}


def close_allowed(tx: Tx, window: ResponseWindow) -> None:
    """Nobody cancelled in time: the advantage stands."""
    tx.emit(ResponseWindowClosed(event=window.event, kind=window.kind))
    HOUSE.windows[window.kind].resolve(tx, window, None)


@dataclass(frozen=True, slots=True)
class WindowKind:
    name: str
    resolve: Resolve
    asked: Asked = karama_asked
    command: str = "respond"  # the command type that answers this kind
    expire: Expire | None = close_allowed  # what its deadline does (None: it has none)
    says: str | None = None  # what answering does, said before one answers (the pages show it)
    shown: Shown | None = None
    answers: Answers = karama_answers
    # The shapes of what its view adds: its public facts (`data["public"]`), and what
    # `shown` adds (a field left out at times: `(type, None)`).
    public: dict[str, Any] = field(default_factory=dict)
    shows: dict[str, Any] = field(default_factory=dict)

    def shape(self) -> type[Shape]:
        """Its window as a view shows it (INTERFACE "Views": `response`)."""
        name = "".join(part.title() for part in self.name.split("_")) + "Window"
        kind: Any = Literal[self.name]
        return shape(name, {"kind": kind, **self.public, **self.shows}, WindowShape)


def waiting(state: RoomState, window: ResponseWindow) -> list[str]:
    """The seats still asked, in seating order: public facts only."""
    kind = HOUSE.windows.get(window.kind)
    if kind is None:
        return []
    return [f for f in kind.asked(state, window) if f not in window.passes]


def open_window(tx: Tx, kind: str, data: dict[str, Any]) -> str:
    """Open a window bound to the event that opens it; returns that event id."""
    if kind not in HOUSE.windows:
        raise ValueError(f"unknown response window kind {kind}")
    if tx.state.control.response is not None:
        # Callers refuse to start a flow while another window is open; never overwrite one.
        raise ValueError("a response window is already open")
    event = tx.next_event_id()
    tx.emit(ResponseWindowOpened(event=event, kind=kind, turn=tx.state.turn,
                                 phase=tx.state.phase, data=data, deadline=tx.deadline()))
    return event


class Respond(Command):
    type: Literal["respond"]
    event: EventId
    action: Literal["pass", "karama"]
    card: CardId | None = None


def bound_window(state: RoomState, actor: str, event: str, command: str) -> ResponseWindow:
    """The open window a command quotes, checked for event, turn, phase and kind."""
    w = state.control.response
    if w is None or w.event != event:
        raise Rejection("stale_event", "that response window is not open")
    if (state.turn, state.phase) != (w.turn, w.phase):
        raise Rejection("stale_event", "that response window belongs to another turn or phase")
    kind = HOUSE.windows.get(w.kind)
    if kind is None or kind.command != command:
        raise Rejection("not_eligible", f"this window is not answered with '{command}'")
    if actor in w.passes:
        raise Rejection("not_eligible", "you have already passed in this window")
    if actor not in waiting(state, w):
        raise Rejection("not_eligible", "you may not respond in this window")
    return w


def respond(tx: Tx, actor: str, cmd: Respond) -> None:
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
        # About the sender's own card only: a seat without a Karama can only pass.
        raise Rejection("not_eligible", "that card cannot cancel this advantage")
    # Discarded while this window still holds the slot: a Semuta reaction to the
    # Karama queues behind the flow instead of being overwritten by its next window.
    discard_card(tx, actor, cmd.card)
    tx.emit(ResponseCancelled(event=w.event, kind=w.kind, seat=actor, card=cmd.card))
    HOUSE.windows[w.kind].resolve(tx, w, actor)


def close_unanswered(tx: Tx) -> bool:
    """Every seat asked has passed (or nobody was asked): the advantage stands."""
    w = tx.state.control.response
    if w is None:
        return False
    kind = HOUSE.windows.get(w.kind)
    if kind is None or kind.command != "respond" or waiting(tx.state, w):
        return False
    close_allowed(tx, w)
    return True


# --- the deadline ------------------------------------------------------------------


class WindowDeadline(Command):
    """Sent by the worker only (never parsed from a seat's JSON): the open window's
    deadline has passed, so it closes as its kind says."""

    type: Literal["window_deadline"] = "window_deadline"
    event: str


def expired(state: RoomState, now: datetime) -> ResponseWindow | None:
    """The open window whose deadline has passed by `now`, if any (never during a search,
    nor in a room that has ended: it takes no more commands, the worker's neither)."""
    w = state.control.response
    if state.search is not None or state.ended is not None or w is None or w.deadline is None:
        return None
    return w if datetime.fromisoformat(w.deadline) <= now else None


def expire_window(state: RoomState, randomness: Randomness, now: datetime) -> Tx | None:
    """The worker's close of a window past its deadline, decided like a command; None
    when no window is due."""
    w = expired(state, now)
    if w is None:
        return None
    return decide(state, SYSTEM, WindowDeadline(event=w.event), randomness, now=now)


def window_deadline(tx: Tx, actor: str, cmd: WindowDeadline) -> None:
    w = tx.state.control.response
    if w is None or w.event != cmd.event:
        raise Rejection("stale_event", "that response window is not open")
    kind = HOUSE.windows.get(w.kind)
    if tx.now is None or expired(tx.state, tx.now) is not w or kind is None \
            or kind.expire is None:
        raise Rejection("not_eligible", "that window's deadline has not passed")
    tx.emit(ResponseDeadlinePassed(event=w.event, kind=w.kind))
    kind.expire(tx, w)


# --- events -----------------------------------------------------------------------


class ResponseWindowOpened(DeadlineSinceV2, Event):
    """v2: the window's deadline (v1 windows had none)."""

    schema_version = 2
    event: str
    kind: str
    turn: int
    phase: int
    data: dict[str, Any]
    deadline: str | None

    def apply(self, state: RoomState) -> None:
        state.control.response = ResponseWindow(
            kind=self.kind, event=self.event, turn=self.turn, phase=self.phase,
            data=dict(self.data), deadline=self.deadline,
        )

    def public(self) -> dict[str, Any]:
        return {"event": self.event, "kind": self.kind, "deadline": self.deadline,
                **self.data.get("public", {})}

    @classmethod
    def public_fields(cls) -> dict[str, Any]:
        # The Karama kinds open with this event (the others have their own): each one's
        # public facts, there only for its kind.
        facts: dict[str, Any] = {}
        for kind in HOUSE.windows.values():
            if kind.command == "respond":
                for name, fact in kind.public.items():
                    facts[name] = fact if name not in facts else facts[name] | fact
        return {"event": str, "kind": str, "deadline": str | None,
                **{name: (fact, None) for name, fact in facts.items()}}

    def text(self) -> str:
        return f"Waiting for answers on {window(self.kind)}"


class ResponsePassed(Event):
    shown = ("event", "seat")

    event: str
    seat: str

    def apply(self, state: RoomState) -> None:
        w = state.control.response
        assert w is not None and w.event == self.event
        w.passes.append(self.seat)  # type: ignore[arg-type]

    def text(self) -> str:
        return f"{faction(self.seat)} passed"


class ResponseCancelled(Event):
    """A seat cancelled the advantage with this card (played face up)."""

    shown = ("event", "kind", "seat", "card")

    event: str
    kind: str
    seat: str
    card: str

    def apply(self, state: RoomState) -> None:
        w = state.control.response
        assert w is not None and w.event == self.event
        state.control.response = None

    def text(self) -> str:
        return f"{faction(self.seat)} cancelled it with {card(self.card)}"


class ResponseWindowClosed(Event):
    """Nobody cancelled: the advantage is allowed."""

    shown = ("event", "kind")

    event: str
    kind: str

    def apply(self, state: RoomState) -> None:
        w = state.control.response
        assert w is not None and w.event == self.event
        state.control.response = None

    def text(self) -> str:
        return f"Nobody cancelled {window(self.kind)}: it is allowed"


class ResponseDeadlinePassed(Event):
    """The worker found the window past its deadline: its close follows in this append."""

    shown = ("event", "kind")

    event: str
    kind: str

    def apply(self, state: RoomState) -> None:
        w = state.control.response
        assert w is not None and w.event == self.event

    def text(self) -> str:
        return f"Time ran out on {window(self.kind)}"


# --- the view ----------------------------------------------------------------------


def window_view(state: RoomState, w: ResponseWindow | None,
                seat: str | None) -> dict[str, Any] | None:
    """RULES 4.4 / INTERFACE: the window's kind, event, passes, who is still waiting
    and its deadline: all public, all from public facts; then what its kind adds."""
    if w is None:
        return None
    kind = HOUSE.windows.get(w.kind)
    view = {"kind": w.kind, "event": w.event, "passes": list(w.passes),
            "waiting": waiting(state, w),
            "deadline": w.deadline,
            # The room's length of a window (a layout field): a countdown never shows more.
            "seconds": state.response_seconds if w.deadline else None,
            "name": window(w.kind)[:1].upper() + window(w.kind)[1:],
            "says": None if kind is None else kind.says,
            **w.data.get("public", {})}
    if kind is not None and kind.shown is not None:
        view.update(kind.shown(state, w, seat))
    return view


# --- the actions ---------------------------------------------------------------------


def answer_candidates(state: RoomState, seat: str) -> Iterator[c.Candidate]:
    """The answers to the open window, as its kind offers them."""
    w = state.control.response
    kind = None if w is None else HOUSE.windows.get(w.kind)
    if w is not None and kind is not None:
        yield from kind.answers(state, w, seat)


EFFECT = Effect(
    name="responses",
    order=70,
    commands=(Respond,),
    autopilot={Respond: lambda raw: raw.get("action") == "pass"},  # never a Karama
    system=(WindowDeadline,),
    handlers={Respond: respond, WindowDeadline: window_deadline},
    events=(ResponseWindowOpened, ResponsePassed, ResponseCancelled, ResponseWindowClosed,
            ResponseDeadlinePassed),
    offers=(Offer("window", answer_candidates),),
    continuations=(close_unanswered,),
)
