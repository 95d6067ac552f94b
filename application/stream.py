"""How a domain event is kept in a room's stream: an envelope with its chain hash.

`Recorded` is what the eventsourcing library stores and reads back: the
domain fact plus who sent it (seat, command id), which append it belongs to,
when it was recorded, and the hash of its predecessor. `Room` is the
aggregate the library rebuilds from them; `RoomSnapshot` keeps a long room
fast to load.

The chain is signed (docs/security.md): the last event of every append
carries an Ed25519 signature over `APPEND + its chain hash`, stored as the
last key (`"sig"`) of its stored JSON; the chain hash covers the payload
without it, so a signature is checked without re-serializing anything. A
snapshot is signed the same way over the hash of its own payload. A writer
without the server's key can edit rows and recompute every hash, but cannot
make the signatures: `verified_room` (every load) and the audit find it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

import orjson
from pydantic import Field

from dune_ledger.domain.game import (
    EVENT_TYPES,
    Event,
    RoomCreated,
    RoomState,
    apply,
    faction_name,
    initial_state,
)

GENESIS = "0" * 64
# What a signature signs, before the hex chain hash: never the same bytes for an
# append and a snapshot.
APPEND = b"dune-ledger:append:"
SNAPSHOT = b"dune-ledger:snapshot:"
SIGNATURE_CHARS = 88  # base64 of an Ed25519 signature (64 bytes)
SIG_OPEN = b',"sig":"'  # the signature is the last key of a stored JSON object
SIG_SUFFIX = len(SIG_OPEN) + SIGNATURE_CHARS + 2  # ,"sig":"...."}


class Signer(Protocol):
    """The server's key (infrastructure/keys.py): signs appends, checks signatures."""

    def sign(self, message: bytes) -> str: ...

    def verify(self, message: bytes, signature: str) -> bool: ...

    def verify_with(self, public_key: str, message: bytes, signature: str) -> bool:
        """Check with another public key (base64 of its raw 32 bytes)."""
        ...


class Damaged(Exception):
    """A room's stored stream does not verify (RULES 8): the version where, and what.

    The text is for the operator and may be shown to a seat: it names a check and a
    version, never a card or an amount."""

    def __init__(self, version: int, problem: str) -> None:
        super().__init__(f"version {version}: {problem}")
        self.version = version
        self.problem = problem


class UnauthenticRow(Exception):  # noqa: N818 - named for what it is, as Damaged
    """A read-model row whose tag does not verify under the row key (RULES 8: read models
    are derived, never trusted): written or edited by someone without the key file. It
    is never served; the reader folds the room again from its verified stream."""

    def __init__(self, where: str) -> None:
        super().__init__(f"a read-model row fails authentication ({where})")
        self.where = where


def signed(plain: bytes, signature: str | None) -> bytes:
    """A stored JSON object with `signature` added as its last key."""
    if signature is None:
        return plain
    return plain[:-1] + SIG_OPEN + signature.encode() + b"\"}"


def unsigned(plain: bytes) -> tuple[bytes, str | None]:
    """A stored JSON object without its signature (the bytes the hash covers), and the
    signature; (plain, None) when it carries none."""
    if plain[-SIG_SUFFIX:-SIGNATURE_CHARS - 2] == SIG_OPEN and plain.endswith(b'"}'):
        return plain[:-SIG_SUFFIX] + b"}", plain[-SIGNATURE_CHARS - 2:-2].decode("ascii")
    return plain, None


