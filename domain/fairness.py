"""Fair dealing (RULES 9): the commitment, seat keys, the dealing ceremony and the end
that publishes the secret. Its events, handlers, view part and the checks a verifier
runs on a transcript live here.

A v2 room (`hmac-sha256-fy-v2`) starts in its commit stage and refuses gameplay until
the deal; the deal fixes the mix and makes the room's first random calls. Every
outcome is then derived (domain.randomness.Counted) from the secret, the room id,
the room's counter of random calls and the mix: nothing the operator appends moves
it. A v1 room (domain.randomness.Derived: keyed by the version of the command's
first event, seeds that change at any time, the deck shuffled late by custody)
replays and verifies as it did.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import Field

from dune_ledger.domain import commands as c
from dune_ledger.domain.ambassador import BG, COHORT_SIZE, AmbassadorCohortDrawn
from dune_ledger.domain.catalog import Faction
from dune_ledger.domain.commands import Command
from dune_ledger.domain.custody import AutopilotSet, DeckShuffled
from dune_ledger.domain.effect import HOUSE, Effect, Offer, ViewShapes
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.events import Event
from dune_ledger.domain.randomness import (
    ALGORITHM_V2,
    Counted,
    Derived,
    Randomness,
    commitment,
    mix,
)
from dune_ledger.domain.rules import Tx
from dune_ledger.domain.shapes import FreeText, Shape
from dune_ledger.domain.state import Fairness, RoomState
from dune_ledger.domain.words import faction

SEED_PATTERN = r"^[\x20-\x7e]{1,64}$"


def committed(seats: list[str], secret: bytes) -> Fairness:
    """A committed room's fairness at creation (v2): the commitment, the commit stage,
    no seed, key or commitment yet, the counter at 0."""
    return Fairness(commitment=commitment(secret), secret=secret.hex(),
                    seeds={f: None for f in seats}, algorithm=ALGORITHM_V2, stage="commit",
                    commitments={f: None for f in seats}, withheld=[],
                    keys={f: None for f in seats}, calls=0)


def v2(state: RoomState) -> Fairness | None:
    f = state.fairness
    return f if f is not None and f.algorithm == ALGORITHM_V2 else None


def derived(room: str, f: Fairness, version: int) -> Derived:
    seeds = dict(f.seeds)  # as they are now: in force at every draw of this decision
    return Derived(bytes.fromhex(f.secret), room, version, lambda: mix(seeds))


def port(state: RoomState, version: int) -> Randomness | None:
    """The derived port of a committed room: a v2 room's counts its calls (RULES 9.5);
    a v1 room's is keyed by `version`, the command's first appended event. None for a
    seeded or layout room."""
    f = state.fairness
    if f is None:
        return None
    if f.algorithm == ALGORITHM_V2:
        return Counted(bytes.fromhex(f.secret), state.room, f.calls or 0, f.mix)
    return derived(state.room, f, version)


def seed_hash(room: str, seat: str, value: str) -> str:
    """A seat's commitment to its seed (RULES 9.4)."""
    return hashlib.sha256(f"dune-ledger:seed:{room}:{seat}:{value}".encode()).hexdigest()


def mode(state: RoomState) -> str:
    if state.fairness is not None:
        return "committed"
    return "seeded" if state.seed is not None else "layout"


def view_part(state: RoomState, seat: str | None) -> dict[str, Any]:
    """The public `fairness` part of every view: the secret only once the room ended."""
    f = state.fairness
    seats = [s.faction for s in state.seats]
    if f is None:
        return {"fairness": {"mode": mode(state), "algorithm": None, "commitment": None,
                             "stage": None, "commitments": dict.fromkeys(seats),
                             "seeds": dict.fromkeys(seats), "withheld": [], "mix": None,
                             "keys": dict.fromkeys(seats), "secret": None}}
    return {"fairness": {"mode": "committed", "algorithm": f.algorithm,
                         "commitment": f.commitment, "stage": f.stage or "dealt",
                         "commitments": dict(f.commitments or dict.fromkeys(seats)),
                         "seeds": dict(f.seeds), "withheld": list(f.withheld or []),
                         "mix": f.mix, "keys": dict(f.keys or dict.fromkeys(seats)),
                         "secret": f.secret if state.ended is not None else None}}


