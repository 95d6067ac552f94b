"""The notification log on PostgreSQL is gap-free for a follower: no id is ever skipped.

A follower reads the log after the last id it saw (as `projections/read_models.py`
and the library's LISTEN/NOTIFY subscription do). If a transaction holding a
lower id could commit after a higher one was read, the follower would pass it
by for ever. The product's recorder (infrastructure/postgres.py, docs/ordering.md)
prevents that without a lock: ids follow transaction ids and a follower reads
only below the oldest transaction still running. `UnboundedRecorder` (the same
recorder reading without that bound) shows the check catches a skip.
The full-size check is `scripts/bench_pg_order.py`.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder

from dune_ledger.infrastructure.postgres import RoomsRecorder
from dune_ledger.infrastructure.settings import Settings
from dune_ledger.infrastructure.storage import open_rooms
from tests.support import TWO_SEATS, Follower, database, skipped, stored_ids


class UnboundedRecorder(RoomsRecorder):
    """The product's recorder, its followers reading past what has settled with the
    library's query (what the check must catch)."""

    select_notifications = PostgresApplicationRecorder.select_notifications  # type: ignore[assignment]


@pytest.fixture
def pg() -> Iterator[str]:
    """A database of its own: the probe rows below are no room any other test could read."""
    with database("dl_lock") as url:
        yield url


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


@pytest.mark.parametrize("recorder", ["product", "without the bound"])
def test_a_follower_never_passes_a_write_in_flight(pg, recorder):
    env = ({} if recorder == "product"
           else {"APPLICATION_RECORDER_TOPIC": "tests.test_pg_lock:UnboundedRecorder"})
    with open_rooms(pg, **env) as app:
        app.create_room(TWO_SEATS)
        follower = Follower(app.recorder)
        follower.pull()
        probe = in_flight_probe(app, pg)
        later = app.create_room(TWO_SEATS)["room"]  # commits at once: no lock to wait for
        follower.pull()
        if recorder == "product":
            # Committed, held back behind the probe: not read, not fresh, and waited for.
            assert uuid.UUID(later) not in follower.versions
            assert app.recorder.held_back(follower.seen[-1])
            assert app.read_models.catch_up_within(0.05) is False
        probe.commit()
        probe.close()
        missed = skipped(app, follower)
    if recorder == "product":
        assert missed == []
        assert uuid.UUID(later) in follower.versions
    else:
        assert len(missed) == 1  # the probe's id: committed after a higher id was read


def test_writers_in_several_threads_and_a_follower_miss_nothing(pg):
    pairs, writers = 15, 3
    with open_rooms(pg) as app:
        apps = [open_rooms(pg) for _ in range(writers)]
        rooms = [[app.create_room(TWO_SEATS)["room"] for _ in range(pairs)] for _ in apps]
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
        assert follower.in_room_order()


def test_a_statement_runs_no_longer_than_the_statement_timeout(pg):
    """A long transaction holds every follower back: the store's statements are bounded."""
    import psycopg

    with open_rooms(pg, settings=Settings(pg_statement_timeout=1)) as app, \
            app.recorder.datastore.get_connection() as conn, \
            pytest.raises(psycopg.errors.QueryCanceled):
        conn.execute("SELECT pg_sleep(3)")


def test_a_store_made_before_numbers_on_above_its_last_id(pg):
    """A store of the table-lock days (ids from a sequence) is migrated when opened:
    new ids come after the old, a follower from the start reads them all in order."""
    old = {"APPLICATION_RECORDER_TOPIC": "eventsourcing.postgres:PostgresApplicationRecorder"}
    with open_rooms(pg, **old) as app:
        app.create_room(TWO_SEATS)
        before = sorted(stored_ids(app))
    assert before == list(range(1, len(before) + 1))
    with open_rooms(pg) as app:
        app.create_room(TWO_SEATS)
        after = sorted(stored_ids(app))
        follower = Follower(app.recorder)
        assert skipped(app, follower) == []
        assert follower.seen == after and after[:len(before)] == before
        assert follower.in_room_order() and len(follower.versions) == 2
        # Ids are not counts: how far behind the log a reader is counts events.
        assert app.read_models.behind(0) == len(after)
        assert app.read_models.behind(after[-2]) == 1


def test_a_store_whose_ids_run_ahead_of_the_server_is_refused(pg):
    with open_rooms(pg) as app:
        app.create_room(TWO_SEATS)
        with app.recorder.datastore.transaction(commit=True) as curs:
            curs.execute("UPDATE duneledger_events SET notification_id = notification_id "
                         "+ (1::bigint << 60)")
    with pytest.raises(Exception, match="run ahead of this server's transaction ids"):
        open_rooms(pg)
    with open_rooms(pg, CREATE_TABLE="no") as app:  # what the refusal says: it can be exported
        assert len(list(app.stored_room_ids())) == 1


def test_the_subscription_reads_what_settles_without_a_notification(pg):
    """The LISTEN/NOTIFY follower is told of a room while an older writer is in flight, so
    its read finds nothing below the bound; the writer's commit sends no notification,
    yet the room is read once it settles."""
    from dune_ledger.projections.follow import subscription_runner

    with open_rooms(pg) as app:
        assert app.read_models is not None
        app.create_room(TWO_SEATS)
        runner = subscription_runner(app, app.read_models)
        try:
            probe = in_flight_probe(app, pg)
            later = app.create_room(TWO_SEATS)["room"]
            time.sleep(0.3)  # notified, read, held back: nothing read yet
            assert app.read_models.version(later) is None
            probe.commit()
            probe.close()
            deadline = time.monotonic() + 5
            while app.read_models.version(later) != 1 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert app.read_models.version(later) == 1
        finally:
            runner.__exit__(None, None, None)
