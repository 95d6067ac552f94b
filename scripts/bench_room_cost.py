"""What a room costs on PostgreSQL: events per command, and bytes in the events,
snapshots and read-model tables (docs/scaling.md).

    .venv/bin/python -m scripts.bench_room_cost [--rooms 20] [--commands 100]

Plays `--rooms` rooms of the Box layout (infrastructure/demo.py), `--commands`
draws and discards each (the deck runs out and reshuffles), lets the read
models catch up, then reads the sizes PostgreSQL reports, indexes included.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from dune_ledger.infrastructure.demo import BOX_LAYOUT
from dune_ledger.infrastructure.storage import open_rooms
from scripts import benchcommon

SEATS = ("emperor", "harkonnen", "atreides")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rooms", type=int, default=20)
    p.add_argument("--commands", type=int, default=100)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp, \
            benchcommon.database("postgresql", Path(tmp), "room_cost") as url:
        app = open_rooms(url, key_file=str(Path(tmp) / "bench.key"))
        rooms = [app.create_room({**BOX_LAYOUT, "seed": i})["room"] for i in range(args.rooms)]
        for room in rooms:
            for turn in range(args.commands):
                seat = SEATS[turn % len(SEATS)]
                state = app.load(room).state
                me = state.seat(seat)
                if len(me.hand) < me.limit and (state.deck or state.discard):
                    done = app.execute(room, seat, {"type": "draw"})
                else:
                    done = app.execute(room, seat, {"type": "discard", "card": me.hand[0]})
                if not done["ok"]:
                    raise SystemExit(f"a command was refused: {done}")
        assert app.read_models is not None
        app.read_models.catch_up()
        with app.recorder.datastore.transaction(commit=False) as c:  # type: ignore[attr-defined]
            c.execute("SELECT count(*) AS n, sum(octet_length(state)) AS b "
                      "FROM duneledger_events")
            events = c.fetchone()
            c.execute("SELECT pg_total_relation_size('duneledger_events') AS e, "
                      "pg_total_relation_size('duneledger_snapshots') AS s, "
                      "(SELECT sum(pg_total_relation_size(oid)) FROM pg_class "
                      "WHERE relname LIKE 'dl\\_%' AND relkind = 'r') AS m")
            sizes = c.fetchone()
        app.close()
    n, commands = int(events["n"]), args.rooms * args.commands
    print(json.dumps({
        "rooms": args.rooms, "commands": commands, "events": n,
        "events_per_command": round((n - args.rooms) / commands, 2),
        "state_bytes_per_event": round(int(events["b"]) / n),
        "events_table_bytes_per_event": round(int(sizes["e"]) / n),
        "bytes_per_room": {"events": round(int(sizes["e"]) / args.rooms),
                           "snapshots": round(int(sizes["s"]) / args.rooms),
                           "read_models": round(int(sizes["m"]) / args.rooms)},
        "note": benchcommon.SHARED}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
