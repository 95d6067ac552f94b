"""Moving rooms between stores: `dune-ledger export` and `dune-ledger import`.

An export is JSON lines, one stored event a line, room after room, each room's
events in version order:

    {"room": ID, "version": N, "type": "FeePaid", "payload": TEXT, "prev": HEX,
     "hash": HEX, "sig": BASE64 or null}

`payload` is the stored JSON text exactly as hashed, before any cipher: the
fact, its schema version `v`, `prev`, the seat, the command id, the append and
the time. `hash` is the event's chain hash (`application/stream.chain_hash`
over the room, version, type and `payload`), `prev` its predecessor's, and
`sig`, on the last event of each append (null on the others), the append's
Ed25519 signature over `APPEND + hash`. A third party checks a line with
sha256 and the public key alone (docs/security.md). Snapshots and read models
are not exported: they are made again from the events.

An import stores every event unchanged (same room ids, versions, types,
payloads and signatures, so the same hashes) through the application's
mapper (which encrypts it when the store has a cipher key) and recorder, so
that the read models follow it as they follow commands. It first checks the
whole file and refuses all of it, storing nothing, when any room already
exists in the store, or does not verify (RULES 8): a line that is not an
event, a hash that is not its event's, a version out of order, an append
without a signature or whose signature neither this store's key nor the key
named with `--trust-key` verifies (the chain is walked as every load walks it:
application/stream.Chain), or an audit of the room's replay (conservation,
shuffles, hand limits) that finds a problem. A trusted key is recorded in the
room's snapshots, which this store's key signs; later appends are signed with
this store's key.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, BinaryIO, cast
from uuid import UUID

import orjson

from dune_ledger.application.audit import audit_records
from dune_ledger.application.rooms import RoomsApp, room_uuid
from dune_ledger.application.stream import (
    Chain,
    Damaged,
    Recorded,
    Room,
    RoomSnapshot,
    Trusted,
    signed,
    unsigned,
)
from dune_ledger.domain.game import Rejection, RoomCreated
from dune_ledger.infrastructure import strict_json

FIELDS = ("room", "version", "type", "payload", "prev", "hash", "sig")
EARLIER_FIELDS = ("room", "version", "type", "payload", "hash")
HEX64 = re.compile(r"[0-9a-f]{64}")
BASE64_SIG = re.compile(r"[A-Za-z0-9+/]{86}==")  # an Ed25519 signature: 64 bytes
# Events per append while importing: PostgreSQL takes at most 16,383 in one statement.
IMPORT_BATCH = 10_000


class ImportRefused(ValueError):
    """The import file, or a room in it, does not verify: nothing is stored."""


@dataclass
class ExportedRoom:
    room: UUID
    lines: list[dict[str, Any]] = field(default_factory=list)


def export_lines(app: RoomsApp, room_id: str | UUID) -> Iterator[bytes]:
    """One room's stored events as export lines (unknown_room if it has none,
    room_damaged, before any line, if one of them cannot be read)."""
    uid = room_uuid(room_id)
    records = app.stored_records(uid)
    if not records:
        raise Rejection("unknown_room", f"no room '{room_id}'")
    room = str(uid)
    for rec in records:
        if not isinstance(rec, Recorded):
            raise Rejection("room_damaged", f"room {room} version {rec.originator_version} "
                            f"cannot be read: {rec.problem}; see docs/operations.md")

    def lines() -> Iterator[bytes]:
        for rec in cast("list[Recorded]", records):
            yield orjson.dumps({"room": room, "version": rec.originator_version,
                                "type": rec.type, "payload": rec.body().decode("utf-8"),
                                "prev": rec.prev_hash, "hash": rec.hash(),
                                "sig": rec.signature})
            yield b"\n"

    return lines()


def export_rooms(app: RoomsApp, rooms: list[str] | None, out: BinaryIO
                 ) -> tuple[int, int, list[str]]:
    """Write the named rooms (None: every room) to `out`; (rooms, events) written, and
    why each room left out was (every room: a damaged one is left out, the others go on;
    a named one that cannot be exported is refused)."""
    ids: Iterable[str | UUID] = app.room_ids() if rooms is None else rooms
    count = events = 0
    left_out: list[str] = []
    for room in ids:
        try:
            lines = export_lines(app, room)
        except Rejection as r:
            if rooms is not None or r.code != "room_damaged":
                raise
            left_out.append(r.message)
            continue
        for chunk in lines:
            out.write(chunk)
            events += chunk != b"\n"
        count += 1
    out.flush()
    return count, events, left_out


def parse_export(data: bytes) -> list[ExportedRoom]:
    """The rooms of an export file, in order, each line checked for its shape."""
    rooms: dict[UUID, ExportedRoom] = {}
    last: UUID | None = None
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            line = strict_json.loads(raw)
        except strict_json.JSONInputError as e:
            raise ImportRefused(f"line {number}: {e}") from None
        if isinstance(line, dict) and sorted(line) == sorted(EARLIER_FIELDS):
            line = earlier_line(line)
        if not isinstance(line, dict) or sorted(line) != sorted(FIELDS):
            raise ImportRefused(f"line {number}: an export line is an object with exactly "
                                f"{', '.join(FIELDS)}")
        version, kind, payload, sig = (line["version"], line["type"], line["payload"],
                                       line["sig"])
        if type(version) is not int or version < 1 or not isinstance(kind, str) \
                or not isinstance(payload, str) or not isinstance(line["room"], str) \
                or not all(isinstance(line[k], str) and HEX64.fullmatch(line[k])
                           for k in ("prev", "hash")) \
                or not (sig is None or isinstance(sig, str) and BASE64_SIG.fullmatch(sig)):
            raise ImportRefused(f"line {number}: version must be a whole number from 1, type "
                                "and payload text, prev and hash 64 hex digits, sig a "
                                "base64 signature or null")
        try:
            uid = UUID(line["room"])
        except ValueError:
            raise ImportRefused(f"line {number}: '{line['room'][:40]}' is not a room id") \
                from None
        room = rooms.get(uid)
        if room is None:
            room = rooms[uid] = ExportedRoom(uid)
        elif last != uid:
            raise ImportRefused(f"line {number}: the events of room {uid} are not together")
        last = uid
        room.lines.append(line)
    if not rooms:
        raise ImportRefused("the file holds no events")
    return list(rooms.values())


def earlier_line(line: dict[str, Any]) -> dict[str, Any]:
    """A line of an export written before the line format above, whose payload held
    the signature as its last key (tests/golden/v2.jsonl), in today's form."""
    payload = line["payload"]
    if not isinstance(payload, str):
        return line
    plain, sig = unsigned(payload.encode("utf-8"))
    try:
        prev = orjson.loads(plain).get("prev")
    except (orjson.JSONDecodeError, AttributeError):
        prev = None
    return {**line, "payload": plain.decode("utf-8"), "prev": prev, "sig": sig}