class FairnessShown(Shape):
    """RULES 9: how the room's outcomes are made, and what lets anyone check them."""

    mode: Literal["committed", "seeded", "layout"]
    algorithm: str | None
    commitment: str | None  # sha256 of the secret, 64 hex (committed)
    stage: Literal["commit", "reveal", "dealt"] | None  # None: not a committed room
    commitments: dict[Faction, str | None]  # each seat's seed hash (v2)
    seeds: dict[Faction, str | None]  # v2: revealed; v1: in force
    withheld: list[Faction]  # committed and not revealed at the deal
    mix: str | None  # fixed at the deal (v2)
    keys: dict[Faction, str | None]  # each seat's Ed25519 public key, base64
    secret: str | None  # published once the room has ended


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
    """A seat's seed in a v1 room (RULES 9, v1): 1 to 64 printable ASCII characters."""

    written = {"value": FreeText}
    type: Literal["seed"]
    value: Annotated[str, Field(pattern=SEED_PATTERN)]


class RegisterSeatKey(Command):
    """A seat's Ed25519 public key (RULES 9.3): the standard base64 of its raw 32 bytes."""

    written = {"public_key": FreeText}
    type: Literal["seat_key"]
    public_key: Annotated[str, Field(pattern=r"^[A-Za-z0-9+/]{43}=$")]


class CommitSeed(Command):
    """A seat's commitment (RULES 9.4): sha256 of `dune-ledger:seed:{room}:{faction}:{value}`."""

    written = {"hash": FreeText}
    type: Literal["seed_commit"]
    hash: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class RevealSeed(Command):
    """A seat's seed, revealed (RULES 9.4): it must hash to its commitment."""

    written = {"value": FreeText}
    type: Literal["seed_reveal"]
    value: Annotated[str, Field(pattern=SEED_PATTERN)]


class Deal(Command):
    """The operator moves a stalled ceremony on (RULES 9.4)."""

    type: Literal["deal"]


class EndRoom(Command):
    """The operator's end of a room (RULES 9.6): sent by the operator only."""

    type: Literal["end_room"]


def set_seed(tx: Tx, actor: str, cmd: SetSeed) -> None:
    f = tx.state.fairness
    if f is None:
        raise Rejection("not_eligible", f"seeds take part only in a committed room; this "
                        f"room is {mode(tx.state)}")
    if f.algorithm == ALGORITHM_V2:
        raise Rejection("not_eligible", "this room deals by a ceremony: commit a seed's "
                        "hash with seed_commit, then reveal it with seed_reveal")
    if f.seeds.get(actor) == cmd.value:
        raise Rejection("unchanged", "that is already your seed")
    tx.emit(SeatSeedSet(seat=actor, value=cmd.value))


def _ceremony(tx: Tx) -> Fairness:
    f = v2(tx.state)
    if f is None:
        raise Rejection("not_eligible", f"this room is {mode(tx.state)}: it has no dealing "
                        "ceremony" + (" (a v1 room takes `seed`)"
                                      if tx.state.fairness is not None else ""))
    return f


def register_key(tx: Tx, actor: str, cmd: RegisterSeatKey) -> None:
    f = _ceremony(tx)
    if (f.keys or {}).get(actor) is not None:
        raise Rejection("not_eligible", "this seat has a key: a key is replaced only "
                        "through a token reissue, which clears it")
    if not tx.probing and len(base64.b64decode(cmd.public_key)) != 32:
        raise Rejection("invalid_command", "public_key must be the base64 of 32 bytes")
    tx.emit(SeatKeyRegistered(seat=actor, public_key=cmd.public_key))
    if tx.state.seat(actor).autopilot is not None:
        # A key supersedes an unsigned turn-on: the seat signs a new one (RULES 9.3).
        tx.emit(AutopilotSet(seat=actor, profile=None))


def commit_seed(tx: Tx, actor: str, cmd: CommitSeed) -> None:
    f = _ceremony(tx)
    if f.stage != "commit":
        raise Rejection("not_eligible", "the commit stage is over: commitments no longer "
                        "change")
    if (f.commitments or {}).get(actor) == cmd.hash:
        raise Rejection("unchanged", "that is already your commitment")
    tx.emit(SeedCommitted(seat=actor, hash=cmd.hash))
    if all(tx.state.fairness.commitments.values()):  # type: ignore[union-attr]
        tx.emit(RevealBegan(committed=sorted(f.commitments or {})))


