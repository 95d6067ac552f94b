"""Group commit on PostgreSQL: appends that arrive together share one transaction.

Each append keeps its own compare-and-set, chain and signature: one that
loses its race fails alone (infrastructure/postgres.py `GroupCommit`,
`RoomsRecorder.append_parts`). The speed side is `scripts/bench_group_commit.py`.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from eventsourcing.persistence import IntegrityError, StoredEvent

from dune_ledger.application.audit import audit_room
from dune_ledger.infrastructure.postgres import ID_SHIFT, GroupCommit
from dune_ledger.infrastructure.settings import Settings
from dune_ledger.infrastructure.storage import open_rooms
from tests.support import TWO_SEATS, Follower, database, skipped


@pytest.fixture
def pg() -> Iterator[str]:
    with database("dl_group") as url:
        yield url


def event(room: uuid.UUID, version: int) -> StoredEvent:
    return StoredEvent(originator_id=room, originator_version=version, topic="Probe",
                       state=b"")


def test_one_part_that_loses_its_race_leaves_the_others_stored(pg):
    with open_rooms(pg, settings=Settings(pg_group_commit=True)) as app:
        a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        app.recorder.append_alone([event(b, 1)])
        stored = app.recorder.append_parts([[event(a, 1)], [event(b, 1), event(b, 2)],
                                            [event(c, 1), event(c, 2)]])
        assert stored[1] is None  # b's version 1 was taken: none of b's events stand
        assert [v.originator_version for v in app.recorder.select_events(b)] == [1]
        assert [v.originator_version for v in app.recorder.select_events(c)] == [1, 2]
        first, third = stored[0], stored[2]
        assert first is not None and third is not None
        ids = first + third
        assert ids == sorted(ids) and len({i >> ID_SHIFT for i in ids}) == 1  # one transaction
        follower = Follower(app.recorder)
        assert skipped(app, follower) == []
        assert follower.seen == [follower.seen[0], *ids]


def test_appends_that_arrive_while_one_runs_go_together():
    release, running = threading.Event(), threading.Event()
    groups: list[int] = []

    def run(parts: Any) -> list[list[int] | None]:
        groups.append(len(parts))
        running.set()
        release.wait(10)
        return [None if part[0].originator_version == 0 else [1] for part in parts]

    group = GroupCommit(run)
    results: dict[int, Any] = {}

    def append(i: int, version: int) -> None:
        try:
            results[i] = group.append([event(uuid.uuid4(), version)])
        except IntegrityError as e:
            results[i] = e

    first = threading.Thread(target=append, args=(0, 1))
    first.start()
    assert running.wait(10)
    later = [threading.Thread(target=append, args=(i, i - 1)) for i in (1, 2)]
    for t in later:
        t.start()
    while len(group.queue) < 2:
        threading.Event().wait(0.005)
    release.set()
    for t in [first, *later]:
        t.join(10)
    assert groups == [1, 2]  # the lone first, then the two that queued behind it
    assert results[0] == [1] and results[2] == [1]
    assert isinstance(results[1], IntegrityError)  # its race lost, alone
    assert not group.busy and not group.queue


def test_group_commit_is_off_unless_asked_for(pg):
    with open_rooms(pg) as app:
        assert app.recorder.group is None


def test_commands_of_many_threads_in_one_process_are_grouped_and_verify(pg):
    threads, pairs = 8, 6
    with open_rooms(pg, settings=Settings(pg_group_commit=True)) as app:
        rooms = [[app.create_room(TWO_SEATS)["room"] for _ in range(pairs)]
                 for _ in range(threads)]
        follower = Follower(app.recorder)
        start = threading.Barrier(threads)
        failures: list[Any] = []

        def play(own: list[str]) -> None:
            start.wait()
            for room in own:
                begun = app.execute(room, "richese", {"type": "begin_search",
                                                      "card": "nullentropy-box"})
                chosen = app.execute(room, "richese", {
                    "type": "select_card", "search": begun["events"][-1]["search"],
                    "card": "shield-1"}) if begun["ok"] else begun
                if not chosen["ok"]:
                    failures.append(chosen)

        workers = [threading.Thread(target=play, args=(own,)) for own in rooms]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert failures == []
        assert skipped(app, follower) == [] and follower.in_room_order()
        for room in (room for own in rooms for room in own):
            assert audit_room(app, room)["ok"], room
        transactions = [i >> ID_SHIFT for i in follower.seen]
        # Some transaction carried appends of more than one room: commands were grouped.
        by_transaction: dict[int, set[Any]] = {}
        for i, room_versions in zip(transactions, follower.rooms_seen, strict=True):
            by_transaction.setdefault(i, set()).add(room_versions)
        assert max(len(r) for r in by_transaction.values()) > 1
