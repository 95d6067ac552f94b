"""Two writers in one room at full speed: commands per second and `busy` answers.

    .venv/bin/python -m scripts.bench_contention                    # PostgreSQL and SQLite
    .venv/bin/python -m scripts.bench_contention --only sqlite --seconds 5 --rounds 3

Two processes play the same room as fast as they can, each its own seat (a
draw, then a discard of the drawn card). A command whose save loses the race
for the room's next version is decided again on the room as stored, up to
`application.rooms.RETRIES` times, then answered `busy`. Between tries it
waits a random while, up to `RETRY_PAUSE` seconds, doubling with each loss
(`RoomsApp.execute`). The baseline is the same run with no wait
(`RETRY_PAUSE` 0, as before the pause existed), in turn with the product's
setting, `--rounds` times each; the table gives the medians. A rule's
refusal (the other writer moved first) is counted apart from `busy`.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from typing import Any

from scripts.throwaway import throwaway_database

CTX = mp.get_context("spawn")
LAYOUT: dict[str, Any] = {
    "expansions": [], "turn": 2, "phase": 6,
    "seats": [{"faction": "emperor", "spice": 10, "hand": ["karama-1"]},
              {"faction": "harkonnen", "spice": 10, "hand": ["shield-2"]}],
}


def player(url: str, room: str, seat: str, pause: float, seconds: float, barrier: Any,
           out: Any) -> None:
    from dune_ledger.application import rooms
    from dune_ledger.infrastructure.storage import open_rooms

    rooms.RETRY_PAUSE = pause
    counts = {"ok": 0, "busy": 0, "refused": 0}
    with open_rooms(url) as app:
        app.load(room)  # connections and imports warm before the clock starts
        barrier.wait()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            results = [app.execute(room, seat, {"type": "draw"})]
            hand = app.load(room).state.seat(seat).hand
            if hand:
                results.append(app.execute(room, seat, {"type": "discard", "card": hand[-1]}))
            for result in results:
                code = "ok" if result["ok"] else result["error"]["code"]
                counts[code if code in counts else "refused"] += 1
    out.put(counts)


def run(url: str, pause: float, seconds: float) -> dict[str, float]:
    from dune_ledger.infrastructure.storage import open_rooms

    with open_rooms(url) as app:
        room = str(app.create_room(LAYOUT)["room"])
        assert app.execute(room, "operator", {"type": "deal"})["ok"]  # committed: RULES 9.4
    barrier, out = CTX.Barrier(2), CTX.Queue()
    players = [CTX.Process(target=player, args=(url, room, seat, pause, seconds, barrier, out))
               for seat in ("emperor", "harkonnen")]
    for p in players:
        p.start()
    counts = [out.get(timeout=seconds + 120) for _ in players]
    for p in players:
        p.join()
    total = {k: sum(c[k] for c in counts) for k in counts[0]}
    answered = sum(total.values())
    return {"commands_per_s": total["ok"] / seconds,
            "busy_share": total["busy"] / answered if answered else 0.0,
            "refused_share": total["refused"] / answered if answered else 0.0}


def measure(url: str, seconds: float, rounds: int) -> dict[str, dict[str, float]]:
    from dune_ledger.application import rooms

    runs: dict[str, list[dict[str, float]]] = {"pause": [], "no pause": []}
    for _ in range(rounds):  # in turn: the machine's speed drifts
        runs["pause"].append(run(url, rooms.RETRY_PAUSE, seconds))
        runs["no pause"].append(run(url, 0.0, seconds))
    return {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
            for name, rs in runs.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pg-admin", default=os.environ.get(
        "DUNE_LEDGER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres"),
        help="a maintenance URL: the bench creates and drops its own database")
    p.add_argument("--seconds", type=float, default=8.0, help="length of each run")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--only", choices=["postgresql", "sqlite"])
    args = p.parse_args()
    results: list[tuple[str, dict[str, dict[str, float]]]] = []
    if args.only in (None, "postgresql"):
        with throwaway_database(args.pg_admin, "dl_bench_contention") as url:
            results.append(("PostgreSQL", measure(url, args.seconds, args.rounds)))
    if args.only in (None, "sqlite"):
        with tempfile.TemporaryDirectory() as tmp:
            results.append(("SQLite", measure(f"sqlite:///{tmp}/contention.db",
                                              args.seconds, args.rounds)))
    print(f"\n{os.cpu_count()} CPUs; two writers in one room, {args.seconds:g} s runs, "
          f"medians of {args.rounds}\n")
    print("| storage | retries | commands/s | busy | refused by a rule |")
    print("|---|---|---:|---:|---:|")
    for storage, measured in results:
        for name, m in measured.items():
            print(f"| {storage} | {name} | {m['commands_per_s']:,.0f} | "
                  f"{m['busy_share']:.1%} | {m['refused_share']:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
