"""Write a golden corpus: rooms played by this version, exported, with what they replay to.

    .venv/bin/python -m scripts.make_golden LABEL        # tests/golden/LABEL.jsonl + .expected.json

The rooms are played by the real rules through the application (a Box
search, draws past a reshuffle, autopilot, gifts, Truthtrance with a promise,
Distrans, the Guild stop and a claimed shipping cost, Semuta, and the
Ambassador flows: purchase with its income and bonus windows, a Karama
cancel, a decline on a worm, a Bene Gesserit copy, a purchase with no effect,
a cohort drawn anew, and a committed room that ends), so that every stored event
type appears at least once; the script fails naming any type that does not.
`LABEL.jsonl` is the export (`dune-ledger export --all`); `LABEL.expected.json`
records, room by room, the
audit's `state_hash`, the state it hashes and the event count, the public view, the public log and
every seat's view, as this version shows them; `LABEL.key` is the key file
that signed it (a test key, made for the corpus: the importing store must
sign with the same key). `tests/test_golden.py`
imports every corpus and checks them, forever: a later version must replay
an old corpus to the same state and views (upcasting old events where their
meaning changed). Write a new corpus (a new LABEL) whenever events change;
never rewrite an old one.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from nacl.signing import SigningKey

from dune_ledger.application.audit import audit_room
from dune_ledger.application.rooms import RoomsApp
from dune_ledger.application.signatures import public_text
from dune_ledger.application.signatures import signed as sign_command
from dune_ledger.domain.game import EVENT_TYPES, OPERATOR
from dune_ledger.infrastructure.demo import AMBASSADOR_LAYOUT, BOX_LAYOUT, example
from dune_ledger.infrastructure.keys import init_key_file
from dune_ledger.infrastructure.storage import open_rooms
from dune_ledger.infrastructure.transfer import export_rooms

ROOT = Path(__file__).resolve().parent.parent

GOLDEN = ROOT / "tests" / "golden"
BOX = "nullentropy-box"
Play = Callable[[RoomsApp], str]


def ok(app: RoomsApp, room: str, seat: str, command: dict[str, Any]) -> dict[str, Any]:
    result = app.execute(room, seat, command)
    if not result["ok"]:
        raise SystemExit(f"{seat} {command}: refused: {result['error']}")
    return result


def event_of(result: dict[str, Any], kind: str) -> str:
    return str(next(e for e in result["events"] if e["type"] == kind)["event"])


def box_room(app: RoomsApp) -> str:
    room = app.create_room(BOX_LAYOUT)["room"]
    ok(app, room, "richese", {"type": "begin_search", "card": BOX})
    search = app.seat_view(room, "richese")["nullentropy"]["search"]
    ok(app, room, "richese", {"type": "select_card", "search": search["event"],
                              "card": search["cards"][0]["id"]})
    ok(app, room, "atreides", {"type": "set_autopilot", "enabled": True, "profile": "hard"})
    ok(app, room, "atreides", {"type": "set_autopilot", "enabled": False})
    # Draw and discard until the deck runs out and the discard pile is reshuffled.
    for _ in range(40):
        drawn = ok(app, room, "harkonnen", {"type": "draw"})
        hand = app.seat_view(room, "harkonnen")["me"]["hand"]
        ok(app, room, "harkonnen", {"type": "discard", "card": hand[-1]["id"]})
        if any(e["type"] == "DiscardReshuffled" for e in drawn["events"]):
            break
    return room


BASE: dict[str, Any] = {
    "mode": "advanced", "expansions": ["choam_richese"], "seed": 11, "turn": 2, "phase": 6,
    "seats": [
        {"faction": "richese", "spice": 10, "hand": [BOX, "crysknife"]},
        {"faction": "emperor", "spice": 10, "hand": ["karama-1"]},
        {"faction": "harkonnen", "spice": 6, "hand": ["shield-2", "chaumas"]},
    ],
    "discard": ["shield-1", "maula-pistol", "baliset"],
}


def staged(**hands: list[str]) -> dict[str, Any]:
    raw = orjson.loads(orjson.dumps(BASE))
    for seat in raw["seats"]:
        if seat["faction"] in hands:
            seat["hand"] = hands[seat["faction"]]
    return raw


def gifts_and_distrans(app: RoomsApp) -> str:
    raw = staged(richese=[BOX, "crysknife", "distrans", "stunner"])
    raw["seats"][0]["ally"] = "emperor"
    raw["seats"][1]["ally"] = "richese"
    room = app.create_room(raw)["room"]
    offered = ok(app, room, "richese", {"type": "offer_gift", "card": "crysknife",
                                        "to": "emperor"})
    ok(app, room, "emperor", {"type": "answer_gift", "event": event_of(offered, "GiftOffered"),
                              "accept": True})
    offered = ok(app, room, "richese", {"type": "offer_gift", "card": "stunner",
                                        "to": "emperor"})
    ok(app, room, "emperor", {"type": "answer_gift", "event": event_of(offered, "GiftOffered"),
                              "accept": False})
    ok(app, room, "richese", {"type": "distrans", "card": "distrans", "give": "stunner",
                              "to": "harkonnen"})
    return room


def truthtrance(app: RoomsApp) -> str:
    room = app.create_room(staged(emperor=["karama-1", "truthtrance-1"]))["room"]
    asked = ok(app, room, "emperor", {"type": "ask_truthtrance", "card": "truthtrance-1",
                                      "target": "richese", "question": "Will you search?"})
    ok(app, room, "richese", {"type": "answer_truthtrance",
                              "event": event_of(asked, "TruthtranceAsked"), "answer": "yes",
                              "promise": {"box": BOX}})
    ok(app, room, "richese", {"type": "begin_search", "card": BOX})  # the promise kept
    return room


def guild(app: RoomsApp) -> str:
    raw = staged(emperor=["kulon"])
    raw["seats"] += [{"faction": "guild", "spice": 5, "hand": []},
                     {"faction": "atreides", "spice": 5, "hand": ["stunner"]}]
    raw["discard"] = ["shield-1", "karama-2", "baliset", "karama-1"]
    raw["shipping_costs"] = [
        {"card": "karama-2", "creator": "atreides", "beneficiary": "atreides", "price": 5},
        {"card": "karama-1", "creator": "atreides", "beneficiary": "atreides", "price": 2}]
    room = app.create_room(raw)["room"]
    ok(app, room, "richese", {"type": "begin_search", "card": BOX})
    search = app.seat_view(room, "richese")["nullentropy"]["search"]
    ok(app, room, "richese", {"type": "select_card", "search": search["event"],
                              "card": "karama-2"})  # claims its shipping cost
    ok(app, room, "guild", {"type": "guild_stop", "card": "karama-1"})  # refunded
    return room


def semuta(app: RoomsApp) -> str:
    room = app.create_room(staged(emperor=["karama-1", "semuta-drug"]))["room"]
    ok(app, room, "richese", {"type": "begin_search", "card": BOX})
    search = app.seat_view(room, "richese")["nullentropy"]["search"]
    ok(app, room, "richese", {"type": "select_card", "search": search["event"],
                              "card": "maula-pistol"})
    window = app.public_view(room)["semuta"]["event"]
    ok(app, room, "emperor", {"type": "semuta", "event": window, "action": "take",
                              "card": BOX})
    return room


def semuta_passed(app: RoomsApp) -> str:
    room = app.create_room(staged(emperor=["karama-1", "semuta-drug"]))["room"]
    ok(app, room, "harkonnen", {"type": "discard", "card": "chaumas"})
    # Every seat the window waits for passes (who holds Semuta is not public).
    while (window := app.public_view(room)["response"]) is not None:
        for seat in window["waiting"]:
            ok(app, room, seat, {"type": "semuta", "event": window["event"],
                                 "action": "pass"})
    return room


def ambassador_purchase(app: RoomsApp) -> str:
    raw = orjson.loads(orjson.dumps(AMBASSADOR_LAYOUT))
    room = app.create_room(raw)["room"]
    entered = ok(app, room, "atreides", {"type": "enter_territory", "territory": "arrakeen",
                                         "via": "shipment"})
    ok(app, room, "ecaz", {"type": "ambassador_decide",
                           "event": event_of(entered, "AmbassadorOffered"), "trigger": True,
                           "beneficiary": "harkonnen"})
    income = app.public_view(room)["response"]["event"]
    # The Emperor's income is cancelled with a Karama; the bonus window follows.
    ok(app, room, "atreides", {"type": "respond", "event": income, "action": "karama",
                               "card": "karama-2"})
    pass_every_window(app, room)
    return room


def pass_every_window(app: RoomsApp, room: str) -> None:
    """Every seat a response window waits for passes, until none is open."""
    while (window := app.public_view(room)["response"]) is not None:
        for seat in window["waiting"]:
            ok(app, room, seat, {"type": "respond", "event": window["event"],
                                 "action": "pass"})


def ambassador_cohort(app: RoomsApp) -> str:
    """The last token of Ecaz's cohort spent on a purchase whose income is paid: a new
    cohort is drawn. A seeded room: a committed one names no cohort (RULES 9.2), and
    its tokens are placed by the layout alone, so its cohort is never spent."""
    raw = orjson.loads(orjson.dumps(AMBASSADOR_LAYOUT))
    raw["ambassadors"] = {
        "placed": [{"token": "richese", "territory": "arrakeen"}],
        "cohort": ["richese", "fremen", "guild", "ixians", "atreides"],
        "used": ["fremen", "guild", "ixians", "atreides"],
        "copy_pool": ["emperor", "choam"],
    }
    room = app.create_room(raw)["room"]
    entered = ok(app, room, "atreides", {"type": "enter_territory", "territory": "arrakeen",
                                         "via": "shipment"})
    ok(app, room, "ecaz", {"type": "ambassador_decide",
                           "event": event_of(entered, "AmbassadorOffered"), "trigger": True,
                           "beneficiary": "harkonnen"})
    pass_every_window(app, room)
    return room


def window_deadline(app: RoomsApp) -> str:
    """The Emperor's income window left to its deadline: the worker closes it."""
    room = app.create_room(orjson.loads(orjson.dumps(AMBASSADOR_LAYOUT)))["room"]
    entered = ok(app, room, "atreides", {"type": "enter_territory", "territory": "arrakeen",
                                         "via": "shipment"})
    ok(app, room, "ecaz", {"type": "ambassador_decide",
                           "event": event_of(entered, "AmbassadorOffered"), "trigger": True,
                           "beneficiary": "harkonnen"})
    later = datetime.now(UTC) + timedelta(hours=1)
    closed = app.close_expired(room, later)
    if closed is None or not closed["ok"]:
        raise SystemExit(f"the window's deadline did not close it: {closed}")
    pass_every_window(app, room)
    return room


