"""Noninterference (RULES 7): nothing hidden can be inferred from what a seat is shown.

A generated room and its twin differ in one hidden fact: two cards swapped
between hidden zones (two hands, a hand and the deck, two deck positions, the
pile below its top and the pile, the deck or a hand: a layout's initial pile
is unseen below its top, RULES 7), so who holds a Karama or Semuta differs;
spice moved between what two seats privately hold (totals kept); or what a
Box search took (the twin selects another candidate). The same commands run
on both, each decided with the same seeded randomness and the same clock; a
command is skipped only when it names a card that differs. After every
command the public view, the public log (through the projector's own
function), the public part of the result and the version must be the same,
and so must the view of every seat that holds neither differing card.

What each seat is told must match too (issue 24.7): after every command every
seat sends a probe set (each command type with each card id that matters, and
at the end with every card id of the room) to both rooms, and the outcome
(accepted, or the code and message of the refusal) must be the same; a seat
that knows the differing fact is excused only for probes and `actions` that
name a differing card (or, when its own spice differs, entirely). No refusal
message repeats a card id it was sent. The differences the rules themselves
make public are listed in one place, `PUBLIC_BY_RULES`, with their RULES
reference: there the pair stops being compared.

A Box selection is a private choice: at every `select_card` the test also
decides the other candidates on the same state and requires the same public
events and version (the Guild cost claim is such a private fact).

Domain only and fast; `HYPOTHESIS_PROFILE=long` runs many more examples.
"""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from hypothesis import HealthCheck, given, settings
from hypothesis import event as count_case
from hypothesis import strategies as st

from dune_ledger.application.stream import Recorded
from dune_ledger.domain import views
from dune_ledger.domain.actions import Accepted, Probe, actions
from dune_ledger.domain.bidding import round_of
from dune_ledger.domain.catalog import CARDS, hand_limit, room_cards
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.game import OPERATOR, parse_command, parse_operator_command
from dune_ledger.domain.layout import build_room, parse_layout
from dune_ledger.domain.nullentropy import candidates
from dune_ledger.domain.rules import admit, apply, decide, initial_state
from dune_ledger.domain.semuta import bound_cards as semuta_bound
from dune_ledger.domain.state import RoomState
from dune_ledger.infrastructure.randomness import Source
from dune_ledger.projections.projectors import public_entry_text

# HYPOTHESIS_PROFILE=long: ten times as many examples, for a longer run.
EXAMPLES = 3_000 if os.environ.get("HYPOTHESIS_PROFILE") == "long" else 300

ROOM = UUID(int=17)
T0 = datetime(2026, 1, 1, tzinfo=UTC)
BOX = "nullentropy-box"
SEMUTA = "semuta-drug"
# Cards worth putting in hands: the ones the rules react to.
HOT = [BOX, SEMUTA, "distrans", "karama-1", "karama-2", "truthtrance-1", "baliset"]
OPTIONAL = ["atreides", "bene_gesserit", "guild", "ecaz"]
ACTIONS = ["draw", "discard", "begin", "select", "respond", "semuta", "offer_gift",
           "answer_gift", "guild_stop", "enter", "decide", "distrans", "ask", "answer",
           "deadline", "junk"]
# Drawn more often: the steps of a flow (a search, a purchase, a window).
WEIGHTED = ACTIONS + ["begin", "enter", "enter", *["next"] * 8]


def pending(state: RoomState) -> str:
    """`next`: what the game waits for (the seat comes from `natural_actor`)."""
    if state.search is not None:
        return "select"
    if state.truthtrance is not None:
        return "answer"
    if state.control.decision is not None and state.control.response is None:
        return "decide"
    if state.control.response is not None:
        return "respond"
    r = round_of(state)
    if r is not None:
        if r.stage == "richese":
            return "sale_choice"
        if r.stage == "sale" and r.sale is None:
            return "offer"
        if r.sale is not None and r.sale.auction == "silent":
            return "sealed"
        return "ix" if r.stage == "ixians" else "bid"
    return "enter" if state.ambassadors is not None else "discard"


# --- rooms and twins ------------------------------------------------------------------


@st.composite
def rooms(draw: Any) -> tuple[dict[str, Any], dict[str, Any], set[str], set[str], bool]:
    """A layout, its twin, the cards that differ, the seats whose spice differs, and
    whether the twin's first Box selection takes another card."""
    rnd = draw(st.randoms(use_true_random=False))
    kind = draw(st.integers(0, 5))
    # Half the search twins: a shipping cost below the pile's top, the Guild seated,
    # advanced rules (what the Box took decides the Guild's refund, RULES 3.5); the
    # other half: Semuta in a hand (a window may be open when the search begins).
    shipping = kind == 5 and rnd.random() < 0.5
    extra = [f for f in OPTIONAL if draw(st.booleans()) or (shipping and f == "guild")]
    factions = ["richese", "emperor", "harkonnen", *extra]
    expansions = ["choam_richese"] + (["ecaz_moritani"] if "ecaz" in factions else [])
    ids = [c.id for c in room_cards(tuple(expansions))]
    rnd.shuffle(ids)
    # Semuta less often: a window after every discard would hold the slot most of the run.
    hot = [cid for cid in HOT if rnd.random() < (0.35 if cid == SEMUTA else 0.8)
           or (kind == 5 and cid == BOX) or (kind == 5 and not shipping and cid == SEMUTA)]
    hot = [cid for cid in hot if not (shipping and cid == "karama-2")]
    pool = hot + [cid for cid in ids if cid not in hot]
    seats = []
    for f in factions:
        # A search twin: Richese holds the Box (the first hot card).
        n = rnd.randint(1 if kind == 5 and f == "richese" else 0, min(4, hand_limit(f)))
        hand, pool = pool[:n], pool[n:]
        seats.append({"faction": f, "spice": rnd.randint(30, 40), "hand": hand})
    rest = [cid for cid in pool if CARDS[cid].zone != "cache"
            or (cid != SEMUTA and rnd.random() < 0.5)]
    rnd.shuffle(rest)
    n_pile = rnd.randint(3 if kind == 5 else 0, 6)
    pile, rest = rest[:n_pile], rest[n_pile:]
    if shipping and "karama-2" in rest:
        rest.remove("karama-2")
        pile.insert(0, "karama-2")
    cache = [cid for cid in ids if CARDS[cid].zone == "cache"
             and cid not in pile and all(cid not in s["hand"] for s in seats)
             and cid not in rest]
    deck = [cid for cid in rest]
    seat_of = {s["faction"]: s for s in seats}
    seat_of["richese"]["ally"] = "emperor"
    seat_of["emperor"]["ally"] = "richese"
    raw: dict[str, Any] = {
        "mode": "advanced" if shipping else draw(st.sampled_from(["advanced", "advanced",
                                                                   "basic"])),
        "expansions": expansions, "seed": 3, "bank": 100, "turn": 2, "phase": 6,
        "seats": seats, "discard": pile, "deck": deck, "richese_cache": cache,
    }
    karamas = [cid for cid in pile[:-1] if CARDS[cid].is_karama]
    if karamas:
        # A creator with a hand limit of 4 is often at it: the capacity check matters.
        creator = rnd.choice(factions)
        raw["shipping_costs"] = [{"card": karamas[0], "creator": creator,
                                  "beneficiary": creator, "price": 4}]
        hand = seat_of[creator]["hand"]
        if rnd.random() < 0.5:
            while len(hand) < min(4, hand_limit(creator)) and deck:
                hand.append(deck.pop())
    if "ecaz" in factions:
        seat_of["ecaz"]["ally"] = "harkonnen"
        seat_of["harkonnen"]["ally"] = "ecaz"
        raw["ambassadors"] = {
            "placed": [{"token": "richese", "territory": "arrakeen"},
                       {"token": "bene_gesserit", "territory": "carthag"}],
            "cohort": ["richese", "bene_gesserit", "fremen", "guild", "ixians"],
            "copy_pool": ["emperor", "choam", "atreides"],
        }
    if kind == 5:
        # What a search took: the same layout, the twin selects another candidate.
        return raw, raw, set(), set(), True
    twin, differ, spice = make_twin(raw, kind, rnd)
    return raw, twin, differ, spice, False


