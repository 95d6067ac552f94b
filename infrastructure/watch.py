"""Room changes for the view stream (`GET /rooms/{room}/stream`), one follower per process.

One thread follows the notification log from where it was when the app started:
on PostgreSQL it wakes on the recorder's NOTIFY (LISTEN on its channel, with a
poll every second should a notification be missed), elsewhere it polls. For
the rooms someone streams, it catches the read models up (the ordinary read
path) and reads every view of the room in one statement, then wakes the
room's streams on the event loop. A thousand streams of one room cost one read
per change, not a thousand.

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

from application.rooms import RoomsApp, room_uuid
from infrastructure import observability
from projections.store import PUBLIC

log = logging.getLogger("dune_ledger.watch")

POLL = 0.05  # seconds between looks at the log where nothing wakes us (SQLite, memory)
PG_FALLBACK = 1.0  # seconds a PostgreSQL follower waits for a NOTIFY before it looks anyway
BATCH = 1_000
REISSUED = "SeatTokenReissued"  # the stored topic of a seat token's replacement


@dataclass
class Watched:
    """One streamed room: every stored view (seat -> (version, JSON)) and the signal of
    its next change (a fresh asyncio.Event per change)."""

    version: int = 0
    views: dict[str, tuple[int, str]] = field(default_factory=dict)
    reissued: int = 0  # seat tokens re-issued since watching began: streams check theirs
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    streams: int = 0


class RoomWatch:
    def __init__(self, app: RoomsApp, loop: asyncio.AbstractEventLoop) -> None:
        self.app = app
        self.loop = loop
        self.rooms: dict[str, Watched] = {}
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.cursor = int(app.recorder.max_notification_id() or 0)
        self.thread = threading.Thread(target=self._follow, name="room-watch", daemon=True)
        self.thread.start()

    # --- on the event loop ---------------------------------------------------------------

    async def join(self, room: str) -> Watched:
        """Start watching `room` (its canonical id) for one more stream."""
        watched = self.rooms.get(room)
        if watched is None:
            watched = Watched()
            self.rooms[room] = watched
            await asyncio.to_thread(self._refresh, [room])
        watched.streams += 1
        observability.stream_opened()
        return watched

    def leave(self, room: str) -> None:
        watched = self.rooms.get(room)
        if watched is not None:
            watched.streams -= 1
            observability.stream_closed()
            if watched.streams <= 0:
                del self.rooms[room]

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)

    def _publish(self, room: str, version: int, views: dict[str, tuple[int, str]],
                 reissued: int) -> None:
        watched = self.rooms.get(room)
        if watched is None or version <= watched.version:
            return
        watched.version, watched.views = version, views
        watched.reissued += reissued
        signal, watched.changed = watched.changed, asyncio.Event()
        signal.set()

    # --- on the follower thread ---------------------------------------------------------

    def _follow(self) -> None:
        wait = self._waiter()
        while not self.stopped.is_set():
            try:
                wait()
                touched, reissued = self._scan()
                if touched:
                    self._refresh(touched, reissued)
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
                self.stopped.wait(POLL)
            return poll
        return PgWake(recorder, self.stopped)

    def _scan(self) -> tuple[list[str], dict[str, int]]:
        """The watched rooms with an event after the cursor, and how many seat tokens
        each re-issued."""
        touched: set[str] = set()
        reissued: dict[str, int] = {}
        while True:
            notes = self.app.recorder.select_notifications(
                start=self.cursor, limit=BATCH, inclusive_of_start=False)
            if not notes:
                break
            self.cursor = notes[-1].id
            for n in notes:
                room = str(n.originator_id)
                touched.add(room)
                if n.topic == REISSUED:
                    reissued[room] = reissued.get(room, 0) + 1
            if len(notes) < BATCH:
                break
        return [room for room in touched if room in self.rooms], reissued

    def _refresh(self, rooms: list[str], reissued: dict[str, int] | None = None) -> None:
        models = self.app.read_models
        assert models is not None
        models.catch_up()
        for room in rooms:
            version, views = models.room_views(room)
            if version is None:
                continue
            rows = {seat: (version, text) for seat, text in views.items()}
            self.loop.call_soon_threadsafe(self._publish, room, version, rows,
                                           (reissued or {}).get(room, 0))


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
            from infrastructure.postgres import connection_keywords

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
