"""The audit of a long room in parts, one process each (application/audit.py).

A room whose parts pass every check and join up exactly gets the same report as
the audit in one process; anything else (a finding, a snapshot the replay does
not reach, a part that cannot run) is audited in one process, so the report
never depends on the number of processes. Real SQLite files and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

import orjson
import pytest

from dune_ledger.application.audit import audit_in_parts, audit_room
from dune_ledger.application.rooms import RoomsApp
from dune_ledger.infrastructure.settings import Settings
from dune_ledger.infrastructure.storage import open_rooms
from tests.support import PART_MIN, layout, long_room, room_key, stored, tables, tamper

INTERVAL = 20  # a snapshot every 20 events: parts may start at any of them


@contextmanager
def opened(url: str) -> Iterator[RoomsApp]:
    app = open_rooms(url, settings=Settings(snapshot_interval=INTERVAL))
    try:
        yield app
    finally:
        app.close()


def one_process_answers(app: RoomsApp, room: str) -> dict[str, Any]:
    """The parts leave the room to one process, whose report the audit gives."""
    assert audit_in_parts(app, UUID(room), 2, PART_MIN) is None
    report = audit_room(app, room, 2, PART_MIN)
    assert report == audit_room(app, room)
    return report


def test_a_clean_long_room_in_parts_reports_what_one_process_reports(url: str) -> None:
    with opened(url) as app:
        room = long_room(app)
        one = audit_room(app, room)
        assert one["ok"] and one["events"] > 4 * PART_MIN
        for processes in (2, 3):
            parts = audit_in_parts(app, UUID(room), processes, PART_MIN)
            assert parts == one  # made in parts, not by falling back
            assert list(parts) == list(one)
            assert audit_room(app, room, processes, PART_MIN) == one
        # A room too short for two parts is audited in one process.
        short = str(app.create_room(layout())["room"])
        assert audit_in_parts(app, UUID(short), 2, PART_MIN) is None
        assert audit_room(app, short, 2, PART_MIN)["ok"]


@pytest.mark.parametrize("where", ["first part", "end of the first part", "last part"])
def test_an_edited_event_is_reported_as_one_process_reports_it(url: str, where: str) -> None:
    """At the end of a part, only the chain hash where the parts join shows the edit;
    in the first part (this process's own), the other parts are not waited for."""
    with opened(url) as app:
        room = long_room(app)
        start = audit_in_parts_start(app, UUID(room))
        version = {"first part": start // 2, "end of the first part": start,
                   "last part": app.load(room).version - 3}[where]
    events, _ = tables(app)
    key = room_key(url, room)
    body = orjson.loads(stored(url, f"SELECT state FROM {events} WHERE originator_id = ? "
                                    "AND originator_version = ?", key, version))
    body["at"] = "2000-01-01T00:00:00+00:00"  # not a rule's field: only the chain shows it
    tamper(url, f"UPDATE {events} SET state = ? WHERE originator_id = ? "
                "AND originator_version = ?", orjson.dumps(body), key, version)
    with opened(url) as app:
        report = one_process_answers(app, room)
        # (and the edited event's own append signature, when it ends an append)
        assert f"version {version + 1}: it does not carry its predecessor's hash" in \
            report["checks"]["chain_intact"]["details"]


@pytest.mark.parametrize("which", ["where a part starts", "the latest"])
def test_a_snapshot_the_replay_does_not_reach_leaves_the_audit_to_one_process(
        url: str, which: str) -> None:
    """Where a part starts, only the state hash where the parts join tells (the room is
    fine: the live load does not read that snapshot); the latest is what loads read."""
    with opened(url) as app:
        room = long_room(app)
        uid = UUID(room)
        assert app.snapshots is not None
        versions = [s.originator_version for s in app.snapshots.get(uid)]
        start = audit_in_parts_start(app, uid)
        assert start in versions[:-1]
        if which == "the latest":
            start = versions[-1]
    _, snapshots = tables(app)
    key = room_key(url, room)
    body = orjson.loads(stored(url, f"SELECT state FROM {snapshots} WHERE originator_id = ? "
                                    "AND originator_version = ?", key, start))
    # The discard pile in another order: every check of the part after it passes (its
    # next reshuffle takes the pile as a multiset and ends in the same state), so only
    # the state hash where the parts join tells.
    discard = body["state"]["state"]["discard"]
    assert len(set(discard)) > 1
    body["state"]["state"]["discard"] = discard[::-1]
    tamper(url, f"UPDATE {snapshots} SET state = ? WHERE originator_id = ? "
                "AND originator_version = ?", orjson.dumps(body), key, start)
    with opened(url) as app:
        report = one_process_answers(app, room)
        assert report["ok"] is (which == "where a part starts")
        assert report["checks"]["live_state_matches"]["ok"] is report["ok"]


def audit_in_parts_start(app: RoomsApp, uid: UUID) -> int:
    from dune_ledger.application.audit import _part_starts

    (start,) = _part_starts(app, uid, 2, PART_MIN)
    return start.originator_version


@pytest.mark.parametrize("where", ["first", "last"])
def test_a_changed_log_entry_or_view_in_any_part_is_reported_by_one_process(
        url: str, where: str) -> None:
    with opened(url) as app:
        room = long_room(app)
        uid = UUID(room)
        start = audit_in_parts_start(app, uid)
    seq = stored(url, "SELECT min(seq) FROM dl_public_log WHERE room = ? AND version "
                      + ("<= ?" if where == "first" else "> ?"), room, start)
    tagged = stored(url, "SELECT entry FROM dl_public_log WHERE room = ? AND seq = ?",
                    room, seq)
    entry = orjson.loads(tagged[65:])  # after the row's tag (projections/store.py)
    entry["text"] += "."
    tamper(url, "UPDATE dl_public_log SET entry = ? WHERE room = ? AND seq = ?",
           tagged[:65] + orjson.dumps(entry).decode(), room, seq)
    with opened(url) as app:
        report = one_process_answers(app, room)
        assert report["checks"]["read_models_match"]["ok"] is False

    tamper(url, "UPDATE dl_public_log SET entry = ? WHERE room = ? AND seq = ?",
           tagged, room, seq)
    tamper(url, "UPDATE dl_seat_views SET view = '{}' WHERE room = ? AND seat = 'emperor'",
           room)
    with opened(url) as app:
        report = one_process_answers(app, room)
        details = report["checks"]["read_models_match"]["details"]
        assert "emperor's view differs from a fresh rebuild" in details
        assert all("emperor" in d for d in details), details


def test_read_models_that_say_they_are_elsewhere_are_reported_by_one_process(url: str
                                                                           ) -> None:
    """Every row as rebuilt, but the version the read models say they reached is not the
    stream's: only the last part's version check tells."""
    from dune_ledger.projections.store import PUBLIC

    with opened(url) as app:
        room = long_room(app)
        version = app.load(room).version
    tamper(url, "UPDATE dl_seat_views SET version = ? WHERE room = ? AND seat = ?",
           version + 5, room, PUBLIC)
    with opened(url) as app:
        report = one_process_answers(app, room)
        details = report["checks"]["read_models_match"]["details"]
        assert f"the read models are at version {version + 5}, the stream at {version}" \
            in details
        # The row's tag covers its version: the edit is found as such too (RULES 8).
        assert any("fails authentication" in d and f":{version + 5}" in d for d in details)


def test_a_log_that_says_it_is_elsewhere_is_reported_by_one_process(url: str) -> None:
    """Every entry as rebuilt, but the version the public log says it reached is not
    the stream's: only the last part's log version check tells."""
    with opened(url) as app:
        room = long_room(app)
        version = app.load(room).version
    tamper(url, "UPDATE dl_log_rooms SET version = ? WHERE room = ?", version + 5, room)
    with opened(url) as app:
        report = one_process_answers(app, room)
        assert report["checks"]["read_models_match"]["details"] == [
            f"the read models are at version {version + 5}, the stream at {version}",
            f"the views are at version {version}, the public log at {version + 5}"]


def test_an_entry_numbered_out_of_place_across_parts_is_no_match(url: str) -> None:
    """Each part compares its entries with the stored entries of its own events; the
    numbering across parts is checked where they join."""
    with opened(url) as app:
        room = long_room(app)
        uid = UUID(room)
        start = audit_in_parts_start(app, uid)
    first = stored(url, "SELECT min(seq) FROM dl_public_log WHERE room = ? AND version > ?",
                   room, start)
    # The last part's entries renumbered from 1000: each is still what its event makes,
    # and tagged with the row key (a writer with the key file, such as a faulty one).
    from dune_ledger.infrastructure.keys import Keys
    from dune_ledger.projections.store import PUBLIC, Sealer, entry_at

    sealer = Sealer(None, Keys().row_key())
    last = stored(url, "SELECT max(seq) FROM dl_public_log WHERE room = ?", room)
    for seq in range(last, first - 1, -1):
        version = stored(url, "SELECT version FROM dl_public_log WHERE room = ? AND seq = ?",
                         room, seq)
        entry = orjson.loads(sealer.open(stored(
            url, "SELECT entry FROM dl_public_log WHERE room = ? AND seq = ?", room, seq),
            entry_at(room, seq, version)))
        entry["seq"] = seq - first + 1000
        tamper(url, "UPDATE dl_public_log SET seq = ?, entry = ? WHERE room = ? AND seq = ?",
               entry["seq"], sealer.seal_view(PUBLIC, orjson.dumps(entry).decode(),
                                              entry_at(room, entry["seq"], version)),
               room, seq)
    with opened(url) as app:
        report = one_process_answers(app, room)
        assert report["checks"]["read_models_match"]["ok"] is False


def test_a_part_that_cannot_open_the_storage_leaves_the_audit_to_one_process(
        tmp_path: Any) -> None:
    with opened(f"sqlite:///{tmp_path / 'parts.db'}") as app:
        room = long_room(app)
        one = audit_room(app, room)

        def unreachable() -> RoomsApp:
            raise OSError("the storage went away")

        app.reopen = unreachable
        assert audit_in_parts(app, UUID(room), 2, PART_MIN) is None
        assert audit_room(app, room, 2, PART_MIN) == one


@pytest.mark.parametrize("fate", ["hangs", "dies"])
def test_a_part_that_hangs_or_dies_is_stopped_and_one_process_answers(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch, fate: str) -> None:
    import os
    import time

    import dune_ledger.application.audit as audit

    with opened(f"sqlite:///{tmp_path / 'parts.db'}") as app:
        room = long_room(app)
        one = audit_room(app, room)
        parent = os.getpid()
        replay = audit._audit_part

        def stuck(*args: Any) -> Any:
            if os.getpid() != parent:  # only in the forked part
                if fate == "dies":
                    os._exit(3)
                time.sleep(600)
            return replay(*args)

        monkeypatch.setattr(audit, "_audit_part", stuck)
        monkeypatch.setattr(audit, "PART_SLACK", 0.5)
        began = time.monotonic()
        assert audit_in_parts(app, UUID(room), 2, PART_MIN) is None
        assert time.monotonic() - began < 30
        assert audit_room(app, room, 2, PART_MIN) == one
        import multiprocessing

        assert multiprocessing.active_children() == []  # stopped and reaped


def test_storage_no_other_process_can_open_is_audited_in_one_process() -> None:
    with opened("memory://") as app:
        room = long_room(app, draws=40)
        assert app.reopen is None
        assert audit_in_parts(app, UUID(room), 2, PART_MIN) is None
        assert audit_room(app, room, 2, PART_MIN)["ok"]


def play(app: RoomsApp, room: str, draws: int) -> None:
    """More of `long_room`'s draws and discards, on a room it made."""
    for i in range(draws):
        seat = ("emperor", "harkonnen")[i % 2]
        assert app.execute(room, seat, {"type": "draw"})["ok"]
        card = app.load(room).state.seat(seat).hand[-1]
        assert app.execute(room, seat, {"type": "discard", "card": card})["ok"]


def part_processes(app: RoomsApp) -> list[Any]:
    from dune_ledger.application.audit import PartProcesses

    assert isinstance(app.part_processes, PartProcesses)
    return list(app.part_processes.running)


def part_pids(app: RoomsApp) -> list[int]:
    return [worker.process.pid for worker in part_processes(app)]


def test_the_part_processes_serve_every_later_audit_and_read_what_was_written_since(
        url: str) -> None:
    with opened(url) as app:
        room = long_room(app)
        assert app.part_processes is None  # started by the first audit in parts
        first = audit_in_parts(app, UUID(room), 2, PART_MIN)
        assert first == audit_room(app, room)
        pids = part_pids(app)
        assert len(pids) == 1
        play(app, room, 40)  # the last part now ends further on
        app.read_models.catch_up()
        later = audit_in_parts(app, UUID(room), 2, PART_MIN)
        assert later == audit_room(app, room)
        assert later["version"] == app.load(room).version >= first["version"] + 80
        assert part_pids(app) == pids  # the same process, not a new one
        # Another room, the same processes.
        other = long_room(app)
        assert audit_in_parts(app, UUID(other), 2, PART_MIN) == audit_room(app, other)
        assert part_pids(app) == pids


def test_closing_the_app_ends_its_part_processes(tmp_path: Any) -> None:
    import multiprocessing

    with opened(f"sqlite:///{tmp_path / 'parts.db'}") as app:
        room = long_room(app)
        assert audit_in_parts(app, UUID(room), 3, PART_MIN) is not None
        workers = part_processes(app)
        assert len(workers) == 2
    assert app.part_processes is None
    # Each ended by itself (it saw its pipe close, closed its storage), none was killed:
    # a process forked later closes its own copies of the others' pipes.
    assert [worker.process.exitcode for worker in workers] == [0, 0]
    assert multiprocessing.active_children() == []


CHILD = """
import sys, time
from uuid import UUID
from dune_ledger.application.audit import audit_in_parts
from dune_ledger.infrastructure.settings import Settings
from dune_ledger.infrastructure.storage import open_rooms
from tests.support import long_room

app = open_rooms(sys.argv[1], settings=Settings(snapshot_interval=20))
room = long_room(app)
assert audit_in_parts(app, UUID(room), 2, 40) is not None
print(*[w.process.pid for w in app.part_processes.running], flush=True)
time.sleep(600)
"""


def test_part_processes_end_when_their_apps_process_is_killed(tmp_path: Any) -> None:
    """No orphan keeps a storage connection: a part process ends when its pipe to the
    app closes, as it does when the app's process is killed."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    parent = subprocess.Popen([sys.executable, "-c", CHILD, f"sqlite:///{tmp_path / 'p.db'}"],
                              cwd=root, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(root)})
    try:
        assert parent.stdout is not None
        (pid,) = map(int, parent.stdout.readline().split())
        assert running(pid)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
    deadline = time.monotonic() + 20
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(pid)


def running(pid: int) -> bool:
    """Alive and not a zombie (an ended process whose parent has not reaped it)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
