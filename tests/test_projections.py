"""The read models as projections: exactly once, rebuildable, resumable (SQLite and memory)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import orjson
import pytest
from eventsourcing.persistence import Tracking

from dune_ledger.application.audit import audit_room
from dune_ledger.infrastructure.storage import open_rooms
from dune_ledger.infrastructure.worker import Worker
from dune_ledger.projections.follow import Positions, ReadModelProjection
from dune_ledger.projections.read_models import ReadModels, _fold_rows, fresh_rows, fresh_snapshot
from dune_ledger.projections.store import PUBLIC, Sealer, SQLiteStore, entry_at
from tests.support import BOX, everything, example, follow_together, fresh, items, play

BOX_LAYOUT = example("box")


@pytest.fixture(params=["memory", "sqlite"])
def app(request, tmp_path):
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'rm.db'}"
    with open_rooms(url) as app:
        yield app


def test_reads_see_writes_without_a_worker(app):
    room = app.create_room(BOX_LAYOUT)["room"]
    assert app.seat_view(room, "emperor")["version"] == 1
    result = app.execute(room, "emperor", {"type": "draw"})
    view = app.seat_view(room, "emperor")
    assert view["version"] == result["version"] == 2
    assert len(view["me"]["hand"]) == 2
    assert [e["type"] for e in app.public_log(room)][-1] == "CardDrawn"
    assert app.public_view(room)["version"] == 2


def test_each_event_is_applied_once_under_redelivery(app):
    rooms = play(app)
    models: ReadModels = app.read_models
    batch = items(app)
    n = len(batch)
    models.process(batch[:5])
    models.process(batch[:5])  # the same batch again
    models.process(batch[3:9])  # overlapping
    for item in batch:  # one by one, all of it again
        models.process([item])
    models.process(batch)
    # The library's projection interface, delivering an event twice.
    projection = ReadModelProjection(Positions(models))
    rec, nid = batch[-1]
    projection.process_event(rec, Tracking("DuneLedger", nid))
    projection.process_event(rec, Tracking("DuneLedger", nid))
    assert models.position() == n
    assert everything(models, rooms) == fresh(app, rooms)
    for room in rooms:
        seqs = [e["seq"] for e in models.public_log(room)]
        assert seqs == list(range(1, len(seqs) + 1))


def test_two_followers_of_one_file_apply_each_event_once(tmp_path):
    url = f"sqlite:///{tmp_path / 'two.db'}"
    with open_rooms(url) as app:
        rooms = play(app, rooms=3)
        # Two independent connections, as two processes would have.
        followers = [ReadModels(app.recorder, app.mapper, SQLiteStore(str(tmp_path / "two.db")),
                                batch=3) for _ in range(2)]
        assert follow_together(followers) == []
        assert everything(followers[0], rooms) == fresh(app, rooms)
        assert everything(followers[1], rooms) == fresh(app, rooms)


def test_rebuild_equals_incremental(app):
    rooms = play(app)
    # Incremental: catch up after every command, as readers do.
    more = app.create_room(BOX_LAYOUT)["room"]
    for seat in ("emperor", "harkonnen", "atreides", "emperor"):
        app.execute(more, seat, {"type": "draw"})
        app.seat_view(more, seat)
    rooms.append(more)
    app.read_models.catch_up()
    incremental = everything(app.read_models, rooms)
    assert incremental == fresh(app, rooms)
    progress: list[tuple[int, int]] = []
    rebuilt = app.read_models.rebuild(lambda done, total: progress.append((done, total)))
    assert rebuilt == app.read_models.position() == app.recorder.max_notification_id()
    assert progress and progress[-1][0] == progress[-1][1] == rebuilt
    assert everything(app.read_models, rooms) == incremental


def test_a_stopped_projection_resumes_where_it_left_off(tmp_path):
    path = tmp_path / "resume.db"
    with open_rooms(f"sqlite:///{path}") as app:
        rooms = play(app)
        total = app.recorder.max_notification_id()
        first = ReadModels(app.recorder, app.mapper, SQLiteStore(str(path)), batch=4)
        assert first.catch_up(stop=total // 2) == total // 2
        assert first.position() == total // 2
        first.store.close()
        # A new process: no cache, only the stored rows and positions.
        second = ReadModels(app.recorder, app.mapper, SQLiteStore(str(path)), batch=4)
        assert second.position() == total // 2
        assert second.catch_up() == total - total // 2
        assert everything(second, rooms) == fresh(app, rooms)


def test_a_failed_batch_changes_nothing_and_is_applied_later(app, monkeypatch):
    rooms = play(app)
    models: ReadModels = app.read_models
    batch = items(app)
    models.process(batch[:4])
    before = (models.position(), everything(models, rooms))
    views = models.projectors[1]
    original = views.finish

    def broken(tx: Any, touched: Any) -> None:
        original(tx, touched)
        raise OSError("disk full")

    monkeypatch.setattr(views, "finish", broken)
    with pytest.raises(OSError):
        models.process(batch[4:])
    # The public log applied its part; the seat views rolled back theirs entirely.
    assert models.store.position("seat_views") == 4
    assert everything(models, rooms)[rooms[0]]["views"] == before[1][rooms[0]]["views"]
    monkeypatch.setattr(views, "finish", original)
    models.catch_up()
    assert everything(models, rooms) == fresh(app, rooms)


def test_audit_compares_stored_read_models_with_a_fresh_rebuild(tmp_path):
    path = tmp_path / "audit.db"
    with open_rooms(f"sqlite:///{path}") as app:
        room = play(app, rooms=1)[0]
        assert audit_room(app, room)["checks"]["read_models_match"] == {"ok": True, "details": []}
        with sqlite3.connect(path) as db:
            db.execute("UPDATE dl_seat_views SET view = replace(view, '\"spice\":10', "
                       "'\"spice\":99') WHERE seat = 'emperor'")
            db.execute("DELETE FROM dl_public_log WHERE seq = 2")
        report = audit_room(app, room)
        check = report["checks"]["read_models_match"]
        assert check["ok"] is False and report["ok"] is False
        assert any("emperor" in d for d in check["details"])
        assert any("public log" in d for d in check["details"])


def test_the_worker_follows_and_runs_its_per_tick_callables(tmp_path):
    url = f"sqlite:///{tmp_path / 'worker.db'}"
    with open_rooms(url) as writer, open_rooms(url) as follower:
        rooms = play(writer)
        ticks: list[int] = []
        worker = Worker(follower, interval=0.01, ticks=[lambda app: ticks.append(1)])
        assert worker.follower == "polling"
        worker.run(max_ticks=2)
        assert len(ticks) == 2
        models: ReadModels = follower.read_models
        assert models.position() == writer.recorder.max_notification_id()
        assert everything(models, rooms) == fresh(writer, rooms)

        def boom(app: Any) -> None:
            raise ValueError("autopilot hiccup")

        Worker(follower, ticks=[boom, lambda app: ticks.append(2)]).tick()
        assert ticks[-1] == 2  # a failing callable does not stop the others


def test_wait_for_a_version_written_by_another_process(tmp_path):
    url = f"sqlite:///{tmp_path / 'wait.db'}"
    with open_rooms(url) as app, open_rooms(url) as other:
        room = app.create_room(BOX_LAYOUT)["room"]
        assert app.wait_for(room, 1, timeout=1)
        assert not app.wait_for(room, 2, timeout=0.2)
        timer = threading.Timer(0.2, other.execute, (room, "emperor", {"type": "draw"}))
        timer.start()
        assert app.wait_for(room, 2, timeout=10)
        timer.join()
        assert app.read_models.version(room) == 2
        assert app.read_models.seat_view(room, PUBLIC) is not None


def cli(url: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dune_ledger", "--db", url, *args],
                          capture_output=True, text=True, timeout=60, cwd=cwd)


def test_cli_rebuild_worker_and_wait_flag(tmp_path):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with open_rooms(url) as app:
        rooms = play(app)
        app.read_models.catch_up()
        incremental = everything(app.read_models, rooms)
    done = cli(url, tmp_path, "projections", "rebuild")
    assert done.returncode == 0, done.stderr
    out = orjson.loads(done.stdout)
    assert out["ok"] and out["events"] == out["position"] > 0
    assert "rebuilding read models" in done.stderr
    with open_rooms(url) as app:
        assert everything(app.read_models, rooms) == incremental
    worker = cli(url, tmp_path, "worker", "--once")
    assert worker.returncode == 0 and "polling" in worker.stderr
    version = incremental[rooms[0]]["views"][PUBLIC]["version"]
    seen = cli(url, tmp_path, "room", "view", rooms[0], "--as", "emperor",
               "--wait-version", str(version))
    assert seen.returncode == 0 and orjson.loads(seen.stdout)["version"] == version
    late = cli(url, tmp_path, "room", "view", rooms[0], "--public",
               "--wait-version", str(version + 1), "--timeout", "0.2")
    assert late.returncode == 1
    assert orjson.loads(late.stdout)["error"]["code"] == "timeout"


def test_the_guard_withholds_a_view_or_entry_that_would_leak(monkeypatch):
    """Fail closed: a rule module shaping a leaky view or log line gets it withheld."""
    from dune_ledger.domain.nullentropy import CardRetrieved
    from dune_ledger.projections import projectors

    real_view, real_public = projectors.seat_view, CardRetrieved.public

    def leaky_view(state: Any, faction: str) -> dict[str, Any]:
        view = real_view(state, faction)
        view["peek"] = [c for s in state.seats if s.faction != faction for c in s.hand]
        return view

    def leaky_public(self: Any) -> dict[str, Any]:
        return {**real_public(self), "card": self.card}

    monkeypatch.setattr(projectors, "seat_view", leaky_view)
    monkeypatch.setattr(CardRetrieved, "public", leaky_public)
    with open_rooms("memory://") as app:
        room = app.create_room(BOX_LAYOUT)["room"]
        begun = app.execute(room, "richese", {"type": "begin_search", "card": BOX})
        app.execute(room, "richese", {"type": "select_card", "card": "baliset",
                                      "search": begun["events"][-1]["search"]})
        emperor = app.seat_view(room, "emperor")
        assert "withheld" in emperor and "baliset" not in str(emperor)
        retrieved = next(e for e in app.public_log(room) if e["type"] == "CardRetrieved")
        assert "withheld" in retrieved["text"] and "baliset" not in str(retrieved)
        # What was not made leaky is served as usual.
        assert "withheld" not in app.public_view(room)
        assert all("withheld" not in str(e) for e in app.public_log(room)
                   if e["type"] != "CardRetrieved")


def test_a_damaged_stream_quarantines_its_room_not_the_others(tmp_path):
    from dune_ledger.domain.errors import Rejection

    path = tmp_path / "damaged.db"
    with open_rooms(f"sqlite:///{path}") as app:
        damaged, healthy = play(app)
        with sqlite3.connect(path) as db:  # lost before any follower projected it
            db.execute("DELETE FROM stored_events WHERE originator_id = ? "
                       "AND originator_version = 3", (UUID(damaged).hex,))
        with pytest.raises(Rejection) as refused:
            app.seat_view(damaged, "emperor")
        assert refused.value.code == "room_damaged"
        assert app.seat_view(healthy, "emperor")["version"] == app.load(healthy).version
        app.execute(healthy, "emperor", {"type": "draw"})
        assert app.public_view(healthy)["version"] == app.load(healthy).version
        assert app.read_models.position() == app.recorder.max_notification_id()
        assert audit_room(app, damaged)["ok"] is False


def parsed_rows(room: str, records: list[Any]) -> dict[str, Any]:
    log, views = fresh_rows(UUID(room), records)
    return {"log": [orjson.loads(e) for e in log],
            "views": {seat: orjson.loads(v) for seat, v in views.items()}}


def test_the_one_fold_rebuild_equals_the_projectors_rebuild(monkeypatch):
    """The audit's rebuild (one fold, the projectors' row makers) stores what the
    projectors store, withheld rows included, and falls back to them for a damaged stream."""
    from dune_ledger.domain.nullentropy import CardRetrieved
    from dune_ledger.projections import projectors

    real_public, real_view = CardRetrieved.public, projectors.seat_view
    with open_rooms("memory://") as app:
        rooms = play(app, rooms=3)
        monkeypatch.setattr(CardRetrieved, "public",  # a leaky rule module: withheld rows
                            lambda self: {**real_public(self), "card": self.card})
        monkeypatch.setattr(projectors, "seat_view", lambda state, faction: {
            **real_view(state, faction), "peek": list(state.deck)})
        rooms += play(app, rooms=1)
        for room in rooms:
            records = app.records(UUID(room))
            assert _fold_rows(UUID(room), records) is not None
            assert parsed_rows(room, records) == fresh_snapshot(UUID(room), records)
            for cut in (1, 4, len(records) - 1):  # as of an earlier stored version
                assert parsed_rows(room, records[:cut]) == fresh_snapshot(UUID(room),
                                                                          records[:cut])
        assert "withheld" in str(parsed_rows(rooms[-1], app.records(UUID(rooms[-1]))))
        records = app.records(UUID(rooms[0]))
        for damaged in (records[:3] + records[4:], records[1:], records + records[-1:]):
            assert _fold_rows(UUID(rooms[0]), damaged) is None
            assert parsed_rows(rooms[0], damaged) == fresh_snapshot(UUID(rooms[0]), damaged)


def test_the_audit_reads_stored_rows_as_parsed_json(tmp_path):
    """A row stored with other spacing or key order is no mismatch; a changed value in the
    middle of the log, a missing view or an extra one is."""
    path = tmp_path / "rows.db"
    with open_rooms(f"sqlite:///{path}") as app:
        room = play(app, rooms=1)[0]
        assert audit_room(app, room)["checks"]["read_models_match"]["ok"] is True
        # Rewritten by a writer holding the key (rows are authenticated: RULES 8).
        sealer = Sealer(None, app.signer.row_key())  # type: ignore[attr-defined]
        with sqlite3.connect(path) as db:
            for seq, version, entry in db.execute(
                    "SELECT seq, version, entry FROM dl_public_log WHERE room = ?",
                    (room,)).fetchall():
                where = entry_at(room, seq, version)
                text = sealer.open(entry, where)
                spaced = orjson.dumps(dict(reversed(orjson.loads(text).items())),
                                      option=orjson.OPT_INDENT_2).decode()
                db.execute("UPDATE dl_public_log SET entry = ? WHERE room = ? AND seq = ?",
                           (sealer.seal_view(PUBLIC, spaced, where), room, seq))
        assert audit_room(app, room)["checks"]["read_models_match"] == {"ok": True,
                                                                        "details": []}
        with sqlite3.connect(path) as db:
            db.execute("UPDATE dl_public_log SET entry = replace(entry, 'chaumas', 'kulon') "
                       "WHERE room = ? AND seq = 3", (room,))
            db.execute("DELETE FROM dl_seat_views WHERE room = ? AND seat = 'harkonnen'",
                       (room,))
            db.execute("INSERT INTO dl_seat_views VALUES (?, 'fremen', 1, '{}')", (room,))
        check = audit_room(app, room)["checks"]["read_models_match"]
        assert check["ok"] is False
        assert any("public log differs" in d for d in check["details"])
        assert any(d.startswith("harkonnen's view") for d in check["details"])
        # Rows written without the key are reported as such, and left out of the rest.
        assert any("fails authentication" in d and ":fremen:" in d for d in check["details"])
        assert any("fails authentication" in d and "dl_public_log" in d
                   for d in check["details"])
        with sqlite3.connect(path) as db:
            db.execute("UPDATE dl_seat_views SET view = '{not json' WHERE room = ? "
                       "AND seat = 'emperor'", (room,))
        check = audit_room(app, room)["checks"]["read_models_match"]
        assert any(d.startswith("emperor's view") for d in check["details"])


def test_the_read_model_check_reuses_the_audits_fold(monkeypatch):
    """The rows made along the audit's replay are the projectors' rows, withheld ones
    included; for a damaged stream, a record of another room or an event that cannot
    be applied they are not used, and the check says what it says without them."""
    from dataclasses import replace

    from dune_ledger.application.audit import audit_records
    from dune_ledger.domain.custody import CardDrawn
    from dune_ledger.domain.nullentropy import CardRetrieved
    from dune_ledger.projections.read_models import RoomRows

    real_public = CardRetrieved.public
    with open_rooms("memory://") as app:
        models = app.read_models
        rooms = play(app, rooms=2)
        monkeypatch.setattr(CardRetrieved, "public",  # a leaky rule module: withheld rows
                            lambda self: {**real_public(self), "card": self.card})
        rooms += play(app, rooms=1)

        def folded(room: str, records: list[Any]) -> RoomRows:
            fold = models.room_fold(UUID(room))
            audit_records(room, records, fold)
            return fold

        for room in rooms:
            records = app.records(UUID(room))
            assert folded(room, records).rows(records) == fresh_rows(UUID(room), records)
            assert models.check_room(UUID(room), records, folded(room, records)) == {
                "ok": True, "details": []}
        assert "withheld" in str(folded(rooms[-1], app.records(UUID(rooms[-1]))).log)

        room = rooms[0]
        records = app.records(UUID(room))
        other = app.records(UUID(rooms[1]))
        unfit = replace(records[2], fact=CardDrawn(seat="emperor", card="not-on-top"))
        for damaged in (records[:3] + records[4:], records[1:], records + records[-1:],
                        records[:2] + [other[2]] + records[3:], records[:2] + [unfit]
                        + records[3:], records[:-1] + [unfit]):
            fold = folded(room, damaged)
            assert fold.rows(damaged) is None
            check = models.check_room(UUID(room), damaged, fold)
            assert check["ok"] is False
            assert check == models.check_room(UUID(room), damaged)

        # Stored rows changed after the models were written: found along the shared fold.
        entries, views = models.store.entries[room], models.store.views[room]
        version, entry = entries[1]
        entries[1] = (version, entry.replace('"version":2', '"version":3'))
        views["emperor"] = (views["emperor"][0], "{}")
        tampered = models.check_room(UUID(room), records, folded(room, records))
        assert tampered == {"ok": False, "details": [
            f"the public log differs ({len(entries)} entries stored, "
            f"{len(entries)} rebuilt)",
            "emperor's view differs from a fresh rebuild"]}


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgresql"])
def test_the_least_position_is_zero_until_every_projection_has_one(
        kind: str, tmp_path: Any, request: pytest.FixtureRequest) -> None:
    from dune_ledger.projections.store import MemoryStore, Store

    if kind == "postgresql":
        app = open_rooms(request.getfixturevalue("pg_url"))
        request.addfinalizer(app.close)
        assert app.read_models is not None
        store: Store = app.read_models.store  # type: ignore[attr-defined]
        names = [f"probe_{uuid4().hex}", f"probe_{uuid4().hex}"]  # the database is shared
    else:
        store = MemoryStore() if kind == "memory" else SQLiteStore(str(tmp_path / "p.db"))
        names = ["public_log", "seat_views"]
    assert store.least_position(names) == 0
    with store.transaction(names[0]) as writes:
        writes.set_position(names[0], 7)
    assert store.least_position(names) == 0  # the other has applied nothing yet
    with store.transaction(names[1]) as writes:
        writes.set_position(names[1], 5)
    assert store.least_position(names) == 5
    assert store.least_position(names[:1]) == 7
