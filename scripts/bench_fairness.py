"""Fair dealing's cost (issues 26 and 33): a committed room's commands against a seeded
room's, and `verify` against the audit.

    .venv/bin/python -m scripts.bench_fairness [--rounds 7] [--commands 400]
        [--storage sqlite|memory] [--clock cpu|wall] [--verify-events 10000]

Each round plays the same commands in a fresh seeded room, a fresh committed (v2)
room and a fresh committed room whose two playing seats registered keys and sign
every command (both dealt before the clock starts), all of the same layout: draws
and discards by two seats, through the deck's end and the reshuffles of the
discard pile, through RoomsApp.execute on the chosen storage, the rooms' commands
interleaved one by one (so that a slower stretch of a shared machine falls on
all), each command timed alone (a signature is made before its command's clock
starts: that is the client's work; checking it is the server's, and timed), in
this process's CPU time by default (`--clock wall` for elapsed time; on a shared
machine the CPU time is the steadier). It prints the seconds per command of each
and the ratios to the seeded room: the median of the rounds' ratios, and their
range. The goals (issue 33): the signed committed room within 1.15.

Then one committed room of about `--verify-events` events is played and ended, and
its transcript is verified (re-executing every command) and audited: events per
second of each, and verify / audit (the goal: at least 0.5).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from uuid import UUID

from dune_ledger.infrastructure.keys import init_key_file
from dune_ledger.infrastructure.storage import open_rooms
from tests.support import layout

SEATS = ("emperor", "harkonnen")


def prepared(app: Any, raw: dict[str, Any], keyed: bool) -> tuple[str, dict[str, Any]]:
    """A room of `raw`, dealt when committed; with `keyed`, its playing seats' keys."""
    from nacl.signing import SigningKey

    from dune_ledger.application.signatures import public_text

    room = app.create_room(raw)["room"]
    keys = {seat: SigningKey.generate() for seat in SEATS} if keyed else {}
    for seat, key in keys.items():
        assert app.execute(room, seat, {"type": "seat_key", "public_key": public_text(key)})["ok"]
    if "seed" not in raw:
        assert app.execute(room, "operator", {"type": "deal"})["ok"]
    return room, keys


