"""The leak scanner: what may each reader know at each version, and did anything say more?

It works from the true state (the full replay of the stream), independently
of `domain.views` and `projections.guard`: for a reader it computes the card
ids that are hidden from it, serializes whatever was sent out (a view, a log
entry, an error, CLI output) to JSON text, and looks for those ids in it.

What a seat may know at a version: its own hand, its receipts, the top of
the discard pile (face up), removed cards, the Box of an open search (played
face up), the cards of an open Semuta window (discarded face up), the
cards of shipping-cost records (spent face up), and,
only while its own search is open, that search's candidates.
Everything else is hidden from it: other hands, the deck, the cache and the
pile below its top (the search inventory and the pile order). The public
reader knows the same minus anything of a seat's own. The ally offered a gift
knows its card while the offer is open.

Spice: a seat's view may carry a key `spice` only at `me.spice`; the public
view and the log carry none.

A committed room's secret (RULES 9) is in nothing sent out before the room ends.
"""

from __future__ import annotations

import re
from typing import Any
from uuid import UUID

import orjson

from dune_ledger.application.rooms import RoomsApp
from dune_ledger.application.stream import Recorded
from dune_ledger.domain.bidding import CacheCardSold, SaleOffered, SaleUnsold, round_of
from dune_ledger.domain.catalog import CARDS, is_box
from dune_ledger.domain.events import RoomCreated
from dune_ledger.domain.gifts import offer_of
from dune_ledger.domain.nullentropy import FeePaid
from dune_ledger.domain.rules import apply, initial_state
from dune_ledger.domain.state import RoomState
from dune_ledger.projections.read_models import ReadModels
from dune_ledger.projections.store import MemoryStore

TOKEN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def all_ids(state: RoomState) -> set[str]:
    return set(state.cards())


def face_up(state: RoomState) -> set[str]:
    known = set(state.discard[-1:]) | set(state.removed)
    if state.search is not None:
        known.add(state.search.box)
    # A shipment's Karama was spent face up: its record's card is public (RULES 3.5),
    # and so is a Guild stop's refund of it (RULES 7).
    known.update(sc.card for sc in state.shipping_costs)
    window = state.control.response
    if window is not None and window.kind == "semuta":
        # A Semuta window is bound to a public discard (RULES 3.6): it may name those
        # cards, even once a later discard covers them. (Whether it closes when a
        # search takes one is a control leak, which no name scan sees: see
        # tests/test_fuzz_commands.py.)
        known.update(window.data.get("cards", []))
    bidding = round_of(state)
    if bidding is not None and bidding.sale is not None:
        known.add(bidding.sale.card)  # Richese names the card it sells (RULES 10.5)
    return known


def hidden_from_public(state: RoomState, event: Any = None) -> set[str]:
    known = face_up(state)
    if isinstance(event, SaleOffered | CacheCardSold | SaleUnsold):
        known.add(event.card)  # Richese names the card it sells (RULES 10.5)
    if isinstance(event, FeePaid) and is_box(event.card):
        known.add(event.card)  # the Box is played face up when its fee is paid
    return all_ids(state) - known


def hidden_from_seat(state: RoomState, seat: str, *, candidates: bool = True) -> set[str]:
    """Card ids `seat` may not see named in `state`."""
    known = face_up(state) | set(state.seat(seat).hand)
    for r in state.receipts:
        if r.buyer == seat:
            known.update(c for c in (r.card, getattr(r, "bonus", None)) if c)
    # An open offer shows its card to the ally (domain/gifts.py); since issue 17 the
    # offer is the room's response window, no longer `state.gift` alone.
    offer = offer_of(state)
    if offer is not None and offer.data["to"] == seat:
        known.add(offer.data["card"])
    search = state.search
    if candidates and search is not None and search.owner == seat:
        known.update(cid for cid in search.discard if not is_box(cid))
    # The Bidding round (RULES 10.2, 10.1, 10.5): Atreides sees the card up for bid, the
    # Ixians the dealt cards while they choose, Richese its cache while it names a card.
    bidding = round_of(state)
    if bidding is not None:
        if seat == "atreides" and bidding.up is not None and bidding.auction:
            known.add(bidding.auction[0])
        if seat == "ixians" and bidding.stage == "ixians":
            known.update(bidding.dealt)
        if seat == "richese" and bidding.stage == "sale" and bidding.sale is None:
            known.update(state.cache)
    return all_ids(state) - known


def named(data: Any) -> set[str]:
    """Every card id in the JSON text of `data` (keys, values and free text)."""
    text = data if isinstance(data, str) else orjson.dumps(data).decode()
    return {t for t in TOKEN.findall(text) if t in CARDS}


