"""The eventsourcing library's own test cases (`eventsourcing/tests/persistence.py`), run
against this project's recorders, factory and mapper as the library runs them against
its own: an upgrade of the library is checked against its own contract here.

What applies: the application recorder's cases on `RoomsRecorder` (PostgreSQL) and
`RoomsSQLiteRecorder`, the aggregate recorder's on `RoomSnapshotsRecorder` (the
snapshots), the non-interleaving notification ids on both, and the infrastructure
factory's on both factories as `open_rooms` configures them (`RoomMapper`, our
recorders). Not here: the tracking and process recorders and the transcoder's custom
types, which the project takes from the library unchanged or does not use (its
transcoder stores plain JSON).

The documented differences are skips, each named with its reason (`DIFFERENCES`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from eventsourcing.cipher import AESCipher
from eventsourcing.persistence import InfrastructureFactory, Notification
from eventsourcing.postgres import PostgresProcessRecorder, PostgresTrackingRecorder
from eventsourcing.sqlite import (
    SQLiteAggregateRecorder,
    SQLiteDatastore,
    SQLiteFactory,
    SQLiteProcessRecorder,
    SQLiteTrackingRecorder,
)
from eventsourcing.tests.persistence import (
    AggregateRecorderTestCase,
    ApplicationRecorderTestCase,
    InfrastructureFactoryTestCase,
    NonInterleavingNotificationIDsBaseCase,
)
from eventsourcing.utils import Environment, get_topic

from dune_ledger.application.stream import Undecodable
from dune_ledger.infrastructure.postgres import (
    RoomSnapshotsRecorder,
    RoomsPostgresFactory,
    RoomsRecorder,
)
from dune_ledger.infrastructure.sqlite import RoomsSQLiteRecorder
from dune_ledger.infrastructure.storage import RoomMapper, environment
from tests.support import database, datastore

SPARSE_IDS = ("notification ids are sparse on PostgreSQL: an append numbers its events "
              "after its transaction id (infrastructure/postgres.py, docs/ordering.md), so "
              "the literal ids 1, 2, 3 this case expects are not ours")
ROOMS_ONLY = ("RoomMapper maps a room's events and snapshots only, and refuses any other "
              "domain event with a TypeError; the wrong cipher key on a room's event is "
              "checked below (test_a_wrong_cipher_key_makes_a_row_undecodable)")
DIFFERENCES = {
    "test_insert_select[postgresql]": SPARSE_IDS,
    "test_mapper_with_wrong_cipher_key": ROOMS_ONLY,
}


@pytest.fixture(autouse=True, scope="class")
def _store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[None]:
    """The store each case class runs on: a PostgreSQL database of its own (the factory's
    cases make the application's tables, some as the library's plain ones), or a SQLite
    file of its own."""
    cls = request.cls
    if cls is None:
        yield
    elif getattr(cls, "backend", None) == "postgresql":
        with database("dl_library") as url:
            cls.url = url
            yield
    else:
        cls.url = f"sqlite:///{tmp_path_factory.mktemp('library') / 'rooms.db'}"
        yield


def join_readers(before: set[threading.Thread]) -> None:
    """Wait for the threads a case started and left running. The library's concurrent
    cases set their readers' stop flag but never join them, so a reader can still be
    inside a query when tearDown closes the store: on SQLite that is a segmentation
    fault of the whole run (sqlite3 closing a connection another thread uses)."""
    for thread in set(threading.enumerate()) - before:
        if thread.daemon:  # ours, such as the PostgreSQL notifier, stop with their store
            continue
        thread.join(timeout=30)
        assert not thread.is_alive(), f"a case's thread {thread.name} did not stop"


def differs(case: Any, name: str) -> None:
    reason = DIFFERENCES.get(f"{name}[{case.backend}]") or DIFFERENCES.get(name)
    if reason is not None:
        pytest.skip(reason)


class PostgresTables:
    """A table of its own for each recorder a case makes, dropped at the case's end."""

    backend = "postgresql"
    url: str

    def setUp(self) -> None:
        self.threads = set(threading.enumerate())
        self.store = datastore(self.url)
        self.tables: list[Any] = []
        differs(self, self._testMethodName)  # type: ignore[attr-defined]

    def tearDown(self) -> None:
        join_readers(self.threads)
        with self.store.transaction(commit=True) as curs:
            for recorder in self.tables:
                curs.execute(f'DROP TABLE IF EXISTS "{recorder.events_table_name}"')
                base = getattr(recorder, "name_base", None)
                for suffix in ("_append_parts", "_follow", "_settled_max", "_settled"):
                    if base is not None:
                        curs.execute(f'DROP FUNCTION IF EXISTS "{base}{suffix}"')
        self.store.close()

    def made(self, recorder: Any) -> Any:
        self.tables.append(recorder)
        recorder.create_table()
        return recorder

    def table(self) -> str:
        return f"lib_{uuid4().hex[:12]}_events"


