"""A stateful fuzz of real command sequences through the application (RULES 6, 7, 8).

Hypothesis generates rooms (expansions, seats, where every card lies, spice up
to the top of its range, alliances, reservations, shipping costs, Ecaz's
tokens) and plays two of them side by side on one RoomsApp: commands built
from the true state (the cards a seat holds, the open search, window or
question) and hostile ones (any card id, another seat's hidden cards, stale
events, values of the wrong type). After every command:

- the result has the result shape;
- a rejection changes nothing: same version, no event, no randomness drawn;
- the result, the error message, every seat's view and the public view name
  no card hidden from their reader (tests/leaks.py), and the other room reads
  exactly as before;

and when a run ends, every outbound path of both rooms at every version is
scanned (`leaks.scan_room`). A second test throws mangled layouts at room
creation: each is a room or a LayoutError, never another exception.

Runs are derandomized (the same examples every time), so a CI failure repeats.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from dune_ledger.domain.ambassador import ECAZ, TOKENS
from dune_ledger.domain.bidding import round_of
from dune_ledger.domain.catalog import CARDS, EXPANSIONS, FACTIONS, is_box, room_cards
from dune_ledger.domain.commands import SPICE_MAX
from dune_ledger.domain.errors import LayoutError
from dune_ledger.domain.game import COMMAND_TYPES, OPERATOR
from dune_ledger.domain.state import RoomState
from dune_ledger.infrastructure.storage import open_rooms
from tests import leaks
from tests.support import Factory
from tests.support import layout as support_layout

TERRITORIES = ["arrakeen", "carthag", "tueks-sietch", "habbanya-sietch", "sietch-tabr"]
ALL_CARDS = sorted(CARDS)
FREE_TEXT = ("territory", "question")
FEATURED = ("nullentropy-box", "semuta-drug", "karama-1", "truthtrance-1", "distrans")
spice = st.sampled_from([0, 2, 3, 5, 10, SPICE_MAX]) | st.integers(0, SPICE_MAX)


@st.composite
def layouts(draw: st.DrawFn) -> dict[str, Any]:
    """A valid layout: every card of the room placed once, the rest left to the shuffle."""
    expansions = draw(st.lists(st.sampled_from(EXPANSIONS), unique=True, max_size=3))
    if draw(st.integers(0, 3)):  # most rooms hold the Box
        expansions = sorted({*expansions, "choam_richese"}, key=EXPANSIONS.index)
    # Some rooms are set for the Ambassador purchase and its windows, some for the
    # Guild's stop; the rest are anything.
    scene = draw(st.sampled_from(["any", "any", "ambassador", "guild", "bidding"]))
    if scene == "ambassador":
        expansions = sorted({*expansions, "choam_richese", "ecaz_moritani"},
                            key=EXPANSIONS.index)
    pool = [f for f in FACTIONS if f != ECAZ or "ecaz_moritani" in expansions]
    factions = draw(st.lists(st.sampled_from(pool), unique=True, min_size=2, max_size=5))
    lead = {"ambassador": [ECAZ, "emperor"], "guild": ["guild"], "any": [],
            "bidding": ["atreides", "ixians"]}[scene]
    factions = [*lead, *(f for f in factions if f not in lead)][:max(len(factions), 3)]
    seats: list[dict[str, Any]] = [{"faction": f, "spice": draw(spice), "hand": []}
                                   for f in factions]
    if draw(st.booleans()):
        seats[0]["ally"] = seats[1]["faction"]
        seats[1]["ally"] = seats[0]["faction"]
    cards = [c.id for c in room_cards(tuple(expansions))]
    # zone per card: a hand, the discard pile, left unplaced (deck or cache), removed
    # Hands of about three cards (some above their limit), a pile of about five.
    zones = draw(st.lists(st.sampled_from([*range(len(seats)), "discard", "discard"]
                                          + ["unplaced"] * 10 + ["removed"]),
                          min_size=len(cards), max_size=len(cards)))
    for i, cid in enumerate(cards):
        # The cards the rules under test turn on, mostly in a hand.
        if cid in FEATURED and draw(st.sampled_from([True, True, False])):
            zones[i] = draw(st.integers(0, len(seats) - 1))
    discard: list[str] = []
    removed: list[str] = []
    for cid, zone in zip(cards, zones, strict=True):
        if isinstance(zone, int):
            seats[zone]["hand"].append(cid)
        elif zone == "discard":
            discard.append(cid)
        elif zone == "removed":
            removed.append(cid)
    raw: dict[str, Any] = {
        "mode": draw(st.sampled_from(["advanced", "basic"])), "expansions": expansions,
        "seed": draw(st.integers(0, 2**32)), "bank": draw(spice),
        "turn": draw(st.integers(1, 10)),
        "phase": 4 if scene == "bidding" else draw(st.integers(1, 9)),
        "seats": seats, "discard": discard, "removed": removed,
    }
    first = seats[0]
    if first["spice"] and draw(st.booleans()):
        raw["reservations"] = [{"faction": first["faction"], "reason": "auction",
                                "amount": draw(st.integers(0, first["spice"]))}]
    if scene == "guild" and "karama-2" not in discard:
        for zone in (*(s["hand"] for s in seats), removed):
            if "karama-2" in zone:
                zone.remove("karama-2")
        discard.append("karama-2")
    karamas = [c for c in discard if CARDS[c].is_karama]
    if karamas and (scene == "guild" or draw(st.booleans())):
        creator = draw(st.sampled_from(factions))
        raw["shipping_costs"] = [{"card": karamas[0], "creator": creator,
                                  "beneficiary": creator, "price": draw(spice)}]
    if ECAZ in factions:
        tokens = draw(st.lists(st.sampled_from([t for t in TOKENS if t != ECAZ]), unique=True,
                               min_size=1, max_size=len(TERRITORIES)))
        raw["ambassadors"] = {"placed": [{"token": t, "territory": where}
                                         for t, where in zip(tokens, TERRITORIES, strict=False)]}
    return raw


def events_of(state: RoomState) -> list[str]:
    """The event ids a seat could quote now (and a stale one)."""
    found = ["e1", "e999"]
    if state.search is not None:
        found.append(state.search.event)
    for part in (state.control.decision, state.control.response):
        if part is not None:
            found.append(part.event)
    for part in (state.truthtrance, state.gift):
        if part is not None:
            found.append(part.event)
    if state.semuta is not None:
        found += [w.event for w in state.semuta.queue]
    return found


def likely(state: RoomState, seat: str) -> list[dict[str, Any]]:
    """Commands the rules may well accept now: what a client's controls would send."""
    me = state.seat(seat)
    out: list[dict[str, Any]] = []
    search = state.search
    if search is not None:
        if search.owner == seat:
            out += [{"type": "select_card", "search": search.event, "card": cid}
                    for cid in search.discard if not is_box(cid)]
        return out or [{"type": "set_autopilot", "enabled": False}]
    truthtrance = state.truthtrance
    if truthtrance is not None and truthtrance.target == seat:
        out += [{"type": "answer_truthtrance", "event": truthtrance.event, "answer": a}
                for a in ("yes", "no")]
        out.append({"type": "answer_truthtrance", "event": truthtrance.event,
                    "answer": "yes", "promise": {"spice": 1}})
    window = state.control.response
    if window is not None:
        kind = "semuta" if window.kind == "semuta" else "respond"
        out.append({"type": kind, "event": window.event, "action": "pass"})
        take = "take" if kind == "semuta" else "karama"
        out += [{"type": kind, "event": window.event, "action": take, "card": cid}
                for cid in me.hand]
        if window.kind == "gift":
            out += [{"type": "answer_gift", "event": window.event, "accept": a}
                    for a in (True, False)]
    decision = state.control.decision
    if decision is not None and decision.player == seat:
        for beneficiary in {seat, me.ally or seat}:
            out.append({"type": "ambassador_decide", "event": decision.event, "trigger": True,
                        "beneficiary": beneficiary})
        out.append({"type": "ambassador_decide", "event": decision.event, "trigger": False})
        out += [{"type": "ambassador_copy", "event": decision.event, "token": t}
                for t in decision.data.get("options", [])]
    out.append({"type": "draw"})
    out += [{"type": "discard", "card": cid} for cid in me.hand]
    others = [s.faction for s in state.seats if s.faction != seat]
    for cid in me.hand:
        effect = CARDS[cid].effect
        if is_box(cid):
            out.append({"type": "begin_search", "card": cid})
        elif effect == "truthtrance":
            out.append({"type": "ask_truthtrance", "card": cid, "target": others[0],
                        "question": "Do you hold a Karama?"})
        elif cid == "distrans":
            out += [{"type": "distrans", "card": cid, "give": give, "to": others[-1]}
                    for give in me.hand if give != cid]
    if me.ally is not None:
        out += [{"type": "offer_gift", "card": cid, "to": me.ally} for cid in me.hand]
    if state.ambassadors is not None:
        out += [{"type": "enter_territory", "territory": where, "via": via}
                for where in state.ambassadors.placed for via in ("movement", "worm")]
    out += [{"type": "guild_stop", "card": sc.card} for sc in state.shipping_costs]
    bidding = round_of(state)
    if bidding is not None:
        high = bidding.up.high.amount if bidding.up and bidding.up.high else 0
        out += [{"type": "pass_bid"}, {"type": "bid", "amount": high + 1},
                {"type": "bid", "amount": high + 2}, {"type": "bid_support", "amount": 2},
                {"type": "richese_sale", "when": "none"},
                {"type": "richese_sale", "when": "first"}, {"type": "sealed_bid", "amount": 1},
                {"type": "sealed_bid", "amount": 0}]
        out += [{"type": "richese_offer", "card": cid, "auction": auction}
                for cid in state.cache[:2] for auction in ("once_around", "silent")]
        out += [{"type": kind, "karama": cid} | ({"amount": high + 5} if kind == "bid" else {})
                for cid in me.hand if CARDS[cid].is_karama for kind in ("bid", "karama_buy")]
        out += [{"type": "ix_set_aside", "card": cid, "where": "top"}
                for cid in bidding.dealt]
    if decision is not None and decision.kind == "ix_replace":
        out += [{"type": "ix_replace", "event": decision.event, "accept": a}
                for a in (True, False)]
    return out