class SeatTokenReissued(Event):
    """The operator gave a seat a new token; the old one stops working. Only the new
    token's hash is kept (seat tokens are shown once, never stored)."""

    shown_as = {"seat": str, "key_cleared": (bool, None)}

    seat: str
    token_hash: str
    # The seat's key (RULES 9.3) went with the old token: public, so that everyone sees
    # a key the operator replaced. Left out of the stored event while False.
    key_cleared: bool = Field(default=False, exclude_if=lambda v: not v)

    def apply(self, state: RoomState) -> None:
        # Tokens are the room's custody of its seats, not game state (`Recorded.mutate`).
        f = state.fairness
        if self.key_cleared and f is not None and f.keys is not None:
            f.keys[self.seat] = None

    def public(self) -> dict[str, Any]:
        return {"seat": self.seat, **({"key_cleared": True} if self.key_cleared else {})}

    def text(self) -> str:
        return (f"The host gave {faction_name(self.seat)} a new seat token; the old one no "
                "longer works" + (", and its seat key is cleared" if self.key_cleared else ""))


# Every type a room's stream stores, by its name: the rules' events and the room's own.
STORED_TYPES: dict[str, type[Event]] = {**EVENT_TYPES,
                                         SeatTokenReissued.__name__: SeatTokenReissued}


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
    stored: bytes | None = None  # the payload's bytes, without the signature
    # The last event of an append: the server's signature over APPEND + its hash.
    signature: str | None = None
    digest: str | None = None  # `hash()`, made once: a save hashes and signs the same event

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
        """The payload as stored JSON, without the signature (what the hash covers),
        made once and kept."""
        if self.stored is None:
            self.stored = orjson.dumps(self.payload())
        return self.stored

    def stored_form(self) -> bytes:
        """The stored JSON: the body, with the signature as its last key when it has one
        (before any cipher: infrastructure/storage.RoomMapper)."""
        return signed(self.body(), self.signature)

    def signed_message(self) -> bytes:
        return APPEND + self.hash().encode()

    def hash(self) -> str:
        """sha256 over the stream position, the type and the exact stored bytes.

        Hashing the stored bytes (not a re-serialization) lets an audit check a
        long chain at the speed of sha256, and any edit of a stored row shows.
        """
        if self.digest is None:
            self.digest = chain_hash(str(self.originator_id), self.originator_version,
                                     self.type, self.body())
        return self.digest

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
        # A key named at its import (`Trusted`): every signed snapshot carries it.
        self.trusted: Trusted | None = None

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
                # The creation's token hashes; on any other append, what caused it
                # (RULES 9.3): the command as received and `by`.
                meta=meta if meta and self.version + 1 == first else {},
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
    # The server's signature over SNAPSHOT + the hash of `body()`.
    signature: str | None = None
    stored: bytes | None = field(default=None, compare=False)  # `body()` as read back

    def body(self) -> bytes:
        """The payload as stored JSON, without the signature."""
        if self.stored is not None:
            return self.stored
        return orjson.dumps({"state": self.state, "at": self.at})

    def signed_message(self) -> bytes:
        return SNAPSHOT + chain_hash(str(self.originator_id), self.originator_version,
                                     "RoomSnapshot", self.body()).encode()

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
                **({"trusted": {"key": room.trusted.key, "upto": room.trusted.upto}}
                   if room.trusted is not None else {}),
            },
        )

    def mutate(self, _: Room | None) -> Room:
        room = Room(self.originator_id, RoomState.model_validate(self.state["state"]))
        room.version = self.originator_version
        room.last_hash = self.state["head"]
        room.token_hashes = dict(self.state["tokens"])
        room.spectator_hash = self.state.get("spectator")
        room.commands = {k: list(v) for k, v in self.state["commands"].items()}
        trusted = self.state.get("trusted")
        room.trusted = Trusted(str(trusted["key"]), int(trusted["upto"])) if trusted else None
        return room


Room.Snapshot = RoomSnapshot  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class Undecodable:
    """A stored row that is not an event or a snapshot of ours: the mapper's answer for
    it, so that each reader decides (a load refuses the room, the audit reports it, a
    projector fences the room off) instead of one row stopping every reader.

    `originator_id` None: the row names no room (its id is not a room's), so no room's
    reads find it and a follower of the log passes it by; `originator_version` 0: its
    version is not a whole number."""

    originator_id: UUID | None
    originator_version: int
    topic: str
    problem: str

    def mutate(self, _: Room | None) -> Room:
        raise Damaged(self.originator_version, self.problem)


