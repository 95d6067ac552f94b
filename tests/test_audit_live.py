"""The audit of a room that is being played: commands land while it runs.

The audit checks the room at the version it read. A write landing after that
read is no finding: the live load is compared at the audited version, and the
read models (which may have moved on) against a rebuild from the room's own
events up to where they stand. Another app on the same storage writes, as a
player's process would; real SQLite files and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

import pytest

from dune_ledger.application.audit import audit_room
from dune_ledger.application.rooms import RoomsApp
from dune_ledger.infrastructure.settings import Settings
from dune_ledger.infrastructure.storage import open_rooms
from tests.support import HANG, long_room, tamper


@contextmanager
def two_apps(url: str) -> Iterator[tuple[RoomsApp, RoomsApp]]:
    """An auditor and a player's process, on the same storage."""
    auditor = open_rooms(url, settings=Settings(snapshot_interval=20))
    player = open_rooms(url, settings=Settings(snapshot_interval=20))
    try:
        yield auditor, player
    finally:
        auditor.close()
        player.close()


def play_after_the_read(auditor: RoomsApp, room: str, play: Callable[[], None]) -> list[int]:
    """Run `play` just after the auditor first reads the room's whole stream; returns
    the version that read ended at."""
    read = auditor.stored_records
    seen: list[int] = []

    def records(room_id: UUID, gt: int | None = None, lte: int | None = None) -> Any:
        got = read(room_id, gt, lte)
        if not seen and gt is None and lte is None and str(room_id) == room:
            seen.append(got[-1].originator_version)
            play()
        return got

    auditor.stored_records = records  # type: ignore[method-assign]
    return seen


def draw_and_discard(player: RoomsApp, room: str, seat: str = "emperor") -> None:
    drawn = player.execute(room, seat, {"type": "draw"})
    assert drawn["ok"], drawn
    card = player.load(room).state.seat(seat).hand[-1]
    assert player.execute(room, seat, {"type": "discard", "card": card})["ok"]


@pytest.mark.parametrize("projected_by", ["the auditor", "the player"])
def test_commands_landing_during_an_audit_are_no_finding(url: str, projected_by: str) -> None:
    with two_apps(url) as (auditor, player):
        room = long_room(player, draws=30)
        assert player.read_models is not None

        def play() -> None:
            draw_and_discard(player, room)
            if projected_by == "the player":  # as a worker would, before the audit looks
                player.read_models.catch_up()  # type: ignore[union-attr]

        seen = play_after_the_read(auditor, room, play)
        report = audit_room(auditor, room)
        assert seen and report["version"] == seen[0]
        assert player.load(room).version > seen[0]  # the room moved on during the audit
        assert report["ok"], report["checks"]
        assert report["checks"]["live_state_matches"] == {"ok": True, "details": []}
        assert report["checks"]["read_models_match"] == {"ok": True, "details": []}
        # The room as it stands now audits clean too, at its new version.
        assert audit_room(auditor, room)["version"] == player.load(room).version


def test_read_models_that_moved_on_are_still_compared(url: str) -> None:
    """The rows of events written after the audit's read are compared too: a wrong one
    is a finding, not skipped."""
    with two_apps(url) as (auditor, player):
        room = long_room(player, draws=30)

        def play() -> None:
            draw_and_discard(player, room)
            player.read_models.catch_up()  # type: ignore[union-attr]
            last = player.load(room).version
            tamper(url, "UPDATE dl_public_log SET entry = replace(entry, 'emperor', "
                        "'harkonnen') WHERE room = ? AND version = ?", room, last)

        play_after_the_read(auditor, room, play)
        report = audit_room(auditor, room)
        check = report["checks"]["read_models_match"]
        assert check["ok"] is False and report["ok"] is False
        assert any("public log differs" in d for d in check["details"])
        assert report["checks"]["live_state_matches"]["ok"] is True