def make_twin(raw: dict[str, Any], kind: int, rnd: random.Random
              ) -> tuple[dict[str, Any], set[str], set[str]]:
    twin = {**raw, "seats": [{**s, "hand": list(s["hand"])} for s in raw["seats"]],
            "discard": list(raw["discard"]), "deck": list(raw["deck"])}
    hands = [s["hand"] for s in twin["seats"] if s["hand"]]
    # A shipping cost lies in the pile by public record (RULES 3.5): never moved.
    costs = {sc["card"] for sc in twin.get("shipping_costs", [])}
    below_top = [i for i, cid in enumerate(twin["discard"][:-1]) if cid not in costs]
    hot = [h for h in hands if set(h) & set(HOT)]
    if hot and rnd.random() < 0.7:
        # Most swaps move a card the rules react to (a Karama, Semuta, the Box).
        hands = [hot[0], *(h for h in hands if h is not hot[0])]
        rnd.shuffle(hands[1:])
    # Each place is (list, index); a hidden zone: a hand, the deck, the pile below its top.
    places: list[tuple[list[str], int]] = []
    if kind == 0 and len(hands) >= 2:
        a, b = hands[0], rnd.choice(hands[1:])
        places = [(a, _hot_index(a, rnd)), (b, rnd.randrange(len(b)))]
    elif kind == 1 and hands and twin["deck"]:
        h = hands[0]
        places = [(h, _hot_index(h, rnd)), (twin["deck"], rnd.randrange(len(twin["deck"])))]
    elif kind == 2 and len(twin["deck"]) >= 2:
        i, j = rnd.sample(range(len(twin["deck"])), 2)
        places = [(twin["deck"], i), (twin["deck"], j)]
    elif kind == 3 and below_top:
        # The pile below its top is unseen (RULES 7): against another pile position,
        # the deck or a hand.
        others: list[tuple[list[str], int]] = [
            *((twin["discard"], j) for j in below_top),
            *((twin["deck"], j) for j in range(len(twin["deck"]))),
            *((h, j) for h in hands for j in range(len(h)))]
        i = rnd.choice(below_top)
        other = rnd.choice([o for o in others if o != (twin["discard"], i)] or [None])
        semuta = [(h, h.index(SEMUTA)) for h in hands if SEMUTA in h]
        if semuta and rnd.random() < 0.6:
            other = semuta[0]  # in the pile unseen or in a hand: a window opens alike
        if other is not None:
            places = [(twin["discard"], i), other]
    if places:
        (la, ia), (lb, ib) = places
        la[ia], lb[ib] = lb[ib], la[ia]
        return twin, {la[ia], lb[ib]}, set()
    # Spice between two seats, totals kept; both stay far above every price.
    a, b = rnd.sample(twin["seats"], 2)
    moved = rnd.randint(1, 10)
    twin["seats"] = [{**s, "spice": s["spice"] + (moved if s is a else -moved if s is b else 0)}
                     for s in twin["seats"]]
    return twin, set(), {a["faction"], b["faction"]}


def _hot_index(hand: list[str], rnd: random.Random) -> int:
    hot = [i for i, cid in enumerate(hand) if cid in HOT]
    return rnd.choice(hot) if hot and rnd.random() < 0.7 else rnd.randrange(len(hand))


def state_of(raw: dict[str, Any]) -> RoomState:
    return initial_state(build_room(parse_layout(raw), str(ROOM), Source(random.Random(1))))


# --- commands, built from the first room's state --------------------------------------