def awaited_seats(state: RoomState) -> list[str]:
    """The seats an open search, decision, question, offer or window waits for."""
    if state.search is not None:
        return [state.search.owner]
    out = []
    if state.control.decision is not None:
        out.append(state.control.decision.player)
    for waiting in (state.truthtrance and state.truthtrance.target,
                    state.gift and state.gift.to):
        if waiting in {s.faction for s in state.seats}:
            out.append(waiting)
    if state.control.response is not None:
        out += [s.faction for s in state.seats if s.hand
                and s.faction not in state.control.response.passes]
    bidding = round_of(state)
    if bidding is not None and bidding.up is not None:
        out.append(bidding.up.turn)
    elif bidding is not None and bidding.sale is not None:
        sale = bidding.sale
        out += [sale.turn] if sale.turn else [f for f in sale.bidders if f not in sale.sealed]
    elif bidding is not None and bidding.stage != "payment":
        out.append("ixians" if bidding.stage == "ixians" else "richese")
    return [f for f in out if f in {s.faction for s in state.seats}]


@st.composite
def plausible(draw: st.DrawFn, state: RoomState, seat: str) -> dict[str, Any]:
    """A command a client might send now: mostly what its controls would send, else
    any type with its own cards, other cards and the open events."""
    if draw(st.sampled_from([True, True, True, False])):
        return dict(draw(st.sampled_from(likely(state, seat))))
    hand = state.seat(seat).hand
    others = [s.faction for s in state.seats if s.faction != seat]
    mine = st.sampled_from(hand) if hand else st.sampled_from(ALL_CARDS)
    anything = st.sampled_from(ALL_CARDS)
    card = draw(st.one_of(mine, mine, mine, anything))
    event = draw(st.sampled_from(events_of(state)))
    # Mostly a seated faction; sometimes one with no seat in this room.
    target = draw(st.sampled_from(others) | st.sampled_from(others) | st.sampled_from(FACTIONS))
    kind = draw(st.sampled_from(sorted(COMMAND_TYPES)))
    if state.search is not None and state.search.owner == seat and draw(st.integers(0, 2)):
        kind = "select_card"
    if kind == "begin_search":
        boxes = [c for c in hand if is_box(c)]
        return {"type": kind, "card": boxes[0] if boxes else card}
    if kind == "select_card":
        pool = list(state.search.discard) if state.search is not None else ALL_CARDS
        return {"type": kind, "search": event, "card": draw(st.sampled_from(pool or ALL_CARDS))}
    if kind == "set_autopilot":
        return {"type": kind, "enabled": draw(st.booleans()),
                "profile": draw(st.sampled_from([None, "easy", "medium", "hard", "brutal"]))}
    if kind == "draw":
        return {"type": kind}
    if kind in ("discard", "guild_stop"):
        costs = [sc.card for sc in state.shipping_costs]
        if kind == "guild_stop" and costs:
            card = draw(st.sampled_from([*costs, card]))
        return {"type": kind, "card": card}
    if kind == "distrans":
        return {"type": kind, "card": draw(st.sampled_from(["distrans", card])),
                "give": draw(mine), "to": target}
    if kind == "offer_gift":
        return {"type": kind, "card": card, "to": target}
    if kind == "answer_gift":
        return {"type": kind, "event": event, "accept": draw(st.booleans())}
    if kind == "ask_truthtrance":
        tt = [c for c in hand if CARDS[c].effect == "truthtrance"]
        return {"type": kind, "card": tt[0] if tt else card, "target": target,
                "question": "Do you hold the Box?"}
    if kind == "answer_truthtrance":
        promise = draw(st.sampled_from([None, {"spice": 1}, {"spice": SPICE_MAX},
                                        {"box": card}]))
        return {"type": kind, "event": event, "answer": draw(st.sampled_from(["yes", "no"])),
                "promise": promise}
    if kind == "enter_territory":
        return {"type": kind, "territory": draw(st.sampled_from(TERRITORIES)),
                "via": draw(st.sampled_from(["shipment", "movement", "worm"]))}
    if kind == "ambassador_decide":
        return {"type": kind, "event": event, "trigger": draw(st.booleans()),
                "beneficiary": draw(st.sampled_from([None, seat, target]))}
    if kind == "ambassador_copy":
        return {"type": kind, "event": event, "token": draw(st.sampled_from(TOKENS))}
    if kind == "respond":
        return {"type": kind, "event": event, "action": draw(st.sampled_from(["pass", "karama"])),
                "card": draw(st.sampled_from([None, card]))}
    if kind == "seed":
        return {"type": kind, "value": draw(st.sampled_from(["a", "x" * 64, "x" * 65, card]))}
    if kind in ("bid", "sealed_bid", "bid_support"):
        amount = draw(st.sampled_from([0, 1, 2, 5, SPICE_MAX]))
        return {"type": kind, "amount": amount} | (
            {"karama": card} if kind == "bid" and draw(st.booleans()) else {})
    if kind == "pass_bid":
        return {"type": kind}
    if kind == "karama_buy":
        return {"type": kind, "karama": card}
    if kind == "ix_set_aside":
        return {"type": kind, "card": card, "where": draw(st.sampled_from(["top", "bottom"]))}
    if kind == "ix_replace":
        return {"type": kind, "event": event, "accept": draw(st.booleans())}
    if kind == "richese_sale":
        return {"type": kind, "when": draw(st.sampled_from(["first", "last", "none"]))}
    if kind == "richese_offer":
        return {"type": kind, "card": card,
                "auction": draw(st.sampled_from(["once_around", "silent"]))}
    assert kind == "semuta"
    return {"type": kind, "event": event, "action": draw(st.sampled_from(["pass", "take"])),
            "card": draw(st.sampled_from([None, card]))}