def ambassador_flows(app: RoomsApp) -> str:
    """A decline on a worm, a Bene Gesserit copy of the Richese token, and a purchase
    with no effect."""
    raw = orjson.loads(orjson.dumps(AMBASSADOR_LAYOUT))
    raw["seats"][0]["spice"] = 2  # Ecaz cannot pay for a card
    raw["ambassadors"] = {
        "placed": [{"token": "fremen", "territory": "carthag"},
                   {"token": "bene_gesserit", "territory": "arrakeen"},
                   {"token": "guild", "territory": "tueks-sietch"}],
        "cohort": ["fremen", "bene_gesserit", "guild", "ixians", "atreides"],
        "used": ["ixians", "atreides"],
        "copy_pool": ["richese", "emperor", "choam"],
    }
    room = app.create_room(raw)["room"]
    entered = ok(app, room, "atreides", {"type": "enter_territory", "territory": "carthag",
                                         "via": "worm"})
    ok(app, room, "ecaz", {"type": "ambassador_decide",
                           "event": event_of(entered, "AmbassadorOffered"), "trigger": False})
    entered = ok(app, room, "emperor", {"type": "enter_territory", "territory": "arrakeen",
                                        "via": "movement"})
    copied = ok(app, room, "ecaz", {"type": "ambassador_decide",
                                    "event": event_of(entered, "AmbassadorOffered"),
                                    "trigger": True, "beneficiary": "ecaz"})
    decision = next(e for e in copied["events"] if e["type"] == "AmbassadorCopyOffered")
    ok(app, room, "ecaz", {"type": "ambassador_copy", "event": decision["decision"],
                           "token": "richese"})  # Ecaz has 2 spice: no effect
    pass_every_window(app, room)
    entered = ok(app, room, "atreides", {"type": "enter_territory", "territory": "tueks-sietch",
                                         "via": "shipment"})
    ok(app, room, "ecaz", {"type": "ambassador_decide",
                           "event": event_of(entered, "AmbassadorOffered"), "trigger": False})
    return room


