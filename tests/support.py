"""Shared helpers for the foundation tests: layouts, counting randomness, snapshots."""

from __future__ import annotations

import random
from typing import Any

from domain.layout import build_room, parse_layout
from domain.rules import initial_state
from domain.state import RoomState
from infrastructure.randomness import Source


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


def state_of(raw: dict[str, Any], seed: int = 5) -> RoomState:
    return initial_state(build_room(parse_layout(raw), "room-1", Counting(seed)))


def snapshot(state: RoomState) -> dict[str, Any]:
    return state.model_dump(mode="json")
