"""Upgrades keep old streams replaying: every golden corpus (tests/golden/, written by
scripts/make_golden.py with the version of its label) is imported into a fresh store
and must replay, audit clean, to the state hash and the views it recorded."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from domain.events import EVENT_TYPES
from infrastructure.storage import open_rooms
from infrastructure.transfer import import_rooms, parse_export

GOLDEN = Path(__file__).parent / "golden"
CORPORA = sorted(GOLDEN.glob("*.jsonl"))


def expected(corpus: Path) -> dict[str, object]:
    return orjson.loads(corpus.with_suffix(".expected.json").read_bytes())


def test_there_is_a_corpus_and_together_they_hold_every_event_type():
    assert CORPORA, "no golden corpus: run scripts/make_golden.py LABEL"
    held = set()
    for corpus in CORPORA:
        held |= {orjson.loads(line)["type"] for line in corpus.read_bytes().splitlines()}
    assert sorted(set(EVENT_TYPES) - held) == []


@pytest.mark.parametrize("corpus", CORPORA, ids=[c.stem for c in CORPORA])
def test_a_golden_corpus_replays_to_what_it_recorded(corpus: Path, tmp_path: Path):
    record = expected(corpus)
    rooms = record["rooms"]
    assert isinstance(rooms, dict)
    with open_rooms(f"sqlite:///{tmp_path / 'golden.db'}") as app:
        stored = import_rooms(app, parse_export(corpus.read_bytes()))
        assert set(stored) == set(rooms)
        from application.audit import audit_room

        for room, seen in rooms.items():
            report = audit_room(app, room)
            assert report["ok"], report["checks"]
            assert (report["state_hash"], report["events"]) == (seen["state_hash"],
                                                                seen["events"]), room
            assert app.public_view(room) == seen["public"], room
            assert app.public_log(room) == seen["log"], room
            for seat, view in seen["views"].items():
                assert app.seat_view(room, seat) == view, (room, seat)