def signed(room: str, seat: str, key: SigningKey, command: dict[str, Any]) -> dict[str, Any]:
    """A command signed by a seat's key (RULES 9.3), with a command id of its type."""
    return sign_command(key, room, seat, {"command_id": f"{seat}-{command['type']}", **command})


def seed_hash(room: str, seat: str, value: str) -> str:
    return hashlib.sha256(f"dune-ledger:seed:{room}:{seat}:{value}".encode()).hexdigest()


def committed_room(app: RoomsApp) -> str:
    """A committed room (RULES 9): a seat key, the ceremony with a withheld reveal and the
    operator's deal, the deck shuffled at the deal, signed and unsigned play, a token
    reissue that clears a key, the end."""
    raw = staged()
    del raw["seed"]
    room = app.create_room(raw)["room"]
    key = SigningKey(bytes(range(32)))  # a fixed key: the corpus is the same each time
    ok(app, room, "emperor", {"type": "seat_key", "public_key": public_text(key)})
    ok(app, room, "richese", {"type": "seed_commit", "hash": seed_hash(room, "richese", "r")})
    ok(app, room, "emperor", signed(room, "emperor", key, {
        "type": "seed_commit", "hash": seed_hash(room, "emperor", "golden")}))
    ok(app, room, "harkonnen", {"type": "seed_commit",
                                "hash": seed_hash(room, "harkonnen", "kept")})
    ok(app, room, "richese", {"type": "seed_reveal", "value": "r"})
    ok(app, room, "emperor", signed(room, "emperor", key,
                                    {"type": "seed_reveal", "value": "golden"}))
    ok(app, room, OPERATOR, {"type": "deal"})  # harkonnen withheld its reveal
    ok(app, room, "emperor", signed(room, "emperor", key, {"type": "draw"}))
    ok(app, room, "richese", {"type": "begin_search", "card": BOX})
    search = app.seat_view(room, "richese")["nullentropy"]["search"]
    ok(app, room, "richese", {"type": "select_card", "search": search["event"],
                              "card": search["cards"][0]["id"]})
    app.reissue_token(room, "emperor")  # the key goes with the old token, publicly
    ended = app.end_room(room, "golden-end")
    if not ended["ok"]:
        raise SystemExit(f"the end was refused: {ended['error']}")
    return room