Stored = Recorded | RoomSnapshot | Undecodable


def as_room_id(value: Any) -> UUID | None:
    """A room's id as a UUID, from a UUID or its text (as SQLite keeps it); None when
    `value` is not one (a stored column of another type, or NULL)."""
    if isinstance(value, UUID):
        return value
    if not isinstance(value, str):
        return None
    try:
        return UUID(value)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Trusted:
    """A public key the operator named at import (`import --trust-key`): besides the
    server's key, it verifies the room's appends up to `upto` (the imported ones).
    Kept in the room's snapshots, which the server's key signs: a writer without the
    key file cannot name a key of its own."""

    key: str  # base64 of the raw 32-byte Ed25519 public key, as `keys show` prints it
    upto: int


class Chain:
    """The one walk over a room's stored chain (RULES 8): loads, past views, imports
    and the audit all check a room through it, so that they agree on what verifies.

    Fed the events in version order (`step`), it checks that versions follow each
    other, that each event carries its predecessor's hash, and that every append it
    has seen end carries a signature. `end` verifies the signature that ends the
    walk: through the hashes it authenticates every event before it, so the others
    are only checked for presence (`every`: verify each one, as an import does).
    When the final signature fails, it names the first append whose signature fails
    (a bisection: an edit with its hashes recomputed breaks every signature from
    the edited append on). Problems go to `fail` (default: raise `Damaged`); the
    audit collects them and walks on. `signer` None: hashes only (streams built by
    hand in tests).
    """

    def __init__(self, signer: Signer | None, *, head: str = GENESIS, version: int = 0,
                 trusted: Trusted | Callable[[], Trusted | None] | None = None,
                 every: bool = False, fail: Callable[[int, str], None] | None = None) -> None:
        # `trusted` may be a lookup, made only if a signature needs it (the audit's:
        # reading the room's latest snapshot costs a query and a signature check).
        self.signer, self.trusted, self.every = signer, trusted, every
        self.head, self.version = head, version
        self.fail = fail if fail is not None else _raise
        self.last: Recorded | None = None  # the last event walked: its append may go on
        self.ends: list[tuple[int, str, str]] = []  # version, hash, signature of each end
        self.room: object = None  # the room whose header text is kept
        self.room_text = ""

    def verify(self, version: int, digest: str, signature: str) -> bool:
        """The signature of the append ending at `version` (chain hash `digest`)."""
        assert self.signer is not None
        message = APPEND + digest.encode()
        if self.signer.verify(message, signature):
            return True
        if callable(self.trusted):
            self.trusted = self.trusted()
        trusted = self.trusted
        return trusted is not None and version <= trusted.upto and \
            self.signer.verify_with(trusted.key, message, signature)

    def step(self, rec: Recorded) -> str:
        """Check one event after the last; its chain hash."""
        v = rec.originator_version
        expected = self.version + 1
        if v > expected:
            self.fail(expected, f"it is missing (version {v} follows version {expected - 1})")
        elif v < expected:
            self.fail(v, f"it is stored again after version {expected - 1}")
        if rec.prev_hash != self.head:
            self.fail(v, "it does not carry its predecessor's hash")
        last = self.last
        if last is not None and last.append != rec.append:
            if last.signature is None or self.every:
                self._ended(last, self.head)
            else:  # `_ended`, inline: the audit's path, once an append
                self.ends.append((last.originator_version, self.head, last.signature))
        if rec.originator_id is not self.room:
            self.room, self.room_text = rec.originator_id, str(rec.originator_id)
        # `chain_hash`, inline: loads and the audit pay for it on every event.
        self.head = hashlib.sha256(
            f"{self.room_text}:{v}:{type(rec.fact).__name__}\n".encode() + rec.body()
        ).hexdigest()
        self.version, self.last = v, rec
        return self.head

    def _ended(self, rec: Recorded, digest: str) -> None:
        if self.signer is None:
            return
        v = rec.originator_version
        if rec.signature is None:
            self.fail(v, "its append is not signed")
        elif self.every and not self.verify(v, digest, rec.signature):
            self.fail(v, "the signature of its append does not verify with the server's key")
        else:
            self.ends.append((v, digest, rec.signature))

    def end(self) -> None:
        """The walk ends where an append ends: its signature must verify."""
        last = self.last
        if last is None or self.signer is None:
            return
        if last.signature is None:
            self.fail(last.originator_version, "the last append is not signed")
            return
        self._ended(last, self.head)
        if self.every or self.verify(*self.ends[-1]):
            return
        # The first end whose signature fails: all before it verify (each covers the
        # ones before it), all after it fail.
        low, high = 0, len(self.ends) - 1
        while low < high:
            mid = (low + high) // 2
            if self.verify(*self.ends[mid]):
                low = mid + 1
            else:
                high = mid
        self.fail(self.ends[low][0], "the signature of its append does not verify with "
                  "the server's key")