def reveal_seed(tx: Tx, actor: str, cmd: RevealSeed) -> None:
    f = _ceremony(tx)
    if f.stage != "reveal":
        raise Rejection("not_eligible", "seeds are revealed in the reveal stage only"
                        + (": the deal fixed them" if f.stage == "dealt" else ""))
    hashed = (f.commitments or {}).get(actor)
    if hashed is None:
        raise Rejection("not_eligible", "this seat committed no seed")
    if f.seeds.get(actor) is not None:
        raise Rejection("unchanged", "this seat's seed is revealed already")
    # The probe (domain/actions.py) asks with a placeholder: the value is the seat's own.
    if not tx.probing and seed_hash(tx.state.room, actor, cmd.value) != hashed:
        raise Rejection("bad_reveal", "that value does not hash to this seat's commitment")
    tx.emit(SeedRevealed(seat=actor, value=cmd.value))
    after = tx.state.fairness
    assert after is not None
    if all(after.seeds.get(s) is not None for s, h in (after.commitments or {}).items() if h):
        deal(tx)


def operator_deal(tx: Tx, actor: str, cmd: Deal) -> None:
    f = _ceremony(tx)
    if f.stage == "dealt":
        raise Rejection("not_eligible", "the room is dealt already")
    committed_seats = [s for s, h in (f.commitments or {}).items() if h]
    if f.stage == "commit" and committed_seats:
        tx.emit(RevealBegan(committed=committed_seats))
        return
    deal(tx)


def deal(tx: Tx) -> None:
    """RULES 9.4: the mix is fixed, the deck shuffled (call 0), then Ecaz's cohort drawn
    (call 1), in the append that deals."""
    f = tx.state.fairness
    assert f is not None
    seeds = {s: f.seeds.get(s) for s in f.seeds}
    withheld = [s for s, h in (f.commitments or {}).items() if h and seeds.get(s) is None]
    tx.emit(Dealt(seeds=seeds, withheld=withheld, mix=mix(seeds)))
    order = tx.shuffle(list(tx.state.deck))
    tx.emit(DeckShuffled(order=order, rng=tx.drawn()))
    amb = tx.state.ambassadors
    if f.cohort_at_deal and amb is not None:
        pool = sorted(set(amb.supply) | set(amb.used))
        cohort = tx.sample(pool, min(COHORT_SIZE, len(pool)))
        rest = [t for t in pool if t not in cohort]
        tx.emit(AmbassadorCohortDrawn(cohort=cohort, supply=rest,
                                      copy_pool=[t for t in rest if t != BG], rng=tx.drawn()))


def end_room(tx: Tx, actor: str, cmd: EndRoom) -> None:
    f = tx.state.fairness
    tx.emit(RoomEnded(secret=None if f is None else f.secret,
                      state_hash=state_digest(tx.state)))


# The commands a v2 room takes before its deal (RULES 9.4): seat control, the ceremony,
# the operator's deal and end. Every other is refused with `not_dealt`.
BEFORE_THE_DEAL = ("set_autopilot", "seat_key", "seed_commit", "seed_reveal", "deal",
                   "end_room", "seed")


def not_dealt(state: RoomState, actor: str, command: Command) -> None:
    f = state.fairness
    if f is not None and f.stage in ("commit", "reveal") and \
            getattr(command, "type", None) not in BEFORE_THE_DEAL:
        raise Rejection("not_dealt", "the room is not dealt yet: its seats commit and "
                        "reveal their seeds first (or the operator deals)")


# --- events ---------------------------------------------------------------------------


class SeatSeedSet(Event):
    shown = ("seat", "value")

    seat: str
    value: str

    def apply(self, state: RoomState) -> None:
        assert state.fairness is not None
        state.fairness.seeds[self.seat] = self.value

    def text(self) -> str:
        return f"{faction(self.seat)} set a seed: {self.value}"