def bidding_round(app: RoomsApp) -> str:
    """A six-seat Bidding round (RULES 10): Richese's silent cache sale first, unsold,
    the Ixians set a card aside, a Karama bid outbid, a purchase with the income and
    the Ixian ally's replacement, one paid with an ally's support with its income and
    bonus, a Karama buy, then everyone passes and the rest go back on the deck."""
    room = app.create_room(example("bidding"))["room"]
    ok(app, room, OPERATOR, {"type": "open_bidding", "order": [
        "emperor", "atreides", "harkonnen", "ixians", "richese", "bene_gesserit"]})
    ok(app, room, "richese", {"type": "richese_sale", "when": "first"})
    dealt = app.seat_view(room, "ixians")["bidding"]["dealt"]
    ok(app, room, "ixians", {"type": "ix_set_aside", "card": dealt[0]["id"], "where": "top"})
    # The cache sale first, silent: every sealed bid 0, so the card goes to Richese.
    ok(app, room, "richese", {"type": "richese_offer", "card": "ornithopter",
                              "auction": "silent"})
    for seat in app.public_view(room)["bidding"]["sale"]["bidders"]:
        ok(app, room, seat, {"type": "sealed_bid", "amount": 0})
    ok(app, room, "bene_gesserit", {"type": "bid_support", "amount": 4})

    def turn() -> str:
        return str(app.public_view(room)["bidding"]["up"]["turn"])

    def pass_until_sold() -> None:
        index = app.public_view(room)["bidding"]["up"]["index"]
        while True:
            ok(app, room, turn(), {"type": "pass_bid"})
            up = (app.public_view(room)["bidding"] or {}).get("up")
            if up is None or up["index"] != index:
                return

    ok(app, room, "emperor", {"type": "bid", "amount": 1, "karama": "karama-1"})
    ok(app, room, "atreides", {"type": "bid", "amount": 2})
    pass_until_sold()
    pass_every_window(app, room)
    decision = app.public_view(room)["decision"]
    ok(app, room, "atreides", {"type": "ix_replace", "event": decision["event"],
                               "accept": True})
    ok(app, room, turn(), {"type": "pass_bid"})
    ok(app, room, "harkonnen", {"type": "bid", "amount": 8})
    pass_until_sold()
    pass_every_window(app, room)
    while turn() != "bene_gesserit":
        ok(app, room, turn(), {"type": "pass_bid"})
    ok(app, room, "bene_gesserit", {"type": "karama_buy", "karama": "karama-2"})
    pass_every_window(app, room)
    while app.public_view(room)["bidding"] is not None:
        ok(app, room, turn(), {"type": "pass_bid"})
    return room


