"""Property: any command sequence conserves cards and spice, and replays exactly."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dune_ledger.application.audit import audit_records, audit_room, state_hash
from dune_ledger.domain.rules import replay
from dune_ledger.infrastructure.settings import Settings
from dune_ledger.infrastructure.storage import open_rooms
from tests.support import layout

SEATS = ["richese", "emperor", "harkonnen"]
ACTIONS = ["begin", "select", "draw", "discard", "autopilot", "junk"]

step = st.tuples(st.sampled_from(SEATS), st.sampled_from(ACTIONS), st.integers(0, 20))


def command_for(app, room, seat, action, pick):
    view = app.seat_view(room, seat)
    hand = [c["id"] for c in view["me"]["hand"]]
    if action == "begin":
        return {"type": "begin_search", "card": "nullentropy-box"}
    if action == "select":
        box = view["nullentropy"]
        if box and box["search"] and box["search"]["cards"]:
            cards = box["search"]["cards"]
            return {"type": "select_card", "search": box["search"]["event"],
                    "card": cards[pick % len(cards)]["id"]}
        return {"type": "select_card", "search": f"e{pick}", "card": "kulon"}
    if action == "draw":
        return {"type": "draw"}
    if action == "discard":
        return {"type": "discard", "card": hand[pick % len(hand)] if hand else "kulon"}
    if action == "autopilot":
        return {"type": "set_autopilot", "enabled": pick % 2 == 0, "profile": "easy"}
    return {"type": "discard", "card": "no-such-card"}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, min_size=1, max_size=25), seed=st.integers(0, 1000))
def test_any_sequence_conserves_and_replays(steps, seed):
    with open_rooms("memory://", settings=Settings(snapshot_interval=4)) as app:
        raw = layout(seed=seed)
        raw["seats"][0]["spice"] = 7
        room = app.create_room(raw)["room"]
        for seat, action, pick in steps:
            before = app.load(room).version
            result = app.execute(room, seat, command_for(app, room, seat, action, pick))
            if not result["ok"]:
                assert app.load(room).version == before
        loaded = app.load(room)
        records = app.records(loaded.id)
        report, replayed = audit_records(room, records)
        assert all(check["ok"] for check in report["checks"].values()), report
        assert replayed is not None and state_hash(replayed) == state_hash(loaded.state)
        assert state_hash(replay(r.fact for r in records)) == state_hash(loaded.state)
        assert audit_room(app, room)["ok"]