class SeatKeyRegistered(Event):
    """A seat's public key: from now on nothing is accepted in its name unsigned."""

    shown = ("seat", "public_key")

    seat: str
    public_key: str

    def apply(self, state: RoomState) -> None:
        assert state.fairness is not None and state.fairness.keys is not None
        state.fairness.keys[self.seat] = self.public_key

    def text(self) -> str:
        return f"{faction(self.seat)} registered a seat key"


class SeedCommitted(Event):
    shown = ("seat", "hash")

    seat: str
    hash: str

    def apply(self, state: RoomState) -> None:
        assert state.fairness is not None and state.fairness.commitments is not None
        state.fairness.commitments[self.seat] = self.hash

    def text(self) -> str:
        return f"{faction(self.seat)} committed to a seed"


class RevealBegan(Event):
    """No commitment changes from now on; the committed seats reveal."""

    shown = ("committed",)

    committed: list[str]

    def apply(self, state: RoomState) -> None:
        assert state.fairness is not None
        state.fairness.stage = "reveal"

    def text(self) -> str:
        return "Every seed is committed: the seats reveal them"


class SeedRevealed(Event):
    shown = ("seat", "value")

    seat: str
    value: str

    def apply(self, state: RoomState) -> None:
        assert state.fairness is not None
        state.fairness.seeds[self.seat] = self.value

    def text(self) -> str:
        return f"{faction(self.seat)} revealed its seed"


class Dealt(Event):
    """The deal (RULES 9.4): the seeds, who withheld a reveal, and the mix, fixed."""

    shown = ("seeds", "withheld", "mix")

    seeds: dict[str, str | None]
    withheld: list[str]
    mix: str

    def apply(self, state: RoomState) -> None:
        f = state.fairness
        assert f is not None
        f.stage, f.seeds, f.mix = "dealt", dict(self.seeds), self.mix
        f.withheld = list(self.withheld)
        f.deck_shuffled = True  # shuffled in this append: never again late

    def text(self) -> str:
        withheld = ", ".join(faction(s) for s in self.withheld)
        return "The cards were dealt" + (f"; withheld reveals: {withheld}" if withheld else "")


class RoomEnded(Event):
    """The operator ended the room. `secret` (a committed room's; public from now on)
    lets anyone derive every shuffle again; `state_hash` is the state it ended in, which
    a verifier's replay must reach (private, like the state)."""

    shown = ("secret",)

    secret: str | None
    state_hash: str

    def apply(self, state: RoomState) -> None:
        state.ended = state.version + 1
        if state.fairness is not None and self.secret is not None:
            state.fairness.secret = self.secret  # published: a read model's state lacked it

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
HASH = {"kind": "text", "min_length": 64, "max_length": 64, "of": "sha256, lowercase hex"}
KEY = {"kind": "text", "min_length": 44, "max_length": 44,
       "of": "base64 of a raw Ed25519 public key"}


def seed_candidates(state: RoomState, seat: str) -> Iterator[c.Candidate]:
    f = state.fairness
    if f is None or f.algorithm != ALGORITHM_V2:
        yield {"type": "seed"}, {"value": SEED}  # a v1 committed room's only (RULES 9)
        return
    yield {"type": "seat_key"}, {"public_key": KEY}
    yield {"type": "seed_commit"}, {"hash": HASH}
    yield {"type": "seed_reveal"}, {"value": SEED}


EFFECT = Effect(
    name="fairness",
    order=100,
    commands=(SetSeed, RegisterSeatKey, CommitSeed, RevealSeed),
    operator=(Deal, EndRoom),
    # Seeds, keys and the ceremony (RULES 9); the operator may end a room at any time.
    any_time=(SetSeed, RegisterSeatKey, CommitSeed, RevealSeed, Deal, EndRoom),
    handlers={SetSeed: set_seed, RegisterSeatKey: register_key, CommitSeed: commit_seed,
              RevealSeed: reveal_seed, Deal: operator_deal, EndRoom: end_room},
    events=(SeatSeedSet, SeatKeyRegistered, SeedCommitted, RevealBegan, SeedRevealed, Dealt,
            RoomEnded),
    gates=(not_dealt,),
    view=view_part,
    view_shapes=ViewShapes(public={"fairness": FairnessShown}),
    offers=(Offer("any_time", seed_candidates),),
)
