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

from dune_ledger.domain import fairness, words
from dune_ledger.domain.actions import actions
from dune_ledger.domain.ambassador import PRICE
from dune_ledger.domain.catalog import CARDS
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.events import Event
from dune_ledger.domain.gifts import offer_of, offered_to
from dune_ledger.domain.nullentropy import FEE, candidates, check_begin, full_hand_exchange
from dune_ledger.domain.responses import KINDS, waiting
from dune_ledger.domain.semuta import semuta_view
from dune_ledger.domain.state import Decision, ResponseWindow, RoomState

FULL_HAND_NOTICE = (
    "Your hand is at its limit: the Box leaves as the card you take arrives "
    "(provisional full-hand exchange)."
)


# What each choice does, said before it is made (the pages show these words; the rules
# they describe live in domain/nullentropy.py, ambassador.py, responses.py, truthtrance.py).
BOX_SAYS = (
    f"Pay {FEE} spice to the Spice Bank to search the discard in secret for one card other "
    "than a Box. The fee is spent as soon as the candidates are shown: a search cannot be "
    "called off. The rest of the discard is then shuffled and the Box goes on top."
)
WINDOW_SAYS = {
    "ambassador_income": (
        f"The Emperor is due {PRICE} spice from the Spice Bank for this purchase. A Karama "
        "played now cancels that income: the spice stays in the Bank. The purchase stands."),
    "ambassador_bonus": (
        "Harkonnen may draw one more card for this purchase. A Karama played now cancels "
        "that bonus card. The purchase stands."),
    "semuta": ("The holder of the Semuta Drug may take the discarded card and then discards "
               "Semuta; anyone else can only pass."),
    "gift": "Accepting puts the offered card in your hand; refusing leaves it with Richese.",
}
TRUTHTRANCE_SAYS = (
    "A promise binds you: promised spice stays reserved, so you cannot spend it elsewhere; "
    "a promised Box fee is paid by that Box's next search."
)


def decision_says(kind: str, public: dict[str, Any]) -> str | None:
    """What an Ambassador choice does, from public facts only."""
    if kind == "ambassador" and public.get("token") == "richese":
        return (f"Triggering the Richese ambassador lets its beneficiary (Ecaz, or Ecaz's ally) "
                f"buy the top Treachery card for {PRICE} spice of its own, if it has "
                "the spice, room in hand and a card to draw. Declining leaves the token.")
    if kind == "ambassador" and public.get("token") == "bene_gesserit":
        return ("Triggering the Bene Gesserit ambassador lets its beneficiary use the effect "
                "of a token from the copy pool. Declining leaves the token.")
    if kind == "ambassador":
        return "Triggering commits the ambassador token; declining leaves it where it is."
    if kind == "ambassador_copy":
        return "Choose the token whose effect the Bene Gesserit ambassador copies."
    return None


def card_objects(ids: Iterable[str]) -> list[dict[str, str]]:
    return [CARDS[cid].public() for cid in ids]


def public_decision(d: Decision | None) -> dict[str, Any] | None:
    if d is None:
        return None
    public = d.data.get("public", {})
    says = decision_says(d.kind, public)
    return {"kind": d.kind, "event": d.event, "player": d.player, **public,
            **({"says": says} if says else {})}


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
            "deadline": w.deadline,
            # The room's length of a window (a layout field): a countdown never shows more.
            "seconds": state.response_seconds if w.deadline else None,
            "name": words.window(w.kind)[:1].upper() + words.window(w.kind)[1:],
            "says": WINDOW_SAYS.get(w.kind),
            **w.data.get("public", {})}


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
        "truthtrance": _truthtrance(state),
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


def _truthtrance(state: RoomState) -> dict[str, Any] | None:
    part = _public_part(state.truthtrance)
    return None if part is None else {**part, "says": TRUTHTRANCE_SAYS}


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
        "says": BOX_SAYS,
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
