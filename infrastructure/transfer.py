"""Moving rooms between stores: `dune-ledger export` and `dune-ledger import`.

An export is JSON lines, one stored event a line, room after room, each room's
events in version order:

    {"room": ID, "version": N, "type": "FeePaid", "payload": TEXT, "hash": HEX}

`payload` is the exact stored payload (the JSON text the chain hash covers,
with the fact, its schema version `v`, `prev`, the seat, the command id, the
append, the time, and whatever else the payload carries, such as a
signature), and `hash` is the event's chain hash (`application/stream.chain_hash`).
Snapshots and read models are not exported: they are made again from the events.

An import stores every event unchanged (same room ids, versions, types and
payloads, so the same hashes) through the application's mapper and recorder,
so that the read models follow it as they follow commands. It first checks
the whole file and refuses all of it, storing nothing, when any room already
exists in the store, or does not verify: a line that is not an event, a hash
that is not its event's, a version out of order, or an audit of the room's
replay (chain, conservation, shuffles, hand limits) that finds a problem.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, BinaryIO
from uuid import UUID

import orjson

from application.audit import audit_records
from application.rooms import RoomsApp, room_uuid
from application.stream import Recorded, Room, RoomSnapshot, chain_hash
from domain.errors import Rejection
from infrastructure import strict_json

FIELDS = ("room", "version", "type", "payload", "hash")
HEX64 = re.compile(r"[0-9a-f]{64}")
# Events per append while importing: PostgreSQL takes at most 16,383 in one statement.
IMPORT_BATCH = 10_000


class ImportRefused(ValueError):
    """The import file, or a room in it, does not verify: nothing is stored."""


@dataclass
class ExportedRoom:
    room: UUID
    lines: list[dict[str, Any]] = field(default_factory=list)


def export_lines(app: RoomsApp, room_id: str | UUID) -> Iterable[bytes]:
    """One room's stored events as export lines (unknown_room if it has none)."""
    uid = room_uuid(room_id)
    records = app.records(uid)
    if not records:
        raise Rejection("unknown_room", f"no room '{room_id}'")
    room = str(uid)
    for rec in records:
        body = rec.body()
        yield orjson.dumps({"room": room, "version": rec.originator_version,
                            "type": rec.type, "payload": body.decode("utf-8"),
                            "hash": chain_hash(room, rec.originator_version, rec.type, body)})
        yield b"\n"


def export_rooms(app: RoomsApp, rooms: list[str] | None, out: BinaryIO) -> tuple[int, int]:
    """Write the named rooms (None: every room) to `out`; (rooms, events) written."""
    ids: Iterable[str | UUID] = app.room_ids() if rooms is None else rooms
    count = events = 0
    for room in ids:
        for chunk in export_lines(app, room):
            out.write(chunk)
            events += chunk != b"\n"
        count += 1
    out.flush()
    return count, events


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
        if not isinstance(line, dict) or sorted(line) != sorted(FIELDS):
            raise ImportRefused(f"line {number}: an export line is an object with exactly "
                                f"{', '.join(FIELDS)}")
        version, kind, payload, digest = (line["version"], line["type"], line["payload"],
                                          line["hash"])
        if type(version) is not int or version < 1 or not isinstance(kind, str) \
                or not isinstance(payload, str) or not isinstance(digest, str) \
                or not HEX64.fullmatch(digest) or not isinstance(line["room"], str):
            raise ImportRefused(f"line {number}: version must be a whole number from 1, type "
                                "and payload text, hash 64 hex digits")
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


def verified(app: RoomsApp, exported: ExportedRoom) -> list[Recorded]:
    """The room's events as the mapper reads them, once every check has passed."""
    room = str(exported.room)
    records: list[Recorded] = []
    for expected, line in enumerate(exported.lines, start=1):
        where = f"room {room} version {line['version']}"
        if line["version"] != expected:
            raise ImportRefused(f"room {room}: version {line['version']} where {expected} "
                                "was expected")
        body = line["payload"].encode("utf-8")
        if chain_hash(room, expected, line["type"], body) != line["hash"]:
            raise ImportRefused(f"{where}: the hash is not the hash of its event")
        try:
            rec = app.mapper.recorded(exported.room, expected, line["type"], body)  # type: ignore[attr-defined]
        except Exception as e:  # an unknown type or a payload the mapper cannot read
            raise ImportRefused(f"{where}: not a stored event ({type(e).__name__}: "
                                f"{str(e)[:100]})") from None
        records.append(rec)
    try:
        report, _ = audit_records(room, records)
    except Exception as e:  # a payload of the right shape whose fact does not fit
        raise ImportRefused(f"room {room}: its replay fails ({type(e).__name__})") from None
    failed = {name: check["details"][:3] for name, check in report["checks"].items()
              if not check["ok"]}
    if failed:
        raise ImportRefused(f"room {room} does not verify: {orjson.dumps(failed).decode()}")
    return records


def exists(app: RoomsApp, room: UUID) -> bool:
    return bool(app.recorder.select_events(room, limit=1))


def import_rooms(app: RoomsApp, rooms: list[ExportedRoom]) -> dict[str, int]:
    """Check every room, then store them all; {room: events stored}."""
    checked: list[tuple[UUID, list[Recorded]]] = []
    for exported in rooms:
        if exists(app, exported.room):
            raise ImportRefused(f"room {exported.room} already exists in this store")
        checked.append((exported.room, verified(app, exported)))
    stored: dict[str, int] = {}
    for room, records in checked:
        store_room(app, records)
        stored[str(room)] = len(records)
    return stored


def store_room(app: RoomsApp, records: list[Recorded]) -> None:
    """Append the room's events as they were, then its snapshots (at the app's interval,
    as commands would have taken them), made from the same events."""
    mapper = app.mapper
    for start in range(0, len(records), IMPORT_BATCH):
        batch = records[start:start + IMPORT_BATCH]
        app.recorder.insert_events([mapper.to_stored_event(rec) for rec in batch])
    interval = app.snapshotting_intervals.get(Room)
    if app.snapshots is None or not interval:
        return
    room: Room | None = None
    snapshots = []
    for rec in records:
        room = rec.mutate(room)
        if rec.originator_version % interval == 0:
            snapshots.append(RoomSnapshot.take(room))
    if snapshots:
        app.snapshots.put(snapshots)
