"""`dune-ledger demo`: scripted rooms a newcomer can read from top to bottom.

The play (`play_demo`) only runs commands and records what it shows in a
`Transcript`; printing it is apart (`print_summary`, or the whole transcript
as JSON with `--json`), so that a new scene is added to the play alone.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, TextIO

import orjson

from dune_ledger.application.audit import audit_room
from dune_ledger.application.rooms import RoomsApp

# The demo's rooms go to a file of their own, not to the rooms of `dune-ledger.db`.
DEMO_URL = "sqlite:///dune-ledger-demo.db"


# The layouts of examples/, shipped as package data of `dune_ledger.examples`.
EXAMPLES = resources.files("dune_ledger.examples")


def example(name: str) -> dict[str, Any]:
    """A layout of examples/ by its name (`box`)."""
    layout: dict[str, Any] = orjson.loads(EXAMPLES.joinpath(f"{name}.json").read_bytes())
    return layout


def committed(layout: dict[str, Any]) -> dict[str, Any]:
    """The layout without its seed: a committed room (RULES 9.1), which a newcomer's
    table makes so that every room it plays can be verified; `demo` keeps its seed
    for repeatable output."""
    raw = {k: v for k, v in layout.items() if k != "seed"}
    amb = raw.get("ambassadors")
    if isinstance(amb, dict):
        # Ecaz's cohort left to the deal too (RULES 9.2): a cohort the layout writes
        # would be its author's choice, and a committed layout is refused with one.
        raw["ambassadors"] = {k: v for k, v in amb.items() if k not in ("cohort", "used")}
    return raw


BOX_LAYOUT = example("box")


class DemoRefused(Exception):
    """A scripted step was refused: the demo is out of step with the rules."""


@dataclass
class DemoRoom:
    title: str
    room: str
    commands: int = 0
    events: int = 0
    audit: dict[str, Any] = field(default_factory=dict)


@dataclass
class Transcript:
    """What the play shows, scene by scene, and the rooms it played."""

    scenes: list[dict[str, Any]] = field(default_factory=list)
    rooms: list[DemoRoom] = field(default_factory=list)

    def show(self, title: str, data: Any = None) -> None:
        self.scenes.append({"title": title, "data": data})

    def step(self, app: RoomsApp, room: str, seat: str,
             command: dict[str, Any]) -> dict[str, Any]:
        result = app.execute(room, seat, command)
        self.show(f"{seat}: {orjson.dumps(command).decode()}", result)
        if not result["ok"]:
            raise DemoRefused(f"demo step refused: {result['error']['message']}")
        self.rooms[-1].commands += 1
        return result

    def audit(self, app: RoomsApp, room: str) -> dict[str, Any]:
        report = audit_room(app, room)
        self.show("Audit", report)
        self.rooms[-1].audit = report
        self.rooms[-1].events = report["events"]
        return report

    @property
    def ok(self) -> bool:
        return all(r.audit.get("ok") for r in self.rooms)

    def as_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "scenes": self.scenes,
                "rooms": [{"title": r.title, "room": r.room, "commands": r.commands,
                           "events": r.events, "audit_ok": r.audit.get("ok"),
                           "state_hash": r.audit.get("state_hash")} for r in self.rooms]}


def play_demo(app: RoomsApp) -> Transcript:
    t = Transcript()
    play_box_room(app, t)
    play_ambassador_room(app, t)
    play_bidding_room(app, t)
    return t


def print_summary(t: Transcript, url: str, out: TextIO = sys.stdout) -> None:
    """A few lines: each room, what it showed, its audit, and what to try next."""
    print(f"dune-ledger demo: {len(t.rooms)} rooms played in {url}", file=out)
    for r in t.rooms:
        verdict = "clean" if r.audit.get("ok") else "PROBLEMS FOUND"
        print(f"  {r.title}: room {r.room}, {r.commands} commands, {r.events} events, "
              f"audit {verdict}", file=out)
    first = t.rooms[0].room
    db = f"--db {url} "
    me = program()
    print("Next:", file=out)
    print(f"  {me} {db}room log {first}", file=out)
    print(f"  {me} {db}room view {first} --as richese", file=out)
    print(f"  {me} {db}audit {first}", file=out)
    print(f"  {me} demo --json   (every scene: commands, views, logs, audits)", file=out)


def program() -> str:
    """How to run this command again as typed: `dune-ledger` when it is on the PATH,
    else the path it was started by (`.venv/bin/dune-ledger` on a fresh clone)."""
    if shutil.which("dune-ledger"):
        return "dune-ledger"
    started = sys.argv[0]
    if os.path.basename(started) == "dune-ledger" and os.path.exists(started):
        return os.path.relpath(started)
    return "dune-ledger"


def play_box_room(app: RoomsApp, t: Transcript) -> None:
    show, step = t.show, t.step
    created = app.create_room(BOX_LAYOUT)
    room = created["room"]
    t.rooms.append(DemoRoom("Nullentropy Box search", room))
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
    t.audit(app, room)


# --- the second room: a Richese Ambassador purchase (RULES 4) -------------------------

AMBASSADOR_LAYOUT = example("ambassador")


def pass_everyone(app: RoomsApp, t: Transcript, room: str) -> None:
    """Every seat the open window waits for passes, in the order the window lists them."""
    window = app.public_view(room)["response"]
    for seat in window["waiting"]:
        t.step(app, room, seat, {"type": "respond", "event": window["event"], "action": "pass"})


def play_ambassador_room(app: RoomsApp, t: Transcript) -> None:
    """Atreides ships into Arrakeen; Ecaz triggers the Richese token for its Harkonnen
    ally, who buys a card; the Emperor's income and the Harkonnen bonus each get a
    Karama window; Ecaz never sees its ally's new cards."""
    show, step = t.show, t.step
    created = app.create_room(AMBASSADOR_LAYOUT)
    room = created["room"]
    t.rooms.append(DemoRoom("Richese Ambassador purchase", room))
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
    pass_everyone(app, t, room)
    show("The Harkonnen bonus window (public view)", app.public_view(room)["response"])
    pass_everyone(app, t, room)

    show("Public log", app.public_log(room))
    for seat in ("ecaz", "harkonnen", "emperor", "atreides"):
        view = app.seat_view(room, seat)
        show(f"{seat}'s view", {"me": view["me"], "seats": view["seats"],
                                "ambassador": view["ambassador"],
                                "receipts": view["receipts"]})
    t.audit(app, room)