# Hostile shapes: wrong types, unknown fields and types, values out of range.
junk = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.just("5"),
                 st.sampled_from(ALL_CARDS), st.text(max_size=20), st.lists(st.integers(),
                                                                         max_size=2))


@st.composite
def hostile(draw: st.DrawFn, command: dict[str, Any]) -> dict[str, Any]:
    out = dict(command)
    for _ in range(draw(st.integers(1, 2))):
        key = draw(st.sampled_from([*out, "expected_version", "command_id", "spice", "x"]))
        value = draw(junk)
        if key in FREE_TEXT and isinstance(value, str) and value in CARDS:
            # A territory or a question is public as the sender wrote it: one that
            # names a card says what its sender chose to say, which no scan tells from a leak.
            value = value.upper()
        out[key] = value
    if draw(st.sampled_from([False] * 5 + [True])):
        out["type"] = draw(st.sampled_from(["drop_box", "", "DRAW"]))
    return out


def result_shape(result: Any) -> None:
    assert isinstance(result, dict) and isinstance(result.get("ok"), bool), result
    assert isinstance(result["version"], int) and not isinstance(result["version"], bool)
    if result["ok"]:
        assert set(result) == {"ok", "version", "events"}, result
        assert isinstance(result["events"], list) and result["events"], result
        for e in result["events"]:
            assert isinstance(e["type"], str) and isinstance(e["version"], int), e
    else:
        assert set(result) == {"ok", "version", "error"}, result
        error = result["error"]
        assert set(error) == {"code", "message"}, error
        assert isinstance(error["code"], str) and error["code"], error
        assert isinstance(error["message"], str) and error["message"], error


