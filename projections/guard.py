"""A last line of defence for hidden information, applied before a row is stored.

The views come from `domain.views`; this module does not shape them, it only
refuses to store one that names a card its reader may not know:

- the public view and public log entries never name a card in the deck, a
  card of an open search's inventory below the top of the pile (the
  candidates and the pile order), nor the card a search retrieved;
- a seat's view names nothing beyond the public view except that seat's own
  hand, its own open search's candidates, its own receipts and a gift offered
  by or to it.

A refused row is replaced by a withheld marker (fail closed) rather than
stopping the projection, so one bad rule module cannot blind every room.
"""

from __future__ import annotations

import re
from typing import Any

from domain.catalog import CARDS
from domain.events import CardRetrieved, Event
from domain.nullentropy import candidates
from domain.state import RoomState

TOKEN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def card_ids(data: Any) -> set[str]:
    """Every card id named anywhere in a JSON-like value, in keys, values or text."""
    found: set[str] = set()
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if item in CARDS:
                found.add(item)
            elif "-" in item or " " in item:
                found.update(t for t in TOKEN.findall(item) if t in CARDS)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return found


def secret_to_all(state: RoomState) -> set[str]:
    """Cards nobody may see named: the deck, and an open search's inventory."""
    hidden = set(state.deck)
    if state.search is not None:
        top = state.discard[-1:]
        hidden.update(cid for cid in state.search.discard if cid not in top)
    return hidden


def public_leaks(state: RoomState, data: Any, event: Event | None = None) -> set[str]:
    hidden = secret_to_all(state)
    if isinstance(event, CardRetrieved):
        hidden.add(event.card)
    return card_ids(data) & hidden


def seat_leaks(state: RoomState, seat: str, view: Any, public_ids: set[str]) -> set[str]:
    allowed = set(public_ids) | set(state.seat(seat).hand)
    allowed.update(candidates(state, seat) or ())
    for r in state.receipts:
        if r.buyer == seat:
            allowed.update(c for c in (r.card, getattr(r, "bonus", None)) if c is not None)
    gift = state.gift
    if gift is not None and seat in (gift.get("giver"), gift.get("to")):
        allowed.add(gift["card"])
    return card_ids(view) - allowed


def withheld_view(state: RoomState, seat: str | None) -> dict[str, Any]:
    return {"room": state.room, "version": state.version, "seat": seat,
            "withheld": "this view was withheld: it would have shown hidden cards"}


def withheld_entry(entry: dict[str, Any]) -> dict[str, Any]:
    return {"seq": entry["seq"], "version": entry["version"], "type": entry["type"],
            "text": "(withheld: this entry would have shown hidden cards)"}