BIDDING_LAYOUT = example("bidding")
BIDDING_ORDER = ["emperor", "atreides", "harkonnen", "ixians", "richese", "bene_gesserit"]


def play_bidding_room(app: RoomsApp, t: Transcript) -> None:
    """A Bidding round (RULES 10): the operator opens it, Richese sells no cache card,
    the Ixians set one of the dealt cards aside, Atreides sees the card up for bid and
    nobody else does; the Emperor wins it, the income window follows; then everyone
    passes and the rest go back on the deck."""
    show, step = t.show, t.step
    created = app.create_room(BIDDING_LAYOUT)
    room = created["room"]
    t.rooms.append(DemoRoom("Bidding round", room))
    show("Third room: a six-seat Bidding round (seat tokens are shown once, here)", created)
    step(app, room, "operator", {"type": "open_bidding", "order": BIDDING_ORDER})
    step(app, room, "richese", {"type": "richese_sale", "when": "none"})
    dealt = app.seat_view(room, "ixians")["bidding"]["dealt"]
    show("The Ixians' view: the dealt cards, theirs alone to see", dealt)
    step(app, room, "ixians", {"type": "ix_set_aside", "card": dealt[0]["id"],
                               "where": "bottom"})
    show("Atreides' view of the card up for bid (prescience)",
         app.seat_view(room, "atreides")["bidding"]["up"])
    show("The public view of the round: no card", app.public_view(room)["bidding"])
    step(app, room, "emperor", {"type": "bid", "amount": 2})
    for seat in BIDDING_ORDER[1:]:
        step(app, room, seat, {"type": "pass_bid"})
    # The Emperor bought it: no income window (the price stays in the Bank), no bonus.
    show("After the Emperor's purchase: the next card is up", app.public_view(room)["bidding"])
    while (view := app.public_view(room))["bidding"] is not None:
        if view["response"] is not None:
            pass_everyone(app, t, room)
            continue
        step(app, room, view["bidding"]["up"]["turn"], {"type": "pass_bid"})
    show("Public log", app.public_log(room))
    t.audit(app, room)
