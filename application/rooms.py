"""The rooms application: every command goes load -> decide -> save here.

One eventsourcing `Application`; storage comes from the environment the
infrastructure builds from a URL. A save is a compare-and-set on the room's
version: a concurrent write raises `IntegrityError`, and the command is
reloaded and decided again (with fresh randomness) a bounded number of times.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import random
import secrets
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, ClassVar, Protocol, cast
from uuid import UUID, uuid4

import orjson
from eventsourcing.application import AggregateNotFoundError, Application, ProcessingEvent
from eventsourcing.persistence import IntegrityError, Recording

from dune_ledger.application.stream import (
    Chain,
    Damaged,
    Recorded,
    Room,
    RoomSnapshot,
    SeatTokenReissued,
    Signer,
    Stored,
    Trusted,
    UnauthenticRow,
    Undecodable,
    folded,
    project_room,
    verified_room,
)
from dune_ledger.domain.game import (
    SYSTEM,
    Command,
    EndRoom,
    Randomness,
    Rejection,
    RoomState,
    Tx,
    WindowDeadline,
    apply,
    build_room,
    committed_layout,
    decide,
    expired,
    initial_state,
    parse_command,
    parse_layout,
    port,
    seat_view_at,
)

# (room seed or None, room version) -> the randomness for one decision
RandomnessFactory = Callable[[int | None, int], Randomness]
Result = dict[str, Any]

RETRIES = 8
# After a lost race, a command waits a random while (up to this many seconds, doubling
# with each loss) before it reads the room again: two writers in one room at full
# speed otherwise lose to each other in lockstep, the one that kept the room winning.
RETRY_PAUSE = 0.001

# Rooms a process keeps in memory after saving them, for its next command on the same
# room (most recently used kept): that command is decided on the kept room instead of
# a load (see `_room_to_decide_on` for a room another process also writes).
ROOM_CACHE_ENV = "DUNE_LEDGER_ROOM_CACHE"
DEFAULT_ROOM_CACHE = 256
# Seconds a read spends catching the read models up before it folds its own room.
READ_CATCH_UP = 0.25
log = logging.getLogger("dune_ledger.rooms")
PUBLIC_VIEW = "*public*"  # the key of the public view among the views (projections.store.PUBLIC)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def now() -> str:
    return datetime.now(UTC).isoformat()


def public_events(records: list[Recorded]) -> list[dict[str, Any]]:
    out = []
    for rec in records:
        fields = rec.fact.public()
        if fields is not None:
            out.append({"type": rec.type, "version": rec.originator_version, **fields})
    return out


class AppendRetried(IntegrityError):
    """The store sent an append again after losing its connection (its commit outcome
    unknown: a failover), and found the versions taken, perhaps by the first send."""


class RoomsApp(Application[UUID]):
    name = "DuneLedger"
    snapshotting_intervals: ClassVar[dict[type[Any], int]] = {Room: 50}
    snapshotting_projectors: ClassVar[dict[type[Any], Any]] = {Room: project_room}

    def __init__(
        self, env: dict[str, str] | None = None, *, randomness: RandomnessFactory,
        signer: Signer,
    ) -> None:
        # The server's key (infrastructure/keys.py): every append is signed with it,
        # every load checks with it (application/stream.verified_room).
        self.signer = signer
        super().__init__(env)
        interval = self.env.get("DUNE_LEDGER_SNAPSHOT_INTERVAL")
        if interval:
            # Per instance, so that one process can run rooms at two intervals (tests).
            self.snapshotting_intervals = {Room: int(interval)}  # type: ignore[misc]
        self.randomness = randomness
        self.kept = KeptRooms(room_cache_size(self.env.get(ROOM_CACHE_ENV)))
        # The clock port handed to the rules: a window's deadline is stamped from it.
        self.clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    def save(self, *objs: Any, **kwargs: Any) -> list[Recording[UUID]]:
        """The library's save of rooms, without its runtime Protocol checks.

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
        recordings = self._record(processing_event)
        self._take_snapshots(processing_event)
        self._notify(recordings)
        return recordings

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

    # --- writes ---------------------------------------------------------------

    def create_room(self, raw_layout: Any) -> Result:
        """Validate a layout and store the new room. LayoutError on bad input."""
        layout = parse_layout(raw_layout)
        room_id = uuid4()
        # A committed room's secret, from the operating system (RULES 9).
        created = build_room(layout, str(room_id), self.randomness(layout.seed, 0),
                             secrets.token_bytes(32) if committed_layout(layout) else None)
        tokens = {s.faction: secrets.token_urlsafe(24) for s in layout.seats}
        spectator = secrets.token_urlsafe(24)
        room = Room(room_id, initial_state(created))
        room.record(
            [created], None, seat=None, command_id=None, at=now(),
            meta={"token_hashes": {f: token_hash(t) for f, t in tokens.items()},
                  "spectator_hash": token_hash(spectator)},
        )
        # As a load would find them (`Recorded.mutate` reads them from the meta).
        room.token_hashes = {f: token_hash(t) for f, t in tokens.items()}
        room.spectator_hash = token_hash(spectator)
        self.save(room)
        self.kept.keep(room)
        return {"room": str(room_id), "version": 1, "seats": tokens, "spectator": spectator}

    def reissue_token(self, room_id: str, seat: str) -> Result:
        """A new token for `seat`; the old one stops working. The event that records it
        holds the new token's hash only; the token is returned once, here."""
        for _ in range(RETRIES):
            room = self.current(room_id)
            if not room.state.has_seat(seat):
                raise Rejection("unknown_seat", "that faction has no seat in this room")
            token = secrets.token_urlsafe(24)
            fact = SeatTokenReissued(seat=seat, token_hash=token_hash(token))
            state = room.state.clone()
            apply(state, fact)
            room.record([fact], state, seat=None, command_id=None, at=now())
            room.token_hashes[seat] = fact.token_hash
            try:
                self.save(room)
            except IntegrityError:
                continue
            self.kept.keep(room)
            return {"room": str(room.id), "seat": seat, "token": token, "version": room.version}
        raise Rejection("busy", "the room kept changing; try again")

    def end_room(self, room_id: str, command_id: str | None = None) -> Result:
        """The operator's end of a room (RULES 9): the secret is published and every
        later command is refused. A repeated `command_id` returns the first result."""
        return self._run(room_id, SYSTEM, EndRoom(command_id=command_id),
                         self.clock())

    def room_summaries(self) -> list[dict[str, Any]]:
        """Every room for the operator: id, version, seats, ended, created, last command."""
        out = []
        for uid in self.room_ids():
            room = self.current(uid)
            self.kept.keep(room)
            first = self.records(uid, lte=1)
            last = self.records(uid, gt=room.version - 1)
            out.append({
                "room": str(uid), "version": room.version,
                "seats": [s.faction for s in room.state.seats],
                "ended": room.state.ended,
                "created": first[0].at if first else None,
                "last_command": None if not last or last[-1].seat is None else {
                    "at": last[-1].at, "seat": last[-1].seat, "event": last[-1].type},
            })
        return out

    def execute(self, room_id: str, seat: str, raw: Any) -> Result:
        """Run one command as `seat`. Never raises for a rule: returns the result shape."""
        try:
            command = parse_command(raw)
        except Rejection as r:
            return self._refused(room_id, r)
        return self._run(room_id, seat, command, self.clock())

    def close_expired(self, room_id: str, moment: datetime | None = None) -> Result | None:
        """Close the room's open window if its deadline has passed by `moment` (RULES
        4.4): the worker's append, on the same path as a command. None: nothing was due."""
        moment = moment or self.clock()
        try:
            room = self.current(room_id)
        except Rejection:
            return None
        self.kept.keep(room)
        window = expired(room.state, moment)
        if window is None:
            return None
        command = WindowDeadline(event=window.event, command_id=f"deadline:{window.event}")
        return self._run(room_id, SYSTEM, command, moment)

    def _run(self, room_id: str, seat: str, command: Command, moment: datetime) -> Result:
        decided_on = 0
        lost_a_race = False
        for attempt in range(RETRIES):
            if attempt:  # a race was lost; not the room's randomness: nothing of it is kept
                time.sleep(random.uniform(0, RETRY_PAUSE * 2 ** (attempt - 1)))
            try:
                room, as_stored = self._room_to_decide_on(room_id)
            except Rejection as r:
                return {"ok": False, "version": 0, "error": r.as_error()}
            room.written_elsewhere |= lost_a_race
            try:
                outcome = self._decide(room, seat, command, moment)
                if not isinstance(outcome, Tx) and not as_stored:
                    # A stale room may answer what the stored room would not: the answer
                    # counts only once the room is known to be as stored.
                    kept_at = room.version
                    room = self._up_to_date(room)
                    if room.version != kept_at:
                        outcome = self._decide(room, seat, command, moment)
                if not isinstance(outcome, Tx):
                    self.kept.keep(room)
                    return outcome
                decided_on = room.version
                room.record(outcome.events, outcome.state, seat=seat,
                            command_id=command.command_id, at=now())
            except Rejection as r:  # the room does not verify (`_up_to_date`)
                return {"ok": False, "version": 0, "error": r.as_error()}
            except Exception as e:
                # The rules or the encoding failed on this room's state: nothing is
                # stored, the room is not kept, and the other rooms go on (RULES 8).
                print(f"dune-ledger: room {room.id}: {type(e).__name__}: {e}", file=sys.stderr)
                return {"ok": False, "version": 0, "error": {
                    "code": "room_damaged",
                    "message": f"room {room.id} cannot take this command: its stored state "
                               f"does not fit the rules; an operator should run "
                               f"`dune-ledger audit {room.id}`"}}
            appended = list(room.pending)
            try:
                self.save(room)
            except IntegrityError as e:
                if isinstance(e, AppendRetried) and self._landed(room.id, appended):
                    # The store retried an append whose commit had landed before its
                    # answer was lost (a failover): it is stored once, and is this answer.
                    return {"ok": True, "version": appended[-1].originator_version,
                            "events": public_events(appended)}
                lost_a_race = True  # someone else wrote first: load and decide again
                continue
            self.kept.keep(room)
            return {"ok": True, "version": room.version, "events": public_events(appended)}
        # The version this command last decided on; the room has moved past it since.
        return {"ok": False, "version": decided_on,
                "error": {"code": "busy", "message": "the room kept changing; try again"}}

    def _decide(self, room: Room, seat: str, command: Command, moment: datetime
                ) -> Tx | Result:
        """The events `command` appends to `room` (a Tx), or the answer that appends nothing.

        Decided in place: the command holds the room alone (`KeptRooms.take`) and
        replaces its state by the Tx's. A refusal that came after some events were
        applied leaves the room `spoiled`: `KeptRooms` does not keep it."""
        if command.command_id is not None:
            done = room.commands.get(f"{seat}:{command.command_id}")
            if done is not None:
                return self._first_result(room.id, done)
        if command.expected_version is not None and command.expected_version != room.version:
            return {
                "ok": False,
                "version": room.version,
                "error": {
                    "code": "conflict",
                    "message": f"the room is at version {room.version}, "
                    f"not {command.expected_version}",
                },
            }
        try:
            # A committed room derives its outcomes (RULES 9) from the version of the
            # command's first event; the others draw from (seed, version) as before.
            randomness = port(room.state, room.version + 1) or self.randomness(
                room.state.seed, room.version)
            return decide(room.state, seat, command, randomness, in_place=True, now=moment)
        except Rejection as r:
            return {"ok": False, "version": room.version, "error": r.as_error()}

    def _landed(self, room_id: UUID, appended: list[Recorded]) -> bool:
        """Are these very events stored (the same chain hashes, which cover their bytes,
        time and predecessor: no other writer's append has them)?"""
        stored = self.stored_records(room_id, gt=appended[0].originator_version - 1,
                                     lte=appended[-1].originator_version)
        return [type(r) is Recorded and r.hash() for r in stored] == [
            r.hash() for r in appended]

    def _refused(self, room_id: str, r: Rejection) -> Result:
        try:
            version = self.load(room_id).version
        except Rejection as missing:
            return {"ok": False, "version": 0, "error": missing.as_error()}
        return {"ok": False, "version": version, "error": r.as_error()}

    def _first_result(self, room_id: UUID, span: list[int]) -> Result:
        first, last = span
        records = list(self.records(room_id, gt=first - 1, lte=last))
        return {"ok": True, "version": last, "events": public_events(records)}

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

    # --- reads ----------------------------------------------------------------

    def _room_to_decide_on(self, room_id: str | UUID) -> tuple[Room, bool]:
        """The room to decide a command on, and whether it is known to be as stored.

        A room this process kept, and that no other process is known to write, is
        decided on as kept: if it is stale after all, the save is refused (the
        version is taken) and the command is decided again on the room as stored,
        so an append costs no read first. Any other room is read as stored now.
        """
        room = self.kept.take(room_id)
        if room is None:
            return self.load(room_id), True
        if room.written_elsewhere:
            return self._up_to_date(room), True
        return room, False

    def current(self, room_id: str | UUID) -> Room:
        """The room as stored now: the room this process kept after its last command on
        it, brought up to date with any events written since (one query), or else a load.
        The caller owns it: it is no longer kept."""
        room = self.kept.take(room_id)
        if room is None:
            return self.load(room_id)
        return self._up_to_date(room)

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
                yield n.originator_id  # type: ignore[misc]
            start = batch[-1].id + 1

    def stored_room_ids(self) -> list[UUID]:
        """Every room with any stored event (the audit's), where the store can list them;
        else `room_ids`."""
        select = getattr(self.recorder, "select_room_ids", None)
        return list(select()) if select is not None else list(self.room_ids())

    # Views and the log come from the read models (projections/), caught up
    # incrementally first so that a reader sees its own writes; a read never
    # replays a stream. `open_rooms` injects them; `view_at` alone reads the stream.
    read_models: ReadModelsPort | None = None
    # Opens this app's storage again (with its read models), as a new process must, for
    # one query at a time (an audit's part: one PostgreSQL connection to start with):
    # `open_rooms` sets it; None for storage another process cannot open (memory://).
    reopen: Callable[[], RoomsApp] | None = None
    # The processes that audit parts of long rooms for this app (application/audit.py
    # `PartProcesses`), started by its first audit in parts: they end with the app.
    part_processes: Closing | None = None

    def close(self) -> None:
        if self.part_processes is not None:
            self.part_processes.close()
            self.part_processes = None
        super().close()

    def _caught_up(self, room_id: str) -> tuple[ReadModelsPort, str, bool]:
        """The read models, the canonical room id, and whether the models caught up.

        A read catches up for at most READ_CATCH_UP seconds: when more is left (a
        rebuild, a long log), the caller folds its own room instead of waiting."""
        if self.read_models is None:
            raise RuntimeError("no read models: open the app with storage.open_rooms")
        room = str(room_uuid(room_id))
        fresh = self.read_models.catch_up_within(READ_CATCH_UP)
        try:
            public = self.read_models.public_view(room)
        except UnauthenticRow:  # never served: the caller folds the room (`_served`)
            return self.read_models, room, False
        if public is None and fresh:
            raise Rejection("unknown_room", f"no room '{room_id}'")
        if public is not None and public.get("damaged"):
            raise Rejection("room_damaged", public["withheld"])
        return self.read_models, room, fresh

    def _own_rows(self, room: str, *, distrusted: bool = False
                  ) -> tuple[list[str], dict[str, str]] | None:
        """The room's log and views folded from its own verified events, when the stored
        ones are behind it or (`distrusted`) fail authentication; None: the stored ones
        serve."""
        models = self.read_models
        assert models is not None
        current = self.current(room)  # verified (RULES 8), or room_damaged
        self.kept.keep(current)
        if not distrusted:
            try:
                stored = models.public_view(room)
            except UnauthenticRow:
                stored = None
            if stored is not None and stored.get("version", 0) >= current.version:
                return None
        return models.fresh_rows(current.id, self.records(current.id))

    def _served(self, room_id: str, stored: Callable[[ReadModelsPort, str], Any],
                folded: Callable[[tuple[list[str], dict[str, str]]], Any]) -> Any:
        """A read: `stored(models, room)` from the read models, or `folded(rows)` from
        the room's own verified events when they are behind or a row fails
        authentication (it is never served: RULES 8)."""
        models, room, fresh = self._caught_up(room_id)
        own = None if fresh else self._own_rows(room)
        if own is None:
            try:
                return stored(models, room)
            except UnauthenticRow as e:
                log.warning("room %s: %s; served from its verified stream instead", room, e)
                own = self._own_rows(room, distrusted=True)
                assert own is not None
        return folded(own)

    def room_rows(self, room_id: str) -> tuple[int | None, dict[str, str]]:
        """Every view of the room (seat -> JSON) and their version, as `room_views` of
        the read models, folded from the verified stream when a row fails."""
        models = self.read_models
        assert models is not None
        try:
            return models.room_views(str(room_uuid(room_id)))
        except UnauthenticRow as e:
            log.warning("room %s: %s; served from its verified stream instead", room_id, e)
            own = self._own_rows(str(room_uuid(room_id)), distrusted=True)
            assert own is not None
            return orjson.loads(own[1][PUBLIC_VIEW])["version"], own[1]

    def seat_view(self, room_id: str, seat: str) -> dict[str, Any]:
        def folded(own: tuple[list[str], dict[str, str]]) -> dict[str, Any] | None:
            text = own[1].get(seat)
            return None if text is None else dict(orjson.loads(text))

        view = self._served(room_id, lambda models, room: models.seat_view(room, seat), folded)
        if view is None:
            raise Rejection("unknown_seat", "that faction has no seat in this room")
        return dict(view)

    def public_view(self, room_id: str) -> dict[str, Any]:
        def stored(models: ReadModelsPort, room: str) -> dict[str, Any]:
            view = models.public_view(room)
            assert view is not None
            return view

        return dict(self._served(room_id, stored,
                                 lambda own: orjson.loads(own[1][PUBLIC_VIEW])))

    def public_log(self, room_id: str, after: int = 0) -> list[dict[str, Any]]:
        return list(self._served(
            room_id, lambda models, room: models.public_log(room, after),
            lambda own: [orjson.loads(entry) for entry in own[0][max(0, after):]]))

    def wait_for(self, room_id: str, version: int, timeout: float) -> bool:
        """Wait until the room's read models reach `version` (written by anyone)."""
        models, room, _ = self._caught_up(room_id)
        return models.wait(room, version, timeout)

    def view_at(self, room_id: str, version: int, seat: str) -> dict[str, Any]:
        """A seat's view as it was at the end of the append that holds `version` (RULES 7:
        a version inside one append shows the state after that append; RULES 3.4:
        closed searches stay hidden)."""
        current = self.load(room_id)
        if version < 1 or version > current.version:
            raise Rejection("unknown_version", f"the room has versions 1 to {current.version}")
        if not current.state.has_seat(seat):
            raise Rejection("unknown_seat", "that faction has no seat in this room")
        end = self._append_end(current, version)
        past = current if end == current.version else self.load(room_id, version=end)
        return seat_view_at(past.state, current.state, seat)

    def _append_end(self, room: Room, version: int) -> int:
        """The last version of the append that holds `version`: the version before the
        first later event that starts an append of its own."""
        after = version
        while after < room.version:
            upto = min(room.version, after + 64)  # an append is a few events long
            for rec in self.records(room.id, gt=after, lte=upto):
                if rec.append == rec.originator_version:
                    return rec.originator_version - 1
            after = upto
        return room.version