def _raise(version: int, problem: str) -> None:
    raise Damaged(version, problem)


def folded(items: Iterable[Stored], signer: Signer, *, room: Room | None = None,
           trusted: Trusted | Callable[[], Trusted | None] | None = None
           ) -> tuple[Room | None, Chain | None]:
    """Fold stored events (after a snapshot, or from the first) into a Room, walking
    the chain as they go (`Chain.step`; a snapshot's signature must verify), and the
    walk, for its caller to end. `room`: a room these events follow; `trusted`: the
    key its import named, for a walk from the first event (a snapshot or `room`
    carries its own). Raises `Damaged`.
    """
    chain = None if room is None else Chain(signer, head=room.head_hash(),
                                           version=room.version, trusted=room.trusted)
    for item in items:
        if type(item) is Recorded:
            if chain is None:
                if not isinstance(item.fact, RoomCreated):
                    raise Damaged(item.originator_version,
                                  "the stream does not start with RoomCreated")
                chain = Chain(signer, trusted=trusted)
            digest = chain.step(item)
            try:
                room = item.mutate(room)
            except Exception:  # the operator's audit names the error; a seat gets no detail
                raise Damaged(item.originator_version, f"{item.type} cannot be applied to "
                                                       "the state before it") from None
            room.last_hash = digest
        elif isinstance(item, RoomSnapshot):
            v = item.originator_version
            if room is not None or chain is not None:
                raise Damaged(v, "a snapshot is stored among the events")
            room = verified_snapshot(item, signer)
            chain = Chain(signer, head=room.head_hash(), version=v, trusted=room.trusted)
        else:
            item.mutate(room)  # an Undecodable: raises Damaged
    return room, chain


def verified_room(items: Iterable[Stored], signer: Signer, *, room: Room | None = None
                  ) -> Room | None:
    """`folded`, ending where the last append ends: its signature must verify
    (`Chain.end`). Raises `Damaged`."""
    room, chain = folded(items, signer, room=room)
    if chain is not None:
        chain.end()
    return room


def verified_snapshot(snapshot: RoomSnapshot, signer: Signer) -> Room:
    """The room a snapshot holds, once its signature verifies. Raises `Damaged`."""
    v = snapshot.originator_version
    if snapshot.signature is None:
        raise Damaged(v, "the snapshot is not signed")
    if not signer.verify(snapshot.signed_message(), snapshot.signature):
        raise Damaged(v, "the snapshot's signature does not verify")
    try:
        return snapshot.mutate(None)
    except Exception:
        raise Damaged(v, "the snapshot does not hold a room's state") from None


def project_room(room: Room | None, events: Iterable[Recorded | RoomSnapshot]) -> Room | None:
    """Fold stored events into a Room; the library's default pays for a runtime
    Protocol check on every event, which dominated load time."""
    for event in events:
        room = event.mutate(room)
    return room
