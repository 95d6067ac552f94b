"""PostgreSQL storage: the URL, the pool settings, and a room's full life on the real server."""

from __future__ import annotations

import contextlib
import threading
import time
from uuid import UUID, uuid4

import psycopg
import pytest
from eventsourcing.persistence import IntegrityError, StoredEvent

from dune_ledger.application.audit import audit_room, state_hash
from dune_ledger.application.stream import project_room
from dune_ledger.domain.errors import Rejection
from dune_ledger.infrastructure.errors import UsageError
from dune_ledger.infrastructure.postgres import RoomsRecorder, name_base, prepare_and_run
from dune_ledger.infrastructure.settings import Settings
from dune_ledger.infrastructure.storage import environment, open_rooms
from tests.support import HANG, database, datastore, layout, until


def test_url_and_pool_settings_reach_the_library(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUNE_LEDGER_PG_POOL_SIZE", "3")
    monkeypatch.setenv("DUNE_LEDGER_PG_LOCK_TIMEOUT", "7")
    env = environment("postgresql://alice:s%40cret@db.example:6543/rooms")
    assert env["PERSISTENCE_MODULE"] == "dune_ledger.infrastructure.postgres:RoomsPostgresFactory"
    assert (env["POSTGRES_HOST"], env["POSTGRES_PORT"], env["POSTGRES_DBNAME"]) == (
        "db.example", "6543", "rooms")
    assert (env["POSTGRES_USER"], env["POSTGRES_PASSWORD"]) == ("alice", "s@cret")
    assert env["POSTGRES_POOL_SIZE"] == "3" and env["POSTGRES_LOCK_TIMEOUT"] == "7"
    assert env["POSTGRES_MAX_OVERFLOW"] == "8"
    assert env["APPLICATION_RECORDER_TOPIC"] == "dune_ledger.infrastructure.postgres:RoomsRecorder"
    monkeypatch.setenv("APPLICATION_RECORDER_TOPIC", "tests.test_pg_lock:UnboundedRecorder")
    assert environment("postgresql://db/rooms", Settings())["APPLICATION_RECORDER_TOPIC"] == (
        "tests.test_pg_lock:UnboundedRecorder")


@pytest.mark.parametrize("name,value", [("DUNE_LEDGER_PG_POOL_SIZE", "many"),
                                        ("DUNE_LEDGER_PG_POOL_SIZE", "0"),
                                        ("DUNE_LEDGER_PG_CONNECT_TIMEOUT", "-1")])
def test_bad_pool_settings_are_usage_errors(monkeypatch: pytest.MonkeyPatch, name: str,
                                            value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(UsageError, match=name):
        environment("postgresql://postgres@127.0.0.1:5432/x")


def test_url_without_a_database_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        environment("postgresql://postgres@127.0.0.1:5432/")


def test_unreachable_server_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUNE_LEDGER_PG_CONNECT_TIMEOUT", "2")
    with pytest.raises(UsageError, match="cannot connect"):
        open_rooms("postgresql://postgres@127.0.0.1:1/nowhere")


def test_a_room_lives_and_reloads_on_postgres(pg_url: str) -> None:
    app = open_rooms(pg_url)
    try:
        room = app.create_room(layout())["room"]
        begun = app.execute(room, "richese", {"type": "begin_search", "card": "nullentropy-box",
                                              "command_id": "b1"})
        assert begun["ok"]
    finally:
        app.close()
    again = open_rooms(pg_url)  # a new process would see the same: nothing cached in memory
    try:
        state = again.load(room).state
        assert state.search is not None and state.search.owner == "richese"
        assert again.execute(room, "richese", {"type": "begin_search", "card": "nullentropy-box",
                                               "command_id": "b1"}) == begun
        assert str(room) in {str(r) for r in again.room_ids()}
        assert audit_room(again, room)["ok"]
    finally:
        again.close()


def test_rooms_are_stored_in_the_tables_every_database_already_has(pg_url: str) -> None:
    """The application's name picks its tables: however the application is layered, the
    rooms go to `duneledger_events`, where every store written so far holds them."""
    with open_rooms(pg_url) as app:
        room = app.create_room(layout())["room"]
    with psycopg.connect(pg_url) as c:
        row = c.execute("SELECT count(*) FROM duneledger_events WHERE originator_id = %s",
                        (UUID(room),)).fetchone()
    assert row is not None and row[0] == 1


def test_a_reopened_app_starts_with_one_connection(pg_url: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # An audit's part opens the storage again in a process of its own and runs one
    # query at a time: it opens one connection, not the configured pool's worth.
    monkeypatch.setenv("DUNE_LEDGER_PG_POOL_SIZE", "3")
    app = open_rooms(pg_url)
    try:
        assert app.reopen is not None
        again = app.reopen()
        try:
            assert app.recorder.datastore.pool.min_size == 3  # type: ignore[attr-defined]
            assert again.recorder.datastore.pool.min_size == 1  # type: ignore[attr-defined]
            room = app.create_room(layout())["room"]
            assert again.records(UUID(room))[0].fact.type == "RoomCreated"
        finally:
            again.close()
    finally:
        app.close()


def test_long_room_snapshots_load_the_same_state(pg_url: str) -> None:
    app = open_rooms(pg_url, settings=Settings(snapshot_interval=3))
    try:
        room = app.create_room(layout())["room"]
        uid = UUID(room)
        for i, seat in enumerate(["emperor", "harkonnen", "emperor", "harkonnen", "emperor"]):
            assert app.execute(room, seat, {"type": "draw", "command_id": f"d{i}"})["ok"]
            # One round trip (snapshot and the events after it) = the library's two.
            fast = app.load(room)
            library = app.repository.get(uid, projector_func=project_room)
            assert (fast.version, fast.head_hash(), fast.commands) == (
                library.version, library.head_hash(), library.commands)
            assert state_hash(fast.state) == state_hash(library.state)
        assert app.snapshots is not None
        assert [s.originator_version for s in app.snapshots.get(uid)] == [3, 6]
        with pytest.raises(Rejection, match="no room"):
            app.load(uuid4())
        report = audit_room(app, room)
        assert report["ok"] and report["checks"]["live_state_matches"]["ok"]
    finally:
        app.close()


def test_connections_dropped_by_the_server_are_replaced(pg_url: str, pg_admin_url: str) -> None:
    app = open_rooms(pg_url)
    try:
        room = app.create_room(layout())["room"]
        assert app.execute(room, "emperor", {"type": "draw"})["ok"]
        with psycopg.connect(pg_admin_url, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (pg_url.rsplit("/", 1)[-1],)).fetchone()
        assert killed is not None and killed[0] >= 1
        assert app.execute(room, "harkonnen", {"type": "draw"})["ok"]
        assert app.load(room).version == 3
    finally:
        app.close()


def test_statements_run_through_libpq_behave_as_through_a_cursor() -> None:
    # The append and the room's load go to libpq directly (infrastructure/postgres.py):
    # a batch too long to prepare, a refused duplicate, and a session that lost its
    # prepared statements must all behave as the library's cursor path does.
    # A database of its own: the probe events are no room, and read models catching
    # up on the session's shared database would fail to decode them.
    with database("dl_libpq") as url:
        app = open_rooms(url)
        try:
            recorder = app.recorder
            room = uuid4()
            batch = [StoredEvent(originator_id=room, originator_version=v, topic=f"T{v}",
                                 state=bytes([v]) * v) for v in range(1, 41)]  # unprepared: > 16
            ids = recorder.insert_events(batch)
            assert ids is not None and list(ids) == list(range(ids[0], ids[0] + 40))
            assert recorder.select_room(room) == batch
            with pytest.raises(IntegrityError):
                recorder.insert_events([batch[-1]])
            assert recorder.select_room(room) == batch

            played = app.create_room(layout())["room"]
            pool = recorder.datastore.pool  # type: ignore[attr-defined]
            held = [pool.getconn() for _ in range(pool.min_size)]
            for conn in held:
                conn.execute("DEALLOCATE ALL")
                pool.putconn(conn)
            app.kept.rooms.clear()  # the command loads the room: both statements run
            assert app.execute(played, "emperor", {"type": "draw"})["ok"]
            assert app.load(played).version == 2
        finally:
            app.close()


def test_processes_that_open_one_store_at_once_create_its_tables_in_turn() -> None:
    """Opening a store runs `CREATE OR REPLACE FUNCTION`s; two sessions doing so at once
    fail ("tuple concurrently updated"), as a worker reopening the store beside a starting
    process did. The recorder's table creation takes turns (`RoomsRecorder._create_table`)."""
    from eventsourcing.utils import Environment

    from dune_ledger.infrastructure.postgres import RoomsPostgresFactory, RoomsRecorder

    with database("dl_test_ddl") as url:
        env = environment(url)
        with open_rooms(url):
            pass  # the tables exist, as for a worker that opens the store again
        failures: list[str] = []

        def open_again() -> None:
            factory = RoomsPostgresFactory(Environment("DuneLedger", env))
            try:
                for _ in range(10):
                    try:
                        RoomsRecorder(factory.datastore,
                                      events_table_name="duneledger_events").create_table()
                    except Exception as e:
                        failures.append(str(e))
            finally:
                factory.close()

        threads = [threading.Thread(target=open_again) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failures == []


def test_a_statement_prepared_while_it_waits_for_a_lock_lets_the_other_threads_run(
        pg_admin_url: str) -> None:
    """The first run of a statement on a connection prepares it in a pipeline; waiting
    there with the GIL held froze serve's worker thread inside the transaction that held
    the lock, until the server ended it (a fresh serve's first POST /rooms took 5 s)."""
    key = 0x64756E00 + uuid4().int % 256
    with psycopg.connect(pg_admin_url) as holder, \
            psycopg.connect(pg_admin_url, autocommit=True) as waiter:
        # Frozen, the holder would be ended by the server as serve's worker was.
        holder.execute("SET idle_in_transaction_session_timeout = '2s'")
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (key,))

        def commit_later() -> None:
            time.sleep(0.3)  # Python: it runs only if the waiting thread lets it
            with contextlib.suppress(psycopg.OperationalError):  # ended by the server
                holder.commit()

        committer = threading.Thread(target=commit_later)
        committer.start()
        started = time.monotonic()
        prepare_and_run(waiter, b"probe", b"SELECT pg_advisory_xact_lock($1)", [20],
                        [key.to_bytes(8, "big")], [1])
        committer.join()
        assert time.monotonic() - started < 1.5  # the holder committed: the lock came free


@pytest.mark.parametrize("length", [55, 63])
def test_a_long_table_name_keeps_its_functions_apart(pg_url: str, length: int) -> None:
    """PostgreSQL cuts every name at 63 bytes: from a table name of 55 characters on,
    `..._settled_max` and `..._settled` were one function calling itself, and every read
    of the log failed ("stack depth limit exceeded"). The library takes names up to 63."""
    table = f"t{uuid4().hex}".ljust(length, "x")
    store = datastore(pg_url)
    recorder = RoomsRecorder(store, events_table_name=table)
    try:
        recorder.create_table()
        room, other = uuid4(), uuid4()
        ids = list(recorder.insert_events([
            StoredEvent(originator_id=room, originator_version=v, topic="t", state=b"{}")
            for v in range(1, 17)]))  # the longest prepared append's name
        ids += recorder.insert_events([StoredEvent(originator_id=other, originator_version=1,
                                                   topic="t", state=b"{}")])
        parts = recorder.append_parts([
            [StoredEvent(originator_id=uuid4(), originator_version=1, topic="t", state=b"{}")]
            for _ in range(2)])
        ids += [i for part in parts for i in part or []]
        assert len(ids) == 19
        assert recorder.max_notification_id() == max(ids)
        assert [n.id for n in recorder.select_notifications(start=None, limit=50)] == sorted(ids)
        assert recorder.count_after(0) == 19 and not recorder.held_back(0)
        with store.transaction(commit=False) as curs:
            curs.execute("SELECT proname FROM pg_proc WHERE proname LIKE %s",
                         (recorder.name_base + "%",))
            names = {row["proname"] for row in curs.fetchall()}
        base = recorder.name_base
        assert names == {base + "_append_parts", base + "_settled", base + "_follow",
                         base + "_settled_max"}
        assert all(len(name) <= 63 for name in names)
        assert name_base("duneledger_events") == "duneledger_events"  # stores made before
    finally:
        with store.transaction(commit=True) as curs:
            for name in (f"{recorder.name_base}{suffix}" for suffix in (
                    "_append_parts", "_follow", "_settled_max", "_settled")):
                curs.execute(f'DROP FUNCTION IF EXISTS "{name}"')
            curs.execute(f'DROP TABLE IF EXISTS "{table}"')
        store.close()


def test_a_closed_store_leaves_no_notifier_behind(pg_url: str) -> None:
    """A closed app's notifier sends its last NOTIFY and its thread ends; a second close
    returns at once, even with a send in flight. The thread went on trying the closed
    pool, holding a lock as it tried; the interpreter's exit stops it where it stands,
    and the library's `__del__` closes the app again at the exit: processes that had
    done their work (a racer, a player) hung there for ever. No lock is held across a
    send now."""
    app = open_rooms(pg_url)
    room = app.create_room(layout())["room"]
    assert app.execute(room, "emperor", {"type": "draw"})["ok"]
    notifier = app.recorder.notifier  # type: ignore[attr-defined]
    app.close()
    assert notifier.thread is not None
    until(lambda: not notifier.thread.is_alive(), "the notifier's thread to end")
    notifier.asked = True  # as an append whose NOTIFY a stopped thread had yet to send
    again = threading.Thread(target=app.close, daemon=True)
    again.start()
    again.join(timeout=HANG)
    assert not again.is_alive()
