"""`actions` in a seat's view: exactly the commands the rules accept now, naming no
hidden card (INTERFACE "Views")."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dune_ledger.domain.actions import actions
from dune_ledger.domain.ambassador import TOKENS
from dune_ledger.domain.catalog import CARDS, is_box
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.game import parse_command
from dune_ledger.domain.rules import decide
from dune_ledger.domain.state import RoomState
from dune_ledger.domain.views import public_view, seat_view
from tests.leaks import face_up, hidden_from_seat, named
from tests.rules_support import ambassador_layout, ambassador_room, ambassador_seats, enter, trigger
from tests.support import Counting, layout, rejected, run, snapshot, state_of

BOX = "nullentropy-box"


def busy_layout() -> dict[str, Any]:
    """Every command of custody within reach: a Box, Semuta, Truthtrance, Distrans,
    Karamas, a gift to an ally, a shipping-cost record for the Guild."""
    return layout(seats=[
        {"faction": "richese", "spice": 9, "ally": "guild",
         "hand": [BOX, "distrans", "crysknife"]},
        {"faction": "emperor", "spice": 5, "hand": ["karama-1", "semuta-drug"]},
        {"faction": "guild", "spice": 4, "ally": "richese",
         "hand": ["truthtrance-1", "kulon"]},
        {"faction": "bene_gesserit", "spice": 1, "hand": ["baliset", "chaumas"]},
    ], discard=["shield-1", "maula-pistol", "karama-2"],
        shipping_costs=[{"card": "karama-2", "creator": "emperor", "beneficiary": "emperor",
                         "price": 2}])


LAYOUTS = [busy_layout, lambda: ambassador_layout()]


def to_commands(action: dict[str, Any], state: RoomState, seat: str) -> list[dict[str, Any]]:
    """What a client may send for a listed action: its free fields filled in, one
    command per option of each choice."""
    cmds = [{k: v for k, v in action.items() if k != "free"}]
    for name, spec in action.get("free", {}).items():
        if spec["kind"] == "choice":
            cmds = [{**cmd, name: option} for cmd in cmds for option in spec["options"]]
            continue
        for cmd in cmds:
            if spec["kind"] == "card":  # guild_stop: the Guild remembers the costs paid
                cmd[name] = next(r.card for r in state.shipping_costs
                                 if accepts(state, seat, {**cmd, name: r.card}))
            elif spec["kind"] == "text":
                cmd[name] = "Is the Box in your hand?" if name == "question" else "arrakeen"
            elif spec["kind"] == "spice_promise":
                cmd[name] = {"spice": spec["max"]}
    return cmds


def key(cmd: dict[str, Any]) -> str:
    """An accepted command's listed action: without the fields an action leaves free."""
    bare = dict(cmd)
    for free in ("question", "territory", "via"):
        bare.pop(free, None)
    if bare["type"] in ("guild_stop",):
        bare.pop("card")
    if bare["type"] == "set_autopilot" and bare["enabled"]:
        bare.pop("profile")
    if isinstance(bare.get("promise"), dict) and "spice" in bare["promise"]:
        bare.pop("promise")
    return repr(sorted(bare.items()))


def accepts(state: RoomState, seat: str, cmd: dict[str, Any]) -> bool:
    try:
        decide(state, seat, parse_command(cmd), Counting())
    except Rejection:
        return False
    return True


def tries(state: RoomState, seat: str) -> list[dict[str, Any]]:
    """Commands far beyond what a seat would list: every room card, every seat, every
    open event, for every command type."""
    cards = sorted({c for zone in state.zones().values() for c in zone})
    factions = [s.faction for s in state.seats]
    events = {f"e{state.version}", "e1"}
    for part in (state.control.response, state.control.decision, state.search):
        if part is not None:
            events.add(part.event)
    for part in (state.truthtrance, state.gift):
        if part is not None:
            events.add(part.event)
    out: list[dict[str, Any]] = [{"type": "draw"},
                                 {"type": "set_autopilot", "enabled": False},
                                 {"type": "set_autopilot", "enabled": True, "profile": "hard"}]
    for cid in cards:
        out += [{"type": "discard", "card": cid}, {"type": "begin_search", "card": cid},
                {"type": "guild_stop", "card": cid}]
        out += [{"type": "offer_gift", "card": cid, "to": f} for f in factions]
        out += [{"type": "ask_truthtrance", "card": cid, "target": f,
                 "question": "Is it so?"} for f in factions]
    for via in ("shipment", "movement", "worm"):
        out.append({"type": "enter_territory", "territory": "arrakeen", "via": via})
    for event in events:
        out += [{"type": "respond", "event": event, "action": "pass"},
                {"type": "semuta", "event": event, "action": "pass"},
                {"type": "answer_gift", "event": event, "accept": True},
                {"type": "answer_gift", "event": event, "accept": False},
                {"type": "answer_truthtrance", "event": event, "answer": "no"},
                {"type": "answer_truthtrance", "event": event, "answer": "yes",
                 "promise": {"spice": 1}},
                {"type": "ambassador_decide", "event": event, "trigger": False}]
        out += [{"type": "ambassador_decide", "event": event, "trigger": True,
                 "beneficiary": f} for f in factions]
        out += [{"type": "ambassador_copy", "event": event, "token": t} for t in TOKENS]
        for cid in cards:
            out += [{"type": "select_card", "search": event, "card": cid},
                    {"type": "respond", "event": event, "action": "karama", "card": cid},
                    {"type": "semuta", "event": event, "action": "take", "card": cid},
                    {"type": "answer_truthtrance", "event": event, "answer": "yes",
                     "promise": {"box": cid}}]
    hand = state.seat(seat).hand
    out += [{"type": "distrans", "card": d, "give": g, "to": f}
            for d in hand for g in cards for f in factions]
    return out


