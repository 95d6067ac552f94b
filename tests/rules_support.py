"""Helpers for the tests of the rules around the Box (Truthtrance, gifts, Distrans,
Guild, Semuta, commitments, autopilot): run a command, check a refusal changed
nothing, open and close a search around another command."""

from __future__ import annotations

from typing import Any

from dune_ledger.domain.catalog import room_cards
from dune_ledger.domain.game import Tx, initial_state
from dune_ledger.domain.layout import build_room, parse_layout
from dune_ledger.domain.nullentropy import candidates
from dune_ledger.domain.state import RoomState
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


# --- the Richese Ambassador room (RULES 4), shared by its domain, storage and bounds tests

EXPANSIONS = ["choam_richese", "ecaz_moritani"]
ALL_CARDS = [c.id for c in room_cards(tuple(EXPANSIONS))]
CACHE = {c.id for c in room_cards(tuple(EXPANSIONS)) if c.zone == "cache"}
RICHESE_TOKENS: dict[str, Any] = {
    "placed": [{"token": "richese", "territory": "arrakeen"},
               {"token": "fremen", "territory": "tueks-sietch"}],
    "cohort": ["richese", "bene_gesserit", "fremen", "guild", "ixians"],
    "used": [],
    "copy_pool": ["emperor", "choam", "atreides"],
}


def ambassador_seats(**hands: Any) -> list[dict[str, Any]]:
    """Ecaz allied with Harkonnen, an Emperor with a Karama, Atreides the entrant."""
    base: dict[str, dict[str, Any]] = {
        "ecaz": {"faction": "ecaz", "spice": 10, "hand": [], "ally": "harkonnen"},
        "harkonnen": {"faction": "harkonnen", "spice": 10, "hand": ["crysknife", "stunner"],
                      "ally": "ecaz"},
        "emperor": {"faction": "emperor", "spice": 10, "hand": ["karama-1"]},
        "atreides": {"faction": "atreides", "spice": 10, "hand": []},
    }
    for faction, value in hands.items():
        if value is None:
            base.pop(faction, None)
        elif isinstance(value, dict):
            base[faction] = {"faction": faction, **value}
        else:
            base.setdefault(faction, {"faction": faction, "spice": 10})["hand"] = value
    return list(base.values())


def ambassador_layout(*, deck: list[str] | None = None, discard: list[str] | None = None,
           ambassadors: dict[str, Any] | None = None, **over: Any) -> dict[str, Any]:
    """A staged room; with an explicit deck every other card is out of the game."""
    raw: dict[str, Any] = {
        "mode": "advanced", "expansions": EXPANSIONS, "seed": 4, "bank": 100,
        "turn": 3, "phase": 6, "seats": ambassador_seats(),
        "discard": discard if discard is not None else ["baliset", "shield-1"],
        "ambassadors": ambassadors or RICHESE_TOKENS,
    }
    raw.update(over)
    if deck is not None:
        placed = set(deck) | set(raw["discard"])
        for s in raw["seats"]:
            placed |= set(s.get("hand", []))
        raw["deck"] = deck
        raw["removed"] = [c for c in ALL_CARDS if c not in placed and c not in CACHE]
    return raw


def ambassador_room(**kw: Any) -> RoomState:
    """A room staged by `ambassador_layout`."""
    return initial_state(build_room(parse_layout(ambassador_layout(**kw)), "room-a", Counting(9)))


def enter(state: RoomState, who: str = "atreides", where: str = "arrakeen",
          via: str = "movement") -> RoomState:
    return run(state, who, {"type": "enter_territory", "territory": where, "via": via}).state


def trigger(state: RoomState, beneficiary: str = "ecaz") -> Tx:
    d = state.control.decision
    assert d is not None and d.kind == "ambassador"
    return run(state, "ecaz", {"type": "ambassador_decide", "event": d.event, "trigger": True,
                               "beneficiary": beneficiary})


HARK = ["crysknife", "stunner", "chaumas", "chaumurky", "ellaca-drug", "gom-jabbar",
        "lasgun", "slip-tip"]


__all__ = ["BOX", "Counting", "layout", "snapshot", "state_of", "run", "rejected", "code",
           "types", "open_search", "close_search", "assert_lock_round_trip", "ALL_CARDS", "HARK",
           "ambassador_layout", "ambassador_room", "ambassador_seats", "enter", "trigger"]