def command_for(state: RoomState, actor: str, action: str, pick: int) -> dict[str, Any] | None:
    hand = state.seat(actor).hand if state.has_seat(actor) else []
    mine = hand[pick % len(hand)] if hand else "kulon"
    w = state.control.response
    event = w.event if w is not None else f"e{pick}"
    if action == "draw":
        return {"type": "draw"}
    if action == "discard":
        return {"type": "discard", "card": mine}
    if action == "begin":
        return {"type": "begin_search", "card": BOX}
    if action == "select":
        cards = candidates(state, actor) or ["kulon"]
        search = state.search.event if state.search else "e1"
        return {"type": "select_card", "search": search, "card": cards[pick % len(cards)]}
    if action == "respond" and w is not None and w.kind == "gift":
        action = "answer_gift"
    elif action == "respond" and w is not None and w.kind == "semuta":
        action = "semuta"
    if action == "respond":
        karama = [c for c in hand if CARDS[c].is_karama or CARDS[c].is_worthless]
        if pick % 2 and karama:
            return {"type": "respond", "event": event, "action": "karama", "card": karama[0]}
        return {"type": "respond", "event": event, "action": "pass"}
    if action == "semuta":
        cards = list(w.data.get("cards", [])) if w is not None else []
        if pick % 2 and cards:
            return {"type": "semuta", "event": event, "action": "take", "card": cards[0]}
        return {"type": "semuta", "event": event, "action": "pass"}
    if action == "offer_gift":
        return {"type": "offer_gift", "card": mine, "to": "emperor"}
    if action == "answer_gift":
        return {"type": "answer_gift", "event": event, "accept": pick % 2 == 0}
    if action == "guild_stop":
        rec = state.shipping_costs[0].card if state.shipping_costs else "karama-1"
        return {"type": "guild_stop", "card": rec}
    if action == "enter":
        return {"type": "enter_territory", "territory": ("arrakeen", "carthag")[pick % 2],
                "via": ("shipment", "movement", "worm")[pick % 3]}
    if action == "open":
        order = [s.faction for s in state.seats]
        return {"type": "open_bidding", "order": order[pick % len(order):]
                + order[:pick % len(order)]}
    r = round_of(state)
    if action == "bid":
        high = 0 if r is None or r.up is None or r.up.high is None else r.up.high.amount
        karama = [c for c in hand if CARDS[c].is_karama]
        if pick % 7 == 6 and karama:
            return {"type": "bid", "amount": high + 1 + pick, "karama": karama[0]}
        if pick % 7 == 5 and karama:
            return {"type": "karama_buy", "karama": karama[0]}
        if pick % 3 == 0 or (high and pick % 3 == 2):
            return {"type": "pass_bid"}
        return {"type": "bid", "amount": high + 1 + (pick % 3 if pick % 5 else pick)}
    if action == "support":
        return {"type": "bid_support", "amount": pick % 7}
    if action == "sale_choice":
        return {"type": "richese_sale", "when": ("first", "last", "none")[pick % 3]}
    if action == "offer":
        cache = state.cache or ["ornithopter"]
        return {"type": "richese_offer", "card": cache[pick % len(cache)],
                "auction": ("once_around", "silent")[pick % 2]}
    if action == "sealed":
        return {"type": "sealed_bid", "amount": pick % 6}
    if action == "ix":
        dealt = r.dealt if r is not None and r.dealt else ["kulon"]
        return {"type": "ix_set_aside", "card": dealt[pick % len(dealt)],
                "where": ("top", "bottom")[pick % 2]}
    if action == "decide":
        d = state.control.decision
        if d is not None and d.kind == "ix_replace":
            return {"type": "ix_replace", "event": d.event, "accept": pick % 2 == 0}
        if d is not None and d.kind == "ambassador_copy":
            return {"type": "ambassador_copy", "event": d.event, "token": "richese"}
        return {"type": "ambassador_decide", "event": d.event if d else "e1",
                "trigger": pick % 3 != 0,
                "beneficiary": None if pick % 3 == 0 else ("ecaz", "harkonnen")[pick % 2]}
    if action == "distrans":
        others = [c for c in hand if c != "distrans"] or ["kulon"]
        to = [s.faction for s in state.seats if s.faction != actor][pick % (len(state.seats) - 1)]
        return {"type": "distrans", "card": "distrans", "give": others[pick % len(others)],
                "to": to}
    if action == "ask":
        target = [s.faction for s in state.seats if s.faction != actor][0]
        return {"type": "ask_truthtrance", "card": "truthtrance-1", "target": target,
                "question": "Do you hold a Karama?"}
    if action == "answer":
        t = state.truthtrance
        promise = [None, {"spice": 1 + pick % 3}, {"box": BOX}][pick % 3]
        return {"type": "answer_truthtrance", "event": "e1" if t is None else t.event,
                "answer": ("yes", "no")[pick % 2], "promise": promise}
    return {"type": "discard", "card": "no-such-card"}


def natural_actor(state: RoomState, action: str, pick: int) -> str | None:
    """The seat the game waits on for this kind of command, if any."""
    w = state.control.response
    d = state.control.decision
    if action in ("respond", "semuta", "answer_gift") and w is not None:
        from dune_ledger.domain.responses import waiting

        asked = waiting(state, w) or [w.data.get("to", "emperor")]
        return asked[pick % len(asked)]
    if action == "decide" and d is not None:
        return d.player
    if action == "select" and state.search is not None:
        return state.search.owner
    if action == "begin":
        return state.holder(BOX)
    if action == "answer" and state.truthtrance is not None:
        return state.truthtrance.target
    if action == "enter":
        return next((s.faction for s in state.seats
                     if s.faction not in ("ecaz", "harkonnen", "richese")), None)
    r = round_of(state)
    if action in ("sale_choice", "offer"):
        return "richese"
    if action == "sealed" and r is not None and r.sale is not None:
        return next((f for f in r.sale.bidders if f not in r.sale.sealed), None)
    if action == "bid" and r is not None and r.sale is not None:
        return r.sale.turn
    if action == "bid" and r is not None and r.up is not None:
        return r.up.turn
    if action == "ix" and r is not None:
        return "ixians"
    if action == "open":
        return OPERATOR
    return None


def named_cards(command: dict[str, Any]) -> set[str]:
    named = {command.get(k) for k in ("card", "give", "karama")}
    if command.get("type") == "semuta" and command.get("action") == "take":
        named.add(SEMUTA)  # a take plays the sender's Semuta Drug
    promise = command.get("promise") or {}
    named.add(promise.get("box"))
    return {c for c in named if isinstance(c, str)}


# --- running one side ---------------------------------------------------------------------


class Side:
    """One room of the pair: its state, its public log entries and its append count."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.state = state_of(raw)
        self.log: list[str] = []

    def run(self, actor: str, command: dict[str, Any] | None, seed: int, now: datetime,
            system: bool = False) -> dict[str, Any]:
        before = self.state
        try:
            if system:
                tx = expire(before, seed, now)
                if tx is None:
                    return {"ok": False, "version": before.version}
            else:
                parse = parse_operator_command if actor == OPERATOR else parse_command
                tx = decide(before, actor, parse(command), Source(random.Random(seed)),
                            **clock(now))
        except Rejection as r:
            return {"ok": False, "version": before.version, "error": r.as_error()}
        self.state = tx.state
        self.extend_log(before, tx.events, actor)
        return {"ok": True, "version": tx.state.version,
                "events": public_events(before.version, tx.events)}

    def extend_log(self, before: RoomState, events: list[Any], actor: str) -> None:
        # The projector's own function, against the state just after each event.
        state = before.clone()
        first = state.version + 1
        for event in events:
            apply(state, event)
            rec = Recorded(ROOM, state.version, event, "", actor, None, first, "")
            text = public_entry_text(len(self.log) + 1, rec, state)
            if text is not None:
                self.log.append(text)


def public_events(version: int, events: list[Any]) -> list[Any]:
    out = []
    for i, event in enumerate(events, start=version + 1):
        fields = event.public()
        if fields is not None:
            out.append({"type": event.type, "version": i, **fields})
    return out


def clock(now: datetime) -> dict[str, Any]:
    """The clock port, where decide takes one."""
    import inspect

    return {"now": now} if "now" in inspect.signature(decide).parameters else {}


def expire(state: RoomState, seed: int, now: datetime) -> Any:
    """The worker's close of a window past its deadline, where the rules have one."""
    try:
        from dune_ledger.domain.responses import expire_window
    except ImportError:
        return None
    return expire_window(state, Source(random.Random(seed)), now)


