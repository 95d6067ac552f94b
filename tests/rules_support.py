"""Helpers for the tests of the rules around the Box (Truthtrance, gifts, Distrans,
Guild, Semuta, commitments, autopilot): run a command, check a refusal changed
nothing, open and close a search around another command."""

from __future__ import annotations

from typing import Any

from domain.nullentropy import candidates
from domain.rules import Tx
from domain.state import RoomState
from tests.support import Counting, layout, rejected, run, snapshot, state_of, types

BOX = "nullentropy-box"


def code(state: RoomState, actor: str, command: dict[str, Any]) -> str:
    return rejected(state, actor, command).code


def open_search(state: RoomState, owner: str = "richese", box: str = BOX) -> RoomState:
    tx = run(state, owner, {"type": "begin_search", "card": box})
    assert tx.state.search is not None, "the test pile needs two eligible cards"
    return tx.state


def close_search(state: RoomState, card: str | None = None) -> Tx:
    search = state.search
    assert search is not None
    pick = card or (candidates(state, search.owner) or [])[0]
    return run(state, search.owner, {"type": "select_card", "search": search.event,
                                     "card": pick})


def without_search(state: RoomState) -> dict[str, Any]:
    """The state dump minus what a search legitimately changes (fee, pile, hand, which
    pile cards the public saw last)."""
    dump = snapshot(state)
    for key in ("bank", "discard", "version", "search", "pile_unseen"):
        dump.pop(key)
    for seat in dump["seats"]:
        seat.pop("hand")
        seat.pop("spice")
    return dump


def assert_lock_round_trip(state: RoomState, actor: str, command: dict[str, Any]) -> RoomState:
    """Refused with `locked` during a search; everything else restored when it closes."""
    searching = open_search(state)
    assert code(searching, actor, command) == "locked"
    closed = close_search(searching).state
    before, after = without_search(state), without_search(closed)
    assert after == before
    return closed


__all__ = ["BOX", "Counting", "layout", "snapshot", "state_of", "run", "rejected", "code",
           "types", "open_search", "close_search", "assert_lock_round_trip"]