def test_a_process_between_storing_the_log_and_the_views_is_no_finding(url: str) -> None:
    """A projector stores a batch's log entries, then its views, in two transactions:
    the audit may find the log of a command whose views are not stored yet. Both are
    compared, each at its own version; the views behind the log are looked at again,
    and they moved (the auditor's own catch-up stored them)."""
    with two_apps(url) as (auditor, player):
        room = long_room(player, draws=30)
        models = auditor.read_models
        assert models is not None and player.read_models is not None
        public_log = player.read_models.projectors[0]  # type: ignore[attr-defined]
        assert public_log.name == "public_log"
        store = models.store  # type: ignore[attr-defined]
        read_log = store.log_at
        looks: list[tuple[int, list[tuple[int, str]]]] = []

        def log_at(room_id: str, **kwargs: Any) -> tuple[int, list[tuple[int, str]]]:
            if not looks:  # the first look: a command lands, its log entries stored alone
                draw_and_discard(player, room)
                recorder = player.recorder
                notes = recorder.select_notifications(
                    start=models.position() + 1, limit=100)  # type: ignore[attr-defined]
                public_log.process(player.read_models.decode(notes))  # type: ignore[attr-defined]
            looks.append(read_log(room_id, **kwargs))
            return looks[-1]

        store.log_at = log_at
        report = audit_room(auditor, room)
        assert report["checks"]["read_models_match"] == {"ok": True, "details": []}
        assert report["ok"]
        assert len(looks) == 2  # the views were behind the log at the first look
        assert looks[0][0] == player.load(room).version > report["version"]


def test_commands_landing_during_an_audit_in_parts_are_no_finding(url: str) -> None:
    """The parts see the room moved on (their last part reads on to the newest event,
    the read models too); they leave it to one process, which reports it clean."""
    from tests.support import PART_MIN

    with two_apps(url) as (auditor, player):
        room = long_room(player, draws=60)
        read = auditor.records
        played: list[int] = []

        def records(room_id: UUID, gt: int | None = None, lte: int | None = None) -> Any:
            got = read(room_id, gt, lte)
            if not played and lte is not None and gt is None:  # the first part's read
                played.append(got[-1].originator_version)
                draw_and_discard(player, room)
            return got

        auditor.records = records  # type: ignore[method-assign]
        report = audit_room(auditor, room, 2, PART_MIN)
        assert played, "the audit was not made in parts"
        assert report["ok"], report["checks"]
        assert report["version"] <= player.load(room).version


def keep_playing(url: str, room: str, seat: str, stop: Any) -> None:
    """A player's process: `seat` draws and discards until told to stop, the read
    models caught up now and then, as a server's reads would."""
    with open_rooms(url) as app:
        turn = 0
        while not stop.is_set():
            # Two writers on one room at full speed: a command may be answered `busy`
            # (the room kept changing), and is played again at the next turn.
            app.execute(room, seat, {"type": "draw"})
            hand = app.load(room).state.seat(seat).hand
            if hand:
                app.execute(room, seat, {"type": "discard", "card": hand[-1]})
            turn += 1
            if turn % 3 == 0:
                app.read_models.catch_up()  # type: ignore[union-attr]


def test_audits_while_two_processes_play_find_nothing(url: str) -> None:
    """The drill: two processes play a room as fast as they can while it is audited
    again and again, in one process and in parts. Every report is clean."""
    import multiprocessing

    from tests.support import PART_MIN

    context = multiprocessing.get_context("spawn")
    with two_apps(url) as (auditor, player):
        room = long_room(player, draws=60)
        stop = context.Event()
        players = [context.Process(target=keep_playing, args=(url, room, seat, stop))
                   for seat in ("emperor", "harkonnen")]
        for process in players:
            process.start()
        try:
            start = auditor.load(room).version
            while auditor.load(room).version < start + 20:  # both are playing
                assert all(p.is_alive() for p in players)
            reports = [audit_room(auditor, room, processes, PART_MIN)
                       for _ in range(6) for processes in (1, 2)]
        finally:
            stop.set()
            for process in players:
                process.join(timeout=HANG)
        assert all(p.exitcode == 0 for p in players)
        assert [r["checks"] for r in reports if not r["ok"]] == []
        versions = [r["version"] for r in reports]
        assert versions == sorted(versions) and versions[0] < versions[-1]
        assert audit_room(auditor, room)["ok"]