class SettledReads(RoomsRecorder):
    """RoomsRecorder, read as its followers read it. The library's cases read the log
    right after a commit; ours shows what has settled (docs/ordering.md), and a
    transaction of the database still running holds back what committed after it took
    its id (the NOTIFY of another append does, while it waits for the server's
    notification lock). A read here first waits until nothing committed is held back,
    as a follower's catch-up does (`ReadModels.catch_up`)."""

    def select_notifications(self, start: int | None, limit: int, stop: int | None = None,
                             topics: Sequence[str] = (), *,
                             inclusive_of_start: bool = True) -> Sequence[Notification]:
        deadline = time.monotonic() + 10
        while self.held_back(0) and time.monotonic() < deadline:
            time.sleep(0.01)
        return super().select_notifications(start, limit, stop, topics,
                                            inclusive_of_start=inclusive_of_start)


class TestRoomsRecorder(PostgresTables, ApplicationRecorderTestCase[RoomsRecorder]):
    EXPECT_CONTIGUOUS_NOTIFICATION_IDS = False

    def create_recorder(self) -> RoomsRecorder:
        return self.made(SettledReads(self.store, events_table_name=self.table()))

    def test_insert_subscribe(self) -> None:
        self.optional_test_insert_subscribe()


class TestRoomSnapshotsRecorder(PostgresTables, AggregateRecorderTestCase):
    def create_recorder(self) -> RoomSnapshotsRecorder:
        return self.made(RoomSnapshotsRecorder(self.store, events_table_name=self.table()))


class TestRoomsRecorderIdsDoNotInterleave(PostgresTables,
                                          NonInterleavingNotificationIDsBaseCase):
    def create_recorder(self) -> RoomsRecorder:
        return self.made(SettledReads(self.store, events_table_name=self.table()))


class SQLiteFile:
    backend = "sqlite"
    url: str

    def setUp(self) -> None:
        differs(self, self._testMethodName)  # type: ignore[attr-defined]
        self.threads = set(threading.enumerate())
        # A file of the case's own: the concurrent cases read from several threads.
        self.path = Path(self.url.removeprefix("sqlite:///")).with_name(
            f"{uuid4().hex[:12]}.db")
        self.store = SQLiteDatastore(str(self.path))

    def tearDown(self) -> None:
        join_readers(self.threads)
        self.store.close()

    def create_recorder(self) -> RoomsSQLiteRecorder:
        recorder = RoomsSQLiteRecorder(self.store)
        recorder.create_table()
        return recorder


class TestRoomsSQLiteRecorder(SQLiteFile, ApplicationRecorderTestCase[RoomsSQLiteRecorder]):
    pass


class TestRoomsSQLiteRecorderIdsDoNotInterleave(SQLiteFile,
                                                NonInterleavingNotificationIDsBaseCase):
    pass


class PostgresTracking(PostgresTrackingRecorder):
    pass


class SQLiteTracking(SQLiteTrackingRecorder):
    pass


