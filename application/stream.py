"""How a domain event is kept in a room's stream: an envelope with its chain hash.

`Recorded` is what the eventsourcing library stores and reads back: the
domain fact plus who sent it (seat, command id), which append it belongs to,
when it was recorded, and the hash of its predecessor. `Room` is the
aggregate the library rebuilds from them; `RoomSnapshot` keeps a long room
fast to load.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

import orjson

from domain.events import Event, RoomCreated
from domain.rules import apply, initial_state
from domain.state import RoomState

GENESIS = "0" * 64


class SeatTokenReissued(Event):
    """The operator gave a seat a new token; the old one stops working. Only the new
    token's hash is kept (seat tokens are shown once, never stored)."""

    seat: str
    token_hash: str

    def apply(self, state: RoomState) -> None:
        pass  # tokens are the room's custody of its seats, not game state (`Recorded.mutate`)

    def public(self) -> dict[str, Any]:
        return {"seat": self.seat}

    def text(self) -> str:
        return f"{self.seat} was given a new seat token"


def chain_hash(room: str, version: int, event_type: str, body: bytes) -> str:
    """The hash of one stored event (`Recorded.hash`), from its parts."""
    return hashlib.sha256(f"{room}:{version}:{event_type}\n".encode() + body).hexdigest()


@dataclass(slots=True, eq=False)
class Recorded:
    """Treat as immutable once built: `stored` caches the exact bytes kept in the store."""

    originator_id: UUID
    originator_version: int
    fact: Event
    prev_hash: str
    seat: str | None  # the acting seat; None for room creation
    command_id: str | None
    append: int  # the version of the first event of the same atomic append
    at: str  # ISO time of recording: for operators, never read by the rules
    meta: dict[str, Any] = field(default_factory=dict)
    stored: bytes | None = None

    @property
    def timestamp(self) -> datetime:
        return datetime.fromisoformat(self.at)

    @property
    def type(self) -> str:
        return self.fact.type

    def payload(self) -> dict[str, Any]:
        """Everything stored besides the stream position: what the hash covers."""
        return {
            "fact": self.fact.model_dump(mode="json"),
            "v": type(self.fact).schema_version,
            "prev": self.prev_hash,
            "seat": self.seat,
            "cmd": self.command_id,
            "append": self.append,
            "at": self.at,
            "meta": self.meta,
        }

    def body(self) -> bytes:
        """The stored bytes: the payload as JSON, made once and kept."""
        if self.stored is None:
            self.stored = orjson.dumps(self.payload())
        return self.stored

    def hash(self) -> str:
        """sha256 over the stream position, the type and the exact stored bytes.

        Hashing the stored bytes (not a re-serialization) lets an audit check a
        long chain at the speed of sha256, and any edit of a stored row shows.
        """
        return chain_hash(str(self.originator_id), self.originator_version, self.type,
                          self.body())

    def mutate(self, room: Room | None) -> Room:
        if room is None:
            assert isinstance(self.fact, RoomCreated)
            room = Room(self.originator_id, initial_state(self.fact))
            room.token_hashes = dict(self.meta.get("token_hashes", {}))
            room.spectator_hash = self.meta.get("spectator_hash")
        else:
            apply(room.state, self.fact)
            if isinstance(self.fact, SeatTokenReissued):
                room.token_hashes[self.fact.seat] = self.fact.token_hash
        room.version = self.originator_version
        room.last = self
        room.last_hash = None
        if self.command_id is not None and self.seat is not None:
            room.commands[f"{self.seat}:{self.command_id}"] = [self.append, self.originator_version]
        return room


class Room:
    """The aggregate: the domain state plus what the application keeps per room."""

    def __init__(self, room_id: UUID, state: RoomState) -> None:
        self.id = room_id
        self.version = 0
        self.state = state
        self.last: Recorded | None = None
        self.last_hash: str | None = GENESIS
        self.token_hashes: dict[str, str] = {}
        self.spectator_hash: str | None = None  # rooms created before spectators: none
        self.commands: dict[str, list[int]] = {}  # "seat:command_id" -> [first, last]
        self.pending: list[Recorded] = []
        # Another process was seen writing this room: catch up before deciding on it.
        self.written_elsewhere = False

    def head_hash(self) -> str:
        if self.last_hash is None:
            assert self.last is not None
            self.last_hash = self.last.hash()
        return self.last_hash

    def record(
        self,
        facts: list[Event],
        state: RoomState | None,
        *,
        seat: str | None,
        command_id: str | None,
        at: str,
        meta: dict[str, Any] | None = None,
    ) -> None:
        """Append decided facts; `state` is the state they already produced."""
        first = self.version + 1
        for fact in facts:
            rec = Recorded(
                originator_id=self.id,
                originator_version=self.version + 1,
                fact=fact,
                prev_hash=self.head_hash(),
                seat=seat,
                command_id=command_id,
                append=first,
                at=at,
                meta=meta if isinstance(fact, RoomCreated) and meta else {},
            )
            self.pending.append(rec)
            self.version = rec.originator_version
            self.last, self.last_hash = rec, rec.hash()
        if state is not None:
            self.state = state
        if command_id is not None and seat is not None:
            self.commands[f"{seat}:{command_id}"] = [first, self.version]

    def collect_events(self) -> list[Recorded]:
        pending, self.pending = self.pending, []
        return pending


@dataclass(frozen=True, slots=True)
class RoomSnapshot:
    originator_id: UUID
    originator_version: int
    state: dict[str, Any]
    at: str = ""

    @property
    def timestamp(self) -> datetime:
        return datetime.fromisoformat(self.at) if self.at else datetime.min

    @property
    def topic(self) -> str:
        return "RoomSnapshot"

    @classmethod
    def take(cls, room: Room) -> RoomSnapshot:
        return cls(
            originator_id=room.id,
            originator_version=room.version,
            state={
                "state": room.state.model_dump(mode="json"),
                "head": room.head_hash(),
                "tokens": room.token_hashes,
                "spectator": room.spectator_hash,
                "commands": room.commands,
            },
        )

    def mutate(self, _: Room | None) -> Room:
        room = Room(self.originator_id, RoomState.model_validate(self.state["state"]))
        room.version = self.originator_version
        room.last_hash = self.state["head"]
        room.token_hashes = dict(self.state["tokens"])
        room.spectator_hash = self.state.get("spectator")
        room.commands = {k: list(v) for k, v in self.state["commands"].items()}
        return room


Room.Snapshot = RoomSnapshot  # type: ignore[attr-defined]


def project_room(room: Room | None, events: Iterable[Recorded | RoomSnapshot]) -> Room | None:
    """Fold stored events into a Room; the library's default pays for a runtime
    Protocol check on every event, which dominated load time."""
    for event in events:
        room = event.mutate(room)
    return room