def lockstep(app: Any, layouts: dict[str, dict[str, Any]], commands: int,
             clock: Any = time.process_time) -> dict[str, tuple[float, int]]:
    """Seconds per command of each layout's room (a name ending in `signed`: its seats
    keyed, every command signed), the rooms' commands interleaved one by one (the order
    turned every command), so that a slower moment of a shared machine falls on all;
    and the shuffles each room's commands drew."""
    from dune_ledger.application.signatures import signed

    made = {name: prepared(app, raw, name.endswith("signed")) for name, raw in layouts.items()}
    rooms = {name: room for name, (room, _) in made.items()}

    def sent(name: str, seat: str, command: dict[str, Any]) -> dict[str, Any]:
        key = made[name][1].get(seat)
        return command if key is None else signed(key, rooms[name], seat, command)

    spent = dict.fromkeys(rooms, 0.0)
    shuffles = dict.fromkeys(rooms, 0)
    names = list(rooms)
    for done in range(0, commands, 2):
        seat = SEATS[done // 2 % 2]
        turn = done // 2 % len(names)
        for name in names[turn:] + names[:turn]:
            room = rooms[name]
            command = sent(name, seat, {"type": "draw"})
            start = clock()
            drawn = app.execute(room, seat, command)
            spent[name] += clock() - start
            assert drawn["ok"], drawn
            shuffles[name] += sum(e["type"] in ("DeckShuffled", "DiscardReshuffled")
                                  for e in drawn["events"])
            # The hand as the app kept the room after the draw (a peek: no read, no copy).
            card = app.kept.rooms[UUID(room)].state.seat(seat).hand[-1]
            command = sent(name, seat, {"type": "discard", "card": card})
            start = clock()
            discarded = app.execute(room, seat, command)
            spent[name] += clock() - start
            assert discarded["ok"], discarded
    return {name: (spent[name] / commands, shuffles[name]) for name in rooms}


def shuffle_cost(clock: Any, times: int = 2000) -> dict[str, float]:
    """Microseconds to make one command's port and shuffle a 45-card deck with it: the
    seeded source (infrastructure/randomness.for_room) against the derived one (v2)."""
    from dune_ledger.domain.game import Counted
    from dune_ledger.infrastructure.randomness import for_room

    deck = [f"card-{i}" for i in range(45)]
    out = {}
    for name, make in (("seeded_shuffle_us", lambda v: for_room(11, v)),
                       ("committed_shuffle_us", lambda v: Counted(bytes(32), "room", v,
                                                                  "0" * 64))):
        start = clock()
        for v in range(times):
            make(v).shuffle(deck)
        out[name] = 1e6 * (clock() - start) / times
    return out


def verify_against_audit(app: Any, events: int, clock: Any) -> dict[str, Any]:
    """One committed room of about `events` events, ended: its transcript verified and
    the room audited, each timed once, in events per second."""
    from dune_ledger.application.audit import audit_room
    from dune_ledger.infrastructure.keys import public_key_info
    from dune_ledger.infrastructure.verify import public_key, transcript, verify

    room, _ = prepared(app, {k: v for k, v in layout().items() if k != "seed"}, False)
    while app.load(room).version < events:
        for seat in SEATS:
            assert app.execute(room, seat, {"type": "draw"})["ok"]
            card = app.kept.rooms[UUID(room)].state.seat(seat).hand[-1]
            assert app.execute(room, seat, {"type": "discard", "card": card})["ok"]
    assert app.end_room(room)["ok"]
    data = b"".join(transcript(app, room))
    key = public_key(public_key_info(app.key_file)["public_key"])
    start = clock()
    report = verify(data, key)
    verified = clock() - start
    assert report["ok"], report["first_failure"]
    start = clock()
    audited_report = audit_room(app, room)
    audited = clock() - start
    assert audited_report["ok"], audited_report
    n = report["events"]
    return {"verify_events": n, "verify_events_per_s": round(n / verified),
            "audit_events_per_s": round(n / audited),
            "verify_over_audit": round(audited / verified, 3)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--commands", type=int, default=400)
    p.add_argument("--storage", choices=["sqlite", "memory"], default="sqlite")
    p.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    p.add_argument("--verify-events", type=int, default=10_000)
    args = p.parse_args()
    seeded = layout()
    committed = {k: v for k, v in layout().items() if k != "seed"}
    with tempfile.TemporaryDirectory() as tmp:
        key = Path(tmp) / "bench.key"
        init_key_file(key)
        url = "memory://" if args.storage == "memory" else f"sqlite:///{tmp}/bench.db"
        with open_rooms(url, key_file=str(key)) as app:
            app.key_file = key
            clock = time.process_time if args.clock == "cpu" else time.perf_counter
            three = {"seeded": seeded, "committed": committed, "committed_signed": committed}
            lockstep(app, three, 40)  # warm up imports and caches
            rows = []
            for _ in range(args.rounds):
                got = lockstep(app, three, args.commands, clock)
                rows.append({"seeded": got["seeded"][0], "committed": got["committed"][0],
                             "signed": got["committed_signed"][0],
                             "ratio": got["committed"][0] / got["seeded"][0],
                             "signed_ratio": got["committed_signed"][0] / got["seeded"][0],
                             "shuffles": got["committed"][1]})
            checked = verify_against_audit(app, args.verify_events, clock)
    ratios = [row["ratio"] for row in rows]
    signed_ratios = [row["signed_ratio"] for row in rows]
    report = {
        "storage": args.storage, "clock": args.clock, "rounds": args.rounds,
        "commands": args.commands,
        "seeded_ms": 1000 * statistics.median(row["seeded"] for row in rows),
        "committed_ms": 1000 * statistics.median(row["committed"] for row in rows),
        "signed_ms": 1000 * statistics.median(row["signed"] for row in rows),
        "ratio_median": statistics.median(ratios),
        "ratio_range": [min(ratios), max(ratios)],
        "signed_ratio_median": statistics.median(signed_ratios),
        "signed_ratio_range": [min(signed_ratios), max(signed_ratios)],
        "shuffles_per_room": rows[0]["shuffles"],
        **checked,
        **shuffle_cost(time.process_time if args.clock == "cpu" else time.perf_counter),
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
