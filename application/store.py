"""The rooms' event store: loads verified as they fold, signed saves, snapshots, rows.

`RoomStore` is the eventsourcing `Application`; storage comes from the environment
the infrastructure builds from a URL. Every load walks the room's chain
(application/stream.Chain) and refuses a room that does not verify with
`room_damaged` (RULES 8); every append is signed with the server's key. The rooms a
process saved are kept in memory (`KeptRooms`) for its next command on them.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, ClassVar, Protocol, cast
from uuid import UUID

from cachetools import LRUCache
from eventsourcing.application import AggregateNotFoundError, Application, ProcessingEvent
from eventsourcing.persistence import IntegrityError, Recording

from dune_ledger.application.stream import (
    Chain,
    Damaged,
    Recorded,
    Room,
    RoomSnapshot,
    Signer,
    Stored,
    Trusted,
    Undecodable,
    as_room_id,
    folded,
    project_room,
    verified_room,
)
from dune_ledger.domain.game import Rejection

# Rooms a process keeps in memory after saving them, for its next command on the same
# room (most recently used kept): that command is decided on the kept room instead of
# a load (see `RoomsApp._room_to_decide_on` for a room another process also writes).
DEFAULT_ROOM_CACHE = 256
SNAPSHOT_INTERVAL = 50  # events between two snapshots of a room


class AppendRetried(IntegrityError):
    """The store sent an append again after losing its connection (its commit outcome
    unknown: a failover), and found the versions taken, perhaps by the first send."""


class RoomStore(Application[UUID]):
    # The application's name picks its tables (`duneledger_events`, ...) and settings:
    # every layer above (queries, the use cases) is the same application to the store.
    name = "DuneLedger"
    snapshotting_intervals: ClassVar[dict[type[Any], int]] = {Room: SNAPSHOT_INTERVAL}
    snapshotting_projectors: ClassVar[dict[type[Any], Any]] = {Room: project_room}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)  # which names a subclass after itself
        cls.name = RoomStore.name

    def __init__(self, env: dict[str, str] | None = None, *, signer: Signer,
                 snapshot_interval: int = SNAPSHOT_INTERVAL,
                 room_cache: int = DEFAULT_ROOM_CACHE) -> None:
        # The server's key (infrastructure/keys.py): every append is signed with it,
        # every load checks with it (application/stream.verified_room).
        self.signer = signer
        super().__init__(env)
        # Per instance, so that one process can run rooms at two intervals (tests).
        self.snapshotting_intervals = {Room: snapshot_interval}  # type: ignore[misc]
        self.kept = KeptRooms(room_cache)

    # The processes that audit parts of long rooms for this app (application/audit.py
    # `PartProcesses`), started by its first audit in parts: they end with the app.
    part_processes: Closing | None = None

    def close(self) -> None:
        if self.part_processes is not None:
            self.part_processes.close()
            self.part_processes = None
        super().close()

    # --- writes ---------------------------------------------------------------

    def save(self, *objs: Any, **kwargs: Any) -> list[Recording[UUID]]:
        """The library's save of rooms, without its runtime Protocol checks; it returns
        no recordings.

        `ProcessingEvent.collect_events` asks `isinstance(obj, <Protocol>)` twice per
        room, which costs a tenth of a command's CPU on Python 3.11.
        """
        if not all(isinstance(obj, Room) for obj in objs):
            return super().save(*objs, **kwargs)
        processing_event: ProcessingEvent[UUID] = ProcessingEvent()
        for room in objs:
            events = room.collect_events()
            self._sign(events)
            processing_event.events.extend(events)
            processing_event.aggregates[room.id] = room
        processing_event.saved_kwargs.update(kwargs)
        # Stored as the library's `_record` stores them, without the Recording and
        # Notification it makes of each event for its process applications: no caller
        # reads them (the read models follow the stored log).
        to_stored = self.mapper.to_stored_event
        self.recorder.insert_events([to_stored(e) for e in processing_event.events],
                                    **kwargs)
        self._take_snapshots(processing_event)
        return []

    def _sign(self, events: list[Recorded]) -> None:
        """Sign the last event of each append (one per command; a batch save may hold
        several): its hash covers every event before it."""
        sign = self.signer.sign
        for i, rec in enumerate(events):
            if i + 1 == len(events) or events[i + 1].append != rec.append:
                rec.signature = sign(rec.signed_message())

    def _take_snapshots(self, processing_event: ProcessingEvent[UUID]) -> None:
        """Snapshot the room just saved, from memory, when its append crossed an interval.

        The library would reload the room from the store to snapshot it; the
        saved aggregate already holds exactly the state its events produce. The
        events are stored by now: a snapshot that cannot be made (a state the store
        cannot encode) is skipped and said on stderr, never the command's failure.
        """
        try:
            self._snapshot(processing_event)
        except Exception as e:  # the loads fold more events until the next snapshot
            print(f"dune-ledger: a snapshot was skipped: {type(e).__name__}: {e}",
                  file=sys.stderr)

    def _snapshot(self, processing_event: ProcessingEvent[UUID]) -> None:
        if self.snapshots is None:
            return
        interval = self.snapshotting_intervals.get(Room)
        if not interval:
            return
        for room in processing_event.aggregates.values():
            if not isinstance(room, Room):
                continue
            versions = [e.originator_version for e in processing_event.events
                        if e.originator_id == room.id]
            if versions and versions[-1] // interval > (versions[0] - 1) // interval:
                snapshot = RoomSnapshot.take(room)
                snapshot = replace(snapshot, stored=snapshot.body())
                self.snapshots.put([replace(snapshot, signature=self.signer.sign(
                    snapshot.signed_message()))])

    # --- reads ----------------------------------------------------------------

    def current(self, room_id: str | UUID) -> Room:
        """The room as stored now: the room this process kept after its last command on
        it, brought up to date with any events written since (one query), or else a load.
        The caller owns it: it is no longer kept."""
        room = self.kept.take(room_id)
        if room is None:
            return self.load(room_id)
        return self._up_to_date(room)

    def peek(self, room_id: str | UUID) -> Room:
        """The room as stored now (`current`), for the caller to read only: it stays kept
        for this process's next command on it."""
        room = self.current(room_id)
        self.kept.keep(room)
        return room

    def _up_to_date(self, room: Room) -> Room:
        """`room` with the events written since this process last saw it (one query);
        read afresh if its state is spoiled."""
        if spoiled(room):
            stored = self.load(room.id)
            stored.written_elsewhere = room.written_elsewhere or stored.version != room.version
            return stored
        newer = self.stored_records(room.id, gt=room.version)
        if newer:
            version = room.version
            try:
                verified_room(newer, self.signer, room=room)
            except Damaged as d:
                raise damaged(room.id, d, self.signer) from None
            room.written_elsewhere = room.version != version
        return room

    def load(self, room_id: str | UUID, version: int | None = None) -> Room:
        """The room as stored (at `version`), verified as it is folded (RULES 8: a room
        that does not verify is refused with `room_damaged`)."""
        uid = room_uuid(room_id)
        select_room = getattr(self.recorder, "select_room", None)
        signer = self.signer
        try:
            if version is None and select_room is not None:
                # The store reads the latest snapshot and the events after it in one
                # round trip (infrastructure/postgres.py).
                stored = [cast(Stored, self.mapper.to_domain_event(e))
                          for e in select_room(uid)]
                latest = verified_room(stored, signer)
                if latest is None:
                    raise Rejection("unknown_room", f"no room '{room_id}'")
                return latest

            def trusted() -> Trusted | None:  # a past view of an imported room may need it
                return self.trusted(uid)

            def fold(_: Room | None, items: Any) -> Room | None:
                room, chain = folded(items, signer, trusted=trusted)
                if chain is not None and room is not None:
                    if version is not None:
                        self._signed_past(room, chain)
                    chain.end()
                return room

            room: Room = self.repository.get(uid, version=version, projector_func=fold)
        except AggregateNotFoundError:
            raise Rejection("unknown_room", f"no room '{room_id}'") from None
        except Damaged as d:
            raise damaged(uid, d, signer) from None
        assert isinstance(room, Room)
        return room

    def _signed_past(self, room: Room, chain: Chain, batch: int = 64) -> None:
        """A past version of a room is as signed: the walk goes on, reading on from
        `room`, to the end of the append that holds its version (`Chain.end` then
        checks its signature). Raises Damaged."""
        after = room.version
        while chain.last is not None and chain.last.signature is None:
            following = self.stored_records(room.id, gt=after, lte=after + batch)
            if not following:
                raise Damaged(after, "the last append is not signed")
            for rec in following:
                if type(rec) is not Recorded:
                    raise Damaged(rec.originator_version, cast(Undecodable, rec).problem)
                chain.step(rec)
                after = rec.originator_version
                if rec.signature is not None:
                    break

    def trusted(self, room_id: UUID) -> Trusted | None:
        """The key a room's import named (`import --trust-key`), from its latest snapshot
        if that is signed (None: none; a snapshot deleted or forged leaves the appends
        that key signed unverified, which a past view or the audit then reports)."""
        if self.snapshots is None:
            return None
        for snapshot in self.snapshots.get(room_id, desc=True, limit=1):
            if isinstance(snapshot, RoomSnapshot) and snapshot.signature is not None and \
                    self.signer.verify(snapshot.signed_message(), snapshot.signature):
                return snapshot.mutate(None).trusted
        return None

    def records(
        self, room_id: UUID, gt: int | None = None, lte: int | None = None
    ) -> list[Recorded]:
        """The room's events (those after `gt`, up to `lte`); `room_damaged` when one
        of them cannot be read (the audit reads them with `stored_records`)."""
        stored = self.stored_records(room_id, gt, lte)
        for rec in stored:
            if type(rec) is not Recorded:
                assert isinstance(rec, Undecodable)
                raise damaged(room_id, Damaged(rec.originator_version, rec.problem),
                              self.signer)
        return cast("list[Recorded]", stored)

    def verified_records(self, room_id: UUID) -> list[Recorded]:
        """The room's whole stream, walked by the chain as a load walks it (RULES 8), for
        a fold of it that serves only what verifies; `room_damaged` when it does not."""
        records = self.records(room_id)
        chain = Chain(self.signer, trusted=lambda: self.trusted(room_id))
        try:
            for rec in records:
                chain.step(rec)
            chain.end()
        except Damaged as d:
            raise damaged(room_id, d, self.signer) from None
        return records

    def stored_records(
        self, room_id: UUID, gt: int | None = None, lte: int | None = None
    ) -> list[Recorded | Undecodable]:
        """The room's events (those after `gt`, up to `lte`) as stored, each row that
        cannot be read as an Undecodable.

        A stream (an audit's read) may be long: it is read with the collector
        paused, and as plain rows where the store offers them (a StoredEvent and a
        UUID per row were half the cost of reading).
        """
        select_stream = getattr(self.recorder, "select_stream", None)
        stream = getattr(self.mapper, "stream", None)
        with gc_paused():
            if select_stream is not None and stream is not None:
                return cast("list[Recorded | Undecodable]",
                            stream(room_id, select_stream(room_id, gt, lte)))
            return [e for e in self.events.get(room_id, gt=gt, lte=lte)
                    if isinstance(e, Recorded | Undecodable)]

    def room_ids(self) -> Iterator[UUID]:
        """Every room, in creation order, from the notification log."""
        start = 1
        while True:
            batch = self.recorder.select_notifications(
                start=start, limit=500, topics=["RoomCreated"]
            )
            if not batch:
                return
            for n in batch:
                if isinstance(n.originator_id, UUID):  # else the row names no room
                    yield n.originator_id
            start = batch[-1].id + 1

    def stored_room_ids(self) -> list[UUID]:
        """Every room with any stored event (the audit's), where the store can list them;
        else `room_ids`."""
        select = getattr(self.recorder, "select_room_ids", None)
        return list(select()) if select is not None else list(self.room_ids())


