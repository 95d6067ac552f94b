"""Shared test helpers: layouts, counting randomness, running and refusing commands."""

from __future__ import annotations

import random
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from dune_ledger.application.rooms import RoomsApp, token_hash
from dune_ledger.domain.commands import parse_command
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.game import Tx, decide, initial_state
from dune_ledger.domain.layout import build_room, parse_layout
from dune_ledger.domain.state import RoomState
from dune_ledger.infrastructure.randomness import Source


class Counting(Source):
    """A seeded source that remembers every draw."""

    def __init__(self, seed: int = 1) -> None:
        super().__init__(random.Random(seed))


def layout(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "mode": "advanced",
        "expansions": ["choam_richese"],
        "seed": 11,
        "turn": 2,
        "phase": 6,
        "seats": [
            {"faction": "richese", "spice": 10, "hand": ["nullentropy-box", "crysknife"]},
            {"faction": "emperor", "spice": 10, "hand": ["karama-1"]},
            {"faction": "harkonnen", "spice": 6, "hand": ["shield-2", "chaumas"]},
        ],
        "discard": ["shield-1", "maula-pistol", "baliset"],
    }
    base.update(overrides)
    return base


def state_of(raw: dict[str, Any], seed: int = 5, secret: bytes | None = None) -> RoomState:
    """`secret`: a committed layout's (RULES 9)."""
    return initial_state(build_room(parse_layout(raw), "room-1", Counting(seed), secret))


def snapshot(state: RoomState) -> dict[str, Any]:
    return state.model_dump(mode="json")


def run(state: RoomState, actor: str, command: dict[str, Any],
        rng: Counting | None = None) -> Tx:
    return decide(state, actor, parse_command(command), rng or Counting())


def rejected(state: RoomState, actor: str, command: dict[str, Any]) -> Rejection:
    """The command is refused, and nothing changed: no event, no state, no draw."""
    before = snapshot(state)
    rng = Counting()
    with pytest.raises(Rejection) as info:
        run(state, actor, command, rng)
    assert snapshot(state) == before
    assert rng.draws == 0
    return info.value


def types(tx: Tx) -> list[str]:
    return [e.type for e in tx.events]


class Factory:
    """A randomness factory for RoomsApp that keeps every source it handed out."""

    def __init__(self) -> None:
        self.sources: list[Counting] = []

    def __call__(self, seed: int | None, version: int) -> Counting:
        source = Counting(version)
        self.sources.append(source)
        return source

    @property
    def draws(self) -> int:
        return sum(s.draws for s in self.sources)


def long_room(app: Any, draws: int = 100) -> str:
    """A room played by an app: draws and discards by two seats (about two events a
    command, reshuffles too), its read models caught up."""
    room = str(app.create_room(layout())["room"])
    for i in range(draws):
        seat = ("emperor", "harkonnen")[i % 2]
        assert app.execute(room, seat, {"type": "draw"})["ok"]
        card = app.load(room).state.seat(seat).hand[-1]
        assert app.execute(room, seat, {"type": "discard", "card": card})["ok"]
    app.read_models.catch_up()
    return room


def authenticate(app: RoomsApp, room_id: str, token: str) -> str | None:
    """The seat a token belongs to in the stored room, or None (the tests' check that
    a token stored or reissued is the one that opens the seat)."""
    room = app.load(room_id)
    digest = token_hash(token)
    for faction, stored in room.token_hashes.items():
        if secrets.compare_digest(stored, digest):
            return faction
    return None


@contextmanager
def opened(url: str, **env: str) -> Iterator[RoomsApp]:
    """The rooms app on `url`, closed at the end."""
    from dune_ledger.infrastructure.storage import open_rooms

    app = open_rooms(url, **env)
    try:
        yield app
    finally:
        app.close()
