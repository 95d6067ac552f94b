"""The read models on the real PostgreSQL server (127.0.0.1:5432, user postgres).

A throwaway database `dl_proj_<random>` is created for this module and
dropped at the end. The worker follows by LISTEN/NOTIFY here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from eventsourcing.persistence import Tracking

from dune_ledger.application.audit import audit_room
from dune_ledger.infrastructure.storage import open_rooms
from dune_ledger.infrastructure.worker import Worker
from dune_ledger.projections.follow import Positions, ReadModelProjection, subscription_runner
from dune_ledger.projections.read_models import ReadModels
from dune_ledger.projections.store import PostgresStore
from tests.support import database, everything, example, follow_together, fresh, items, play

BOX_LAYOUT = example("box")


@pytest.fixture(scope="module")
def pg() -> Iterator[str]:
    with database("dl_proj") as url:
        yield url


def wait_until(check: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return False


def test_reads_see_writes_and_rebuild_equals_incremental(pg):
    with open_rooms(pg) as app:
        assert isinstance(app.read_models.store, PostgresStore)
        rooms = play(app)
        for room in rooms:
            assert app.seat_view(room, "emperor")["version"] == app.load(room).version
        incremental = everything(app.read_models, rooms)
        assert incremental == fresh(app, rooms)
        app.read_models.rebuild()
        assert everything(app.read_models, rooms) == incremental
        for room in rooms:
            assert audit_room(app, room)["checks"]["read_models_match"]["ok"] is True


def test_redelivery_and_concurrent_followers_apply_each_event_once(pg):
    with open_rooms(pg) as app, open_rooms(pg) as other:
        rooms = play(app, rooms=3)
        app.read_models.rebuild()
        models: ReadModels = app.read_models
        batch = items(app)
        projection = ReadModelProjection(Positions(models))
        for rec, nid in batch[-4:]:
            projection.process_event(rec, Tracking("DuneLedger", nid))
        models.process(batch)
        # Two apps (two pools, as two processes) catching up on the same database.
        for more in play(app, rooms=2):
            rooms.append(more)
        assert follow_together([app.read_models, other.read_models]) == []
        assert everything(app.read_models, rooms) == fresh(app, rooms)
        for room in rooms:
            seqs = [e["seq"] for e in app.read_models.public_log(room)]
            assert seqs == list(range(1, len(seqs) + 1))


def test_the_worker_follows_by_listen_notify_and_resumes_after_a_stop(pg):
    with open_rooms(pg) as writer, open_rooms(pg) as follower:
        models: ReadModels = follower.read_models
        models.catch_up()
        worker = Worker(follower, interval=0.05)
        assert worker.follower == "listen/notify"
        thread = threading.Thread(target=worker.run)
        thread.start()
        try:
            room = writer.create_room(BOX_LAYOUT)["room"]
            result = writer.execute(room, "emperor", {"type": "draw"})
            # Nobody reads through `follower`: only the subscription can move it.
            assert wait_until(lambda: models.version(room) == result["version"])
        finally:
            worker.stop()
            thread.join()
        # Written while the worker is stopped; a new worker picks up from its position.
        stopped_at = models.position()
        writer.execute(room, "atreides", {"type": "draw"})
        writer.execute(room, "harkonnen", {"type": "discard", "card": "chaumas"})
        assert models.position() == stopped_at
        # The subscription itself (no batch catch-up first) starts after the stored position.
        runner = subscription_runner(follower, models, catch_up=False)
        try:
            assert wait_until(lambda: models.version(room) == writer.load(room).version)
            writer.execute(room, "emperor", {"type": "draw"})
            assert wait_until(lambda: models.version(room) == writer.load(room).version)
        finally:
            runner.__exit__(None, None, None)
        assert everything(models, [room]) == fresh(writer, [room])


def test_an_app_in_a_schema_of_its_own_reads_and_writes_only_there() -> None:
    """Reads name their tables with the datastore's schema (PostgresStore._statement):
    a schema other than public must be where every read looks."""
    import psycopg

    with database("dl_schema") as url:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("CREATE SCHEMA rooms_elsewhere")
        with open_rooms(url, POSTGRES_SCHEMA="rooms_elsewhere") as app:
            (room,) = play(app, rooms=1)
            view = app.seat_view(room, "emperor")
            assert view["version"] == app.load(room).version
            assert app.public_log(room)
            assert audit_room(app, room)["ok"]
        with psycopg.connect(url) as admin:
            where = {schema for schema, in admin.execute(
                "SELECT DISTINCT table_schema FROM information_schema.tables "
                "WHERE table_name LIKE 'dl\\_%'")}
        assert where == {"rooms_elsewhere"}
