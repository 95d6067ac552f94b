"""The autopilot index's rows: which seats of a room an autopilot plays, and whether the
worker must look at the room now. The projector writes them as events arrive; the store
fills a new index from the stored room states."""

from __future__ import annotations

import orjson

from dune_ledger.application import autopilot
from dune_ledger.domain.game import RoomState, seat_view

# room, JSON {faction: profile} ("{}": none left), an autopilot seat is asked now
Autopilot = tuple[str, str, bool]


def seats_json(seats: dict[str, str]) -> str:
    return orjson.dumps(seats, option=orjson.OPT_SORT_KEYS).decode()


def autopilot_row(room: str, state: RoomState) -> Autopilot:
    """The room's autopilot seats, and whether the worker must look at it now: one of
    them is asked for something, or a window with a deadline is open."""
    seats: dict[str, str] = {s.faction: s.autopilot for s in state.seats
                             if s.autopilot is not None}
    window = state.control.response
    due = (window is not None and window.deadline is not None) or any(
        autopilot.has_prompt(seat_view(state, faction)) for faction in seats)
    return room, seats_json(seats), due


def autopilot_entry(room: str, state_json: str) -> Autopilot:
    return autopilot_row(room, RoomState.model_validate_json(state_json))
