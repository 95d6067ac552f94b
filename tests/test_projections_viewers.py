"""The viewer matrix of seed 000 (the Box audit), served from the read models.

Richese holds four real cards including the Box (at its limit: a full-hand
exchange), with Guild, Atreides and Emperor seated. Each viewer (the owner,
every other seat, the public) is checked before payment, during the search,
after it, and after a reload of the application from its database file.
"""

from __future__ import annotations

from typing import Any

import pytest

from dune_ledger.domain.nullentropy import display_order
from dune_ledger.infrastructure.storage import open_rooms
from tests import leaks

BOX = "nullentropy-box"
PILE = ["shield-1", "maula-pistol", "baliset", "snooper-3", "lasgun"]
LAYOUT: dict[str, Any] = {
    "mode": "advanced",
    "expansions": ["choam_richese"],
    "seed": 26,
    "turn": 3,
    "phase": 6,
    "seats": [
        {"faction": "richese", "spice": 10,
         "hand": [BOX, "crysknife", "shield-2", "chaumas"]},
        {"faction": "guild", "spice": 5, "hand": ["karama-1"]},
        {"faction": "atreides", "spice": 7, "hand": ["snooper-1"]},
        {"faction": "emperor", "spice": 12, "hand": []},
    ],
    "discard": PILE,
}
OTHERS = ["guild", "atreides", "emperor"]


def ids(cards: list[dict[str, Any]]) -> list[str]:
    return [c["id"] for c in cards]


def views(app: Any, room: str) -> dict[str, Any]:
    out = {seat: app.seat_view(room, seat) for seat in ["richese", *OTHERS]}
    out["public"] = app.public_view(room)
    return out


def assert_clean(app: Any, room: str, seen: dict[str, Any]) -> None:
    state = leaks.true_state(app, room)
    problems = []
    for seat in ["richese", *OTHERS]:
        problems += leaks.seat_view_problems(state, seat, seen[seat], seat)
    problems += leaks.public_problems(state, seen["public"], "public")
    assert problems == []


@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path / 'seed000.db'}"


def test_viewer_matrix_before_during_after_and_after_reload(db):
    with open_rooms(db) as app:
        room = app.create_room(LAYOUT)["room"]

        # Before payment: only the owner has a Box control, with the provisional notice.
        before = views(app, room)
        control = before["richese"]["nullentropy"]
        assert control["card"]["id"] == BOX
        assert control["blocked"] is None and control["search"] is None
        assert control["full_hand_exchange"] is True and "notice" in control
        for seat in OTHERS:
            assert before[seat]["nullentropy"] is None
            assert before[seat]["search"] is None
            assert "me" in before[seat] and "spice" not in str(before[seat]["seats"])
        assert "me" not in before["public"] and "nullentropy" not in before["public"]
        assert_clean(app, room, before)

        begun = app.execute(room, "richese", {"type": "begin_search", "card": BOX})
        assert begun["ok"]
        search = begun["events"][-1]["search"]

    # A reload while the search is open: a lost connection leaves it open.
    with open_rooms(db) as app:
        during = views(app, room)
        owner = during["richese"]
        assert owner["me"]["spice"] == 8
        assert owner["decision"]["kind"] == "nullentropy"
        cards = ids(owner["nullentropy"]["search"]["cards"])
        assert cards == display_order(PILE) != PILE  # stable display order, not the pile's
        assert owner["nullentropy"]["full_hand_exchange"] is True
        for viewer in [*OTHERS, "public"]:
            seen = during[viewer]
            assert seen["decision"] == {"kind": "nullentropy", "event": search,
                                        "player": "richese"}
            assert seen["search"] == {"event": search, "owner": "richese", "box": BOX}
            assert seen.get("nullentropy") is None
            own = {c["id"] for c in seen.get("me", {}).get("hand", [])}
            assert leaks.named(seen) <= {BOX, PILE[-1]} | own  # the Box, the top, its own
        assert_clean(app, room, during)
        during_version = owner["version"]

        chosen = app.execute(room, "richese", {"type": "select_card", "search": search,
                                                "card": "maula-pistol"})
        assert chosen["ok"]
        assert all("maula-pistol" not in str(e) for e in chosen["events"])
        after = views(app, room)

    owner = after["richese"]
    assert sorted(ids(owner["me"]["hand"])) == sorted(["crysknife", "shield-2", "chaumas",
                                                      "maula-pistol"])
    assert owner["nullentropy"] is None and owner["me"]["spice"] == 8
    for viewer in [*OTHERS, "public"]:
        seen = after[viewer]
        assert seen["discard"] == {"count": 5, "top": {"id": BOX, "name": "Nullentropy Box",
                                                       "category": "special"}}
        richese = next(s for s in seen["seats"] if s["faction"] == "richese")
        assert richese["hand_count"] == 4
        assert "maula-pistol" not in str(seen)
        assert seen["decision"] is None and seen["search"] is None

    # After a reload: the same views, from the stored read models.
    with open_rooms(db) as app:
        assert views(app, room) == after
        assert_clean(app, room, after)
        # Time travel to the open search: its candidates are gone once it closed.
        past = app.view_at(room, during_version, "richese")
        assert past["nullentropy"]["search"] == {"event": search, "cards": None}
        for seat in OTHERS:
            assert app.view_at(room, during_version, seat)["nullentropy"] is None
        log = app.public_log(room)
        types = [e["type"] for e in log]
        assert types[-6:] == ["FeePaid", "SearchOpened", "CardRetrieved", "PileShuffled",
                              "BoxDiscarded", "SearchClosed"]
        assert all("maula-pistol" not in str(e) for e in log)
        assert leaks.scan_room(app, room) == []


def test_candidates_do_not_depend_on_the_pile_order(db):
    with open_rooms(db) as app:
        shown = []
        for pile in (PILE, list(reversed(PILE))):
            room = app.create_room({**LAYOUT, "discard": pile})["room"]
            app.execute(room, "richese", {"type": "begin_search", "card": BOX})
            shown.append(ids(app.seat_view(room, "richese")["nullentropy"]["search"]["cards"]))
        assert shown[0] == shown[1]
