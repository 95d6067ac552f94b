"""Autopilot: acting for seats whose autopilot is on (RULES 3.7).

`tick(app, pace=...)` makes one pass over the rooms where an autopilot seat is asked
for something (the read models keep that index, so a worker among thousands
of rooms loads only those). In each room whose last event is at least `pace`
seconds old (normal pacing: a human at the table sees each step), the first
autopilot seat, in seating order, that has something to do sends one command
through `RoomsApp.execute`, the same path as a person:

- its own open Box search: the one bound selection;
- an open Semuta window that asks it: take (when its own hand holds Semuta) or pass;
- a response window that lists it as waiting: pass.

The choice is made by `choose(profile, view, rng)` from that seat's own view
(`domain.game.seat_view`) and nothing else: the chooser never sees the
room state, another seat's hand or the pile order. The only other input is
the public card catalog. The command carries `expected_version` and a command
id derived from the room version (`autopilot:<profile>:<version>`), so two
workers racing on the same room make one selection: the second either finds
the id already done or the room moved on. The random choice of the easy
profile comes from the room's seed and version (or the operating system for
an unseeded room) and is stored like any other outcome: the selected card is
in the command and in the events it produced.

Profiles, each with its own preference:

- easy: a uniformly random candidate; never spends Semuta (passes).
- medium: the first weapon, else defense, else special, else worthless card
  (candidates in their display order); takes with Semuta only a weapon or a
  defense.
- hard: the highest value by a fixed table (Karama and Lasgun high, worthless
  nil); trades Semuta only for a card worth at least a defense.
- brutal: fills the gap in its own hand first (a weapon when it holds none,
  then a defense), else the highest value; always takes with Semuta, the
  best card (a Box above all: another search).

Every profile passes in response windows. An autopilot seat does not ask or
answer Truthtrance questions, offer gifts or play cards of its own.

In a Bidding round (RULES 10) a seat on its turn bids or passes from the `bid`
action its view lists (the lowest bid and what it can pay) and nothing else:

- easy: passes one time in two, else bids the lowest bid;
- medium, hard, brutal: value the card up by what their view shows (Atreides the
  card itself, the others an unseen card's worth) and bid the lowest bid while it
  is at most that worth: half of it (medium), all of it (hard), two more (brutal).

In a cache sale the card Richese named is valued alike; a sealed bid is that limit
(easy: 0 to 2), bounded by what the seat can pay. None spends a Karama on a bid. The
Ixians put the dealt card worth least on the bottom of the deck (easy: one at random);
Richese sells no cache card; the Ixians' ally keeps the card it bought unless it is
worth less than an unseen card (hard, brutal).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dune_ledger.application.rooms import RoomsApp
from dune_ledger.domain.game import CARDS, Rejection, seat_view

View = dict[str, Any]
Command = dict[str, Any]
Chooser = Callable[[str, View, random.Random], Command | None]

CATEGORY_ORDER = ("weapon", "defense", "special", "worthless")
# Public card values used by hard and brutal: by effect first, then by category.
EFFECT_VALUE = {"karama": 9, "lasgun": 8, "nullentropy_box": 8, "cheap_hero": 7,
                "weather_control": 6, "family_atomics": 6, "hajr": 5, "tleilaxu_ghola": 5,
                "truthtrance": 4}
CATEGORY_VALUE = {"weapon": 6, "defense": 5, "special": 3, "worthless": 0}
SEMUTA_WORTH = CATEGORY_VALUE["defense"]
# What a card nobody has seen is worth: about the deck's average by the table above.
UNSEEN_WORTH = 4
# The highest bid a profile makes, by what the card is worth to it.
BID_LIMIT: dict[str, Callable[[int], int]] = {
    "medium": lambda worth: worth // 2, "hard": lambda worth: worth,
    "brutal": lambda worth: worth + 2}


def value(card_id: str) -> int:
    card = CARDS[card_id]
    if card.effect in EFFECT_VALUE:
        return EFFECT_VALUE[card.effect]
    return CATEGORY_VALUE.get(card.category, 0)


def _best(ids: list[str]) -> str:
    # max keeps the first of equals: the display order breaks ties.
    return max(ids, key=value)


def _first_by_category(ids: list[str]) -> str:
    return min(ids, key=lambda cid: CATEGORY_ORDER.index(CARDS[cid].category))


def pick(profile: str, candidates: list[str], hand: list[str], rng: random.Random) -> str:
    """The card a profile takes from `candidates` (never empty)."""
    if profile == "easy":
        return rng.choice(candidates)
    if profile == "medium":
        return _first_by_category(candidates)
    if profile == "hard":
        return _best(candidates)
    held = {CARDS[cid].category for cid in hand}
    for needed in ("weapon", "defense"):
        wanted = [cid for cid in candidates if CARDS[cid].category == needed]
        if needed not in held and wanted:
            return _best(wanted)
    return _best(candidates)


def semuta_choice(profile: str, takeable: list[str], hand: list[str],
                  rng: random.Random) -> str | None:
    """The card a profile takes with Semuta, or None to pass."""
    if not takeable or profile == "easy":
        return None
    if profile == "medium":
        fit = [cid for cid in takeable if CARDS[cid].category in ("weapon", "defense")]
        return _first_by_category(fit) if fit else None
    if profile == "hard":
        best = _best(takeable)
        return best if value(best) >= SEMUTA_WORTH else None
    return pick(profile, takeable, hand, rng)


def choose(profile: str, view: View, rng: random.Random) -> Command | None:
    """The one command this seat's autopilot sends now, from its own view alone."""
    me = view["me"]["faction"]
    hand = [c["id"] for c in view["me"]["hand"]]
    box = view.get("nullentropy") or {}
    search = box.get("search")
    if search is not None:
        cards = [c["id"] for c in search.get("cards") or []]
        if not cards:
            return None  # a malformed search shows nothing: leave it to an operator
        return {"type": "select_card", "search": search["event"],
                "card": pick(profile, cards, hand, rng)}
    open_search = view.get("search")
    if open_search is not None or view.get("truthtrance") is not None:
        return None  # the room is locked, or waits for an answer
    semuta = view.get("semuta") or {}
    if semuta.get("eligible"):
        # Asked like every seat with a card; only a seat holding Semuta may take.
        takeable = [c["id"] for c in semuta["cards"]] if semuta.get("can_take") else []
        chosen = semuta_choice(profile, takeable, hand, rng)
        if chosen is None:
            return {"type": "semuta", "event": semuta["event"], "action": "pass"}
        return {"type": "semuta", "event": semuta["event"], "action": "take", "card": chosen}
    response = view.get("response") or {}
    if response.get("kind") not in ("semuta", "gift") and me in response.get("waiting", []):
        return {"type": "respond", "event": response["event"], "action": "pass"}
    return bidding_choice(profile, view, rng)


