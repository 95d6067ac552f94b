"""The audit: replay a room's stream from its first event and check it.

Replay uses only the stored events: no randomness, no clock, no snapshot.
Every check is true, false, or null (not checked) with details; a room
passes when none is false.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any
from uuid import UUID

import orjson

from application.rooms import RoomFold, RoomsApp, gc_paused, room_uuid
from application.stream import GENESIS, Recorded, chain_hash
from domain.catalog import room_cards
from domain.errors import Rejection
from domain.events import DiscardReshuffled, PileShuffled, RoomCreated
from domain.rules import apply, initial_state
from domain.state import RoomState

MAX_DETAILS = 20
SHUFFLES = (PileShuffled, DiscardReshuffled)


def state_hash(state: RoomState) -> str:
    canonical = orjson.dumps(state.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()


class Check:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def fail(self, problem: str) -> None:
        if len(self.problems) < MAX_DETAILS:
            self.problems.append(problem)
        elif len(self.problems) == MAX_DETAILS:
            self.problems.append("... more problems not listed")

    def report(self) -> dict[str, Any]:
        return {"ok": not self.problems, "details": self.problems}


def audit_records(room_id: str, records: list[Recorded], fold: RoomFold | None = None,
                  ) -> tuple[dict[str, Any], RoomState | None]:
    """Replay and check `records`; `fold` (the read models' own) sees the state after
    each event the replay applied, in order, and nothing after one it could not."""
    names = ["cards_conserved", "spice_conserved", "shuffles_are_permutations",
             "hands_within_limits", "chain_intact"]
    checks = {name: Check() for name in names}
    chain, conserved = checks["chain_intact"], checks["cards_conserved"]
    state: RoomState | None = None
    cards: Counter[str] = Counter()
    catalog_ids: frozenset[str] = frozenset()
    catalog_size = 0
    spice = 0
    prev_hash = GENESIS
    # Hand sizes, seat by seat: after the last event, and before the current append.
    hands: list[int] = []
    hands_before: list[int] = []
    # The chain header names the room: its text is made once, not once per event.
    room: object = None
    room_text = ""
    last = len(records) - 1

    for i, rec in enumerate(records):
        v = rec.originator_version
        if v != i + 1:
            chain.fail(f"version {v} found where {i + 1} was expected")
        if rec.prev_hash != prev_hash:
            chain.fail(f"version {v} does not carry its predecessor's hash")
        fact = rec.fact
        if rec.originator_id is not room and rec.originator_id != room:
            room, room_text = rec.originator_id, str(rec.originator_id)
        prev_hash = chain_hash(room_text, v, fact.type, rec.body())

        try:
            if state is None:
                if not isinstance(fact, RoomCreated):
                    chain.fail("the stream does not start with RoomCreated")
                    break
                state = initial_state(fact)
                cards = Counter(c.id for c in room_cards(tuple(state.expansions)))
                catalog_ids = frozenset(cards)
                catalog_size = len(catalog_ids)
                spice = state.total_spice()
                hands = [len(seat.hand) for seat in state.seats]
            else:
                if rec.append == v:
                    hands_before = hands
                if isinstance(fact, SHUFFLES) and Counter(
                    fact.order
                ) != Counter(state.discard):
                    checks["shuffles_are_permutations"].fail(
                        f"version {v}: {fact.type} is not a permutation of the pile"
                    )
                apply(state, fact)
        except Exception as e:  # a stored event that does not fit the state it follows
            chain.fail(f"version {v} ({fact.type}) cannot be applied: {e}")
            break
        if fold is not None:
            fold.step(rec, state)

        # Every zone after every event: a forged event may move any card. The catalog
        # ids are unique, so "each exactly once" is: as many cards as ids, the same set.
        deck, discard, cache, removed = state.deck, state.discard, state.cache, state.removed
        held = set(deck)
        held.update(discard, cache, removed)
        count = len(deck) + len(discard) + len(cache) + len(removed)
        total = state.bank  # RoomState.total_spice, in the same pass as the hands
        hands = []
        for seat in state.seats:
            hand = seat.hand
            held.update(hand)
            hands.append(len(hand))
            total += seat.spice
        count += sum(hands)
        if count != catalog_size or held != catalog_ids:
            held_ids = deck + discard + cache + removed
            for seat in state.seats:
                held_ids += seat.hand
            held_count = Counter(held_ids)
            extra = sorted((held_count - cards).keys())
            missing = sorted((cards - held_count).keys())
            conserved.fail(f"version {v}: duplicated or foreign {extra}, missing {missing}")
        if total != spice:
            checks["spice_conserved"].fail(
                f"version {v}: seats and bank hold {total}, not {spice}"
            )
        # When an append ends, a hand that grew in it may not end above its limit.
        if v > 1 and hands != hands_before and (
            i == last or records[i + 1].append != rec.append
        ):
            for seat, held_now, before in zip(state.seats, hands, hands_before, strict=False):
                if held_now > before and held_now > seat.limit:
                    checks["hands_within_limits"].fail(
                        f"version {v}: {seat.faction} holds {held_now} "
                        f"(limit {seat.limit}, was {before})"
                    )

    report: dict[str, Any] = {
        "room": room_id,
        "events": len(records),
        "version": records[-1].originator_version if records else 0,
        "state_hash": state_hash(state) if state is not None else None,
        "checks": {name: check.report() for name, check in checks.items()},
    }
    return report, state


def audit_room(app: RoomsApp, room_id: str) -> dict[str, Any]:
    with gc_paused():
        return _audit_room(app, room_id)


def _audit_room(app: RoomsApp, room_id: str) -> dict[str, Any]:
    uid = room_uuid(room_id)
    records = app.records(uid)
    if not records:
        raise Rejection("unknown_room", f"no room '{room_id}'")
    models = app.read_models
    fold = models.room_fold(uid) if models is not None else None
    report, replayed = audit_records(str(uid), records, fold)
    live = _live_state_hash(app, uid)
    matches = replayed is not None and state_hash(replayed) == live
    report["checks"]["live_state_matches"] = {
        "ok": matches,
        "details": [] if matches else [f"the loaded state (snapshots included) is {live}"],
    }
    # The stored projections against a fresh rebuild of this room in memory, made
    # along the replay above.
    report["checks"]["read_models_match"] = (
        models.check_room(uid, records, fold) if models is not None
        else {"ok": None, "details": ["not checked: this app has no read models"]}
    )
    report["ok"] = all(c["ok"] is not False for c in report["checks"].values())
    return report


def _live_state_hash(app: RoomsApp, uid: UUID) -> str:
    try:
        return state_hash(app.load(uid).state)
    except Exception as e:  # a stream that no longer loads is itself a finding
        return f"unloadable: {type(e).__name__}"


def audit_all(app: RoomsApp) -> list[dict[str, Any]]:
    return [audit_room(app, str(rid)) for rid in app.room_ids()]