@dataclass
class Checked:
    room: UUID
    records: list[Recorded]
    trusted: Trusted | None  # the key named with --trust-key, for these appends


def verified(app: RoomsApp, exported: ExportedRoom, trust_key: str | None = None) -> Checked:
    """The room's events as the mapper reads them, once every check has passed: every
    hash, every append's signature under the server's key (or `trust_key`, the
    base64 public key the operator named), and an audit of the room's replay."""
    room = str(exported.room)
    trusted = Trusted(trust_key, len(exported.lines)) if trust_key is not None else None
    walk = Chain(app.signer, trusted=trusted, every=True)
    records: list[Recorded] = []
    try:
        for expected, line in enumerate(exported.lines, start=1):
            where = f"room {room} version {line['version']}"
            if line["version"] != expected:
                raise ImportRefused(f"room {room}: version {line['version']} where "
                                    f"{expected} was expected")
            payload = line["payload"].encode("utf-8")
            rec = app.mapper.recorded(  # type: ignore[attr-defined]
                exported.room, expected, line["type"], signed(payload, line["sig"]))
            if not isinstance(rec, Recorded):
                raise ImportRefused(f"{where}: not a stored event ({rec.problem})")
            if rec.body() != payload or rec.signature != line["sig"]:
                raise ImportRefused(f"{where}: the payload carries a signature of its own")
            if expected == 1 and not isinstance(rec.fact, RoomCreated):
                raise ImportRefused(f"{where}: the room does not start with RoomCreated")
            if walk.step(rec) != line["hash"]:
                raise ImportRefused(f"{where}: the hash is not the hash of its event")
            if rec.prev_hash != line["prev"]:
                raise ImportRefused(f"{where}: prev is not the prev of its payload")
            records.append(rec)
        walk.end()
    except Damaged as d:
        hint = ""
        if "does not verify" in d.problem:
            hint = (" (signed with another key? name the source's public key, as its "
                    "`dune-ledger keys show` prints it, with --trust-key if you trust it)"
                    if trust_key is None else " nor with the key named with --trust-key")
        raise ImportRefused(f"room {room} does not verify at version {d.version}: "
                            f"{d.problem}{hint}") from None
    try:  # the chain holds: now the rules' checks on its replay
        report, _ = audit_records(room, records)
    except Exception as e:  # a payload of the right shape whose fact does not fit
        raise ImportRefused(f"room {room}: its replay fails ({type(e).__name__})") from None
    failed = {name: check["details"][:3] for name, check in report["checks"].items()
              if not check["ok"]}
    if failed:
        raise ImportRefused(f"room {room} does not verify: {orjson.dumps(failed).decode()}")
    return Checked(exported.room, records, trusted)