class KeptRooms:
    """Rooms kept in memory between commands, least recently used first out.

    `take` removes the room, so a command holds it alone while it mutates it: a
    concurrent command on the same room loads its own copy, and a failed save
    leaves nothing half-written behind.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.rooms: OrderedDict[UUID, Room] = OrderedDict()
        self.lock = threading.Lock()

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
            while len(self.rooms) > self.size:
                self.rooms.popitem(last=False)


def spoiled(room: Room) -> bool:
    """A command refused after events were applied to the room's state in place
    (`decide(in_place=True)`): the state no longer is the room's at its version."""
    return room.state.version != room.version


def room_cache_size(raw: str | None) -> int:
    raw = (raw or "").strip()
    if not raw:
        return DEFAULT_ROOM_CACHE
    if not raw.isdigit():
        raise ValueError(f"{ROOM_CACHE_ENV} must be a whole number of rooms (0: none), "
                         f"not {raw!r}")
    return int(raw)


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


class ReadModelsPort(Protocol):
    """What the application needs of the read models (implemented in projections/)."""

    def catch_up(self) -> int: ...

    def catch_up_within(self, seconds: float) -> bool: ...

    def fresh_rows(self, room_id: UUID, records: list[Recorded]
                   ) -> tuple[list[str], dict[str, str]]: ...

    def seat_view(self, room: str, seat: str) -> dict[str, Any] | None: ...

    def public_view(self, room: str) -> dict[str, Any] | None: ...

    def public_log(self, room: str, after: int = 0) -> list[dict[str, Any]]: ...

    def room_views(self, room: str) -> tuple[int | None, dict[str, str]]: ...

    def wait(self, room: str, version: int, timeout: float) -> bool: ...

    def token_room(self, digest: str) -> str | None: ...

    def room_fold(self, room_id: UUID) -> RoomFold: ...

    def check_room(self, room_id: UUID, records: list[Recorded], fold: RoomFold | None = None,
                   later: Callable[[int, int], list[Recorded]] | None = None
                   ) -> dict[str, Any]:
        """The stored read models against a rebuild from `records` (stepped along in
        `fold`) and, where they have moved past them, `later(after, upto)`."""

    def part_fold(self, room_id: UUID, after: int, upto: int | None) -> PartFold: ...


