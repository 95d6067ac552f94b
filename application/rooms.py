"""The rooms application's use cases: every command goes load -> decide -> save here.

`RoomsApp` is the whole application: these use cases, over its queries
(application/queries.py), over its event store (application/store.py). A save is a
compare-and-set on the room's version: a concurrent write raises `IntegrityError`,
and the command is reloaded and decided again (with fresh randomness) a bounded
number of times.
"""

from __future__ import annotations

import random
import secrets
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

from eventsourcing.persistence import IntegrityError

from dune_ledger.application.queries import RoomQueries
from dune_ledger.application.seats import Seats, token_hash
from dune_ledger.application.store import (
    DEFAULT_ROOM_CACHE,
    SNAPSHOT_INTERVAL,
    AppendRetried,
    room_uuid,
)
from dune_ledger.application.stream import Recorded, Room, SeatTokenReissued, Signer
from dune_ledger.domain.game import (
    COMMANDS,
    NEWEST_CATALOG,
    OPERATOR,
    OPERATOR_COMMANDS,
    SYSTEM,
    Command,
    EndRoom,
    Randomness,
    Rejection,
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
    parse_operator_command,
    port,
)

# The names the infrastructure, scripts and tests import from the application's face.
__all__ = ["RETRIES", "RETRY_PAUSE", "AppendRetried", "RandomnessFactory", "RoomsApp", "now",
           "room_uuid", "token_hash"]

# (room seed or None, room version) -> the randomness for one decision
RandomnessFactory = Callable[[int | None, int], Randomness]
Result = dict[str, Any]

RETRIES = 8
# After a lost race, a command waits a random while (up to this many seconds, doubling
# with each loss) before it reads the room again: two writers in one room at full
# speed otherwise lose to each other in lockstep, the one that kept the room winning.
RETRY_PAUSE = 0.001


def now() -> str:
    return datetime.now(UTC).isoformat()


def public_events(records: list[Recorded]) -> list[dict[str, Any]]:
    out = []
    for rec in records:
        fields = rec.fact.public()
        if fields is not None:
            out.append({"type": rec.type, "version": rec.originator_version, **fields})
    return out


def _parsed(seat: str, raw: Any) -> Command:
    """A seat's command, or the operator's: each sends only its own."""
    kind = raw.get("type") if isinstance(raw, dict) else None
    if not isinstance(kind, str):
        kind = None  # parsing names what is wrong
    if seat == OPERATOR:
        if kind in COMMANDS:
            raise Rejection("not_eligible", f"{kind} is a seat's command, not the operator's")
        return parse_operator_command(raw)
    if kind in OPERATOR_COMMANDS:
        raise Rejection("not_eligible", f"{kind} is one of the operator's commands "
                        "(the CLI's --operator, or the operator token over HTTP)")
    return parse_command(raw)


class RoomsApp(RoomQueries):
    def __init__(
        self, env: dict[str, str] | None = None, *, randomness: RandomnessFactory,
        signer: Signer, snapshot_interval: int = SNAPSHOT_INTERVAL,
        room_cache: int = DEFAULT_ROOM_CACHE,
    ) -> None:
        super().__init__(env, signer=signer, snapshot_interval=snapshot_interval,
                         room_cache=room_cache)
        self.randomness = randomness
        self.seats = Seats(self)
        # The clock port handed to the rules: a window's deadline is stamped from it.
        self.clock: Callable[[], datetime] = lambda: datetime.now(UTC)
        # Told of every command once it has run (the command log and metrics:
        # `open_rooms` sets it): room, seat, the command as sent, result, seconds.
        self.observer: Callable[[str, str, Any, Result, float], None] | None = None
        # The catalog new rooms are made with: the newest, unless an older one is kept
        # (a table whose pages know only the cards of that one).
        self.catalog = NEWEST_CATALOG

    def create_room(self, raw_layout: Any) -> Result:
        """Validate a layout and store the new room. LayoutError on bad input."""
        layout = parse_layout(raw_layout)
        room_id = uuid4()
        # A committed room's secret, from the operating system (RULES 9).
        created = build_room(layout, str(room_id), self.randomness(layout.seed, 0),
                             secrets.token_bytes(32) if committed_layout(layout) else None,
                             catalog=self.catalog)
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
            self.seats.forget(str(room.id))  # the old token stops working here at once
            return {"room": str(room.id), "seat": seat, "token": token, "version": room.version}
        raise Rejection("busy", "the room kept changing; try again")

    def end_room(self, room_id: str, command_id: str | None = None) -> Result:
        """The operator's end of a room (RULES 9): the secret is published and every
        later command is refused. A repeated `command_id` returns the first result."""
        return self._run(room_id, OPERATOR, EndRoom(type="end_room", command_id=command_id),
                         self.clock())

    def execute(self, room_id: str, seat: str, raw: Any) -> Result:
        """Run one command as `seat`, or as the operator (`OPERATOR`: its own commands,
        `deal`, `open_bidding`, `end_room`). Never raises for a rule: returns the result
        shape."""
        started = time.perf_counter()
        try:
            command = _parsed(seat, raw)
        except Rejection as r:
            result = self._refused(room_id, r, seat, raw)
        else:
            result = self._run(room_id, seat, command, self.clock())
        if self.observer is not None:
            self.observer(str(room_id), seat, raw, result, time.perf_counter() - started)
        return result

    def close_expired(self, room_id: str, moment: datetime | None = None) -> Result | None:
        """Close the room's open window if its deadline has passed by `moment` (RULES
        4.4): the worker's append, on the same path as a command. None: nothing was due."""
        moment = moment or self.clock()
        try:
            room = self.peek(room_id)
        except Rejection:
            return None
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

    def _refused(self, room_id: str, r: Rejection, seat: str, raw: Any) -> Result:
        try:
            room = self.load(room_id)
        except Rejection as missing:
            return {"ok": False, "version": 0, "error": missing.as_error()}
        # A repeated id returns the first result, whatever is sent with it, even a
        # command that does not parse.
        cid = raw.get("command_id") if isinstance(raw, dict) else None
        done = room.commands.get(f"{seat}:{cid}") if isinstance(cid, str) else None
        if done is not None:
            return self._first_result(room.id, done)
        return {"ok": False, "version": room.version, "error": r.as_error()}

    def _first_result(self, room_id: UUID, span: list[int]) -> Result:
        first, last = span
        records = list(self.records(room_id, gt=first - 1, lte=last))
        return {"ok": True, "version": last, "events": public_events(records)}