def involved(side: RoomState, differ: set[str], spice: set[str]) -> set[str]:
    """The seats that may know a differing fact: holders, and a search owner seeing it."""
    out = set(spice)
    for s in side.seats:
        if differ & set(s.hand):
            out.add(s.faction)
    search = side.search
    if search is not None and differ & set(search.discard):
        out.add(search.owner)
    for r in side.receipts:
        if r.card in differ or r.bonus in differ:
            out.add(r.buyer)
    bidding = round_of(side)
    if bidding is not None:
        # Prescience: Atreides sees the card up; the Ixians the dealt cards while they
        # choose (RULES 10.2, 10.1).
        if bidding.up is not None and bidding.auction[:1] and bidding.auction[0] in differ:
            out.add("atreides")
        if bidding.stage == "ixians" and differ & set(bidding.dealt):
            out.add("ixians")
        # The winner pays from its own spice first, then from its ally's support (RULES
        # 10.2): the supporter learns what of its support was spent.
        for supporter in bidding.support:
            if side.seat(supporter).ally in spice:
                out.add(supporter)
    return out


def check_private_choice(state: RoomState, actor: str, command: dict[str, Any],
                         result: dict[str, Any], seed: int, now: datetime) -> None:
    """Every other candidate of a selection gives the same public record."""
    if not result["ok"] or command["type"] != "select_card":
        return
    for other in candidates(state, actor) or []:
        alt = decide(state, actor, parse_command({**command, "card": other}),
                     Source(random.Random(seed)), **clock(now))
        assert public_events(state.version, alt.events) == result["events"], other
        assert alt.state.version == result["version"]
        assert views.public_view(alt.state) == views.public_view(
            decide(state, actor, parse_command(command), Source(random.Random(seed)),
                   **clock(now)).state)


# A seat number past the seats: the seat the game waits on for that command.
step = st.tuples(st.integers(0, 12), st.sampled_from(WEIGHTED), st.integers(0, 20))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=rooms(), steps=st.lists(step, min_size=1, max_size=24), at=st.integers(0, 24))
def test_twins_differing_in_hidden_information_look_the_same(pair, steps, at):
    raw, twin, differ, spice, alt_select = pair
    if alt_select:
        # Harkonnen discards (a Semuta window may open), then the Box holder searches
        # (seat 12: the natural actor), somewhere in the run.
        steps = [*steps[:at], (2, "discard", at), (12, "begin", 0), (12, "select", at),
                 *steps[at:]]
    run_pair(raw, twin, differ, spice, steps, alt_select=alt_select, steps_are_generated=True)


# --- whole Bidding rounds (RULES 10.6) -------------------------------------------------


@st.composite
def bidding_rooms(draw: Any) -> tuple[dict[str, Any], dict[str, Any], set[str], set[str]]:
    """A room in the Bidding phase and its twin: two cards swapped between the top of the
    deck (what is dealt) and the deck below or a hand, or spice moved between two seats."""
    rnd = draw(st.randoms(use_true_random=False))
    extra = [f for f in ("ixians", "bene_gesserit", "fremen", "richese") if draw(st.booleans())]
    factions = ["atreides", "emperor", "harkonnen", *extra]
    ids = [c.id for c in room_cards(("choam_richese",)) if CARDS[c.id].zone != "cache"]
    rnd.shuffle(ids)
    pool = ["karama-1", "karama-2", *[c for c in ids if c not in ("karama-1", "karama-2")]]
    rnd.shuffle(pool[:6])
    seats = []
    for f in factions:
        n = rnd.randint(0, hand_limit(f) - (0 if rnd.random() < 0.2 else 1))
        hand, pool = pool[:n], pool[n:]
        seats.append({"faction": f, "spice": rnd.randint(0, 16), "hand": hand})
    ally = rnd.choice([f for f in factions if f != "atreides"])
    seats[0]["ally"], seats[factions.index(ally)]["ally"] = ally, "atreides"
    pile, deck = pool[:3], pool[3:]
    if rnd.random() < 0.3:
        pile, deck = pile + deck[2:], deck[:2]  # the deck runs out while dealing
    raw: dict[str, Any] = {
        "mode": draw(st.sampled_from(["advanced", "basic"])), "expansions": ["choam_richese"],
        "seed": 3, "bank": 100, "turn": 2, "phase": 4, "seats": seats, "discard": pile,
        "deck": deck}
    twin = {**raw, "seats": [{**x, "hand": list(x["hand"])} for x in seats],
            "discard": list(pile), "deck": list(deck)}
    kind = draw(st.integers(0, 2))
    hands = [x["hand"] for x in twin["seats"] if x["hand"]]
    if kind < 2 and len(twin["deck"]) >= 2:
        i = rnd.randrange(min(8, len(twin["deck"])))
        if kind == 0 or not hands:
            j = rnd.choice([k for k in range(len(twin["deck"])) if k != i])
            la, ia, lb, ib = twin["deck"], i, twin["deck"], j
        else:
            h = rnd.choice(hands)
            la, ia, lb, ib = twin["deck"], i, h, rnd.randrange(len(h))
        la[ia], lb[ib] = lb[ib], la[ia]
        return raw, twin, {la[ia], lb[ib]}, set()
    a, b = rnd.sample(range(len(seats)), 2)
    moved = rnd.randint(1, max(1, seats[b]["spice"]))
    twin["seats"][a]["spice"] += moved
    twin["seats"][b]["spice"] -= moved
    if twin["seats"][b]["spice"] < 0:
        twin["seats"][b]["spice"] += moved
        twin["seats"][a]["spice"] -= moved
        return raw, twin, set(), set()
    return raw, twin, set(), {factions[a], factions[b]}


