"""Upgrades keep old streams replaying: every golden corpus (tests/golden/, written by
scripts/make_golden.py with the version of its label) is imported into a fresh store
and must replay, audit clean, to the state hash and the views it recorded.

A view, and the room's state, may gain fields in a later version (a client that
ignores them sees what it saw; a state field added with its default changes
nothing the old events meant); a field that was recorded must still be there with
the value it had. The recorded `state_hash` is checked exactly on the state as
recorded: the replayed state cut down to the recorded fields hashes to it.
A signed corpus comes with the test key that signed it. `v1` was written before
the chain was signed: it carries no signature, and an unsigned chain is damage
whatever its age (RULES 8), so no store takes it; it stays as evidence that the
old payloads still upcast and replay with the rules alone.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson
import pytest

from dune_ledger.application.audit import audit_room
from dune_ledger.domain.game import EVENT_TYPES
from dune_ledger.infrastructure.storage import open_rooms
from dune_ledger.infrastructure.transfer import ImportRefused, import_rooms, parse_export
from tests.support import replayed

GOLDEN = Path(__file__).parent / "golden"
CORPORA = sorted(GOLDEN.glob("*.jsonl"))
SIGNED = [c for c in CORPORA if c.with_suffix(".key").exists()]
UNSIGNED = [c for c in CORPORA if not c.with_suffix(".key").exists()]


# View fields a later version retired on purpose, each with where it went: a recorded
# view may miss these, and nothing else. Add one only with the change that retires it.
RETIRED = {
    "gift": "issue 17: a gift offer is a response window (`response`, kind gift)",
}
# Descriptions of an action's free field that a later version redescribed on purpose, each
# with why: a recorded one may be shown otherwise, and no other. Add one only with the
# change that redescribes it.
REDESCRIBED = {
    ".free.territory": "issue 36: territories are the printed map's, offered as a choice",
}


def reworded(recorded: list[dict[str, Any]], log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The recorded log with each entry's `text` as the log words it now: a log line is
    words for people, and it may be reworded (issue 27: the game's names in place of
    ids); every other field must still be there with the value it had."""
    now = {e["seq"]: e["text"] for e in log}
    return [{**e, "text": now.get(e["seq"], e["text"])} for e in recorded]


def shows(actual: Any, recorded: Any, where: str = "") -> list[str]:
    """Where `actual` does not show what `recorded` showed (dicts may gain keys)."""
    if any(where.endswith(field) for field in REDESCRIBED) and isinstance(actual, dict):
        return []
    if isinstance(recorded, dict) and isinstance(actual, dict):
        return [problem for key, value in recorded.items()
                if not (where in ("", ".") and key in RETIRED and key not in actual)
                for problem in (shows(actual[key], value, f"{where}.{key}") if key in actual
                                else [f"{where}.{key} is gone"])]
    if isinstance(recorded, list) and isinstance(actual, list) and len(actual) == len(recorded):
        return [p for i, (a, r) in enumerate(zip(actual, recorded, strict=True))
                for p in shows(a, r, f"{where}[{i}]")]
    return [] if actual == recorded else [f"{where}: {actual!r} where {recorded!r} was shown"]


def cut(actual: Any, recorded: Any) -> Any:
    """`actual` with only the fields `recorded` has (lists item by item)."""
    if isinstance(recorded, dict) and isinstance(actual, dict):
        return {key: cut(actual[key], value) for key, value in recorded.items() if key in actual}
    if isinstance(recorded, list) and isinstance(actual, list) and len(actual) == len(recorded):
        return [cut(a, r) for a, r in zip(actual, recorded, strict=True)]
    return actual


def state_hash_of(dump: Any) -> str:
    """As application/audit.state_hash hashes a state's JSON dump."""
    return hashlib.sha256(orjson.dumps(dump, option=orjson.OPT_SORT_KEYS)).hexdigest()


