"""The decision core: a command and a state in, events out (or a Rejection).

`decide` is the only way into the rules; `apply` the only way a state changes. The
handlers, gates and continuations it runs are the effects' declarations, collected
into `effect.HOUSE` by `domain/game.py`; this module imports no effect module.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from dune_ledger.domain.commands import Command
from dune_ledger.domain.effect import HOUSE, Handler
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.events import Event, RoomCreated
from dune_ledger.domain.randomness import Counted, Randomness
from dune_ledger.domain.state import RoomState

# The senders that are no seat: the operator (the deal, a round's opening, the end of a
# room) and the worker (a window's deadline). Each command is accepted from one kind of
# sender only: a seat, the operator or the worker (`effect.Effect`).
OPERATOR = "operator"
SYSTEM = "system"


class Tx:
    """One command's work: emitted events applied to a private copy of the state.

    Handlers validate first and emit after; the copy is made on the first
    emit, so a handler that rejects never touched anything. `in_place`: no copy,
    the events change the caller's own state (see `decide`).
    """

    # True on the actions' probe (domain/actions.py), which asks with placeholder values
    # for the fields a seat writes: a check of such a value's content is then skipped.
    probing = False

    def __init__(self, state: RoomState, randomness: Randomness, *,
                 in_place: bool = False, now: datetime | None = None) -> None:
        self.state = state
        self.events: list[Event] = []
        self._randomness = randomness
        self._copied = in_place
        # The clock port: the caller's time, read only to stamp a deadline into an event.
        self.now = now

    def emit(self, event: Event) -> None:
        if not self._copied:
            self.state = self.state.clone()
            self._copied = True
        apply(self.state, event)
        self.events.append(event)

    def next_event_id(self) -> str:
        """The id of the next event to be emitted: decisions and windows bind to it."""
        return f"e{self.state.version + 1}"

    def deadline(self, seconds: float | None = None) -> str | None:
        """The ISO time a window opened now closes at: `seconds` from now, or the
        room's `response_seconds`; None without a clock or with 0 seconds."""
        seconds = self.state.response_seconds if seconds is None else seconds
        if self.now is None or not self.state.response_seconds:
            return None
        return (self.now + timedelta(seconds=max(0.0, seconds))).isoformat()

    def shuffle(self, ids: list[str]) -> list[str]:
        self._follow()
        return self._randomness.shuffle(ids)

    def sample(self, ids: list[str], k: int) -> list[str]:
        self._follow()
        return self._randomness.sample(ids, k)

    def _follow(self) -> None:
        # A v2 room's port reads the room's counter and mix as this command left them
        # (the deal fixes the mix in the same append as its first draws: RULES 9.4).
        f = self.state.fairness
        if isinstance(self._randomness, Counted) and f is not None:
            self._randomness.at(f.calls or 0, f.mix)

    def drawn(self) -> dict[str, Any] | None:
        """The `rng` record of the last draw, for the event carrying its outcome (RULES
        9); None outside a committed room."""
        rng = self._randomness.last_draw()
        return None if rng is None else rng.model_dump()


def decide(state: RoomState, actor: str, command: Command, randomness: Randomness,
           *, in_place: bool = False, now: datetime | None = None) -> Tx:
    """The events `command` appends, applied to a copy of `state` (`Tx.state`); or a
    Rejection, `state` untouched.

    `in_place`: for a caller that owns `state` and would replace it by `Tx.state`
    anyway (copying it was a tenth of a command). A Rejection may then come after
    some events changed it: `state.version` moved, and the state must be thrown away.
    `now`: the caller's clock, stamped into the deadline of a window the command opens
    (None: windows open without a deadline). Replay never needs it.
    """
    handler = admit(state, actor, command)
    tx = Tx(state, randomness, in_place=in_place, now=now)
    handler(tx, actor, command)
    settle(tx)
    return tx


def admit(state: RoomState, actor: str, command: Command) -> Handler:
    """The room-wide refusals every command meets before its handler (the effects'
    gates: a Box search's lock, Truthtrance's answer-first); its handler.

    `domain.actions` asks the same, so a listed action is one `decide` accepts.
    """
    kind = type(command)
    sender = (OPERATOR if kind in HOUSE.operator.values()
              else SYSTEM if kind in HOUSE.system else None)
    if sender != (actor if actor in (OPERATOR, SYSTEM) else None):
        raise Rejection("not_eligible", "that command is not accepted from this sender")
    if sender is None and not state.has_seat(actor):
        raise Rejection("unknown_seat", "that faction has no seat in this room")
    if state.ended is not None:
        raise Rejection("room_ended", "the room has ended: it takes no more commands")
    for gate in HOUSE.gates:
        gate(state, actor, command)
    handler = HOUSE.handlers.get(type(command))
    if handler is None:
        raise Rejection("not_implemented", "that command is not implemented yet")
    return handler


def settle(tx: Tx) -> None:
    """Run automatic continuations until none applies; never while a search is open."""
    progressed = True
    while progressed and tx.state.search is None:
        progressed = any(step(tx) for step in HOUSE.continuations)


def initial_state(event: RoomCreated) -> RoomState:
    # The room state's class with every effect's part (`effect.Part`).
    state = HOUSE.state.model_validate(event.state)
    state.version = 1
    return state


def apply(state: RoomState, event: Event) -> None:
    event.apply(state)
    rng = getattr(event, "rng", None)
    if rng is not None and "n" in rng and state.fairness is not None:
        state.fairness.calls = rng["n"] + 1  # a v2 room's counter (RULES 9.5)
    state.version += 1


def replay(events: Iterable[Event]) -> RoomState:
    """Fold a whole stream into a state; draws nothing, reads nothing else."""
    it = iter(events)
    first = next(it)
    if not isinstance(first, RoomCreated):
        raise ValueError("a room's stream starts with RoomCreated")
    state = initial_state(first)
    for event in it:
        apply(state, event)
    return state