bidding_step = st.tuples(st.integers(0, 12),
                         st.sampled_from(["next"] * 12 + ["support", "respond", "decide",
                                                          "bid", "discard", "draw"]),
                         st.integers(0, 20))


@settings(max_examples=EXAMPLES // 3, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(pair=bidding_rooms(), steps=st.lists(bidding_step, min_size=1, max_size=40),
       order=st.integers(0, 5), sealed=st.booleans())
def test_twins_look_the_same_over_a_whole_bidding_round(pair, steps, order, sealed):
    """Rooms differing in the dealt cards, the deck below them, a seat's spice or a
    sealed amount give every other seat the same views, actions, refusals, log, results
    and versions, Atreides' view of the card up aside (RULES 10.6)."""
    raw, twin, differ, spice = pair
    a, _ = run_pair(raw, twin, differ, spice, [(OPERATOR, "open", order), *steps],
                    steps_are_generated=True, alt_sealed=sealed)
    if a.state.version > 1:
        count_case("the round opened")
    if any(r for r in a.state.receipts):
        count_case("a card was sold")
    if any(e.startswith("The sealed bids") for e in a.log):
        count_case("sealed bids revealed")


# The differences the rules themselves make public (RULES 7: "not leaks"): the one
# place the test allows the twins to part. Each returns True when it applies.
def _pile_top(a: RoomState, b: RoomState, differ: set[str], command: dict[str, Any],
              ra: dict[str, Any], rb: dict[str, Any]) -> bool:
    return any(bool(s.discard) and s.discard[-1] in differ for s in (a, b))


def _guild_refund(a: RoomState, b: RoomState, differ: set[str], command: dict[str, Any],
                  ra: dict[str, Any], rb: dict[str, Any]) -> bool:
    stops = [e for r in (ra, rb) for e in r.get("events", []) if e["type"] == "ShipmentStopped"]
    return command.get("type") == "guild_stop" and ra["ok"] and rb["ok"] and \
        len({e["refunded"] for e in stops}) == 2


# The commands whose acceptance rests on the sender's own spice by the rules.
SPENDING = ("bid", "bid_support", "sealed_bid")

def _sealed_revealed(a: RoomState, b: RoomState, differ: set[str], command: dict[str, Any],
                     ra: dict[str, Any], rb: dict[str, Any]) -> bool:
    shown = [[e for e in r.get("events", []) if e["type"] == "SealedBidsRevealed"]
             for r in (ra, rb)]
    return shown[0] != shown[1]


PUBLIC_BY_RULES = {
    "RULES 7: the top of the discard pile is public": _pile_top,
    "RULES 3.5, 7: a Guild stop that refunds moves the card to its creator's hand "
    "for all to count (a claimed record refunds nothing)": _guild_refund,
    "RULES 10.5: every sealed amount is public once all are in": _sealed_revealed,
}


def made_public(a: RoomState, b: RoomState, differ: set[str], command: dict[str, Any],
                ra: dict[str, Any], rb: dict[str, Any]) -> str | None:
    return next((why for why, applies in PUBLIC_BY_RULES.items()
                 if applies(a, b, differ, command, ra, rb)), None)


def run_pair(raw: dict[str, Any], twin_raw: dict[str, Any], differ: set[str], spice: set[str],
             steps: list[tuple[Any, str, int]], alt_select: bool = False,
             steps_are_generated: bool = False, alt_sealed: bool = False) -> tuple[Side, Side]:
    """Run `steps` (a seat number, or a faction) on both rooms, checking after each;
    `alt_select`: the twin's first Box selection takes another candidate;
    `alt_sealed`: the twin's first sealed bid is another amount (its sender knows it);
    `steps_are_generated`: inside hypothesis, which counts the accepted commands."""
    a, b = Side(raw), Side(twin_raw)
    differ = set(differ)
    factions = [s.faction for s in a.state.seats]
    now = T0
    for i, (who, action, pick) in enumerate(steps):
        if action == "next":
            action, who = pending(a.state), len(factions)
        if isinstance(who, str):
            actor = who
        else:
            actor = (natural_actor(a.state, action, pick) if who >= len(factions) else None) \
                or factions[who % len(factions)]
        now += timedelta(seconds=1 + 20 * (pick % 3))
        if action == "deadline":
            ra = a.run(actor, None, i, now, system=True)
            rb = b.run(actor, None, i, now, system=True)
            command: dict[str, Any] = {}
        else:
            command = command_for(a.state, actor, action, pick) or {}
            if named_cards(command) & differ:
                continue
            twin_command = command
            if alt_select and command["type"] == "select_card":
                offered = candidates(b.state, actor) or []
                # Most often one side takes a card another rule watches: a shipping cost,
                # or a card a Semuta window is bound to (if it were offered).
                watched = [c for c in offered if c in {sc.card for sc in a.state.shipping_costs}
                           | semuta_bound(a.state)]
                if watched and pick % 4:
                    command = {**command, "card": watched[pick % len(watched)]}
                other = [c for c in offered if c != command["card"]]
                if other:
                    twin_command = {**command, "card": other[pick % len(other)]}
                    differ |= {command["card"], twin_command["card"]}
                    alt_select = False
                    if steps_are_generated:
                        count_case("twin: the search took another card")
            if alt_sealed and command["type"] == "sealed_bid":
                twin_command = {**command, "amount": max(0, command["amount"] - 1)}
                if twin_command != command:
                    spice = spice | {actor}  # its own amount: its own to know
                    alt_sealed = False
                    if steps_are_generated:
                        count_case("twin: a sealed bid of another amount")
            before = a.state
            ra = a.run(actor, command, i, now)
            rb = b.run(actor, twin_command, i, now)
            check_private_choice(before, actor, command, ra, i, now)
        if ra["ok"] and steps_are_generated:
            count_case(f"accepted: {command.get('type', 'window_deadline')}")
        if made_public(a.state, b.state, differ, command, ra, rb):
            return a, b  # the rules showed a differing fact to everyone: the pair parted
        if actor in spice and command.get("type") in SPENDING and ra["ok"] != rb["ok"]:
            # A seat may spend what it holds: with other spice its choice is another one,
            # made on its own knowledge (RULES 10.6).
            return a, b
        quiet = involved(a.state, differ, spice) | involved(b.state, differ, spice)
        if actor in spice:
            assert (ra["ok"], ra["version"], ra.get("events")) == \
                   (rb["ok"], rb["version"], rb.get("events")), (actor, command)
        else:
            # The code and message of a refusal too: the command names no differing card.
            assert ra == rb, (actor, command)
        assert a.state.version == b.state.version
        assert views.public_view(a.state) == views.public_view(b.state), (actor, command)
        assert a.log == b.log, (actor, command)
        for f in factions:
            if f not in quiet:
                assert views.seat_view(a.state, f) == views.seat_view(b.state, f), (f, command)
            elif f not in spice:
                assert own_actions(a.state, f, differ) == own_actions(b.state, f, differ), f
        check_probes(a.state, b.state, factions, quiet, spice, differ, every_card=False)
    quiet = involved(a.state, differ, spice) | involved(b.state, differ, spice)
    check_probes(a.state, b.state, factions, quiet, spice, differ, every_card=True)
    return a, b