def cache_sale(app: RoomsApp) -> str:
    """Richese sells a cache card once around, last: the normal cards first, then the
    sale, bought by the Emperor and paid to Richese."""
    raw = example("bidding")
    raw["seats"] = [s for s in raw["seats"] if s["faction"] != "ixians"]
    raw["seats"][1] = {**raw["seats"][1], "ally": None}
    order = ["emperor", "atreides", "harkonnen", "richese", "bene_gesserit"]
    room = app.create_room(raw)["room"]
    ok(app, room, OPERATOR, {"type": "open_bidding", "order": order})
    ok(app, room, "richese", {"type": "richese_sale", "when": "last"})
    while (round_ := app.public_view(room)["bidding"])["stage"] != "sale":
        if app.public_view(room)["response"] is not None:
            pass_every_window(app, room)
            continue
        up = round_["up"]
        command = {"type": "bid", "amount": 1} if up["high"] is None else {"type": "pass_bid"}
        ok(app, room, up["turn"], command)
    ok(app, room, "richese", {"type": "richese_offer", "card": "ornithopter",
                              "auction": "once_around"})
    ok(app, room, "bene_gesserit", {"type": "pass_bid"})
    ok(app, room, "emperor", {"type": "bid", "amount": 3})
    while (round_ := app.public_view(room)["bidding"]) and round_["sale"]["turn"]:
        ok(app, room, round_["sale"]["turn"], {"type": "pass_bid"})
    pass_every_window(app, room)
    return room


PLAYS: list[Play] = [box_room, gifts_and_distrans, truthtrance, guild, semuta, semuta_passed,
                     ambassador_purchase, ambassador_cohort, ambassador_flows, window_deadline,
                     committed_room, bidding_round, cache_sale]


def seen(app: RoomsApp, room: str) -> dict[str, Any]:
    """What this version shows of a room, and what its audit replays it to."""
    report = audit_room(app, room)
    if not report["ok"]:
        raise SystemExit(f"room {room} does not audit clean: {report['checks']}")
    public = app.public_view(room)
    seats = [s["faction"] for s in public["seats"]]
    return {"state_hash": report["state_hash"], "events": report["events"],
            "state": app.load(room).state.model_dump(mode="json"),
            "public": public, "log": app.public_log(room),
            "views": {seat: app.seat_view(room, seat) for seat in seats}}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("label", help="the corpus name, e.g. v1 (never an existing one)")
    p.add_argument("--force", action="store_true", help="overwrite an existing corpus")
    args = p.parse_args()
    corpus, expected = GOLDEN / f"{args.label}.jsonl", GOLDEN / f"{args.label}.expected.json"
    if corpus.exists() and not args.force:
        raise SystemExit(f"{corpus} exists: old corpora are never rewritten (use a new label)")
    key = GOLDEN / f"{args.label}.key"
    key.unlink(missing_ok=True)
    GOLDEN.mkdir(parents=True, exist_ok=True)
    init_key_file(key)
    with tempfile.TemporaryDirectory() as tmp, \
            open_rooms(f"sqlite:///{tmp}/golden.db", key_file=str(key)) as app:
        rooms = [play(app) for play in PLAYS]
        out = io.BytesIO()
        export_rooms(app, rooms, out)
        types = {orjson.loads(line)["type"] for line in out.getvalue().splitlines()}
        # A type the rules no longer emit (kept to replay old streams) is covered by the
        # corpus of a version that did.
        older = {orjson.loads(line)["type"] for old in GOLDEN.glob("*.jsonl")
                 if old != corpus for line in old.read_bytes().splitlines()}
        domain = {name for name, cls in EVENT_TYPES.items()
                  if cls.__module__.startswith("dune_ledger.domain.")}
        missing = sorted(domain - types - older)
        if missing:
            raise SystemExit(f"the corpus has no {', '.join(missing)}: add a play for each")
        if domain - types:
            print(f"only in older corpora: {', '.join(sorted(domain - types))}",
                  file=sys.stderr)
        record = {"label": args.label, "event_types": sorted(types),
                  "rooms": {room: seen(app, room) for room in rooms}}
    corpus.write_bytes(out.getvalue())
    expected.write_bytes(orjson.dumps(record, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
                         + b"\n")
    print(f"{corpus}: {len(rooms)} rooms, {len(out.getvalue().splitlines())} events, "
          f"{len(types)} event types", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