class Factories(InfrastructureFactoryTestCase[Any]):
    """The factory as `open_rooms` configures it from a storage URL, and the classes it
    makes (`made`: the factory, its aggregate, application, tracking and process
    recorders, and a tracking recorder's subclass)."""

    __test__ = False  # its cases run in the subclasses below
    backend: str
    url: str
    made: tuple[type[Any], type[Any], type[Any], type[Any], type[Any], type[Any]]

    def setUp(self) -> None:
        differs(self, self._testMethodName)
        self.env = Environment("DuneLedger", environment(self.url))
        super().setUp()

    def tearDown(self) -> None:
        super().tearDown()
        if self.backend == "postgresql":  # what a case made, as the library's own cases drop it
            import psycopg

            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute("DROP SCHEMA public CASCADE")
                conn.execute("CREATE SCHEMA public")

    def expected_factory_class(self) -> type[Any]:
        return self.made[0]

    def expected_aggregate_recorder_class(self) -> type[Any]:
        return self.made[1]

    def expected_application_recorder_class(self) -> type[Any]:
        return self.made[2]

    def expected_tracking_recorder_class(self) -> type[Any]:
        return self.made[3]

    def expected_process_recorder_class(self) -> type[Any]:
        return self.made[4]

    def tracking_recorder_subclass(self) -> type[Any]:
        return self.made[5]


class TestRoomsPostgresFactory(Factories):
    __test__ = True
    backend = "postgresql"
    made = (RoomsPostgresFactory, RoomSnapshotsRecorder, RoomsRecorder, PostgresTrackingRecorder,
            PostgresProcessRecorder, PostgresTracking)


class TestRoomsSQLiteFactory(Factories):
    __test__ = True
    backend = "sqlite"
    made = (SQLiteFactory, SQLiteAggregateRecorder, RoomsSQLiteRecorder, SQLiteTrackingRecorder,
            SQLiteProcessRecorder, SQLiteTracking)


@pytest.fixture
def mapper_env(tmp_path: Path) -> Iterator[Environment]:
    yield Environment("App1", {**environment(f"sqlite:///{tmp_path / 'rooms.db'}"),
                               "CIPHER_TOPIC": get_topic(AESCipher),
                               "APP1_CIPHER_KEY": AESCipher.create_key(16),
                               "APP2_CIPHER_KEY": AESCipher.create_key(16)})


def test_a_wrong_cipher_key_makes_a_row_undecodable(mapper_env: Environment) -> None:
    """The library's `test_mapper_with_wrong_cipher_key` with a room's event: our mapper
    answers a row it cannot decrypt with an Undecodable (for the reader to refuse or
    report), where the library's raises ValueError."""
    from dune_ledger.application.stream import Recorded
    from dune_ledger.domain.custody import CardDrawn

    factory = InfrastructureFactory.construct(mapper_env)
    mine = factory.mapper()
    assert isinstance(mine, RoomMapper)
    event = Recorded(uuid4(), 2, CardDrawn(seat="emperor", card="karama-1"), "0" * 64,
                     "emperor", "c1", 2, "2024-01-01T00:00:00+00:00")
    stored = mine.to_stored_event(event)
    back = mine.to_domain_event(stored)
    assert isinstance(back, Recorded) and back.hash() == event.hash()
    mapper_env.name = "App2"
    theirs = InfrastructureFactory.construct(mapper_env).mapper()
    refused = theirs.to_domain_event(stored)
    assert isinstance(refused, Undecodable)
    assert "does not decrypt with this key file's cipher key" in refused.problem
    factory.close()


def test_the_mapper_refuses_what_is_not_a_rooms(mapper_env: Environment) -> None:
    from eventsourcing.domain import DomainEvent

    mapper = InfrastructureFactory.construct(mapper_env).mapper()
    other = DomainEvent(originator_id=uuid4(), originator_version=1,
                        timestamp=DomainEvent.create_timestamp())
    with pytest.raises(TypeError, match="keeps a room's events and snapshots, not DomainEvent"):
        mapper.to_stored_event(other)