# --- the probe set: what each seat is told when it asks --------------------------------


def own_actions(state: RoomState, faction: str, differ: set[str]) -> list[dict[str, Any]]:
    """A seat's `actions`, less those naming a card that differs (its own to know)."""
    return [act for act in actions(state, faction) if not named_cards(act) & differ]


def probe_commands(state: RoomState, me: str, cards: list[str]) -> list[dict[str, Any]]:
    """Each command type, with each card id of `cards` where it takes one."""
    others = [s.faction for s in state.seats if s.faction != me]
    to = state.seat(me).ally or others[0]
    w = state.control.response
    event = w.event if w is not None else "e1"
    search = state.search.event if state.search is not None else "e1"
    question = "e1" if state.truthtrance is None else state.truthtrance.event
    d = state.control.decision
    decision = d.event if d is not None else "e1"
    out: list[dict[str, Any]] = [
        {"type": "set_autopilot", "enabled": True, "profile": "easy"},
        {"type": "ambassador_decide", "event": decision, "trigger": True,
         "beneficiary": "ecaz"},
        {"type": "ambassador_decide", "event": decision, "trigger": False},
        {"type": "ambassador_copy", "event": decision, "token": "richese"},
        {"type": "draw"}, {"type": "respond", "event": event, "action": "pass"},
        {"type": "semuta", "event": event, "action": "pass"},
        {"type": "answer_gift", "event": event, "accept": True},
        {"type": "answer_truthtrance", "event": question, "answer": "yes"},
        {"type": "enter_territory", "territory": "arrakeen", "via": "shipment"},
        {"type": "pass_bid"}, {"type": "bid", "amount": 1}, {"type": "bid", "amount": 6},
        {"type": "bid", "amount": 25}, {"type": "bid_support", "amount": 4},
        {"type": "ix_replace", "event": decision, "accept": True}]
    for cid in cards:
        out += [
            {"type": "begin_search", "card": cid},
            {"type": "select_card", "search": search, "card": cid},
            {"type": "discard", "card": cid},
            {"type": "distrans", "card": "distrans", "give": cid, "to": to},
            {"type": "offer_gift", "card": cid, "to": to},
            {"type": "ask_truthtrance", "card": cid, "target": others[0], "question": "?"},
            {"type": "respond", "event": event, "action": "karama", "card": cid},
            {"type": "semuta", "event": event, "action": "take", "card": cid},
            {"type": "guild_stop", "card": cid},
            {"type": "answer_truthtrance", "event": question, "answer": "no",
             "promise": {"box": cid}},
            {"type": "bid", "amount": 30, "karama": cid},
            {"type": "karama_buy", "karama": cid},
            {"type": "ix_set_aside", "card": cid, "where": "top"}]
    return out


_PARSED: dict[str, Any] = {}


def outcome(state: RoomState, actor: str, command: dict[str, Any]) -> Any:
    """Accepted, or the refusal's code and message: asked as `domain.actions` asks,
    on a probe that stops at the first event (handlers validate before they emit)."""
    key = repr(sorted(command.items()))
    parsed = _PARSED.get(key)
    if parsed is None:
        parsed = _PARSED[key] = parse_command(command)
    try:
        admit(state, actor, parsed)(Probe(state), actor, parsed)
    except Rejection as r:
        return r.code, r.message
    except Accepted:
        return "accepted"
    return "emits nothing"


def check_probes(a: RoomState, b: RoomState, factions: list[str], quiet: set[str],
                 spice: set[str], differ: set[str], every_card: bool) -> None:
    if every_card:
        cards = [c.id for c in room_cards(tuple(a.expansions))]
    else:
        # The cards that matter now: the differing ones, those the rules react to, an
        # open window's, the shipping costs'.
        w = a.control.response
        cards = sorted(differ | set(HOT) | set((w.data.get("cards") or []) if w else [])
                       | {sc.card for sc in a.shipping_costs})
    for f in factions:
        if f in spice:
            continue  # its own spice decides what it may pay: its own to know
        for command in probe_commands(a, f, cards):
            if f in quiet and named_cards(command) & differ:
                continue
            seen = outcome(a, f, command), outcome(b, f, command)
            assert seen[0] == seen[1], (f, command, seen)
            if seen[0] != "accepted":
                # Messages never repeat the value sent (docs/input.md).
                assert not any(c in seen[0][1] for c in named_cards(command)), seen[0]


# --- each leak of issue 17, as a pair (each failed before its fix) ------------------------


def small(**changes: Any) -> dict[str, Any]:
    ids = [c.id for c in room_cards(("choam_richese",))]
    raw: dict[str, Any] = {
        "mode": "advanced", "expansions": ["choam_richese"], "seed": 3, "bank": 100,
        "turn": 2, "phase": 6,
        "seats": [
            {"faction": "richese", "spice": 30, "hand": [BOX, "crysknife", "baliset"],
             "ally": "emperor"},
            {"faction": "emperor", "spice": 30, "hand": [SEMUTA, "karama-1"],
             "ally": "richese"},
            {"faction": "harkonnen", "spice": 30, "hand": ["shield-2", "kulon"]},
        ],
        "discard": ["shield-1", "karama-2", "maula-pistol"],
    }
    raw.update(changes)
    placed = {c for s in raw["seats"] for c in s["hand"]} | set(raw["discard"])
    raw["deck"] = [c for c in ids if c not in placed and CARDS[c].zone != "cache"]
    raw["richese_cache"] = [c for c in ids if c not in placed and CARDS[c].zone == "cache"]
    return raw


