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

from application.audit import audit_room
from application.rooms import RoomsApp
from infrastructure.storage import open_rooms
from tests.support import long_room
from tests.test_audit_parts import tamper


@contextmanager
def two_apps(url: str) -> Iterator[tuple[RoomsApp, RoomsApp]]:
    """An auditor and a player's process, on the same storage."""
    auditor = open_rooms(url, DUNE_LEDGER_SNAPSHOT_INTERVAL="20")
    player = open_rooms(url, DUNE_LEDGER_SNAPSHOT_INTERVAL="20")
    try:
        yield auditor, player
    finally:
        auditor.close()
        player.close()


def play_after_the_read(auditor: RoomsApp, room: str, play: Callable[[], None]) -> list[int]:
    """Run `play` just after the auditor first reads the room's whole stream; returns
    the version that read ended at."""
    read = auditor.records
    seen: list[int] = []

    def records(room_id: UUID, gt: int | None = None, lte: int | None = None) -> Any:
        got = read(room_id, gt, lte)
        if not seen and gt is None and lte is None and str(room_id) == room:
            seen.append(got[-1].originator_version)
            play()
        return got

    auditor.records = records  # type: ignore[method-assign]
    return seen


def draw_and_discard(player: RoomsApp, room: str, seat: str = "emperor") -> None:
    assert player.execute(room, seat, {"type": "draw"})["ok"]
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
    the audit may read the log of a command whose views are not stored yet. It looks
    again, and the player's process (here, the auditor's own catch-up) stores them."""
    with two_apps(url) as (auditor, player):
        room = long_room(player, draws=30)
        models = auditor.read_models
        assert models is not None and player.read_models is not None
        public_log = player.read_models.projectors[0]  # type: ignore[attr-defined]
        assert public_log.name == "public_log"
        store = models.store  # type: ignore[attr-defined]
        read_log = store.log
        looks: list[int] = []

        def log(room_id: str) -> list[str]:
            if not looks:  # the first look: a command lands, its log entries stored alone
                draw_and_discard(player, room)
                recorder = player.recorder
                notes = recorder.select_notifications(
                    start=models.position() + 1, limit=100)  # type: ignore[attr-defined]
                public_log.process(player.read_models.decode(notes))  # type: ignore[attr-defined]
            looks.append(1)
            return read_log(room_id)

        store.log = log
        report = audit_room(auditor, room)
        assert report["checks"]["read_models_match"] == {"ok": True, "details": []}
        assert report["ok"]
        assert len(looks) == 2  # the second look found the views stored


def test_commands_landing_during_an_audit_in_parts_are_no_finding(url: str) -> None:
    """The parts see the room moved on (their last part reads on to the newest event,
    the read models too); they leave it to one process, which reports it clean."""
    from tests.test_audit_parts import PART_MIN

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
