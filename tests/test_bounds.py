"""Bounds and strict input (RULES 8): commands and layouts, field by field.

Every numeric, boolean and string field of every command and of a layout is
sent wrong (a number as a string, a boolean for a number, a fraction, out of
range) and must be refused naming that field, never quoting the value. Then
the layout records that contradict each other, and, through the application
on SQLite and PostgreSQL, a room at the extreme allowed values that plays
without breaking any other room.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dune_ledger.application.audit import audit_room
from dune_ledger.domain.commands import COUNT_MAX, SPICE_MAX
from dune_ledger.domain.errors import LayoutError, Rejection
from dune_ledger.domain.game import COMMAND_TYPES, parse_command
from dune_ledger.domain.layout import CommitmentKind, build_room, parse_layout
from dune_ledger.domain.state import COMMITMENT_KINDS
from dune_ledger.infrastructure.storage import open_rooms
from tests.rules_support import ambassador_layout, ambassador_seats
from tests.support import Counting, layout

# One valid command of every type, with every optional field set.
EXAMPLES: dict[str, dict[str, Any]] = {
    "begin_search": {"card": "nullentropy-box"},
    "select_card": {"search": "e1", "card": "shield-1"},
    "set_autopilot": {"enabled": True, "profile": "easy"},
    "discard": {"card": "crysknife"},
    "draw": {},
    "distrans": {"card": "distrans", "give": "crysknife", "to": "emperor"},
    "offer_gift": {"card": "crysknife", "to": "emperor"},
    "answer_gift": {"event": "e1", "accept": True},
    "ask_truthtrance": {"card": "truthtrance-1", "target": "emperor", "question": "Box?"},
    "answer_truthtrance": {"event": "e1", "answer": "yes", "promise": {"spice": 3}},
    "enter_territory": {"territory": "arrakeen", "via": "worm"},
    "ambassador_decide": {"event": "e1", "trigger": True, "beneficiary": "ecaz"},
    "ambassador_copy": {"event": "e1", "token": "richese"},
    "respond": {"event": "e1", "action": "karama", "card": "karama-1"},
    "semuta": {"event": "e1", "action": "take", "card": "crysknife"},
    "guild_stop": {"card": "karama-2"},
    "seed": {"value": "my seed 42"},
    "bid": {"amount": 3, "karama": "karama-1"},
    "pass_bid": {},
    "karama_buy": {"karama": "karama-1"},
    "bid_support": {"amount": 2},
    "ix_set_aside": {"card": "crysknife", "where": "top"},
    "ix_replace": {"event": "e1", "accept": True},
    "richese_sale": {"when": "first"},
    "richese_offer": {"card": "ornithopter", "auction": "silent"},
    "sealed_bid": {"amount": 4},
}
COMMON = {"command_id": "c1", "expected_version": 3}


def command(kind: str) -> dict[str, Any]:
    return {"type": kind, **COMMON, **copy.deepcopy(EXAMPLES[kind])}


def leaves(data: Any, path: tuple[str | int, ...] = ()) -> list[tuple[tuple[str | int, ...], Any]]:
    """Every scalar field of a JSON value, with its path."""
    if isinstance(data, dict):
        return [x for k, v in data.items() for x in leaves(v, (*path, k))]
    if isinstance(data, list):
        return [x for i, v in enumerate(data) for x in leaves(v, (*path, i))]
    return [(path, data)]


def put(data: Any, path: tuple[str | int, ...], value: Any) -> Any:
    out = copy.deepcopy(data)
    target = out
    for p in path[:-1]:
        target = target[p]
    target[path[-1]] = value
    return out


def wrong_values(value: Any, *, top: int) -> list[Any]:
    """Values of the wrong type, or out of range, for a field holding `value`."""
    if isinstance(value, bool):
        return [1, 0, "true", "false", None]
    if isinstance(value, int):
        return [str(value), True, False, float(value), value + 0.5, -1, top + 1, 2**64 - 1]
    return [5, True, 1.5, [value], {"id": value}]


def refused_naming(raw: dict[str, Any], field: str, *, within: bool = False) -> str:
    """Refused as invalid, the message naming `field` first (or a field within it)."""
    with pytest.raises(Rejection) as info:
        parse_command(raw)
    assert info.value.code == "invalid_command"
    assert info.value.message.startswith(f"{field}:") or (
        within and info.value.message.startswith(f"{field}.")), info.value.message
    return info.value.message


def test_every_command_type_has_an_example_that_parses():
    assert set(EXAMPLES) == COMMAND_TYPES
    for kind in EXAMPLES:
        assert parse_command(command(kind)).type == kind  # type: ignore[attr-defined]


CASES = [
    (kind, path, bad)
    for kind in sorted(EXAMPLES)
    for path, value in leaves(command(kind))
    if path != ("type",)
    for bad in wrong_values(value, top=SPICE_MAX if path[-1] == "spice" else COUNT_MAX)
]


@pytest.mark.parametrize(("kind", "path", "bad"), CASES,
                         ids=[f"{k}.{'.'.join(map(str, p))}={b!r}" for k, p, b in CASES])
def test_every_field_of_every_command_refuses_a_wrong_type_or_range(kind, path, bad):
    message = refused_naming(put(command(kind), path, bad), ".".join(map(str, path)))
    if isinstance(bad, str) and len(bad) > 1:
        assert bad not in message


@pytest.mark.parametrize(("field", "good"), [
    ("expected_version", 0), ("expected_version", COUNT_MAX),
    ("promise", {"spice": 1}), ("promise", {"spice": SPICE_MAX}), ("promise", None),
    ("promise", {"box": "nullentropy-box"}),
])
def test_the_ends_of_each_range_are_accepted(field, good):
    parse_command({**command("answer_truthtrance"), field: good})


@pytest.mark.parametrize("bad", [{"spice": 0}, {}, 5, "5", [], {"box": "x", "spice": 2}])
def test_a_promise_is_a_box_or_a_positive_amount(bad):
    refused_naming({**command("answer_truthtrance"), "promise": bad}, "promise", within=True)


@pytest.mark.parametrize("raw", [{"type": "secret-card-id"}, {"type": 5}, {"card": "x"},
                                 {"type": ["draw"]}])
def test_an_unknown_or_missing_type_names_the_field_not_the_value(raw):
    message = refused_naming(raw, "type")
    assert "secret-card-id" not in message


def test_a_long_unknown_key_is_cut_short_in_the_message():
    message = refused_naming({"type": "draw", "k" * 500: 1}, "k" * 40 + "...")
    assert len(message) < 200


MARK = "zzleak"
texts = st.text(max_size=8).map(lambda t: f"{MARK}{t}")
values = st.recursive(
    st.none() | st.booleans() | st.integers() | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
        ["card", "spice", "box", "event"]), inner, max_size=3),
    max_leaves=6)
keys = st.sampled_from(["card", "search", "event", "enabled", "profile", "give", "to",
                        "accept", "target", "question", "answer", "promise", "territory",
                        "via", "trigger", "beneficiary", "token", "action",
                        "expected_version", "command_id"])


@settings(max_examples=300, derandomize=True, deadline=None)
@given(kind=st.sampled_from(sorted(COMMAND_TYPES)) | texts,
       fields=st.dictionaries(keys, values, max_size=5))
def test_no_refusal_quotes_a_value_it_was_sent(kind, fields):
    try:
        parse_command({"type": kind, **fields})
    except Rejection as r:
        assert r.code == "invalid_command"
        assert MARK not in r.message, r.message


def test_a_command_that_is_not_an_object_is_refused():
    for raw in (None, [], "draw", 5, True):
        with pytest.raises(Rejection, match="must be a JSON object"):
            parse_command(raw)


# --- layouts ---------------------------------------------------------------------


def full_layout() -> dict[str, Any]:
    """A valid layout that sets every numeric field a layout has."""
    raw = layout(bank=500, reservations=[{"faction": "richese", "amount": 3, "reason": "auction"}],
                 shipping_costs=[{"card": "karama-2", "creator": "emperor",
                                  "beneficiary": "emperor", "price": 5, "claimed": False}])
    raw["discard"] = [*raw["discard"], "karama-2"]
    return raw


def layout_error(raw: Any) -> str:
    with pytest.raises(LayoutError) as info:
        build_room(parse_layout(raw), "room-1", Counting())
    return str(info.value)


LAYOUT_FIELDS: list[tuple[tuple[str | int, ...], int]] = [
    (("bank",), SPICE_MAX), (("seed",), COUNT_MAX), (("turn",), COUNT_MAX), (("phase",), 9),
    (("seats", 0, "spice"), SPICE_MAX), (("reservations", 0, "amount"), SPICE_MAX),
    (("shipping_costs", 0, "price"), SPICE_MAX),
]
LAYOUT_CASES = [(path, bad) for path, top in LAYOUT_FIELDS
                for bad in wrong_values(7, top=top)] + [
    (("shipping_costs", 0, "claimed"), bad) for bad in wrong_values(False, top=0)] + [
    (path, bad) for path in (("seats", 0, "faction"), ("seats", 0, "hand", 0), ("discard", 0),
                             ("reservations", 0, "reason"), ("mode",))
    for bad in wrong_values("x", top=0)]


@pytest.mark.parametrize(("path", "bad"), LAYOUT_CASES,
                         ids=[f"{'.'.join(map(str, p))}={b!r}" for p, b in LAYOUT_CASES])
def test_every_field_of_a_layout_refuses_a_wrong_type_or_range(path, bad):
    message = layout_error(put(full_layout(), path, bad))
    assert message.startswith(f"invalid layout: {'.'.join(map(str, path))}:"), message


def test_the_full_layout_is_valid_and_the_ends_of_the_ranges_are_accepted():
    build_room(parse_layout(full_layout()), "room-1", Counting())
    raw = full_layout()
    raw.update(bank=SPICE_MAX, seed=COUNT_MAX, turn=COUNT_MAX, phase=9)
    raw["seats"][0]["spice"] = SPICE_MAX
    raw["reservations"][0]["amount"] = SPICE_MAX
    raw["shipping_costs"][0]["price"] = SPICE_MAX
    state = build_room(parse_layout(raw), "room-1", Counting()).state
    assert state["bank"] == SPICE_MAX and state["seats"][0]["spice"] == SPICE_MAX


def test_a_layout_giving_2_to_the_64_minus_1_spice_is_refused():
    raw = ambassador_layout(seats=ambassador_seats(emperor={"spice": 2**64 - 1,
                                                            "hand": ["karama-1"]}))
    assert "seats.2.spice: Input should be less than or equal to 1000000" in layout_error(raw)


def test_a_staged_control_is_bounded_in_depth_and_numbers():
    def staged(data: Any) -> dict[str, Any]:
        return layout(control={"response": {"kind": "test", "event": "e1", "turn": 2,
                                            "phase": 6, "passes": [], "data": data}})

    build_room(parse_layout(staged({"n": [COUNT_MAX, -COUNT_MAX, 1.5, None, "x"]})),
               "room-1", Counting())
    assert "control.response.data.n.0: a number out of range" in \
        layout_error(staged({"n": [2**64 - 1]}))
    deep: Any = 1
    for _ in range(40):
        deep = [deep]
    assert "nested deeper than 32 levels" in layout_error(staged({"deep": deep}))
    assert "control.response.turn: Input should be a valid integer" in layout_error(
        put(staged({}), ("control", "response", "turn"), "2"))


def test_lists_and_strings_are_bounded():
    assert "seats.0.hand.0: String should have at most 64 characters" in layout_error(
        put(layout(), ("seats", 0, "hand", 0), "x" * 65))
    assert "discard: List should have at most" in layout_error(
        put(layout(), ("discard",), ["shield-1"] * 1000))


def test_commitment_kinds_are_the_rules_kinds():
    assert set(CommitmentKind.__args__) == set(COMMITMENT_KINDS)  # type: ignore[attr-defined]


def with_seat(raw: dict[str, Any], faction: str, **seat: Any) -> dict[str, Any]:
    raw["seats"] = [*raw["seats"], {"faction": faction, **seat}]
    return raw


def cost(card: str = "karama-2", creator: str = "emperor", **kw: Any) -> dict[str, Any]:
    return {"card": card, "creator": creator, "beneficiary": creator, "price": 2, **kw}


def allied(*pairs: tuple[int, str]) -> dict[str, Any]:
    raw = layout()
    for i, ally in pairs:
        raw["seats"][i]["ally"] = ally
    return raw


def pile(*cards: str, **over: Any) -> dict[str, Any]:
    raw = layout(**over)
    raw["discard"] = [*raw["discard"], *cards]
    return raw


CONTRADICTIONS = [
    ("two shipping records for one card",
     pile("karama-2", shipping_costs=[cost(), cost(price=3)]),
     "shipping_costs: 2 records for karama-2"),
    ("reservations above a seat's spice",
     layout(reservations=[{"faction": "harkonnen", "amount": 4, "reason": "auction"},
                          {"faction": "harkonnen", "amount": 3, "reason": "truthtrance"}]),
     "reservations: harkonnen's reservations add up to more than its spice"),
    ("a reservation of a seat not in the room",
     layout(reservations=[{"faction": "fremen", "amount": 1, "reason": "auction"}]),
     "reservations: fremen has no seat"),
    ("an ally that is not reciprocal",
     with_seat(allied((0, "emperor"), (1, "harkonnen")), "fremen"),
     "seats: the alliance of richese and emperor is not reciprocal"),
    # Issue 24.16 (RULES 8): once filled in as shorthand, now refused.
    ("an ally named on one side", allied((0, "emperor")),
     "seats: the alliance of richese and emperor is not reciprocal"),
    ("one ally named by two seats", allied((0, "harkonnen"), (1, "harkonnen")),
     "seats: harkonnen is named as the ally of 2 seats"),
    ("an ally of itself", allied((0, "richese")), "richese is named as its own ally"),
    ("an ally with no seat", allied((0, "fremen")), "richese's ally fremen has no seat"),
    ("a faction seated twice", with_seat(layout(), "emperor"),
     "factions seated twice: emperor"),
    ("a commitment of a card in no hand",
     layout(commitments=[{"card": "shield-1", "kind": "battle_plan"}]),
     "commitments: shield-1 is in no seat's hand"),
    ("a commitment of a card not in the room",
     layout(commitments=[{"card": "hunter-seeker", "kind": "battle_plan"}]),
     "commitments: hunter-seeker is not in this room's catalog"),
    ("one card committed twice",
     layout(commitments=[{"card": "crysknife", "kind": "battle_plan"},
                         {"card": "crysknife", "kind": "prescience"}]),
     "commitments: crysknife is committed 2 times"),
    ("a commitment of an unknown kind",
     layout(commitments=[{"card": "crysknife", "kind": "sold"}]),
     "commitments.0.kind: Input should be"),
    ("a Box promise of a card that is not a Box",
     layout(reservations=[{"faction": "richese", "amount": 2, "reason": "truthtrance",
                           "box": "crysknife"}]),
     "reservations: crysknife is not a Nullentropy Box of this room"),
    ("a Box promise of another seat's Box",
     layout(reservations=[{"faction": "emperor", "amount": 2, "reason": "truthtrance",
                           "box": "nullentropy-box"}]),
     "reservations: emperor promises nullentropy-box, not in its hand"),
    ("a Box promise of a committed Box",
     layout(reservations=[{"faction": "richese", "amount": 2, "reason": "truthtrance",
                           "box": "nullentropy-box"}],
            commitments=[{"card": "nullentropy-box", "kind": "black_market"}]),
     "richese promises nullentropy-box, which is committed"),
    ("a Box promise of another amount than the fee",
     layout(reservations=[{"faction": "richese", "amount": 5, "reason": "truthtrance",
                           "box": "nullentropy-box"}]),
     "reservations: a Box promise reserves the fee of 2"),
    ("one Box promised twice",
     layout(reservations=[{"faction": "richese", "amount": 2, "reason": "truthtrance",
                           "box": "nullentropy-box"}] * 2),
     "reservations: richese promises nullentropy-box more than once"),
    ("a shipping cost that is not a Karama", layout(shipping_costs=[cost("shield-1")]),
     "shipping_costs: shield-1 is not a Karama its creator could spend"),
    ("a worthless shipping cost of a seat other than the Bene Gesserit",
     layout(shipping_costs=[cost("baliset")]), "baliset is not a Karama"),
    ("a worthless shipping cost of the Bene Gesserit in basic mode",
     with_seat(layout(mode="basic", shipping_costs=[cost("baliset", "bene_gesserit")]),
               "bene_gesserit"), "baliset is not a Karama"),
    ("a shipping cost of a seat not in the room", pile("karama-2", shipping_costs=[cost(
        creator="fremen")]), "shipping_costs: fremen has no seat"),
    ("a shipping cost card not in the room", layout(shipping_costs=[cost("hunter-seeker")]),
     "shipping_costs: hunter-seeker is not in this room's catalog"),
    ("a deck card in the Richese cache",
     layout(richese_cache=["shield-1"], discard=["maula-pistol", "baliset"]),
     "richese_cache: not cache cards: shield-1"),
]


@pytest.mark.parametrize(("raw", "message"), [c[1:] for c in CONTRADICTIONS],
                         ids=[c[0] for c in CONTRADICTIONS])
def test_records_that_contradict_each_other_are_refused(raw, message):
    source = Counting()
    with pytest.raises(LayoutError, match="invalid layout") as info:
        build_room(parse_layout(raw), "room-1", source)
    assert message in str(info.value)
    assert source.draws == 0  # checked before the deck is shuffled


AGREEMENTS = [
    ("an alliance named on both sides", allied((0, "emperor"), (1, "richese"))),
    ("reservations adding up to the seat's spice",
     layout(reservations=[{"faction": "harkonnen", "amount": 4, "reason": "auction"},
                          {"faction": "harkonnen", "amount": 2, "reason": "truthtrance"}])),
    ("a Box promise of the promiser's Box at the fee",
     layout(reservations=[{"faction": "richese", "amount": 2, "reason": "truthtrance",
                           "box": "nullentropy-box"}])),
    ("a commitment of each kind of a card in hand",
     layout(commitments=[{"card": c, "kind": k} for c, k in zip(
         ["crysknife", "karama-1", "shield-2", "chaumas"], COMMITMENT_KINDS, strict=False)])),
    ("an unclaimed shipping cost drawn out of the pile (a reshuffle took it)",
     layout(shipping_costs=[cost()])),
    ("a claimed shipping cost in a hand",
     layout(shipping_costs=[cost("karama-1", claimed=True)])),
    ("a worthless shipping cost of the Bene Gesserit in advanced mode",
     with_seat(layout(shipping_costs=[cost("baliset", "bene_gesserit")]), "bene_gesserit")),
    ("the cache's own cards in the cache",
     layout(richese_cache=["semuta-drug", "distrans"])),
]


@pytest.mark.parametrize("raw", [c[1] for c in AGREEMENTS], ids=[c[0] for c in AGREEMENTS])
def test_records_that_agree_are_accepted(raw):
    build_room(parse_layout(raw), "room-1", Counting())


def test_an_alliance_named_on_both_sides_is_kept():
    state = build_room(parse_layout(allied((0, "emperor"), (1, "richese"))), "room-1",
                       Counting()).state
    assert {s["faction"]: s["ally"] for s in state["seats"]} == {
        "richese": "emperor", "emperor": "richese", "harkonnen": None}


def test_a_layout_that_is_not_an_object_is_refused():
    for raw in (None, [], "x", 5):
        with pytest.raises(LayoutError, match="a layout must be a JSON object"):
            parse_layout(raw)


# --- through the application -------------------------------------------------------


def test_a_strictly_refused_command_changes_nothing():
    with open_rooms("memory://") as app:
        room = app.create_room(layout())["room"]
        before = len(app.records(app.load(room).id))
        for raw in ({"type": "draw", "expected_version": True},
                    {"type": "draw", "expected_version": "1"},
                    {"type": "answer_truthtrance", "event": "e1", "answer": "yes",
                     "promise": {"spice": "5"}},
                    {"type": "set_autopilot", "enabled": 1, "profile": "easy"}):
            result = app.execute(room, "emperor", raw)
            assert result["ok"] is False and result["error"]["code"] == "invalid_command"
            assert result["version"] == 1
        assert len(app.records(app.load(room).id)) == before


def extreme_layout() -> dict[str, Any]:
    """Every amount at the top of its range: the Emperor, the buyer and the Bank
    at 1,000,000, a reservation and a shipping price too."""
    top = {"spice": SPICE_MAX}
    raw = ambassador_layout(seats=ambassador_seats(
        ecaz={**top, "hand": [], "ally": "harkonnen"},
        harkonnen={**top, "hand": ["crysknife", "stunner"], "ally": "ecaz"},
        emperor={**top, "hand": ["karama-1"]},
        atreides={**top, "hand": []}))
    raw.update(bank=SPICE_MAX, seed=COUNT_MAX, turn=COUNT_MAX,
               reservations=[{"faction": "harkonnen", "amount": SPICE_MAX - 3,
                              "reason": "auction"}],
               shipping_costs=[{"card": "karama-2", "creator": "atreides",
                                "beneficiary": "atreides", "price": SPICE_MAX}])
    raw["discard"] = [*raw["discard"], "karama-2"]
    return raw


def answers(app: Any, room: str, seats: list[str]) -> None:
    """Every read of the room answers."""
    for seat in seats:
        assert app.seat_view(room, seat)["room"] == room
    assert app.public_view(room)["room"] == room
    assert isinstance(app.public_log(room), list)


def test_a_room_at_the_extremes_breaks_no_other_room(url):
    with open_rooms(url) as app:
        with pytest.raises(LayoutError, match="seats.2.spice"):
            app.create_room(ambassador_layout(seats=ambassador_seats(
                emperor={"spice": 2**64 - 1, "hand": ["karama-1"]})))
        other = app.create_room(layout())["room"]
        assert app.execute(other, "emperor", {"type": "draw"})["ok"]
        answers(app, other, ["richese", "emperor", "harkonnen"])

        extreme = app.create_room(extreme_layout())["room"]
        entered = app.execute(extreme, "atreides", {"type": "enter_territory",
                                                    "territory": "arrakeen", "via": "worm"})
        assert entered["ok"], entered
        offer = next(e for e in entered["events"] if e["type"] == "AmbassadorOffered")
        bought = app.execute(extreme, "ecaz", {"type": "ambassador_decide",
                                               "event": offer["event"], "trigger": True,
                                               "beneficiary": "harkonnen"})
        assert bought["ok"], bought
        # The income window: everybody passes, so the Emperor is paid above the layout's top.
        while (window := app.public_view(extreme)["response"]) is not None:
            seat = window["waiting"][0]
            assert app.execute(extreme, seat, {"type": "respond", "event": window["event"],
                                               "action": "pass"})["ok"]
        state = app.load(extreme).state
        assert state.seat("emperor").spice == SPICE_MAX + 3
        assert state.seat("harkonnen").spice == SPICE_MAX - 3
        assert state.bank == SPICE_MAX  # 3 in from the buyer, 3 out to the Emperor
        assert app.execute(extreme, "emperor", {"type": "draw"})["ok"]

        seats = ["ecaz", "harkonnen", "emperor", "atreides"]
        answers(app, extreme, seats)
        assert app.seat_view(extreme, "emperor")["me"]["spice"] == SPICE_MAX + 3
        answers(app, other, ["richese", "emperor", "harkonnen"])
        fresh = app.create_room(layout())["room"]
        assert app.execute(fresh, "harkonnen", {"type": "draw"})["ok"]
        answers(app, fresh, ["richese", "emperor", "harkonnen"])
        app.read_models.rebuild()
        for room in (extreme, other, fresh):
            report = audit_room(app, room)
            failed = {k: v for k, v in report["checks"].items() if v["ok"] is False}
            assert not failed, (room, failed)
    # A second process on the same store reads every room.
    with open_rooms(url) as again:
        answers(again, extreme, seats)
        answers(again, other, ["richese", "emperor", "harkonnen"])
