"""A small run of scripts/kill_drill.py: SIGKILLed workers lose and duplicate nothing.

The drill kills a worker only once it has had a command accepted (on a loaded machine a
worker may take seconds to start): a slow machine makes the run longer, never empty."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

ROOT = Path(__file__).resolve().parent.parent
KILLS = 6


def run_drill(url: str, workdir: Path) -> dict:  # type: ignore[type-arg]
    done = subprocess.run(
        [sys.executable, "-m", "scripts.kill_drill", "--db", url, "--rooms", "6", "--workers", "3",
         "--kills", str(KILLS), "--seconds", "0", "--kill-every", "0.3", "--seed", "5",
         "--ack-timeout", "120", "--dir", str(workdir)],
        capture_output=True, timeout=KILLS * 120 + 120, cwd=ROOT,
    )
    report = orjson.loads(done.stdout)
    assert done.returncode == (0 if report["ok"] else 1), done.stderr.decode()
    return report  # type: ignore[no-any-return]


@pytest.mark.parametrize("backend", ["postgresql", "sqlite"])
def test_killed_workers_lose_nothing_and_apply_nothing_twice(
        backend: str, pg_url: str, tmp_path: Path) -> None:
    url = pg_url if backend == "postgresql" else f"sqlite:///{tmp_path / 'drill.db'}"
    report = run_drill(url, tmp_path / "journals")

    assert report["kills"] == KILLS + 3  # and the three at the end
    assert report["workers_crashed"] == 0 and report["workers_stalled"] == 0
    # Each worker killed on the way had a command accepted first: what was acknowledged
    # is what the checks below hold the store to.
    assert report["acknowledged_ok"] >= KILLS and report["events"] > report["rooms"]
    assert report["lost"] == [] and report["applied_twice"] == []
    assert report["rejected_but_stored"] == [] and report["repeats_differing"] == 0
    assert report["stored_without_ack"] == 0  # every in-flight command was re-sent and answered
    assert report["audit_failures"] == []
    assert report["open_searches_completed"] == report["open_searches_after_restart"]
    assert report["ok"] is True


def test_the_drill_would_notice_a_lost_or_doubled_command(tmp_path: Path) -> None:
    from dune_ledger.application.rooms import now
    from dune_ledger.domain.game import parse_command
    from dune_ledger.domain.rules import decide
    from dune_ledger.infrastructure.randomness import for_room
    from dune_ledger.infrastructure.storage import open_rooms
    from scripts import kill_drill as drill

    app = open_rooms("memory://")
    room = app.create_room(drill.LAYOUT)["room"]
    drill.deal(app, room)
    journal = drill.Journal(tmp_path / "slot-0.jsonl")
    ok = drill.send(app, journal, room, "emperor", {"type": "draw", "command_id": "kept"})
    assert ok["ok"]
    # An acknowledgement the store does not back: a lost command.
    journal.write({"k": "ack", "id": "ghost", "room": room, "seat": "emperor", "ok": True,
                   "version": 9, "resent": False, "code": None})
    # The same command id stored in two appends: a command applied twice.
    for _ in range(2):
        loaded = app.load(room)
        tx = decide(loaded.state, "emperor", parse_command({"type": "draw"}), for_room(None, 0))
        loaded.record(tx.events, tx.state, seat="emperor", command_id="twice", at=now())
        app.save(loaded)

    report = drill.verify(app, [room], [tmp_path / "slot-0.jsonl"])
    assert report["lost"] == ["ghost"]
    assert report["applied_twice"] == ["twice"]
    assert report["audit_failures"] == []


def test_the_drill_would_notice_an_unsigned_append() -> None:
    from dune_ledger.application.stream import Recorded
    from dune_ledger.domain.custody import CardDrawn
    from dune_ledger.infrastructure.storage import open_rooms
    from scripts import kill_drill as drill

    app = open_rooms("memory://")
    room = app.create_room(drill.LAYOUT)["room"]
    assert drill.verify(app, [room], [])["bad_signatures"] == []
    head = app.records(app.load(room).id)[-1]
    card = app.load(room).state.deck[0]
    forged = Recorded(head.originator_id, 2, CardDrawn(seat="emperor", card=card),
                      head.hash(), "emperor", "forged", 2, head.at)  # no signature
    app.recorder.insert_events([app.mapper.to_stored_event(forged)])  # type: ignore[arg-type]
    report = drill.verify(app, [room], [])
    assert report["bad_signatures"] == [f"{room}@2"]
