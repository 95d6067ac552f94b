"""Damaged rooms (RULES 8): a stored stream that does not verify or cannot be read is
refused with `room_damaged`, reported by the audit with its check and version (never
a traceback), and fenced off by the read models and the worker; every other room goes
on, on SQLite and on PostgreSQL."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest

from dune_ledger.application.audit import audit_all, audit_room
from dune_ledger.application.rooms import RoomsApp, now, token_hash
from dune_ledger.application.stream import Room
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.layout import build_room, parse_layout
from dune_ledger.domain.rules import initial_state
from dune_ledger.infrastructure.settings import Settings
from dune_ledger.infrastructure.worker import Worker
from tests.support import drawn, example, opened, room_key, stored, tables, tamper, update

BOX_LAYOUT = example("box")


def events_row(url: str, app: RoomsApp, room: str, version: int) -> tuple[str, Any]:
    events, _ = tables(app)
    return (f"FROM {events} WHERE originator_id = ? AND originator_version = {version}",
            room_key(url, room))


def row_cut_in_half(url: str, app: RoomsApp, room: str) -> None:
    where, key = events_row(url, app, room, 3)
    state = bytes(stored(url, f"SELECT state {where}", key))
    update(url, app, room, 3, "state", state[: len(state) // 2])


def not_json(url: str, app: RoomsApp, room: str) -> None:
    update(url, app, room, 3, "state", b"this is not JSON")


def unknown_topic(url: str, app: RoomsApp, room: str) -> None:
    update(url, app, room, 3, "topic", "SpiceConjured")


def middle_deleted(url: str, app: RoomsApp, room: str) -> None:
    events, _ = tables(app)
    tamper(url, f"DELETE FROM {events} WHERE originator_id = ? AND originator_version = 3",
           room_key(url, room))


def snapshot_not_json(url: str, app: RoomsApp, room: str) -> None:
    _, snapshots = tables(app)
    tamper(url, f"UPDATE {snapshots} SET state = ? WHERE originator_id = ?",
           b"{not json", room_key(url, room))


DAMAGE: dict[str, tuple[Callable[[str, RoomsApp, str], None], int, str]] = {
    # name: (the damage, the version the refusal and the audit name, words of the audit)
    "a truncated row": (row_cut_in_half, 3, "cannot be read"),
    "a payload that is not JSON": (not_json, 3, "not JSON"),
    "an unknown topic": (unknown_topic, 3, "not one of ours"),
    "a deleted middle event": (middle_deleted, 3,
                               "version 3: it is missing (version 4 follows version 2)"),
    "a snapshot that is not JSON": (snapshot_not_json, 4, "unloadable"),
    # (audit --all still finds the room: it lists rooms by their stored events)
    "a renamed RoomCreated": (lambda url, app, room: update(url, app, room, 1, "topic",
                                                            "RoomForged"), 1, "not one of ours"),
    # Columns the library leaves nullable (and SQLite untyped): decoded before the chain.
    "a state stored NULL": (lambda url, app, room: update(url, app, room, 3, "state", None),
                            3, "its stored state is not bytes"),
    "a topic stored NULL": (lambda url, app, room: update(url, app, room, 3, "topic", None),
                            3, "its topic is not text"),
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_a_damaged_room_is_refused_reported_and_fenced_off(url: str, kind: str) -> None:
    damage, version, words = DAMAGE[kind]
    # A load reads the latest snapshot and the events after it: the damage is put where
    # a load reads (an event's after the snapshot at 50; the snapshot, taken at 4).
    interval = 4 if "snapshot" in kind else 50
    with opened(url, settings=Settings(snapshot_interval=interval)) as app:
        room, other = drawn(app), drawn(app)
        damage(url, app, room)
    with opened(url, settings=Settings(snapshot_interval=interval)) as app:  # nothing kept
        for _ in range(2):  # on every command, not once
            result = app.execute(room, "emperor", {"type": "draw"})
            assert not result["ok"] and result["error"]["code"] == "room_damaged", result
            assert f"at version {version}" in result["error"]["message"]
            assert "audit" in result["error"]["message"]  # what the operator should do
        # The other room goes on: commands, views, the log.
        assert app.execute(other, "emperor", {"type": "draw"})["ok"]
        assert app.seat_view(other, "emperor")["version"] == 6
        assert app.public_log(other)
        report = audit_room(app, room)
        assert report["ok"] is False
        failed = {name: c["details"] for name, c in report["checks"].items() if c["ok"] is False}
        assert any(words in detail for details in failed.values() for detail in details), report
        verdicts = {r["room"]: r["ok"] for r in audit_all(app)}
        assert verdicts[room] is False and verdicts[other] is True
        # A rebuild of the read models goes through, fencing the room off if it must.
        assert app.read_models is not None
        app.read_models.rebuild()
        assert app.seat_view(other, "emperor")["version"] == 6
        Worker(app, ticks=[], subscribe=False).tick()


def test_damage_behind_the_latest_snapshot_is_the_audits_to_find(url: str) -> None:
    """The signed snapshot stands for the events before it (its head hash commits to
    them): commands go on from the state the server signed, and the audit, which
    replays every event, reports the edit with its version."""
    with opened(url, settings=Settings(snapshot_interval=4)) as app:
        room = drawn(app)
        not_json(url, app, room)
    with opened(url, settings=Settings(snapshot_interval=4)) as app:
        assert app.execute(room, "emperor", {"type": "draw"})["ok"]
        report = audit_room(app, room)
        (detail,) = report["checks"]["chain_intact"]["details"]
        assert detail.startswith("version 3 (CardDrawn): the stored event cannot be read "
                                 "(not JSON")


def test_the_cli_audit_reports_a_damaged_room_without_a_traceback(
        url: str, capsys: pytest.CaptureFixture[str]) -> None:
    import orjson

    from dune_ledger.infrastructure.cli import main

    with opened(url) as app:
        room = drawn(app)
        not_json(url, app, room)
    if url.startswith("postgresql"):
        pytest.skip("the CLI's audit --all of the shared session database audits every test's "
                    "rooms: the SQLite run covers the CLI")
    assert main(["--db", url, "audit", room]) == 1
    out = capsys.readouterr()
    report = orjson.loads(out.out)
    (detail,) = report["checks"]["chain_intact"]["details"]
    assert detail.startswith("version 3 (CardDrawn): the stored event cannot be read (not JSON")
    assert "Traceback" not in out.err
    assert main(["--db", url, "audit", "--all"]) == 1
    assert "Traceback" not in capsys.readouterr().err


def hostile_room(app: RoomsApp, *, bank: int | None = None, emperor: int | None = None) -> Room:
    """A room with a Bank or an Emperor's spice a layout's bounds refuse, stored as a
    writer that skipped the bounds would store it (signed: the server wrote it)."""
    parsed = parse_layout(BOX_LAYOUT)
    rid = uuid4()
    created = build_room(parsed, str(rid), app.randomness(parsed.seed, 0))
    if bank is not None:
        created.state["bank"] = bank  # type: ignore[attr-defined]
    if emperor is not None:
        seats = created.state["seats"]  # type: ignore[attr-defined]
        next(s for s in seats if s["faction"] == "emperor")["spice"] = emperor
    room = Room(rid, initial_state(created))
    room.record([created], None, seat=None, command_id=None, at=now(),
                meta={"token_hashes": {s.faction: token_hash(s.faction) for s in parsed.seats}})
    app.save(room)
    return room


def test_a_bank_beyond_64_bits_is_answered_as_applied_and_audited(url: str) -> None:
    """A Bank of 2^64 - 1 and a Box fee: the state no longer encodes. The command that
    made it, crossing a snapshot, is answered as applied (the snapshot is skipped), and
    `audit --all` reports every room."""
    with opened(url, settings=Settings(snapshot_interval=2)) as app:
        other = drawn(app)
        room = str(hostile_room(app, bank=2**64 - 1).id)
        begun = app.execute(room, "richese", {"type": "begin_search", "card": "nullentropy-box"})
        assert begun["ok"], begun  # it was applied, and says so
        assert app.load(room).version == begun["version"]
        assert app.seat_view(other, "emperor")["version"] == 5
        reports = {r["room"]: r for r in audit_all(app)}
        assert reports[other]["ok"] and room in reports


def test_spice_beyond_64_bits_fences_its_room_off_and_no_other(url: str) -> None:
    """An Emperor at 2^64 - 1 paid 3 of income: that room's views cannot be made. Every
    other room's views (a brand-new room's too), the rebuild and the worker go on."""
    from dune_ledger.domain.purchase import EmperorIncomePaid

    with opened(url) as app:
        other = drawn(app)
        hostile = hostile_room(app, emperor=2**64 - 1)
        hostile.record([EmperorIncomePaid(event="e", emperor="emperor", amount=3)],
                       None, seat="emperor", command_id="income", at=now())
        app.save(hostile)
        room = str(hostile.id)
        assert app.seat_view(other, "emperor")["version"] == 5
        fresh = drawn(app)
        assert app.seat_view(fresh, "harkonnen")["version"] == 5
        for read in (lambda: app.seat_view(room, "emperor"), lambda: app.public_view(room)):
            with pytest.raises(Rejection) as refused:
                read()
            assert refused.value.code == "room_damaged"
        assert app.read_models is not None
        app.read_models.rebuild()
        assert app.seat_view(other, "emperor")["version"] == 5
        Worker(app, subscribe=False).tick()
        reports = {r["room"]: r for r in audit_all(app)}
        assert reports[other]["ok"] and reports[fresh]["ok"]
        assert reports[room]["ok"] is False  # its read models cannot be made


def test_the_postgres_follower_fences_a_room_off(pg_url: str) -> None:
    """The LISTEN/NOTIFY follower (the worker on PostgreSQL) takes a row it cannot read
    and goes on with the other rooms."""
    import time

    from dune_ledger.projections.follow import subscription_runner

    with opened(pg_url) as app:
        assert app.read_models is not None
        runner = subscription_runner(app, app.read_models)
        try:
            room, other = drawn(app), drawn(app)
            events, _ = tables(app)
            # A row that cannot be read, stored after the follower started (without a
            # notification: the next one brings it along).
            # Its id as an append numbers it (infrastructure/postgres.py): the id column
            # has no default.
            tamper(pg_url, f"INSERT INTO {events} (notification_id, originator_id, "
                           "originator_version, topic, state) VALUES "
                           "((pg_current_xact_id()::text::bigint << 20) + 1, ?, 6, "
                           "'CardDrawn', ?)", UUID(room), b"garbage")
            assert app.execute(other, "emperor", {"type": "discard", "card": "karama-1"})["ok"]
            deadline = time.monotonic() + 10
            while app.read_models.version(other) != 6 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert app.read_models.version(other) == 6
            assert not runner.is_interrupted.is_set()
        finally:
            runner.__exit__(None, None, None)


def test_rebuild_and_worker_on_the_command_line_go_past_a_damaged_room(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    from dune_ledger.infrastructure.cli import main

    url = f"sqlite:///{tmp_path / 'rooms.db'}"
    with opened(url) as app:
        room, other = drawn(app), drawn(app)
        update(url, app, room, 2, "state", b"{truncated")
    assert main(["--db", url, "projections", "rebuild"]) == 0
    assert main(["--db", url, "worker", "--once"]) == 0
    assert main(["--db", url, "room", "view", other, "--as", "emperor"]) == 0
    assert main(["--db", url, "room", "view", room, "--as", "emperor"]) == 1
    assert main(["--db", url, "room", "command", room, "--as", "emperor",
                 '{"type": "draw"}']) == 1
    err = capfd.readouterr().err
    assert "Traceback" not in err and "room_damaged" in err


@pytest.mark.parametrize("state", [None, "a text state"], ids=["NULL", "text"])
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_state_that_is_not_bytes_breaks_no_other_room(
        backend: str, state: str | None, tmp_path: Path, capfd: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    """A row of one room whose state is NULL, or (SQLite keeps any type in any column)
    text: the room is damaged, and every other room's view, public view and log over
    HTTP, the operator's list, and the command line's view, audit, export and rebuild
    go on (each once failed with a TypeError)."""
    from fastapi.testclient import TestClient

    from dune_ledger.infrastructure.cli import main
    from dune_ledger.infrastructure.http import create_app
    from tests.support import ADMIN, auth, database, layout

    if backend == "postgresql" and state is not None:
        pytest.skip("a bytea column holds bytes only")
    with contextlib.ExitStack() as stack:
        url = (f"sqlite:///{tmp_path / 'rooms.db'}" if backend == "sqlite"
               else stack.enter_context(database("dl_test_undecoded")))
        with opened(url) as app:
            created = [app.create_room(layout()) for _ in range(2)]
            room, other = (str(c["room"]) for c in created)
            for seat in ("emperor", "harkonnen"):
                assert app.execute(room, seat, {"type": "draw"})["ok"]
            update(url, app, room, 3, "state", state)
            with TestClient(create_app(app, admin_token=ADMIN)) as client:
                for path in ("view", "public", "log"):
                    r = client.get(f"/rooms/{other}/{path}",
                                   headers=auth(created[1]["seats"]["emperor"]))
                    assert r.status_code == 200, (path, r.text)
                r = client.get(f"/rooms/{room}/view", headers=auth(created[0]["seats"]["emperor"]))
                assert r.status_code == 422 and r.json()["error"]["code"] == "room_damaged"
                listed = {r["room"]: r for r in client.get("/rooms", headers=auth(ADMIN)).json()}
                assert listed[other]["version"] == 1 and "damaged" not in listed[other]
                assert "at version 3" in listed[room]["damaged"]
        assert main(["--db", url, "room", "view", other, "--as", "emperor"]) == 0
        assert main(["--db", url, "audit", "--all"]) == 1
        export = tmp_path / "rooms.jsonl"
        assert main(["--db", url, "export", "--all", "-o", str(export)]) == 1
        assert export.read_bytes().count(b"\n") == 1  # the other room's one event
        assert main(["--db", url, "projections", "rebuild"]) == 0
    err = capfd.readouterr().err
    assert f"left out: room {room} version 3 cannot be read" in err
    assert "Traceback" not in err and "unexpected error" not in err
    assert not [r for r in caplog.records if r.exc_info]
