"""Fair dealing (RULES 9): the commitment, the seats' seeds and the end that publishes
the secret. Its events, handlers, view part and the checks a verifier runs on a
transcript live here; the late deck shuffle is custody's, at the first draw.

A committed room's every random outcome is derived (domain.randomness.Derived) from
its secret, the room id, the version of the command's first event, the call counter
and the mix of the seeds in force. The seed command draws nothing and no
continuation follows it, so the mix a decision starts with is in force at each of
its draws.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import Field

from dune_ledger.domain import commands as c
from dune_ledger.domain.commands import Command
from dune_ledger.domain.effect import HOUSE, Effect, Offer
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.events import Event
from dune_ledger.domain.randomness import ALGORITHM, Derived, Randomness, commitment, mix
from dune_ledger.domain.rules import Tx
from dune_ledger.domain.state import Fairness, RoomState
from dune_ledger.domain.words import faction


def committed(seats: list[str], secret: bytes) -> Fairness:
    """A committed room's fairness at creation: the commitment, no seeds yet."""
    return Fairness(commitment=commitment(secret), secret=secret.hex(),
                    seeds={f: None for f in seats})


def derived(room: str, f: Fairness, version: int) -> Derived:
    seeds = dict(f.seeds)  # as they are now: in force at every draw of this decision
    return Derived(bytes.fromhex(f.secret), room, version, lambda: mix(seeds))


def port(state: RoomState, version: int) -> Randomness | None:
    """The derived port of a committed room for the command whose first appended event
    has `version`; None for a seeded or layout room."""
    f = state.fairness
    return None if f is None else derived(state.room, f, version)


def mode(state: RoomState) -> str:
    if state.fairness is not None:
        return "committed"
    return "seeded" if state.seed is not None else "layout"


def view_part(state: RoomState, seat: str | None) -> dict[str, Any]:
    """The public `fairness` part of every view: the secret only once the room ended."""
    f = state.fairness
    if f is None:
        return {"fairness": {"mode": mode(state), "algorithm": None, "commitment": None,
                             "seeds": {s.faction: None for s in state.seats}, "secret": None}}
    return {"fairness": {"mode": "committed", "algorithm": ALGORITHM, "commitment": f.commitment,
                         "seeds": dict(f.seeds),
                         "secret": f.secret if state.ended is not None else None}}


def kept_state(state: RoomState) -> str:
    """The state JSON a read model keeps to fold on (projections/projectors.py): without
    the secret before the end, so that no read-model row holds it; the end's event
    writes it back (RoomEnded.apply)."""
    f = state.fairness
    if f is None or state.ended is not None:
        return state.model_dump_json()
    return state.model_copy(update={"fairness": f.model_copy(update={"secret": ""})}
                            ).model_dump_json()


def state_digest(state: RoomState) -> str:
    """sha256 of the canonical state JSON (as application/audit.state_hash)."""
    data = state.model_dump(mode="json")
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False).encode()).hexdigest()


# --- commands -------------------------------------------------------------------------


class SetSeed(Command):
    """A seat's seed (RULES 9): 1 to 64 printable ASCII characters, public."""

    type: Literal["seed"]
    value: Annotated[str, Field(pattern=r"^[\x20-\x7e]{1,64}$")]


class EndRoom(Command):
    """The operator's end of a room (RULES 9.6): sent by the operator only."""

    type: Literal["end_room"] = "end_room"


def set_seed(tx: Tx, actor: str, cmd: SetSeed) -> None:
    f = tx.state.fairness
    if f is None:
        raise Rejection("not_eligible", f"seeds take part only in a committed room; this "
                        f"room is {mode(tx.state)}")
    if f.seeds.get(actor) == cmd.value:
        raise Rejection("unchanged", "that is already your seed")
    tx.emit(SeatSeedSet(seat=actor, value=cmd.value))


def end_room(tx: Tx, actor: str, cmd: EndRoom) -> None:
    f = tx.state.fairness
    tx.emit(RoomEnded(secret=None if f is None else f.secret,
                      state_hash=state_digest(tx.state)))


# --- events ---------------------------------------------------------------------------


class SeatSeedSet(Event):
    seat: str
    value: str

    def apply(self, state: RoomState) -> None:
        assert state.fairness is not None
        state.fairness.seeds[self.seat] = self.value

    def public(self) -> dict[str, Any]:
        return {"seat": self.seat, "value": self.value}

    def text(self) -> str:
        return f"{faction(self.seat)} set a seed: {self.value}"


class RoomEnded(Event):
    """The operator ended the room. `secret` (a committed room's; public from now on)
    lets anyone derive every shuffle again; `state_hash` is the state it ended in, which
    a verifier's replay must reach (private, like the state)."""

    secret: str | None
    state_hash: str

    def apply(self, state: RoomState) -> None:
        state.ended = state.version + 1
        if state.fairness is not None and self.secret is not None:
            state.fairness.secret = self.secret  # published: a read model's state lacked it

    def public(self) -> dict[str, Any]:
        return {"secret": self.secret}

    def text(self) -> str:
        return "The room ended" + (": its secret is published" if self.secret else "")


# --- what a verifier checks of each outcome (infrastructure/verify.py) ------------------


def outcome(event: Event, before: RoomState | None) -> tuple[list[str], list[str], bool] | None:
    """For an event carrying a derived outcome: the list it must have shuffled (by the
    state before it; None before the first event), what it recorded, and whether that is
    a sample (a prefix of the shuffle) rather than the whole shuffle. None: no outcome.
    The effect that draws it says how (`Effect.outcomes`)."""
    rng = getattr(event, "rng", None)
    if rng is None:
        return None
    drawn = HOUSE.outcomes.get(type(event))
    if drawn is None:
        raise ValueError(f"{event.type} carries an outcome no verifier knows")
    return drawn(event, before)


# --- the actions (domain/actions.py keeps those the rules accept) ---------------------

SEED = {"kind": "text", "min_length": 1, "max_length": 64, "of": "printable ASCII"}


def seed_candidates(state: RoomState, seat: str) -> Iterator[c.Candidate]:
    yield {"type": "seed"}, {"value": SEED}  # a committed room's only (RULES 9)


EFFECT = Effect(
    name="fairness",
    order=100,
    commands=(SetSeed,),
    operator=(EndRoom,),
    any_time=(SetSeed, EndRoom),  # a seed (RULES 9); the operator may end a room at any time
    handlers={SetSeed: set_seed, EndRoom: end_room},
    events=(SeatSeedSet, RoomEnded),
    view=view_part,
    offers=(Offer("any_time", seed_candidates),),
)
