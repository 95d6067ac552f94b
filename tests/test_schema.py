"""The OpenAPI describes exactly what the server sends (issue 37): the schema is built
from the models (`infrastructure/http_models.py` over the shapes each effect declares,
`domain/shapes.py`), and every view of every golden state validates against it, with
no field missing and none extra, as does every public event and log entry.

The golden corpora (tests/golden/) are replayed with the rules alone, event by event:
at each version the public view and every seat's view, with its actions, are checked,
so open searches, windows, decisions and gifts of every kind the corpora hold are too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from dune_ledger.application.rooms import public_events
from dune_ledger.domain.game import (
    COMMAND_TYPES,
    OPERATOR_COMMANDS,
    Event,
    RoomState,
    public_entry,
    public_view,
    seat_view,
)
from dune_ledger.infrastructure.transfer import parse_export
from scripts.client_types import openapi
from tests.support import replayed, schema_problems, schema_validator

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    return openapi()


def golden_states() -> Iterator[tuple[str, RoomState, Event]]:
    """Every state of every golden room, after each of its events (that event too)."""
    for corpus in sorted(GOLDEN.glob("*.jsonl")):
        for room in parse_export(corpus.read_bytes()):
            for state, event in replayed(room.lines):
                yield f"{corpus.stem}:{room.room}:{state.version}", state, event


def test_every_view_event_and_entry_of_every_golden_state_fits_the_schema(
        spec: dict[str, Any]) -> None:
    seat, public = schema_validator(spec, "SeatView"), schema_validator(spec, "PublicView")
    event, entry = schema_validator(spec, "PublicEvent"), schema_validator(spec, "LogEntry")
    action = schema_validator(spec, "Action")
    seen: dict[str, int] = {"views": 0, "events": 0, "actions": 0}
    kinds: set[str] = set()
    checked: set[bytes] = set()  # actions repeat from view to view: each checked once
    for where, state, fact in golden_states():
        assert schema_problems(public, public_view(state)) == [], where
        for s in state.seats:
            view = seat_view(state, s.faction)
            assert schema_problems(seat, {**view, "actions": []}) == [], (where, s.faction)
            for listed in view["actions"]:
                key = orjson.dumps(listed)
                if key not in checked:
                    assert schema_problems(action, listed) == [], (where, s.faction)
                    checked.add(key)
            seen["views"] += 1
            seen["actions"] += len(view["actions"])
            kinds.update(a["type"] for a in view["actions"])
            if view["response"]:
                kinds.add("window:" + view["response"]["kind"])
            if view["decision"]:
                kinds.add("decision:" + view["decision"]["kind"])
        shown = public_entry(1, state.version, fact, state.version)
        if shown is not None:
            assert schema_problems(entry, shown) == [], where
            for answered in public_events([_Recorded(fact, state.version)]):
                assert schema_problems(event, answered) == [], where
            seen["events"] += 1
    assert seen["views"] > 2_000 and seen["events"] > 500 and seen["actions"] > 10_000, seen
    # The corpora hold every kind of window and decision, and most actions.
    assert {"window:gift", "window:semuta", "window:ambassador_income",
            "window:ambassador_bonus", "decision:nullentropy", "decision:ambassador",
            "decision:ambassador_copy", "select_card", "respond", "answer_truthtrance"
            } <= kinds, sorted(kinds)


class _Recorded:
    """What `public_events` reads of a stored record."""

    def __init__(self, fact: Event, version: int) -> None:
        self.fact, self.type, self.originator_version = fact, fact.type, version


def test_the_schema_refuses_a_missing_field_an_extra_one_and_a_wrong_type(
        spec: dict[str, Any]) -> None:
    where, state, _ = next(s for s in golden_states() if s[1].search is not None)
    owner = state.search.owner if state.search else ""
    view = orjson.loads(orjson.dumps(seat_view(state, owner)))
    check = schema_validator(spec, "SeatView")
    assert schema_problems(check, view) == [], where
    assert schema_problems(check, {k: v for k, v in view.items() if k != "semuta"})
    assert schema_problems(check, {**view, "hidden": 1})
    box = view["nullentropy"]
    assert schema_problems(check, {**view, "nullentropy": {**box, "search": {"event": "e3"}}})
    assert schema_problems(check, {**view, "me": {**view["me"], "spice": "10"}})
    assert schema_problems(check, {**view, "actions": [{"type": "select_card", "search": "e3"}]})
    assert schema_problems(check, {**view, "ended": True})


def test_the_command_body_is_a_seats_command_or_the_operators(spec: dict[str, Any]) -> None:
    """POST /rooms/{room}/commands takes either, told apart by `type`, with either token;
    a seat token sending the operator's (or the operator token a seat's) is 403."""
    post = spec["paths"]["/rooms/{room}/commands"]["post"]
    assert post["security"] == [{"seatToken": []}, {"operatorToken": []}]
    assert "forbidden" in str(post["responses"]["403"])
    schemas = spec["components"]["schemas"]
    named = {name: set(schemas[name]["discriminator"]["mapping"])
             for name in ("Command", "SeatCommand", "OperatorCommand")}
    assert named["SeatCommand"] == set(COMMAND_TYPES)
    assert named["OperatorCommand"] == set(OPERATOR_COMMANDS) >= {"end_room"}
    assert named["Command"] == named["SeatCommand"] | named["OperatorCommand"]
    check = schema_validator(spec, "Command")
    assert schema_problems(check, {"type": "end_room", "command_id": "end-1"}) == []
    assert schema_problems(check, {"type": "draw"}) == []
    assert schema_problems(check, {"command_id": "end-1"})
    assert schema_problems(check, {"type": "end_room", "room": "r"})