class KeptRooms:
    """Rooms kept in memory between commands, the least recently used first out.

    `take` removes the room, so a command holds it alone while it mutates it: a
    concurrent command on the same room loads its own copy, and a failed save
    leaves nothing half-written behind.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.rooms: LRUCache[UUID, Room] = LRUCache(maxsize=size)
        self.lock = threading.Lock()  # commands run on many threads; the cache is not safe

    def take(self, room_id: str | UUID) -> Room | None:
        try:
            uid = room_uuid(room_id)
        except Rejection:
            return None
        with self.lock:
            return self.rooms.pop(uid, None)

    def keep(self, room: Room) -> None:
        if self.size == 0 or spoiled(room):  # its state is not the room's: never kept
            return
        with self.lock:
            self.rooms[room.id] = room


def spoiled(room: Room) -> bool:
    """A command refused after events were applied to the room's state in place
    (`decide(in_place=True)`): the state no longer is the room's at its version."""
    return room.state.version != room.version


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a long stream is read and replayed.

    100,000 events are millions of objects, kept alive and allocated steadily, so
    the collector ran again and again over all of them, finding next to nothing:
    what a read or a replay drops is freed by reference counting. It resumes
    (unless someone else had stopped it) at the end, and collects whatever cycles
    were left then.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class Closing(Protocol):
    def close(self) -> None: ...


def damaged(room_id: UUID, d: Damaged, signer: Signer) -> Rejection:
    """The refusal of every command on a room that does not verify: for the operator."""
    missing = getattr(signer, "missing", None)
    why = missing() if missing is not None else None
    return Rejection("room_damaged", f"room {room_id} is damaged at version {d.version}: "
                     f"{d.problem}{f' ({why})' if why else ''}; its commands are refused "
                     f"until an operator restores it (run `dune-ledger audit {room_id}`)")


def room_uuid(room_id: str | UUID) -> UUID:
    uid = as_room_id(room_id)
    if uid is None:
        raise Rejection("unknown_room", f"no room '{room_id}'")
    return uid
