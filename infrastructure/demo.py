"""`dune-ledger demo`: a scripted room a newcomer can read from top to bottom."""

from __future__ import annotations

from typing import Any

import orjson

from application.audit import audit_room
from application.rooms import RoomsApp

BOX_LAYOUT: dict[str, Any] = {
    "mode": "advanced",
    "expansions": ["choam_richese"],
    "seed": 7,
    "bank": 500,
    "turn": 2,
    "phase": 6,
    "seats": [
        {"faction": "richese", "spice": 10, "hand": ["nullentropy-box", "crysknife"]},
        {"faction": "emperor", "spice": 10, "hand": ["karama-1"]},
        {"faction": "harkonnen", "spice": 6, "hand": ["shield-2", "chaumas"]},
        {"faction": "atreides", "spice": 8, "hand": []},
    ],
    "discard": ["shield-1", "maula-pistol", "baliset", "snooper-3"],
}


def show(title: str, data: Any = None) -> None:
    print(f"\n== {title}")
    if data is not None:
        print(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())


def step(app: RoomsApp, room: str, seat: str, command: dict[str, Any]) -> dict[str, Any]:
    result = app.execute(room, seat, command)
    show(f"{seat}: {orjson.dumps(command).decode()}", result)
    if not result["ok"]:
        raise SystemExit(f"demo step refused: {result['error']['message']}")
    return result


def run_demo(app: RoomsApp) -> int:
    created = app.create_room(BOX_LAYOUT)
    room = created["room"]
    show("Room created (seat tokens are shown once, here)", created)

    show("Richese before paying: the Box control", app.seat_view(room, "richese")["nullentropy"])
    step(app, room, "richese", {"type": "begin_search", "card": "nullentropy-box",
                                "command_id": "demo-begin"})
    box = app.seat_view(room, "richese")["nullentropy"]
    show("Richese's private candidates (only Richese sees these)", box)
    show("The Emperor sees only that a paid search is open",
         {"decision": app.seat_view(room, "emperor")["decision"],
          "search": app.seat_view(room, "emperor")["search"]})
    refused = app.execute(room, "emperor", {"type": "draw"})
    show("The search lock: the Emperor's draw is refused", refused)

    choice = box["search"]["cards"][0]["id"]
    step(app, room, "richese", {"type": "select_card", "search": box["search"]["event"],
                                "card": choice})

    show("Public log", app.public_log(room))
    for seat in ("richese", "emperor", "harkonnen", "atreides"):
        view = app.seat_view(room, seat)
        show(f"{seat}'s view", {"me": view["me"], "seats": view["seats"],
                                "discard": view["discard"], "decision": view["decision"]})
    report = audit_room(app, room)
    show("Audit", report)
    verdict = "clean" if report["ok"] else "PROBLEMS FOUND"
    print(f"\nRoom {room}: audit {verdict}. Try: dune-ledger audit {room}")
    ambassador_ok = run_ambassador_demo(app)
    return 0 if report["ok"] and ambassador_ok else 1


# --- the second room: a Richese Ambassador purchase (RULES 4) -------------------------

AMBASSADOR_LAYOUT: dict[str, Any] = {
    "mode": "advanced",
    "expansions": ["choam_richese", "ecaz_moritani"],
    "seed": 7,
    "bank": 500,
    "turn": 3,
    "phase": 6,
    "seats": [
        {"faction": "ecaz", "spice": 8, "hand": [], "ally": "harkonnen"},
        {"faction": "harkonnen", "spice": 10,
         "hand": ["crysknife", "stunner", "chaumas", "shield-1", "snooper-1", "baliset"]},
        {"faction": "emperor", "spice": 10, "hand": ["karama-1"]},
        {"faction": "atreides", "spice": 8, "hand": ["karama-2"]},
    ],
    "discard": ["kulon", "shield-2"],
    "ambassadors": {
        "placed": [{"token": "richese", "territory": "arrakeen"},
                   {"token": "fremen", "territory": "carthag"}],
        "cohort": ["richese", "fremen", "guild", "ixians", "bene_gesserit"],
        "used": [],
        "copy_pool": ["emperor", "choam", "atreides"],
    },
}


def pass_everyone(app: RoomsApp, room: str) -> None:
    """Every seat the open window waits for passes, in the order the window lists them."""
    window = app.public_view(room)["response"]
    for seat in window["waiting"]:
        step(app, room, seat, {"type": "respond", "event": window["event"], "action": "pass"})


def run_ambassador_demo(app: RoomsApp) -> bool:
    """Atreides ships into Arrakeen; Ecaz triggers the Richese token for its Harkonnen
    ally, who buys a card; the Emperor's income and the Harkonnen bonus each get a
    Karama window; Ecaz never sees its ally's new cards."""
    created = app.create_room(AMBASSADOR_LAYOUT)
    room = created["room"]
    show("Second room: Ecaz's ambassadors (seat tokens are shown once, here)", created)

    entered = step(app, room, "atreides", {"type": "enter_territory", "territory": "arrakeen",
                                           "via": "shipment"})
    offered = next(e for e in entered["events"] if e["type"] == "AmbassadorOffered")
    step(app, room, "ecaz", {"type": "ambassador_decide", "event": offered["event"],
                             "trigger": True, "beneficiary": "harkonnen"})
    show("The Emperor's income window (public view)", app.public_view(room)["response"])
    show("Harkonnen's own view: the bought card and its receipt",
         {"hand": app.seat_view(room, "harkonnen")["me"]["hand"],
          "receipts": app.seat_view(room, "harkonnen")["receipts"]})
    show("Ecaz's view: its ally's hand is a count, the purchase a public stage",
         {"seats": app.seat_view(room, "ecaz")["seats"],
          "ambassador": app.seat_view(room, "ecaz")["ambassador"],
          "receipts": app.seat_view(room, "ecaz")["receipts"]})

    # RULES 4.4: every seat with a card in hand but the one whose advantage is at stake
    # is asked, whether or not it holds a Karama; here each of them passes.
    pass_everyone(app, room)
    show("The Harkonnen bonus window (public view)", app.public_view(room)["response"])
    pass_everyone(app, room)

    show("Public log", app.public_log(room))
    for seat in ("ecaz", "harkonnen", "emperor", "atreides"):
        view = app.seat_view(room, seat)
        show(f"{seat}'s view", {"me": view["me"], "seats": view["seats"],
                                "ambassador": view["ambassador"],
                                "receipts": view["receipts"]})
    report = audit_room(app, room)
    show("Audit", report)
    verdict = "clean" if report["ok"] else "PROBLEMS FOUND"
    print(f"\nRoom {room}: audit {verdict}. Try: dune-ledger audit {room}")
    return bool(report["ok"])