def may_know(state: RoomState, seat: str) -> set[str]:
    """Cards `seat` may see named beyond `tests.leaks`' face-up cards: the cards of an
    open Semuta window (discarded face up) and a gift offered by or to it."""
    known = face_up(state)
    window = state.control.response
    if window is not None and window.kind == "semuta":
        known.update(window.data["cards"])
    if state.gift is not None and seat in (state.gift.giver, state.gift.to):
        known.add(state.gift.card)
    return known


def check_position(state: RoomState) -> None:
    for s in state.seats:
        before = snapshot(state)
        listed = actions(state, s.faction)
        assert snapshot(state) == before  # probing changed nothing
        keys = set()
        for action in listed:
            for cmd in to_commands(action, state, s.faction):
                assert accepts(state, s.faction, cmd), (s.faction, action, cmd)
                keys.add(key(cmd))
        for cmd in tries(state, s.faction):
            if key(cmd) not in keys:
                assert not accepts(state, s.faction, cmd), (s.faction, cmd, listed)
        leaked = (named(listed) & hidden_from_seat(state, s.faction)) - may_know(state, s.faction)
        assert not leaked, (s.faction, leaked)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(which=st.sampled_from(range(len(LAYOUTS))), seed=st.integers(0, 50),
       steps=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 1000)), max_size=12))
def test_listed_actions_are_exactly_the_accepted_commands(which, seed, steps):
    state = state_of(LAYOUTS[which](), seed)
    check_position(state)
    for who, pick in steps:
        seat = state.seats[who % len(state.seats)].faction
        listed = [a for a in actions(state, seat) if a["type"] != "set_autopilot"]
        if not listed:
            continue
        choice = to_commands(listed[pick % len(listed)], state, seat)
        state = run(state, seat, choice[pick % len(choice)], Counting(pick)).state
        check_position(state)


def test_the_search_owner_lists_one_selection_per_candidate_and_nothing_else_but_control():
    state = run(state_of(layout()), "richese", {"type": "begin_search", "card": BOX}).state
    listed = actions(state, "richese")
    search = state.search
    assert search is not None
    selections = [a for a in listed if a["type"] == "select_card"]
    assert {a["card"] for a in selections} == {c for c in search.discard if not is_box(c)}
    assert all(a["search"] == search.event for a in selections)
    assert {a["type"] for a in listed} == {"select_card", "set_autopilot"}
    # Another seat may only change its own seat control while the room is locked.
    assert {a["type"] for a in actions(state, "emperor")} == {"set_autopilot"}
    for cmd in ({"type": "draw"}, {"type": "discard", "card": "karama-1"}):
        assert rejected(state, "emperor", cmd).code == "locked"


def test_a_box_listed_when_begin_would_be_accepted_and_not_when_blocked():
    state = state_of(layout())
    assert {"type": "begin_search", "card": BOX} in actions(state, "richese")
    assert seat_view(state, "richese")["nullentropy"]["blocked"] is None
    poor = layout()
    poor["seats"][0]["spice"] = 1
    state = state_of(poor)
    assert seat_view(state, "richese")["nullentropy"]["blocked"] == "insufficient_spice"
    assert all(a["type"] != "begin_search" for a in actions(state, "richese"))
    assert rejected(state, "richese", {"type": "begin_search", "card": BOX}).code \
        == "insufficient_spice"


def test_a_response_window_lists_pass_and_each_karama_of_the_seat():
    room = ambassador_room(seats=ambassador_seats(atreides=["karama-2", "kulon"]))
    state = trigger(enter(room)).state
    window = state.control.response
    assert window is not None and window.kind == "ambassador_income"
    atreides = actions(state, "atreides")
    assert {"type": "respond", "event": window.event, "action": "pass"} in atreides
    assert {"type": "respond", "event": window.event, "action": "karama",
            "card": "karama-2"} in atreides
    assert not any(a["type"] == "respond" and a.get("card") == "kulon" for a in atreides)
    # The Emperor's own income: it does not respond to it.
    assert not any(a["type"] == "respond" for a in actions(state, "emperor"))
    assert rejected(state, "emperor", {"type": "respond", "event": window.event,
                                       "action": "pass"}).code == "not_eligible"


def test_a_truthtrance_question_lists_its_answers_with_a_spice_promise_described():
    state = state_of(busy_layout())
    state = run(state, "guild", {"type": "ask_truthtrance", "card": "truthtrance-1",
                                 "target": "richese", "question": "Box?"}).state
    listed = actions(state, "richese")
    answers = [a for a in listed if a["type"] == "answer_truthtrance"]
    described = [a for a in answers if "free" in a]
    assert described and described[0]["free"]["promise"] == {
        "kind": "spice_promise", "min": 1, "max": 9}
    assert {"type": "answer_truthtrance", "event": state.truthtrance.event,
            "answer": "yes", "promise": {"box": BOX}} in answers
    # Answer-first: the others may only change their seat control.
    assert {a["type"] for a in actions(state, "emperor")} == {"set_autopilot"}


def test_the_public_view_has_no_actions():
    state = state_of(busy_layout())
    assert "actions" not in public_view(state)
    assert "actions" in seat_view(state, "richese")


def test_no_action_names_a_card_of_another_hand_or_the_pile():
    state = state_of(busy_layout())
    for s in state.seats:
        others = {c for o in state.seats if o.faction != s.faction for c in o.hand}
        below_top = set(state.discard[:-1])
        assert not named(actions(state, s.faction)) & (others | below_top | set(state.deck))
    assert set(CARDS)  # the catalog is loaded: the sets above are not empty by accident
