"""The notification log on PostgreSQL is gap-free for a follower: no id is ever skipped.

A follower reads the log after the last id it saw (as `projections/read_models.py`
and the library's LISTEN/NOTIFY subscription do). If a transaction holding a
lower id could commit after a higher one was read, the follower would pass it
by for ever. The product's recorder (infrastructure/postgres.py) prevents that
with the events-table lock its append function takes; `NoLockRecorder` (the
same recorder without the lock) shows the check catches a skip.
The throughput side is `scripts/bench_pg_lock.py`.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from eventsourcing.persistence import StoredEvent
from psycopg.sql import SQL, Identifier

from infrastructure.postgres import RoomsRecorder
from infrastructure.storage import open_rooms
from tests.conftest import database

LAYOUT: dict[str, Any] = {
    "expansions": ["choam_richese"], "turn": 2, "phase": 6,
    "seats": [
        {"faction": "richese", "spice": 10, "hand": ["nullentropy-box", "crysknife"]},
        {"faction": "emperor", "spice": 10, "hand": ["karama-1"]},
    ],
    "discard": ["shield-1", "maula-pistol", "baliset", "snooper-3"],
}


class NoLockRecorder(RoomsRecorder):
    """The product's recorder without the table lock (what the check must catch)."""

    append_lock = ""


@pytest.fixture
def pg() -> Iterator[str]:
    """A database of its own: the probe rows below are no room any other test could read."""
    with database("dl_lock") as url:
        yield url


class Follower:
    """Reads after its last id, keeps every id it is given."""

    def __init__(self, recorder: Any) -> None:
        self.recorder = recorder
        self.seen: list[int] = []

    def pull(self) -> int:
        notes = self.recorder.select_notifications(
            start=self.seen[-1] if self.seen else 0, limit=500, inclusive_of_start=False)
        self.seen.extend(n.id for n in notes)
        return len(notes)


def stored_ids(app: Any) -> set[int]:
    recorder = app.recorder
    with recorder.datastore.transaction(commit=False) as curs:
        curs.execute(SQL("SELECT notification_id AS i FROM {0}.{1}").format(
            Identifier(recorder.datastore.schema), Identifier(recorder.events_table_name)))
        return {int(r["i"]) for r in curs.fetchall()}


def skipped(app: Any, follower: Follower) -> list[int]:
    while follower.pull():
        pass
    assert all(a < b for a, b in zip(follower.seen, follower.seen[1:], strict=False))
    return sorted(stored_ids(app) - set(follower.seen))


def waiting_on_a_lock(app: Any) -> bool:
    with app.recorder.datastore.transaction(commit=False) as curs:
        curs.execute("SELECT count(*) AS n FROM pg_locks WHERE NOT granted")
        row = curs.fetchone()
    return bool(row and row["n"])


def in_flight_probe(app: Any, url: str) -> Any:
    """A writer caught between taking its id and committing: the recorder's own append
    of one row, in a transaction left open."""
    import psycopg

    conn = psycopg.connect(url)
    conn.execute("SELECT 1")  # psycopg opens the transaction the append then runs in
    app.recorder.append(conn, [probe_event()])
    return conn


def probe_event() -> StoredEvent:
    return StoredEvent(originator_id=uuid.uuid4(), originator_version=1, topic="Probe",
                       state=b"")


@pytest.mark.parametrize("recorder", ["product", "without the lock"])
def test_a_follower_never_passes_a_write_in_flight(pg, recorder):
    env = ({} if recorder == "product"
           else {"APPLICATION_RECORDER_TOPIC": "tests.test_pg_lock:NoLockRecorder"})
    with open_rooms(pg, **env) as app:
        app.create_room(LAYOUT)
        follower = Follower(app.recorder)
        follower.pull()
        probe = in_flight_probe(app, pg)
        writer = threading.Thread(target=app.create_room, args=(LAYOUT,))
        writer.start()
        deadline = time.monotonic() + 10
        while writer.is_alive() and not waiting_on_a_lock(app) and time.monotonic() < deadline:
            time.sleep(0.01)
        follower.pull()  # the later write has committed, or waits behind the probe
        probe.commit()
        probe.close()
        writer.join()
        missed = skipped(app, follower)
    if recorder == "product":
        assert missed == []
    else:
        assert len(missed) == 1  # the probe's id: committed after a higher id was read


def test_writers_in_several_threads_and_a_follower_miss_nothing(pg):
    pairs, writers = 15, 3
    with open_rooms(pg) as app:
        apps = [open_rooms(pg) for _ in range(writers)]
        rooms = [[app.create_room(LAYOUT)["room"] for _ in range(pairs)] for _ in apps]
        follower = Follower(app.recorder)
        done = threading.Event()

        def follow() -> None:
            while not done.is_set():
                if not follower.pull():
                    time.sleep(0.001)

        def write(w: Any, own: list[str]) -> None:
            for room in own:
                begun = w.execute(room, "richese", {"type": "begin_search",
                                                    "card": "nullentropy-box"})
                assert begun["ok"], begun
                search = begun["events"][-1]["search"]
                chosen = w.execute(room, "richese", {"type": "select_card", "search": search,
                                                     "card": "shield-1"})
                assert chosen["ok"], chosen

        reader = threading.Thread(target=follow)
        reader.start()
        threads = [threading.Thread(target=write, args=(w, own))
                   for w, own in zip(apps, rooms, strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        done.set()
        reader.join()
        for w in apps:
            w.close()
        assert len(stored_ids(app)) > pairs * writers * 2
        assert skipped(app, follower) == []


def test_an_append_waits_for_the_lock_no_longer_than_the_lock_timeout(pg):
    import psycopg

    with open_rooms(pg, POSTGRES_LOCK_TIMEOUT="1") as app:
        recorder = app.recorder
        assert recorder.append_lock_timeout == "1s"
        holder = in_flight_probe(app, pg)  # holds the table lock until it ends
        try:
            # Without the timeout the append would wait as long as the holder.
            with psycopg.connect(pg, autocommit=True) as conn, \
                    pytest.raises(psycopg.errors.LockNotAvailable):
                recorder.append(conn, [probe_event()])
        finally:
            holder.rollback()
            holder.close()
