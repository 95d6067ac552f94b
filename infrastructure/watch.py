"""Room changes for the view stream (`GET /rooms/{room}/stream`), one follower per process.

One thread follows the notification log from where it was when the app started:
on PostgreSQL it wakes on the recorder's NOTIFY (LISTEN on its channel, with a
poll every second should a notification be missed), elsewhere it polls. For
the rooms someone streams, it reads every view of the room in one statement
through the query `GET .../view` uses (`RoomsApp.room_rows`: the same bounded
catch-up, the same damaged-room check), then wakes the room's streams on the
event loop. A thousand streams of one room cost one read per change, not a
thousand.

Noninterference: a stream learns only that its room moved to a new version,
and then its own seat's stored view (the same row `GET .../view` returns);
versions are public (RULES 7).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dune_ledger.application.rooms import RoomsApp, room_uuid
from dune_ledger.domain.game import Rejection
from dune_ledger.infrastructure import observability
from dune_ledger.projections.store import PUBLIC

log = logging.getLogger("dune_ledger.watch")

POLL = 0.05  # seconds between looks at the log where nothing wakes us (SQLite, memory)
PG_FALLBACK = 1.0  # seconds a PostgreSQL follower waits for a NOTIFY before it looks anyway
BATCH = 1_000


@dataclass
class Watched:
    """One streamed room: every stored view (seat -> (version, JSON)) and the signal of
    its next change (a fresh asyncio.Event per change)."""

    version: int = 0
    views: dict[str, tuple[int, str]] = field(default_factory=dict)
    # The seats' token hashes as read from the room as stored at version `hashes_at`,
    # at each change: a stream whose token is no longer there ends.
    hashes: dict[str, str] = field(default_factory=dict)
    hashes_at: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    streams: int = 0
    # Presence (public: whether someone has a seat's page open, not what it holds): the
    # open streams of each seat in this process, and a count of its changes.
    present: dict[str, int] = field(default_factory=dict)
    presence: int = 0

    def seen(self, seat: str | None, step: int) -> None:
        if seat is None:
            return
        self.present[seat] = self.present.get(seat, 0) + step
        if self.present[seat] <= 0:
            del self.present[seat]
        self.presence += 1
        signal, self.changed = self.changed, asyncio.Event()
        signal.set()


class RoomWatch:
    def __init__(self, app: RoomsApp, loop: asyncio.AbstractEventLoop) -> None:
        self.app = app
        self.loop = loop
        self.rooms: dict[str, Watched] = {}
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        # Set by a command this process just appended: the follower looks at once rather
        # than at its next poll (SQLite and memory; PostgreSQL wakes on NOTIFY).
        self.wake = threading.Event()
        self.cursor = int(app.recorder.max_notification_id() or 0)
        self.thread = threading.Thread(target=self._follow, name="room-watch", daemon=True)
        self.thread.start()

    # --- on the event loop ---------------------------------------------------------------

    async def join(self, room: str, seat: str | None = None) -> Watched:
        """Start watching `room` (its canonical id) for one more stream (of `seat`, for
        presence; None for a spectator)."""
        watched = self.rooms.get(room)
        if watched is None:
            watched = Watched()
            self.rooms[room] = watched
            try:
                await asyncio.to_thread(self._refresh, [room])
            except BaseException:  # no view read: the next stream of the room reads again
                self.rooms.pop(room, None)
                raise
        watched.streams += 1
        watched.seen(seat, +1)
        observability.stream_opened()
        return watched

    def leave(self, room: str, seat: str | None = None) -> None:
        watched = self.rooms.get(room)
        if watched is not None:
            watched.streams -= 1
            watched.seen(seat, -1)
            observability.stream_closed()
            if watched.streams <= 0:
                del self.rooms[room]

    def close(self) -> None:
        self.stopped.set()
        self.wake.set()
        self.thread.join(timeout=5)

    def _publish(self, room: str, version: int, views: dict[str, tuple[int, str]],
                 hashes: dict[str, str], hashes_at: int) -> None:
        watched = self.rooms.get(room)
        if watched is None or (version <= watched.version and hashes_at <= watched.hashes_at):
            return
        if version > watched.version:
            watched.version, watched.views = version, views
        if hashes_at > watched.hashes_at:
            watched.hashes, watched.hashes_at = hashes, hashes_at
        signal, watched.changed = watched.changed, asyncio.Event()
        signal.set()

    # --- on the follower thread ---------------------------------------------------------

    def _follow(self) -> None:
        wait = self._waiter()
        while not self.stopped.is_set():
            try:
                wait()
                touched = self._scan()
                if touched:
                    self._refresh(touched)
            except Exception as e:  # the store went away: say so, keep trying, bounded
                log.warning("the view stream follower cannot read the log: %s", e)
                self.stopped.wait(1.0)

    def _waiter(self) -> Callable[[], None]:
        try:
            from eventsourcing.postgres import PostgresApplicationRecorder
        except ImportError:  # pragma: no cover - psycopg is a dependency
            PostgresApplicationRecorder = ()  # type: ignore[assignment,misc]  # noqa: N806
        recorder = self.app.recorder
        if not isinstance(recorder, PostgresApplicationRecorder):
            def poll() -> None:
                self.wake.wait(POLL)
                self.wake.clear()
            return poll
        return PgWake(recorder, self.stopped)

    def _scan(self) -> list[str]:
        """The watched rooms with an event after the cursor."""
        touched: set[str] = set()
        while True:
            notes = self.app.recorder.select_notifications(
                start=self.cursor, limit=BATCH, inclusive_of_start=False)
            if not notes:
                break
            self.cursor = notes[-1].id
            for n in notes:
                touched.add(str(n.originator_id))
            if len(notes) < BATCH:
                break
        return [room for room in touched if room in self.rooms]

    def _refresh(self, rooms: list[str]) -> None:
        for room in rooms:
            # The token hashes of the room as stored now (one query for a room this
            # process keeps): every change, a token reissue included, rechecks them.
            try:
                known = self.app.seats.of(room, stored=True)
            except Rejection:  # damaged, or gone: no token of it is good any more
                hashes, hashes_at = {}, 2**62
            else:
                hashes, hashes_at = known.seats, known.version
            try:  # as GET .../view reads: bounded catch-up, never a forged or damaged row
                version, views = self.app.room_rows(room)
            except Rejection:
                version, views = None, {}
            rows = {seat: (version, text) for seat, text in views.items()} \
                if version is not None else {}
            self.loop.call_soon_threadsafe(self._publish, room, version or 0, rows,
                                           hashes, hashes_at)


class PgWake:
    """Blocks until the recorder's channel is notified, or PG_FALLBACK seconds passed."""

    def __init__(self, recorder: Any, stopped: threading.Event) -> None:
        self.recorder = recorder
        self.stopped = stopped
        self.conn: Any = None

    def __call__(self) -> None:
        from psycopg import connect
        from psycopg.sql import SQL, Identifier

        if self.conn is None or self.conn.closed:
            # A connection of its own: a LISTEN held for the life of the app would take
            # one of the pool's few for good.
            # The pool's keywords: with a multi-host URL, the same primary as the pool.
            from dune_ledger.infrastructure.postgres import connection_keywords

            self.conn = connect(autocommit=True, **connection_keywords(
                self.recorder.datastore))
            self.conn.execute(SQL("LISTEN {0}").format(Identifier(self.recorder.channel_name)))
        deadline = time.monotonic() + PG_FALLBACK
        for _ in self.conn.notifies(timeout=max(0.0, deadline - time.monotonic()),
                                    stop_after=1):
            break


def canonical(room: str) -> str:
    """The room id as the store keys it (a UUID in its canonical spelling)."""
    return str(room_uuid(room))


__all__ = ["PUBLIC", "RoomWatch", "Watched", "canonical"]