def spice_paths(data: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    if isinstance(data, dict):
        for k, v in data.items():
            if k == "spice":
                found.append((*path, k))
            found.extend(spice_paths(v, (*path, str(k))))
    elif isinstance(data, list):
        for item in data:
            found.extend(spice_paths(item, (*path, "[]")))
    return found


def secret_problems(state: RoomState, data: Any, where: str) -> list[str]:
    """The committed room's secret named before the end, in hex or in any case."""
    f = state.fairness
    if f is None or state.ended is not None:
        return []
    text = (data if isinstance(data, str) else orjson.dumps(data).decode()).lower()
    return [f"{where}: the room's secret before its end"] if f.secret in text else []


def seat_view_problems(state: RoomState, seat: str, view: Any, where: str,
                       *, candidates: bool = True) -> list[str]:
    problems = secret_problems(state, view, where) + [f"{where}: {seat} sees hidden {sorted(leak)}"
                for leak in [named(view) & hidden_from_seat(state, seat, candidates=candidates)]
                if leak]
    extra = [p for p in spice_paths(view) if p != ("me", "spice")]
    if extra:
        problems.append(f"{where}: {seat}'s view carries spice at {extra}")
    if isinstance(view, dict) and "withheld" in view:
        problems.append(f"{where}: {seat}'s view was withheld by the projection guard")
    return problems


def public_problems(state: RoomState, data: Any, where: str, event: Any = None,
                    before: RoomState | None = None) -> list[str]:
    """`data` sent out after the append that made `state`; `before`, the state before
    that append, when a card the public saw then may be named (a Semuta take of the
    face-up top card)."""
    problems = secret_problems(state, data, where)
    leak = named(data) & hidden_from_public(state, event)
    if before is not None:
        leak &= hidden_from_public(before, event)
    if leak:
        problems.append(f"{where}: the public sees hidden {sorted(leak)}")
    # A Truthtrance promise of spice is part of the public answer (domain/truthtrance.py).
    spice = [p for p in spice_paths(data) if p[-2:] != ("promise", "spice")]
    if spice:
        problems.append(f"{where}: public data carries spice at {spice}")
    text = orjson.dumps(data).decode()
    if "withheld" in text:
        problems.append(f"{where}: withheld by the projection guard")
    return problems


def error_problems(state: RoomState, seat: str, command: dict[str, Any],
                   result: dict[str, Any]) -> list[str]:
    """A rejection may echo what its sender named, nothing else hidden from it."""
    secret = secret_problems(state, result, f"result to {seat} for {command}")
    if result.get("ok"):
        return secret
    sent = named(command)
    leak = (named(result) - sent) & hidden_from_seat(state, seat)
    return secret + ([f"error to {seat} for {command} names hidden {sorted(leak)}"]
                     if leak else [])


def states_by_version(records: list[Recorded]) -> dict[int, RoomState]:
    """The true state after every version of a stream."""
    out: dict[int, RoomState] = {}
    state: RoomState | None = None
    for rec in records:
        if isinstance(rec.fact, RoomCreated):
            state = initial_state(rec.fact)
        else:
            assert state is not None
            apply(state, rec.fact)
        out[rec.originator_version] = state.model_copy(deep=True)
    return out


def scan_room(app: RoomsApp, room: str) -> list[str]:
    """Every outbound path of one room, at every version, for every reader.

    - the projected views of every seat and the public view after each event
      (a fresh projection fed one event at a time, so no version is skipped);
    - the public log entries, each at the version it was produced;
    - time travel (`view_at`) for every seat and version;
    - the live read models the app serves now.
    """
    uid = UUID(room)
    records = app.records(uid)
    states = states_by_version(records)
    last = records[-1].originator_version
    # A log entry goes out with its whole append (RULES 7: nobody reads inside one),
    # so it is judged by what the public knew before the append or knows after it.
    ends = {rec.append: rec.originator_version for rec in records}
    appends = {rec.originator_version: rec.append for rec in records}

    def entry_problems(v: int, entry: Any, where: str, fact: Any) -> list[str]:
        a = appends[v]
        return public_problems(states[ends[a]], entry, where, fact, before=states.get(a - 1))

    final = states[last]
    # RULES 7: `room at` a version inside an append shows the state after that append.
    append_end: dict[int, int] = {}
    for rec in records:
        append_end[rec.append] = rec.originator_version
    problems: list[str] = []
    step = ReadModels(None, None, MemoryStore())
    seen_log = 0
    for rec in records:
        v = rec.originator_version
        state = states[v]
        step.process([(rec, v)])
        for seat in state.seats:
            view = step.seat_view(room, seat.faction)
            problems += seat_view_problems(state, seat.faction, view, f"v{v} view")
        problems += public_problems(state, step.public_view(room), f"v{v} public view")
        log = step.public_log(room)
        for entry in log[seen_log:]:
            problems += entry_problems(v, entry, f"v{v} log entry", rec.fact)
        seen_log = len(log)
        shown = states[append_end[rec.append]]
        for seat in shown.seats:
            still_open = (shown.search is not None and final.search is not None
                          and final.search.event == shown.search.event)
            past = app.view_at(room, v, seat.faction)
            assert past["version"] == shown.version
            problems += seat_view_problems(shown, seat.faction, past, f"room at {v}",
                                           candidates=still_open)
    for seat in final.seats:
        problems += seat_view_problems(final, seat.faction, app.seat_view(room, seat.faction),
                                       "served view")
    problems += public_problems(final, app.public_view(room), "served public view")
    by_version = {rec.originator_version: rec.fact for rec in records}
    for entry in app.public_log(room):
        v = entry["version"]
        problems += entry_problems(v, entry, f"served log v{v}", by_version[v])
    return problems


def true_state(app: RoomsApp, room: str) -> RoomState:
    records = app.records(UUID(room))
    return states_by_version(records)[records[-1].originator_version]