def exists(app: RoomsApp, room: UUID) -> bool:
    return bool(app.recorder.select_events(room, limit=1))


def import_rooms(app: RoomsApp, rooms: list[ExportedRoom], trust_key: str | None = None
                 ) -> dict[str, int]:
    """Check every room, then store them all; {room: events stored}. `trust_key`: a
    public key (base64 of its raw 32 bytes) whose signatures the store accepts for
    the appends of this file, recorded in each room's signed snapshot."""
    if trust_key is not None:
        if not valid_public_key(trust_key):
            raise ImportRefused("--trust-key must be an Ed25519 public key as `dune-ledger "
                                "keys show` prints it: the base64 of its raw 32 bytes")
        if app.snapshots is None:
            raise ImportRefused("--trust-key needs a store that keeps snapshots: the trust "
                                "is recorded in a snapshot signed with this server's key")
    checked: list[Checked] = []
    for exported in rooms:
        if exists(app, exported.room):
            raise ImportRefused(f"room {exported.room} already exists in this store")
        checked.append(verified(app, exported, trust_key))
    stored: dict[str, int] = {}
    for room in checked:
        store_room(app, room)
        stored[str(room.room)] = len(room.records)
    return stored


def valid_public_key(text: str) -> bool:
    try:
        return len(base64.b64decode(text, validate=True)) == 32
    except (binascii.Error, ValueError):
        return False


def store_room(app: RoomsApp, checked: Checked) -> None:
    """Append the room's events as they were, then its snapshots (at the app's interval,
    as commands would have taken them, and at the end when a key was trusted, so that
    loads find that trust), made from the same events and signed with this store's
    key."""
    records, trusted = checked.records, checked.trusted
    mapper = app.mapper
    for start in range(0, len(records), IMPORT_BATCH):
        batch = records[start:start + IMPORT_BATCH]
        app.recorder.insert_events([mapper.to_stored_event(rec) for rec in batch])
    interval = app.snapshotting_intervals.get(Room) or 0
    if app.snapshots is None:
        return
    room: Room | None = None
    snapshots = []
    for i, rec in enumerate(records):
        room = rec.mutate(room)
        v = rec.originator_version
        if i + 1 < len(records) and records[i + 1].append == rec.append:
            continue  # snapshots fall where appends end, as commands take them
        crossed = bool(interval) and v // interval > (rec.append - 1) // interval
        if crossed or (trusted is not None and i + 1 == len(records)):
            room.trusted = trusted
            snapshots.append(signed_snapshot(app, room))
    if snapshots:
        app.snapshots.put(snapshots)


def signed_snapshot(app: RoomsApp, room: Room) -> RoomSnapshot:
    snapshot = RoomSnapshot.take(room)
    snapshot = replace(snapshot, stored=snapshot.body())
    return replace(snapshot, signature=app.signer.sign(snapshot.signed_message()))