class TwoRooms(RuleBasedStateMachine):
    """Two generated rooms on one app; commands go to either, by any of its seats."""

    def __init__(self) -> None:
        super().__init__()
        self.factory = Factory()
        self.app = open_rooms("memory://", randomness_factory=self.factory)
        self.rooms: list[str] = []
        self.problems: list[str] = []
        self.accepted = 0
        self.ids = 0
        # (room, seat, command_id) -> the first accepted result with that id
        self.done: dict[tuple[str, str, str], dict[str, Any]] = {}

    @initialize(first=layouts(), second=layouts())
    def create(self, first: dict[str, Any], second: dict[str, Any]) -> None:
        for raw in (first, second):
            self.rooms.append(str(self.app.create_room(raw)["room"]))

    def reads(self, room: str) -> dict[str, Any]:
        state = leaks.true_state(self.app, room)
        return {"views": {s.faction: self.app.seat_view(room, s.faction) for s in state.seats},
                "public": self.app.public_view(room), "log": self.app.public_log(room)}

    def send(self, index: int, seat_pick: int, command: dict[str, Any]) -> dict[str, Any]:
        room, other = self.rooms[index], self.rooms[1 - index]
        before = leaks.true_state(self.app, room)
        seat = before.seats[seat_pick % len(before.seats)].faction
        records = len(self.app.records(leaks.UUID(room)))
        other_reads = self.reads(other)
        sources = len(self.factory.sources)

        result = self.app.execute(room, seat, copy.deepcopy(command))

        result_shape(result)
        after = leaks.true_state(self.app, room)
        where = f"{seat} sent {command}"
        cid = command.get("command_id")
        done = self.done.get((room, seat, cid)) if isinstance(cid, str) else None
        if done is not None:
            # A repeated id returns the first result and changes nothing, whatever was sent.
            assert result == done, where
        if result["ok"] and done is None:
            self.accepted += 1
            assert result["version"] == after.version > before.version
            self.problems += leaks.public_problems(
                after, result["events"], f"result {result['events']}: {where}", before=before)
            if isinstance(cid, str):
                self.done[(room, seat, cid)] = result
        else:
            assert result["version"] == before.version or done is not None, (where, result)
            assert len(self.app.records(leaks.UUID(room))) == records, where
            assert after.model_dump() == before.model_dump(), where
            assert sum(s.draws for s in self.factory.sources[sources:]) == 0, where
            # As text: the scanner's orjson cannot encode the oversized integers sent.
            self.problems += leaks.error_problems(
                before, seat, json.dumps(command), result)  # type: ignore[arg-type]
        for s in after.seats:
            self.problems += leaks.seat_view_problems(after, s.faction,
                                                      self.app.seat_view(room, s.faction),
                                                      f"view after {where}")
        self.problems += leaks.public_problems(after, self.app.public_view(room),
                                               f"public view after {where}")
        assert self.reads(other) == other_reads, f"the other room changed: {where}"
        return result

    @precondition(lambda self: self.rooms)
    @rule(index=st.integers(0, 1), seat=st.integers(0, 4), data=st.data())
    def play(self, index: int, seat: int, data: st.DataObject) -> None:
        state = leaks.true_state(self.app, self.rooms[index])
        factions = [s.faction for s in state.seats]
        awaited = awaited_seats(state)
        if awaited and data.draw(st.booleans()):  # the seat the game waits for, often
            seat = factions.index(data.draw(st.sampled_from(awaited)))
        actor = factions[seat % len(factions)]
        command = data.draw(plausible(state, actor))
        if data.draw(st.sampled_from([False] * 4 + [True])):
            command["expected_version"] = data.draw(st.sampled_from(
                [state.version, max(state.version - 1, 0)]))
        self.send(index, seat, command)

    @precondition(lambda self: self.rooms)
    @rule(index=st.integers(0, 1), shift=st.integers(0, 5), broken=st.booleans())
    def open_round(self, index: int, shift: int, broken: bool) -> None:
        """The operator opens a Bidding round (a broken order is refused)."""
        room = self.rooms[index]
        before = leaks.true_state(self.app, room)
        order = [s.faction for s in before.seats]
        order = order[shift % len(order):] + order[:shift % len(order)]
        if broken:
            order = order[1:] + order[:1] * 2
        result = self.app.execute(room, OPERATOR, {"type": "open_bidding", "order": order})
        result_shape(result)
        if not result["ok"]:
            assert leaks.true_state(self.app, room).model_dump() == before.model_dump()
        else:
            self.accepted += 1

    @precondition(lambda self: self.rooms)
    @rule(index=st.integers(0, 1), seat=st.integers(0, 4), data=st.data())
    def play_on(self, index: int, seat: int, data: st.DataObject) -> None:
        """The same as `play`: two rules of three play, one attacks."""
        self.play(index, seat, data)

    @precondition(lambda self: self.rooms)
    @rule(index=st.integers(0, 1), seat=st.integers(0, 4), data=st.data())
    def attack(self, index: int, seat: int, data: st.DataObject) -> None:
        state = leaks.true_state(self.app, self.rooms[index])
        actor = state.seats[seat % len(state.seats)].faction
        self.send(index, seat, data.draw(hostile(data.draw(plausible(state, actor)))))

    @precondition(lambda self: self.rooms)
    @rule(index=st.integers(0, 1), seat=st.integers(0, 4), data=st.data())
    def repeat(self, index: int, seat: int, data: st.DataObject) -> None:
        """A command sent twice with one id: the second returns the first result
        (`send` checks it), and a later, other command with that id does too."""
        state = leaks.true_state(self.app, self.rooms[index])
        actor = state.seats[seat % len(state.seats)].faction
        self.ids += 1
        command = {**data.draw(plausible(state, actor)), "command_id": f"again-{self.ids}"}
        self.send(index, seat, command)
        self.send(index, seat, command)
        later = {**data.draw(plausible(state, actor)), "command_id": command["command_id"]}
        self.send(index, seat, later)

    @invariant()
    def nothing_leaked(self) -> None:
        assert self.problems == []

    def teardown(self) -> None:
        try:
            for room in self.rooms:
                problems = leaks.scan_room(self.app, room)
                assert problems == [], problems[:5]
        finally:
            self.app.close()