def bidding_choice(profile: str, view: View, rng: random.Random) -> Command | None:
    """A Bidding round's move (RULES 10), from the seat's own view and its `actions`."""
    listed = view.get("actions") or []
    by_type: dict[str, list[Command]] = {}
    for action in listed:
        by_type.setdefault(action["type"], []).append(action)
    if "richese_sale" in by_type:
        return {"type": "richese_sale", "when": "none"}
    if "ix_replace" in by_type:
        event = by_type["ix_replace"][0]["event"]
        receipts = view.get("receipts") or []
        bought = receipts[-1]["card"] if receipts else None
        replace = (profile in ("hard", "brutal") and bought is not None
                   and value(bought) < UNSEEN_WORTH) or (profile == "easy"
                                                         and rng.random() < 0.5)
        return {"type": "ix_replace", "event": event, "accept": replace}
    if "ix_set_aside" in by_type:
        dealt = [a["card"] for a in by_type["ix_set_aside"] if a["where"] == "bottom"]
        worst = rng.choice(dealt) if profile == "easy" else min(dealt, key=value)
        return {"type": "ix_set_aside", "card": worst, "where": "bottom"}
    bidding = view.get("bidding") or {}
    # The card at stake as the view shows it: Atreides' card up, a cache card Richese named.
    card = ((bidding.get("up") or {}).get("card")
            or (bidding.get("sale") or {}).get("card"))
    worth = value(card["id"]) if card else UNSEEN_WORTH
    if "sealed_bid" in by_type:
        top = by_type["sealed_bid"][0]["free"]["amount"]["max"]
        limit = rng.randint(0, 2) if profile == "easy" else BID_LIMIT[profile](worth)
        return {"type": "sealed_bid", "amount": max(0, min(top, limit))}
    if "pass_bid" not in by_type:
        return None
    bid = next((a for a in by_type.get("bid", []) if "karama" not in a), None)
    low = None if bid is None else bid["free"]["amount"]["min"]
    if profile == "easy":
        if low is None or rng.random() < 0.5:
            return {"type": "pass_bid"}
        return {"type": "bid", "amount": low}
    if low is not None and low <= BID_LIMIT[profile](worth):
        return {"type": "bid", "amount": low}
    return {"type": "pass_bid"}