def swapped(raw: dict[str, Any], a: tuple[str, str], b: tuple[str, str]) -> dict[str, Any]:
    """The twin with card a[1] of seat a[0] and card b[1] of seat b[0] exchanged."""
    twin = {**raw, "seats": [{**s, "hand": list(s["hand"])} for s in raw["seats"]]}
    hand = {s["faction"]: s["hand"] for s in twin["seats"]}
    ia, ib = hand[a[0]].index(a[1]), hand[b[0]].index(b[1])
    hand[a[0]][ia], hand[b[0]][ib] = b[1], a[1]
    return twin


def test_whether_a_semuta_window_opens_does_not_tell_the_discarder_who_holds_it():
    raw = small()
    twin = swapped(raw, ("emperor", SEMUTA), ("richese", "baliset"))
    run_pair(raw, twin, {SEMUTA, "baliset"}, set(), [("richese", "discard", 1)])


def test_a_semuta_pass_takes_the_same_version_whoever_holds_semuta():
    raw = small()
    twin = swapped(raw, ("emperor", SEMUTA), ("harkonnen", "kulon"))
    run_pair(raw, twin, {SEMUTA, "kulon"}, set(),
             [("richese", "discard", 1), ("emperor", "semuta", 0), ("harkonnen", "semuta", 0)])


def test_the_box_taking_a_shipping_cost_appends_what_any_other_card_appends():
    raw = small(shipping_costs=[{"card": "karama-2", "creator": "harkonnen",
                                 "beneficiary": "harkonnen", "price": 4}])
    twin = swapped(raw, ("emperor", "karama-1"), ("harkonnen", "kulon"))
    # check_private_choice decides every candidate, the cost card among them.
    run_pair(raw, twin, {"karama-1", "kulon"}, set(),
             [("richese", "begin", 0), ("richese", "select", 0), ("richese", "select", 1)])


def ambassador_room() -> dict[str, Any]:
    ids = [c.id for c in room_cards(("choam_richese", "ecaz_moritani"))]
    seats = [
        {"faction": "ecaz", "spice": 30, "hand": ["baliset"], "ally": "harkonnen"},
        {"faction": "harkonnen", "spice": 30, "hand": ["crysknife", "stunner"],
         "ally": "ecaz"},
        {"faction": "emperor", "spice": 30, "hand": ["kulon"]},
        {"faction": "atreides", "spice": 30, "hand": ["karama-2", "shield-1"]},
    ]
    placed = {c for s in seats for c in s["hand"]}
    return {
        "mode": "advanced", "expansions": ["choam_richese", "ecaz_moritani"], "seed": 3,
        "bank": 100, "turn": 3, "phase": 6, "seats": seats, "discard": [],
        "deck": [c for c in ids if c not in placed and CARDS[c].zone != "cache"],
        "richese_cache": [c for c in ids if c not in placed and CARDS[c].zone == "cache"],
        "ambassadors": {"placed": [{"token": "richese", "territory": "arrakeen"}],
                        "cohort": ["richese", "fremen", "guild", "ixians", "bene_gesserit"],
                        "copy_pool": ["emperor", "choam", "atreides"]},
    }


def test_who_is_asked_in_a_karama_window_does_not_tell_who_holds_a_karama():
    raw = ambassador_room()
    twin = swapped(raw, ("atreides", "karama-2"), ("emperor", "kulon"))
    a, _ = run_pair(raw, twin, {"karama-2", "kulon"}, set(),
                    [("atreides", "enter", 0), ("ecaz", "decide", 2),
                     ("emperor", "respond", 0), ("atreides", "respond", 0)])
    assert a.state.version > 6  # the purchase and its windows happened


def test_a_window_past_its_deadline_closes_the_same_in_both_rooms():
    raw = ambassador_room()
    twin = swapped(raw, ("atreides", "karama-2"), ("emperor", "kulon"))
    run_pair(raw, twin, {"karama-2", "kulon"}, set(),
             [("atreides", "enter", 0), ("ecaz", "decide", 2), ("emperor", "respond", 0),
              ("ecaz", "deadline", 2), ("ecaz", "deadline", 2), ("ecaz", "deadline", 2)])


# --- each leak of issue 24, as a pair (each failed before its fix) ------------------------


def test_the_semuta_holder_is_told_the_same_whatever_the_box_took():
    """24.4: Harkonnen's discard opens a window the Box search suspends; whichever card
    the search takes, the holder's actions and refusals are the same (RULES 3.6)."""
    raw = small()
    a, b = run_pair(raw, raw, set(), set(),
                    [("harkonnen", "discard", 1), ("richese", "begin", 0),
                     ("richese", "select", 1)], alt_select=True)
    assert a.state.search is None and a.state.control.response.kind == "semuta"
    assert a.state.seat("richese").hand != b.state.seat("richese").hand


def test_the_guild_is_told_the_same_whatever_the_box_took():
    """24.5: the cost's creator at its hand limit; the Box takes the cost card in one
    room and another card in the twin: the Guild's stop is refused alike (RULES 3.5)."""
    seats = [*small()["seats"][:2],
             {"faction": "harkonnen", "spice": 30, "hand": [
                 "shield-2", "stunner", "chaumas", "slip-tip", "snooper-1", "snooper-2",
                 "snooper-3", "snooper-4"]},
             {"faction": "guild", "spice": 30, "hand": ["kulon"]}]
    raw = small(seats=seats, shipping_costs=[{"card": "karama-2", "creator": "harkonnen",
                                              "beneficiary": "harkonnen", "price": 4}])
    a, b = run_pair(raw, raw, set(), set(),
                    [("richese", "begin", 0), ("richese", "select", 1),
                     ("guild", "guild_stop", 0)], alt_select=True)
    took = {a.state.seat("richese").hand[-1], b.state.seat("richese").hand[-1]}
    assert "karama-2" in took and len(took) == 2


def test_semuta_below_the_top_of_a_layout_pile_opens_the_window_as_in_a_hand():
    """24.6: Semuta staged below the pile's top, or in a hand: the same public record
    (RULES 7: the initial pile is unseen below its top)."""
    raw = small()
    twin = {**raw, "seats": [{**s, "hand": list(s["hand"])} for s in raw["seats"]],
            "discard": list(raw["discard"])}
    twin["seats"][1]["hand"][0], twin["discard"][0] = twin["discard"][0], SEMUTA
    a, _ = run_pair(raw, twin, {SEMUTA, "shield-1"}, set(), [("harkonnen", "discard", 1)])
    assert a.state.control.response.kind == "semuta"


# --- room at: a version inside an append shows the state after it (app level) -------------