class RoomFold(Protocol):
    """What the read models make of a room along a replay someone else runs (the
    audit's), so that checking them does not fold the room a second time."""

    def step(self, rec: Recorded, state: RoomState) -> None:
        """`state` is the replay's own room just after `rec`: read it, keep no copy."""


class PartFold(RoomFold, Protocol):
    """A RoomFold over one part of a stream, the events after one version up to another,
    for an audit made in parts (application/audit.py)."""

    def verdict(self, records: list[Recorded]) -> dict[str, Any] | None:
        """`entries`, `first_seq`, `log_equal` (and `views_equal`, `version`,
        `log_version` for the last part); None when the rows could not be made."""


def damaged(room_id: UUID, d: Damaged, signer: Signer) -> Rejection:
    """The refusal of every command on a room that does not verify: for the operator."""
    missing = getattr(signer, "missing", None)
    why = missing() if missing is not None else None
    return Rejection("room_damaged", f"room {room_id} is damaged at version {d.version}: "
                     f"{d.problem}{f' ({why})' if why else ''}; its commands are refused "
                     f"until an operator restores it (run `dune-ledger audit {room_id}`)")


def room_uuid(room_id: str | UUID) -> UUID:
    try:
        return room_id if isinstance(room_id, UUID) else UUID(str(room_id))
    except ValueError:
        raise Rejection("unknown_room", f"no room '{room_id}'") from None
