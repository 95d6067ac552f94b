"""A bounded schemathesis run against the HTTP API's own /openapi.json (RULES 8).

Every operation the schema names is called with generated requests, valid and
invalid (schemathesis' positive and negative modes): with no token, a wrong
token, a seat token of a real room or the operator token, on a real room or a
generated id. Whatever comes back:

- never a 5xx (a malformed body, path or header is the client's error);
- an error body has the command result shape (`ok: false`, `version`, `error`);
- no response names a card id hidden from its reader (tests/leaks.py), beyond
  what the request itself named.

The routes come from the schema, so a route added later is fuzzed too. Runs
are derandomized and bounded (max_examples per operation), so CI repeats them.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from dune_ledger.application.rooms import RoomsApp
from dune_ledger.infrastructure.http import create_app
from dune_ledger.infrastructure.storage import open_rooms
from tests import leaks
from tests.support import example

BOX_LAYOUT = example("box")

OPERATOR = "operator-token-for-the-fuzz"


class Target:
    """The app under test, with two rooms whose seats' tokens the fuzz may use: one
    with a paid search open (the owner's view holds candidates to leak), one free
    to play."""

    def __init__(self, rooms: RoomsApp) -> None:
        self.rooms = rooms
        self.tokens: dict[str, dict[str, str]] = {}
        for search in (True, False):
            created = rooms.create_room(BOX_LAYOUT)
            room = str(created["room"])
            self.tokens[room] = created["seats"]
            if search:
                assert rooms.execute(room, "richese", {"type": "begin_search",
                                                       "card": "nullentropy-box"})["ok"]
        self.app = create_app(rooms, admin_token=OPERATOR)


# Built when the module is collected: schemathesis reads the schema from the app then
# (its lazy fixture loader does not run on this pytest).
TARGET = Target(open_rooms("memory://"))
schema = schemathesis.openapi.from_asgi("/openapi.json", TARGET.app)


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    yield TARGET
    TARGET.rooms.close()


def pick(case: Any, salt: str) -> int:
    """A choice fixed by the generated case, so derandomized runs stay repeatable."""
    seen = json.dumps([case.method, case.path, case.path_parameters, case.query, case.body,
                       salt], default=str, sort_keys=True)
    return zlib.crc32(seen.encode())


def aim(case: Any, target: Target) -> tuple[str, str | None]:
    """Point most cases at a real room with a real token: the room, and the seat if any."""
    choice = pick(case, "aim") % 6
    rooms = sorted(target.tokens)
    room = rooms[pick(case, "room") % len(rooms)]
    if case.path_parameters and "room" in case.path_parameters and choice < 4:
        case.path_parameters["room"] = room
    headers = dict(case.headers or {})
    seat = None
    if case.path.endswith("/stream"):
        # A stream with a valid token never ends, and this in-process client waits for
        # the whole body: tests/test_stream.py runs it on a real server.
        choice = 5
    if choice in (0, 1, 2):
        tokens = target.tokens[room]
        seat = sorted(tokens)[pick(case, "seat") % len(tokens)]
        headers["Authorization"] = f"Bearer {tokens[seat]}"
    elif choice == 3:
        headers["Authorization"] = f"Bearer {OPERATOR}"
    case.headers = headers
    return room, seat


def sent_text(case: Any) -> str:
    return json.dumps([case.path_parameters, case.query, case.body], default=str)


@schema.parametrize()
@settings(max_examples=40, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
def test_the_api_never_fails_and_never_leaks(case: Any, target: Target) -> None:
    room, seat = aim(case, target)
    operator = case.headers.get("Authorization") == f"Bearer {OPERATOR}"
    response = case.call()
    where = f"{case.method} {case.formatted_path} as {seat or ('operator' if operator else '-')}"
    assert response.status_code < 500, (where, response.status_code, response.text[:300])
    if response.status_code >= 400:
        body = response.json()
        assert body["ok"] is False and isinstance(body["version"], int), (where, body)
        assert set(body["error"]) == {"code", "message"}, (where, body)
    if operator:
        return  # the operator's audit may name any card: the operator keeps custody
    state = leaks.true_state(target.rooms, room)
    hidden = (leaks.hidden_from_seat(state, seat) if seat is not None
              else leaks.hidden_from_public(state))
    named = leaks.named(response.text) - leaks.named(sent_text(case))
    assert not named & hidden, (where, sorted(named & hidden))
    if seat is None:
        assert not leaks.spice_paths(_json_or_none(response)), where


def _json_or_none(response: Any) -> Any:
    try:
        return response.json()
    except ValueError:
        return None
