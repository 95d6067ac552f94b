"""What a reader is shown: views, the public log, past views, the operator's list.

Views and the log come from the read models (projections/), caught up for at most
READ_CATCH_UP seconds first so that a reader sees its own writes; a room whose read
models are behind, or whose row fails authentication, is folded from its own
verified events instead (never served a forged row: RULES 8). `GET /view` and the
view stream read through the same `_served`. `view_at` alone reads the stream.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol
from uuid import UUID

import orjson

from dune_ledger.application.store import RoomStore, room_uuid
from dune_ledger.application.stream import Recorded, Room, UnauthenticRow
from dune_ledger.domain.game import Rejection, RoomState, public_view, seat_view_at

# Seconds a read spends catching the read models up before it folds its own room.
READ_CATCH_UP = 0.25
log = logging.getLogger("dune_ledger.rooms")
PUBLIC_VIEW = "*public*"  # the key of the public view among the views (projections.store.PUBLIC)


class RoomQueries(RoomStore):
    # The read models (projections/), which `open_rooms` injects.
    read_models: ReadModelsPort | None = None
    # Opens this app's storage again (with its read models), as a new process must, for
    # one query at a time (an audit's part: one PostgreSQL connection to start with):
    # `open_rooms` sets it; None for storage another process cannot open (memory://).
    reopen: Callable[[], RoomQueries] | None = None

    def room_summaries(self) -> list[dict[str, Any]]:
        """Every room for the operator: id, version, seats, ended, created, last command;
        a damaged room (RULES 8) with what is wrong, the others as ever."""
        out = []
        for uid in self.room_ids():
            try:
                out.append(self._summary(uid))
            except Rejection as r:
                out.append({"room": str(uid), "version": None, "seats": [], "ended": None,
                            "created": None, "last_command": None, "fairness": None,
                            "damaged": r.message})
        return out

    def _summary(self, uid: UUID) -> dict[str, Any]:
        room = self.peek(uid)
        first = self.records(uid, lte=1)
        last = self._last_command(uid, room.version)
        return {
            "room": str(uid), "version": room.version,
            "seats": [s.faction for s in room.state.seats],
            "ended": room.state.ended,
            "created": first[0].at if first else None,
            "last_command": None if last is None else {
                "at": last.at, "seat": last.seat, "event": last.type,
                "text": last.fact.text()},
            # The public fair dealing part: the host page shows the ceremony from it.
            "fairness": public_view(room.state)["fairness"],
        }

    def _last_command(self, uid: UUID, version: int) -> Recorded | None:
        """The first event of the room's last append made by a command (a seat's, the
        table's deadline, the operator's end): creating the room and reissuing a token
        are none."""
        while version > 1:
            last = self.records(uid, gt=version - 1, lte=version)[-1]
            if last.seat is not None:
                return self.records(uid, gt=last.append - 1, lte=last.append)[0]
            version = last.append - 1
        return None

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
        current = self.peek(room)  # as stored now, or room_damaged
        if not distrusted:
            try:
                stored = models.public_view(room)
            except UnauthenticRow:
                stored = None
            if stored is not None and stored.get("version", 0) >= current.version:
                return None
        return models.fresh_rows(current.id, self.verified_records(current.id))

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
        """Every view of the room (seat -> JSON) and their version, read as `seat_view`
        reads one (the view stream's read: one read for all of the room's streams)."""
        def folded(own: tuple[list[str], dict[str, str]]) -> tuple[int | None, dict[str, str]]:
            return orjson.loads(own[1][PUBLIC_VIEW])["version"], own[1]

        rows: tuple[int | None, dict[str, str]] = self._served(
            room_id, lambda models, room: models.room_views(room), folded)
        return rows

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