def test_shows_allows_new_fields_only():
    assert shows({"a": 1, "b": {"c": [1, {"d": 2, "e": 3}]}}, {"a": 1, "b": {"c": [1, {"d": 2}]}}
                 ) == []
    assert shows({"a": 2}, {"a": 1}) == [".a: 2 where 1 was shown"]
    assert shows({}, {"a": 1}) == [".a is gone"]
    assert shows([1, 2], [1]) != []
    assert shows({"a": 1}, {"a": 1, "gift": None}) == []  # retired on purpose, at the top
    assert shows({"b": {}}, {"b": {"gift": None}}) == [".b.gift is gone"]
    text = {"kind": "text", "max_length": 64}
    assert shows({"free": {"territory": {"kind": "choice"}}}, {"free": {"territory": text}}
                 ) == []  # redescribed on purpose
    assert shows({"free": {"question": {"kind": "choice"}}}, {"free": {"question": text}}
                 ) != []


def domain_event_types() -> set[str]:
    """The event types the rules define (a test may register a probe type of its own)."""
    return {name for name, cls in EVENT_TYPES.items()
            if cls.__module__.startswith("dune_ledger.domain.")}


def test_there_is_a_corpus_and_together_they_hold_every_event_type():
    assert CORPORA, "no golden corpus: run python -m scripts.make_golden LABEL"
    held = set()
    for corpus in CORPORA:
        held |= {orjson.loads(line)["type"] for line in corpus.read_bytes().splitlines()}
    assert sorted(domain_event_types() - held) == []


@pytest.mark.parametrize("corpus", UNSIGNED, ids=[c.stem for c in UNSIGNED])
def test_an_unsigned_corpus_is_refused_by_a_store_and_upcasts_with_the_rules_alone(
        corpus: Path, tmp_path: Path):
    rooms = orjson.loads(corpus.with_suffix(".expected.json").read_bytes())["rooms"]
    exported = parse_export(corpus.read_bytes())
    with open_rooms(f"sqlite:///{tmp_path / 'golden.db'}",
                    key_file=str(tmp_path / "new.key")) as app:
        with pytest.raises(ImportRefused, match="not signed"):
            import_rooms(app, exported)
        assert list(app.room_ids()) == []
    assert {str(room.room) for room in exported} == set(rooms)
    for room in exported:
        seen = rooms[str(room.room)]
        assert len(room.lines) == seen["events"]
        *_, (state, _) = replayed(room.lines)  # the state after the last event
        dump = state.model_dump(mode="json")
        assert shows(dump, seen["state"]) == [], room.room
        assert state_hash_of(cut(dump, seen["state"])) == seen["state_hash"], room.room


@pytest.mark.parametrize("corpus", SIGNED, ids=[c.stem for c in SIGNED])
def test_a_golden_corpus_replays_to_what_it_recorded(corpus: Path, tmp_path: Path):
    record = orjson.loads(corpus.with_suffix(".expected.json").read_bytes())
    rooms = record["rooms"]
    key_file = str(corpus.with_suffix(".key"))
    with open_rooms(f"sqlite:///{tmp_path / 'golden.db'}", key_file=key_file) as app:
        stored = import_rooms(app, parse_export(corpus.read_bytes()))
        assert set(stored) == set(rooms)
        for room, seen in rooms.items():
            report = audit_room(app, room)
            assert report["ok"], {k: v for k, v in report["checks"].items() if not v["ok"]}
            assert report["events"] == seen["events"], room
            state = app.load(room).state.model_dump(mode="json")
            assert state_hash_of(state) == report["state_hash"]  # the audit's own hash
            assert shows(state, seen["state"]) == [], room
            assert state_hash_of(cut(state, seen["state"])) == seen["state_hash"], room
            assert shows(app.public_view(room), seen["public"]) == [], room
            log = app.public_log(room)
            assert all(isinstance(e["text"], str) and e["text"] for e in log), room
            assert shows(log, reworded(seen["log"], log)) == [], room
            for seat, view in seen["views"].items():
                assert shows(app.seat_view(room, seat), view) == [], (room, seat)
            # The replayed room takes commands again, signed from here on.
            again = app.execute(room, "emperor", {"type": "set_autopilot", "enabled": False})
            assert again["ok"] or again["error"]["code"] != "room_damaged", again
        assert all(audit_room(app, room)["ok"] for room in rooms)