# No shrinking: it can take minutes on a long run, and the failing run is printed
# step by step anyway (and repeats, being derandomized).
TwoRooms.TestCase.settings = settings(
    max_examples=30, stateful_step_count=40, deadline=None, derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much],
)
test_two_rooms = TwoRooms.TestCase


def mangled(draw: st.DrawFn, raw: dict[str, Any]) -> dict[str, Any]:
    """A layout with one value replaced by junk, anywhere in it."""
    out = copy.deepcopy(raw)
    paths: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                paths.append((node, k))
                walk(v)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                paths.append((node, i))
                walk(v)

    walk(out)
    parent, key = draw(st.sampled_from(paths))
    parent[key] = draw(junk | st.dictionaries(st.text(max_size=4), junk, max_size=2))
    return out


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_a_mangled_layout_is_a_room_or_a_layout_error(data):
    raw = mangled(data.draw, data.draw(layouts()))
    with open_rooms("memory://") as app:
        try:
            created = app.create_room(raw)
        except LayoutError as e:
            assert str(e)
            return
        room = created["room"]
        state = leaks.true_state(app, room)
        for s in state.seats:
            app.seat_view(room, s.faction)
        app.public_log(room)


# --- found by the fuzz -------------------------------------------------------------


def test_a_search_selection_does_not_tell_whether_a_semuta_window_closes():
    """RULES 7: the events a command appends depend in number and type only on public
    information. Emperor discards chaumas (Harkonnen's Semuta window opens), Richese
    searches while it is open: whatever it takes must look the same. (Since issue 24.4
    chaumas, bound to the window, is not a candidate at all.)"""
    outcomes = []
    for pick in ("shield-1", "baliset"):
        raw = layout_for_semuta()
        with open_rooms("memory://") as app:
            room = app.create_room(raw)["room"]
            assert app.execute(room, "emperor", {"type": "discard", "card": "chaumas"})["ok"]
            assert app.execute(room, "richese", {"type": "begin_search",
                                                 "card": "nullentropy-box"})["ok"]
            search = app.load(room).state.search
            assert search is not None
            done = app.execute(room, "richese", {"type": "select_card", "search": search.event,
                                                 "card": pick})
            assert done["ok"], done
            outcomes.append(([e["type"] for e in done["events"]],
                             app.public_view(room)["response"]["event"]))
    assert outcomes[0] == outcomes[1]


def layout_for_semuta() -> dict[str, Any]:
    raw = support_layout()
    raw["seats"][1]["hand"] = ["karama-1", "chaumas"]
    raw["seats"][2]["hand"] = ["shield-2", "semuta-drug"]
    return raw


def test_room_at_a_version_inside_an_append_shows_the_end_of_the_append():
    """Emperor's discard appends CardDiscarded, SemutaReactionQueued, SemutaWindowOpened
    (versions 2 to 4): every version of them reads as version 4."""
    with open_rooms("memory://") as app:
        room = app.create_room(layout_for_semuta())["room"]
        done = app.execute(room, "emperor", {"type": "discard", "card": "chaumas"})
        assert [e["version"] for e in done["events"]] == [2, 3, 4]
        end = app.view_at(room, 4, "richese")
        assert [app.view_at(room, v, "richese") for v in (2, 3)] == [end, end]
