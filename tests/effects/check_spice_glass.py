"""The sample effect, played in a copy of the repository that holds it (its module in
`domain/`, its card in the catalog): run there by `tests/test_adding_an_effect.py` and by
`python -m scripts.house_figures`. It is listed, accepted, shown to its owner only,
replayed from the store and audited, with no other file of the package touched."""

from __future__ import annotations

import pickle
from pathlib import Path

import orjson

from dune_ledger.application.audit import audit_room
from dune_ledger.domain.game import NEWEST_CATALOG, replay
from dune_ledger.infrastructure.keys import init_key_file
from dune_ledger.infrastructure.storage import open_rooms

GLASS = "spice-glass"
LOOK = {"type": "spice_glass", "card": GLASS}
LAYOUT = {
    "mode": "basic", "seed": 5, "turn": 1, "phase": 4,
    "seats": [{"faction": "atreides", "spice": 3, "hand": [GLASS, "crysknife"]},
              {"faction": "emperor", "spice": 3, "hand": ["karama-1"]}],
    "discard": ["baliset"],
}


def test_the_sample_effect_is_listed_accepted_shown_to_its_owner_replayed_and_audited(
        tmp_path: Path) -> None:
    url, key = f"sqlite:///{tmp_path / 'rooms.db'}", tmp_path / "server.key"
    init_key_file(key)
    with open_rooms(url, key_file=str(key)) as app:
        room = str(app.create_room(LAYOUT)["room"])
        created = app.public_log(room)[0]
        assert created["catalog"] == NEWEST_CATALOG > 1  # the catalog that brings the card
        assert LOOK in app.seat_view(room, "atreides")["actions"]
        assert not [a for a in app.seat_view(room, "emperor")["actions"]
                    if a["type"] == "spice_glass"]

        refused = app.execute(room, "emperor", LOOK)
        assert refused["error"]["code"] == "not_in_hand" and refused["version"] == 1

        looked = app.execute(room, "atreides", LOOK)
        assert looked["ok"], looked
        assert looked["events"] == [{"type": "DeckTopSeen", "version": 2, "seat": "atreides",
                                     "card": GLASS}]
        state = app.load(room).state
        top = state.deck[0]
        owner = app.seat_view(room, "atreides")
        assert owner["spice_glass"]["top"]["id"] == top and owner["me"]["spice"] == 2
        assert app.public_view(room)["spice_glass"] is None
        for other in (app.seat_view(room, "emperor"), app.public_view(room),
                      app.public_log(room)):
            assert top.encode() not in orjson.dumps(other)
        report = audit_room(app, room)
        assert report["ok"], report["checks"]
        seen = state.model_dump(mode="json")
        assert pickle.loads(pickle.dumps(state)).model_dump(mode="json") == seen
    with open_rooms(url, key_file=str(key)) as again:  # another process's store, read anew
        replayed = replay(r.fact for r in again.records(again.load(room).id))
        assert replayed.model_dump(mode="json") == seen
        assert seen["spice_glass"] == {"tops": {"atreides": top}}
        assert again.seat_view(room, "atreides")["spice_glass"]["top"]["id"] == top
