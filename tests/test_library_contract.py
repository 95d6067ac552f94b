"""The private names of the libraries the code relies on, checked by name: an upgrade
that moves one fails here, loudly, instead of somewhere far from its cause.

- `application/store.py` `RoomStore.save` (the library's save without the runtime Protocol
  checks) stores a room's events as the library's `Application._record` does, through
  the recorder's `insert_events(stored_events, **kwargs)`.
- `infrastructure/postgres.py` `RoomsSubscription` runs the library's
  `PostgresSubscription` thread with its own LISTEN loop, reading `_recorder`,
  `_has_been_stopped`, `_thread_error`, `_has_been_notified` and `_last_notification_id`.
- `infrastructure/postgres.py` `RoomsPostgresFactory` sets psycopg_pool's `_check` (the
  check of each connection it hands out) where the library gives no way to pass one.
"""

from __future__ import annotations

import inspect

from eventsourcing.application import Application
from eventsourcing.persistence import ApplicationRecorder, EventStore
from eventsourcing.postgres import PostgresSubscription
from psycopg_pool import ConnectionPool


def test_the_recorders_keep_their_insert_events() -> None:
    insert = inspect.signature(ApplicationRecorder.insert_events)
    assert list(insert.parameters) == ["self", "stored_events", "kwargs"]
    assert "self.recorder.insert_events(" in inspect.getsource(EventStore.put)
    assert "self.events.put(" in inspect.getsource(Application._record)


def test_the_postgres_subscription_keeps_the_attributes_our_listen_loop_reads() -> None:
    source = "".join(inspect.getsource(cls) for cls in PostgresSubscription.__mro__
                     if cls.__module__.startswith("eventsourcing"))
    for name in ("_recorder", "_has_been_stopped", "_thread_error", "_has_been_notified",
                 "_last_notification_id"):
        assert f"self.{name}" in source, f"eventsourcing no longer sets {name}"


def test_the_pool_keeps_its_connection_check() -> None:
    pool = ConnectionPool("", open=False)
    assert hasattr(pool, "_check"), "psycopg_pool no longer keeps its check as _check"
    assert hasattr(pool, "reconnect_timeout")
