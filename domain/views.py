"""What each seat may see (RULES 3.4, 4.4): the only place views are shaped.

A seat's view shows its own spice, hand, reservations and receipts, and
for everyone else only counts and public facts. The candidate list of a
search appears only in its owner's view and only while it is open. The
public view is a seat view with nothing private. Projections and time
travel build on these functions; nothing else renders state for a player.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from domain import fairness
from domain.actions import actions
from domain.catalog import CARDS
from domain.errors import Rejection
from domain.events import Event
from domain.gifts import offer_of, offered_to
from domain.nullentropy import candidates, check_begin, full_hand_exchange
from domain.responses import KINDS, waiting
from domain.semuta import semuta_view
from domain.state import Decision, ResponseWindow, RoomState

FULL_HAND_NOTICE = (
    "Your hand is at its limit: the Box leaves as the card you take arrives "
    "(provisional full-hand exchange)."
)


def card_objects(ids: Iterable[str]) -> list[dict[str, str]]:
    return [CARDS[cid].public() for cid in ids]


def public_decision(d: Decision | None) -> dict[str, Any] | None:
    if d is None:
        return None
    return {"kind": d.kind, "event": d.event, "player": d.player, **d.data.get("public", {})}


def public_response(w: ResponseWindow | None, state: RoomState) -> dict[str, Any] | None:
    """RULES 4.4 / INTERFACE: the window's kind, event, passes, who is still waiting
    and its deadline: all public, all from public facts."""
    if w is None:
        return None
    passes = w.passes
    if w.kind == "semuta":
        passes = [f for f in w.data.get("passed", []) if f not in w.data.get("hidden_passes", [])]
    return {"kind": w.kind, "event": w.event, "passes": list(passes),
            "waiting": waiting(state, w) if w.kind in KINDS else [],
            "deadline": w.deadline, **w.data.get("public", {})}


def _common(state: RoomState) -> dict[str, Any]:
    top = state.discard[-1] if state.discard else None
    return {
        "room": state.room,
        "version": state.version,
        "mode": state.mode,
        "turn": state.turn,
        "phase": state.phase,
        "deck": {"count": len(state.deck)},
        "discard": {"count": len(state.discard), "top": CARDS[top].public() if top else None},
        "decision": public_decision(state.control.decision),
        "response": public_response(state.control.response or offer_of(state), state),
        "search": _public_search(state),
        "ambassador": _public_ambassador(state),
        "truthtrance": _public_part(state.truthtrance),
        "semuta": semuta_view(state, None),
        "fairness": fairness.view(state),
        "ended": False if state.ended is None else state.ended,
    }


def _public_search(state: RoomState) -> dict[str, Any] | None:
    s = state.search
    return None if s is None else {"event": s.event, "owner": s.owner, "box": s.box}


def _public_ambassador(state: RoomState) -> dict[str, Any] | None:
    amb = state.ambassadors
    if amb is None:
        return None
    return {
        "placed": dict(sorted(amb.placed.items())),
        "used": list(amb.used),
        "removed": list(amb.removed),
        "cohort_count": len(amb.cohort),
        "entry": _public_entry(state, amb.entry),
    }


def _public_entry(state: RoomState, entry: dict[str, Any] | None) -> dict[str, Any] | None:
    """RULES 4.4: the stage, the payer and counts; never a card or a reason."""
    if entry is None:
        return None
    receipt = next((r for r in state.receipts if r.event == entry["event"]), None)
    return {
        "event": entry["event"], "entrant": entry["entrant"], "token": entry["token"],
        "territory": entry["territory"], "via": entry["via"], "stage": entry["stage"],
        "beneficiary": entry.get("beneficiary"),
        "payer": None if receipt is None else receipt.buyer,
        "amount": 0 if receipt is None else receipt.amount,
        "cards": 0 if receipt is None else 1 + (receipt.bonus is not None),
    }


def _public_part(part: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if part is None else dict(part.get("public", {}))


def _other(state: RoomState, faction: str) -> dict[str, Any]:
    seat = state.seat(faction)
    return {"faction": seat.faction, "hand_count": len(seat.hand), "ally": seat.ally,
            "autopilot": seat.autopilot}


def nullentropy_control(state: RoomState, faction: str) -> dict[str, Any] | None:
    """The owner's Box control: availability before payment, candidates after."""
    seat = state.seat(faction)
    search = state.search if state.search and state.search.owner == faction else None
    box = search.box if search else next((c for c in seat.hand if CARDS[c].is_box), None)
    if box is None:
        return None
    try:
        check_begin(state, faction, box)
        blocked = None
    except Rejection as r:
        blocked = r.code
    # The Box stays in hand while its owner chooses, so the flag holds throughout.
    exchange = full_hand_exchange(state, faction)
    cards = candidates(state, faction)
    control: dict[str, Any] = {
        "card": CARDS[box].public(),
        "blocked": blocked,
        "full_hand_exchange": exchange,
        "search": None if search is None else {
            "event": search.event,
            "cards": None if cards is None else card_objects(cards),
        },
    }
    if exchange:
        control["notice"] = FULL_HAND_NOTICE
    return control


def seat_view(state: RoomState, faction: str) -> dict[str, Any]:
    seat = state.seat(faction)
    view = _common(state)
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
    view["nullentropy"] = nullentropy_control(state, faction)
    view["semuta"] = semuta_view(state, faction)  # adds whether this seat may react
    offered = offered_to(state, faction)
    if offered is not None and view["response"] is not None:
        view["response"]["card"] = offered  # the gift, for the giver and the ally only
    view["receipts"] = [r.model_dump(mode="json") for r in state.receipts if r.buyer == faction]
    decision = state.control.decision
    if decision is not None and decision.player == faction and view["decision"] is not None:
        view["decision"].update(decision.data.get("private", {}))  # e.g. a BG copy pool
    view["actions"] = actions(state, faction)
    return view


def public_view(state: RoomState) -> dict[str, Any]:
    view = _common(state)
    view["seats"] = [_other(state, s.faction) for s in state.seats]
    return view


def seat_view_at(past: RoomState, now: RoomState, faction: str) -> dict[str, Any]:
    """A past view: a search's candidates vanish once that search has closed."""
    view = seat_view(past, faction)
    box = view.get("nullentropy")
    if box and box["search"] is not None:
        still_open = now.search is not None and now.search.event == box["search"]["event"]
        if not still_open:
            box["search"]["cards"] = None
            view["actions"] = [a for a in view["actions"] if a["type"] != "select_card"]
    return view


def public_entry(seq: int, version: int, event: Event) -> dict[str, Any] | None:
    fields = event.public()
    if fields is None:
        return None
    return {"seq": seq, "version": version, "type": event.type, "text": event.text(), **fields}


def public_log(events: Iterable[tuple[int, Event]]) -> list[dict[str, Any]]:
    log: list[dict[str, Any]] = []
    for version, event in events:
        entry = public_entry(len(log) + 1, version, event)
        if entry is not None:
            log.append(entry)
    return log