def test_room_at_a_version_inside_an_append_shows_the_end_of_that_append():
    from dune_ledger.infrastructure.storage import open_rooms

    # The pile below its top differs; a search retrieves a card both rooms hold.
    raw = small(discard=["shield-1", "karama-2", "maula-pistol", "snooper-1"])
    twin = {**raw, "discard": ["karama-2", "shield-1", "maula-pistol", "snooper-1"]}
    seen: list[list[dict[str, Any]]] = []
    for layout in (raw, twin):
        with open_rooms("memory://") as app:
            app.clock = lambda: T0
            room = app.create_room(layout)["room"]
            app.execute(room, "richese", {"type": "begin_search", "card": BOX})
            search = app.load(room).state.search
            assert search is not None
            done = app.execute(room, "richese", {"type": "select_card", "search": search.event,
                                                 "card": "snooper-1"})
            assert done["ok"] and len(done["events"]) > 3  # one append of several events
            last = app.load(room).version
            seen.append([{**app.view_at(room, v, "harkonnen"), "room": None}
                         for v in range(1, last + 1)])
            inside = done["events"][0]["version"]  # CardRetrieved: the pile's top moved
            assert app.view_at(room, inside, "harkonnen")["version"] == last
    assert seen[0] == seen[1]


# --- old streams keep their meaning (upcasts) ------------------------------------------------


def stored(fact: Any, version: int) -> bytes:
    import orjson

    return orjson.dumps({"fact": fact, "v": version, "prev": "", "seat": None, "cmd": None,
                         "append": 1, "at": "2026-01-01T00:00:00+00:00", "meta": {}})


def test_a_stream_recorded_before_issue_17_replays_with_its_meaning():
    from dune_ledger.domain.gifts import offer_of
    from dune_ledger.domain.guild import record
    from dune_ledger.domain.rules import replay
    from dune_ledger.infrastructure.storage import open_rooms

    raw = small(shipping_costs=[{"card": "karama-2", "creator": "harkonnen",
                                 "beneficiary": "harkonnen", "price": 4}])
    with open_rooms("memory://") as app:
        mapper = app.mapper
    created = build_room(parse_layout(raw), str(ROOM), Source(random.Random(1)))
    old: list[tuple[str, dict[str, Any], int]] = [
        ("RoomCreated", created.model_dump(mode="json"), 1),
        ("FeePaid", {"seat": "richese", "amount": 2, "card": BOX}, 1),
        ("SearchOpened", {"search": "e3", "owner": "richese", "box": BOX, "turn": 2,
                          "phase": 6, "discard": ["shield-1", "karama-2", "maula-pistol"],
                          "parent": {}}, 1),
        ("CardRetrieved", {"search": "e3", "seat": "richese", "card": "karama-2"}, 1),
        ("ShippingCostClaimed", {"card": "karama-2", "search": "e3"}, 1),
        ("PileShuffled", {"search": "e3", "order": ["maula-pistol", "shield-1"]}, 1),
        ("BoxDiscarded", {"search": "e3", "seat": "richese", "card": BOX}, 1),
        ("SearchClosed", {"search": "e3"}, 1),
        ("SemutaReactionQueued", {"event": "e7", "discarder": "richese", "cards": [BOX],
                                  "turn": 2, "phase": 6}, 1),
        ("SemutaWindowOpened", {"event": "e7"}, 1),
        ("SemutaPassed", {"event": "e7", "seat": "emperor"}, 1),
        ("SemutaWindowClosed", {"event": "e7"}, 1),
        ("GiftOffered", {"event": "e13", "giver": "richese", "to": "emperor",
                         "card": "crysknife", "turn": 2, "phase": 6}, 1),
    ]
    records = [mapper.recorded(ROOM, i, topic, stored(fact, v))
               for i, (topic, fact, v) in enumerate(old, start=1)]
    state = replay(r.fact for r in records)
    # The claim happened once, by its own old event; the new field did not add one.
    assert records[3].fact.claimed is False  # type: ignore[attr-defined]
    assert record(state, "karama-2").claimed is True  # type: ignore[union-attr]
    assert "karama-2" in state.seat("richese").hand
    # A v1 pass was private (only the holder could pass): it stays out of the log, and
    # out of the view of a window still open.
    assert records[10].fact.public() is None
    before_close = replay(r.fact for r in records[:11])
    assert views.public_view(before_close)["response"]["passes"] == []
    # A v1 offer stays where it was recorded, and is shown as the room's response.
    assert state.gift is not None and state.control.response is None
    w = offer_of(state)
    assert w is not None and views.public_view(state)["response"]["waiting"] == ["emperor"]
    accepted = decide(state, "emperor", parse_command(
        {"type": "answer_gift", "event": w.event, "accept": True}), Source(random.Random(1)))
    assert "crysknife" in accepted.state.seat("emperor").hand and accepted.state.gift is None
    # What an old stream stored is what the chain hashes: the upcast never rewrites it.
    assert records[3].body() == stored(old[3][1], 1)


def test_a_sealed_amount_changes_nothing_anyone_else_sees_until_all_are_in():
    """RULES 10.5, 10.6: the twin's first sealed bid is another amount; every other seat
    is shown the same until the reveal, which the rules make public."""
    ids = [c.id for c in room_cards(("choam_richese",))]
    seats = [{"faction": f, "spice": 10, "hand": []}
             for f in ("emperor", "atreides", "harkonnen", "richese")]
    raw = {"mode": "advanced", "expansions": ["choam_richese"], "seed": 3, "bank": 100,
           "turn": 2, "phase": 4, "seats": seats, "discard": [],
           "deck": [c for c in ids if CARDS[c].zone != "cache"]}
    steps: list[tuple[Any, str, int]] = [
        (OPERATOR, "open", 0), ("richese", "sale_choice", 0), ("richese", "offer", 1),
        ("emperor", "sealed", 3), ("atreides", "sealed", 2), ("harkonnen", "sealed", 4)]
    a, b = run_pair(raw, raw, set(), set(), steps, alt_sealed=True)
    assert seat_sealed(a.state) == {"emperor": 3, "atreides": 2, "harkonnen": 4}
    assert seat_sealed(b.state) == {"emperor": 2, "atreides": 2, "harkonnen": 4}
    a, b = run_pair(raw, raw, set(), set(), [*steps, ("richese", "sealed", 0)],
                    alt_sealed=True)
    assert any("The sealed bids" in str(entry) for entry in a.log)  # the pair parted there


def seat_sealed(state: RoomState) -> dict[str, int]:
    r = round_of(state)
    assert r is not None and r.sale is not None
    return dict(r.sale.sealed)