def has_prompt(view: View) -> bool:
    """Whether the seat's own view asks it for something: exactly when `choose` answers.

    Every profile answers the same prompts (only what it answers differs), and the
    medium profile draws no randomness, so it stands for all of them.
    """
    return choose("medium", view, random.Random(0)) is not None


def rng_for(seed: int | None, version: int, seat: str) -> random.Random:
    """Seeded rooms choose repeatably per version; others draw from the OS."""
    if seed is None:
        return random.SystemRandom()
    digest = hashlib.sha256(f"autopilot:{seed}:{version}:{seat}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


@dataclass(frozen=True)
class Move:
    room: str
    seat: str
    command: Command


def plan_room(app: RoomsApp, room_id: str, *, pace: float, now: datetime,
              chooser: Chooser = choose) -> Move | None:
    """The next autopilot move in one room, or None (nothing due, or not yet time)."""
    try:
        room = app.load(room_id)
    except Rejection:
        return None
    state = room.state
    seats = [s for s in state.seats if s.autopilot is not None]
    if not seats:
        return None
    last = app.records(room.id, gt=room.version - 1)
    if last and (now - last[-1].timestamp).total_seconds() < pace:
        return None
    for seat in seats:
        assert seat.autopilot is not None
        view = seat_view(state, seat.faction)
        command = chooser(seat.autopilot, view, rng_for(state.seed, room.version, seat.faction))
        if command is None:
            continue
        command = {**command, "expected_version": room.version,
                   "command_id": f"autopilot:{seat.autopilot}:{room.version}"}
        return Move(room=str(room.id), seat=seat.faction, command=command)
    return None


def candidate_rooms(app: RoomsApp) -> list[str]:
    """The rooms where an autopilot seat is asked for something (a search, a window),
    or a window with a deadline is open (the worker closes it when it passes).

    From the read models' autopilot index (caught up first, so an event of a moment
    ago counts), which costs one query however many rooms there are; without read
    models, every room of the log (each one loaded by `plan_room`).
    """
    models = app.read_models
    index = getattr(models, "autopilot_rooms", None)
    if models is None or index is None:
        return [str(room_id) for room_id in app.room_ids()]
    models.catch_up()
    return list(index(due=True))


def tick(app: RoomsApp, *, pace: float, now: datetime | None = None,
         chooser: Chooser = choose) -> int:
    """One pass over the autopilot rooms (a room's last event at least `pace` seconds old);
    returns how many autopilot commands were accepted."""
    now = now or datetime.now(UTC)
    acted = 0
    for room_id in candidate_rooms(app):
        move = plan_room(app, str(room_id), pace=pace, now=now, chooser=chooser)
        if move is not None and app.execute(move.room, move.seat, move.command)["ok"]:
            acted += 1
    return acted
