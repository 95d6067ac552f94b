"""Fair dealing's cost (issue 26): a committed room's commands against a seeded room's.

    .venv/bin/python -m scripts.bench_fairness [--rounds 7] [--commands 400]
        [--storage sqlite|memory] [--clock cpu|wall]

Each round plays the same commands in a fresh seeded room and a fresh committed room
of the same layout (draws and discards by two seats, through the deck's end and the
reshuffles of the discard pile; in the committed room the first draw shuffles the
deck too), through RoomsApp.execute on the chosen storage, the two rooms' commands
interleaved one by one (so that a slower stretch of a shared machine falls on
both), each command timed alone, in this process's CPU time by default (`--clock
wall` for elapsed time; on a shared machine the CPU time is the steadier). It
prints the seconds per command of each and the ratio committed / seeded: the
median of the rounds' ratios, and the rounds' range. The derivation
(domain/randomness.Derived) is built for every command of the committed room and
draws for each shuffle. The goal: a ratio of at most 1.10.
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


def lockstep(app: Any, layouts: dict[str, dict[str, Any]], commands: int,
             clock: Any = time.process_time) -> dict[str, tuple[float, int]]:
    """Seconds per command of each layout's room, the rooms' commands interleaved one by
    one (the order swapped every command), so that a slower moment of a shared machine
    falls on both; and the shuffles each room's commands drew."""
    rooms = {name: app.create_room(raw)["room"] for name, raw in layouts.items()}
    spent = dict.fromkeys(rooms, 0.0)
    shuffles = dict.fromkeys(rooms, 0)
    names = list(rooms)
    for done in range(0, commands, 2):
        seat = ("emperor", "harkonnen")[done // 2 % 2]
        for name in names if done // 2 % 2 else reversed(names):
            room = rooms[name]
            start = clock()
            drawn = app.execute(room, seat, {"type": "draw"})
            spent[name] += clock() - start
            assert drawn["ok"], drawn
            shuffles[name] += sum(e["type"] in ("DeckShuffled", "DiscardReshuffled")
                                  for e in drawn["events"])
            # The hand as the app kept the room after the draw (a peek: no read, no copy).
            card = app.kept.rooms[UUID(room)].state.seat(seat).hand[-1]
            start = clock()
            discarded = app.execute(room, seat, {"type": "discard", "card": card})
            spent[name] += clock() - start
            assert discarded["ok"], discarded
    return {name: (spent[name] / commands, shuffles[name]) for name in rooms}


def shuffle_cost(clock: Any, times: int = 2000) -> dict[str, float]:
    """Microseconds to make one command's port and shuffle a 45-card deck with it: the
    seeded source (infrastructure/randomness.for_room) against the derived one."""
    from dune_ledger.domain.game import committed, derived
    from dune_ledger.infrastructure.randomness import for_room

    deck = [f"card-{i}" for i in range(45)]
    f = committed(["emperor", "harkonnen", "richese"], bytes(32))
    out = {}
    for name, make in (("seeded_shuffle_us", lambda v: for_room(11, v)),
                       ("committed_shuffle_us", lambda v: derived("room", f, v))):
        start = clock()
        for v in range(times):
            make(v).shuffle(deck)
        out[name] = 1e6 * (clock() - start) / times
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--commands", type=int, default=400)
    p.add_argument("--storage", choices=["sqlite", "memory"], default="sqlite")
    p.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    args = p.parse_args()
    seeded = layout()
    committed = {k: v for k, v in layout().items() if k != "seed"}
    with tempfile.TemporaryDirectory() as tmp:
        key = Path(tmp) / "bench.key"
        init_key_file(key)
        url = "memory://" if args.storage == "memory" else f"sqlite:///{tmp}/bench.db"
        with open_rooms(url, key_file=str(key)) as app:
            clock = time.process_time if args.clock == "cpu" else time.perf_counter
            both = {"seeded": seeded, "committed": committed}
            lockstep(app, both, 40)  # warm up imports and caches
            rows = []
            for _ in range(args.rounds):
                got = lockstep(app, both, args.commands, clock)
                rows.append({"seeded": got["seeded"][0], "committed": got["committed"][0],
                             "ratio": got["committed"][0] / got["seeded"][0],
                             "shuffles": got["committed"][1]})
    ratios = [row["ratio"] for row in rows]
    report = {
        "storage": args.storage, "clock": args.clock, "rounds": args.rounds,
        "commands": args.commands,
        "seeded_ms": 1000 * statistics.median(row["seeded"] for row in rows),
        "committed_ms": 1000 * statistics.median(row["committed"] for row in rows),
        "ratio_median": statistics.median(ratios),
        "ratio_range": [min(ratios), max(ratios)],
        "shuffles_per_room": rows[0]["shuffles"],
        **shuffle_cost(time.process_time if args.clock == "cpu" else time.perf_counter),
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
