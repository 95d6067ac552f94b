"""What each seat may see (RULES 3.4, 4.4): the only place views are put together.

Each effect renders its own part (its declared `view`, a window kind's `shown`);
this module joins them to the room's public facts. A seat's view
shows its own spice, hand, reservations and receipts, and for everyone else
only counts and public facts. The candidate list of a search appears only in
its owner's view and only while it is open. The public view is a seat view
with nothing private. Projections and time travel build on these functions;
nothing else renders state for a player.
"""

from __future__ import annotations

from typing import Any

from dune_ledger.domain.actions import actions
from dune_ledger.domain.catalog import CARDS, card_objects
from dune_ledger.domain.effect import HOUSE
from dune_ledger.domain.events import Event
from dune_ledger.domain.responses import window_view
from dune_ledger.domain.state import RoomState


def _common(state: RoomState, seat: str | None) -> dict[str, Any]:
    top = state.discard[-1] if state.discard else None
    view: dict[str, Any] = {
        "room": state.room,
        "version": state.version,
        "mode": state.mode,
        "turn": state.turn,
        "phase": state.phase,
        "deck": {"count": len(state.deck)},
        "discard": {"count": len(state.discard), "top": CARDS[top].public() if top else None},
        "response": window_view(state, state.control.response, seat),
    }
    # Each effect's part: (state, the seat or None for the public view) -> its keys. A
    # part shows a seat only what that seat may know; the window kinds add theirs to
    # `response` (responses.WindowKind.shown).
    for part in HOUSE.views:
        view.update(part(state, seat))
    view["ended"] = False if state.ended is None else state.ended
    return view


def _other(state: RoomState, faction: str) -> dict[str, Any]:
    seat = state.seat(faction)
    return {"faction": seat.faction, "hand_count": len(seat.hand), "ally": seat.ally,
            "autopilot": seat.autopilot}


def seat_view(state: RoomState, faction: str) -> dict[str, Any]:
    seat = state.seat(faction)
    view = _common(state, faction)
    view["seat"] = faction
    view["me"] = {
        "faction": seat.faction,
        "spice": seat.spice,
        "hand": card_objects(seat.hand),
        "hand_limit": seat.limit,
        "ally": seat.ally,
        "reserved": state.reserved(faction),
        "autopilot": seat.autopilot,
    }
    view["seats"] = [_other(state, s.faction) for s in state.seats if s.faction != faction]
    view["actions"] = actions(state, faction)
    return view


def public_view(state: RoomState) -> dict[str, Any]:
    view = _common(state, None)
    view["seats"] = [_other(state, s.faction) for s in state.seats]
    return view


def seat_view_at(past: RoomState, now: RoomState, faction: str) -> dict[str, Any]:
    """A past view, as far as it is still the seat's to see now."""
    view = seat_view(past, faction)
    for forget in HOUSE.past_views:
        forget(view, now)
    return view


def public_entry(seq: int, version: int, event: Event, append: int) -> dict[str, Any] | None:
    """`append`: the version of the first event of the append `event` belongs to, which
    one command's lines share (versions are public)."""
    fields = event.public()
    if fields is None:
        return None
    return {"seq": seq, "version": version, "append": append, "type": event.type,
            "text": event.text(), **fields}

