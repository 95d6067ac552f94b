"""Autopilot ticks per second among many rooms, finding rooms by scan or by index.

    .venv/bin/python -m scripts.bench_autopilot_tick  # 2,000 rooms, 20 with an autopilot seat
    .venv/bin/python -m scripts.bench_autopilot_tick --rooms 10000 --autopilot 100 --db postgresql://...

The database gets `--rooms` rooms (each with an open Box search, by a seat
without autopilot), `--autopilot` of them with an autopilot seat that has
nothing to do, and `--due` more whose autopilot seat has its own search open.
The ticks run with a pace of an hour, so nothing is sent and every tick sees
the same database (the steady state of a worker between moves). Each mode
runs in a fresh process that first catches the read models up (not timed) and
then times `--ticks` autopilot ticks:

- `scan`: every room of the log is loaded and planned (the tick before the index);
- `index`: only the rooms the read models' index marks due are loaded.

Reported: ticks/s, rooms loaded per tick, and the process's peak RSS (the
catch-up included, which is the same for both).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import sys
import tempfile
import time
from typing import Any

from scripts.throwaway import throwaway_database

CTX = mp.get_context("spawn")


def measure(url: str, mode: str, ticks: int, out: Any) -> None:
    from dune_ledger.application import autopilot
    from dune_ledger.infrastructure.storage import open_rooms

    app = open_rooms(url)
    assert app.read_models is not None
    app.read_models.catch_up()
    loads = 0
    original = app.load

    def counted(room_id: Any, version: int | None = None) -> Any:
        nonlocal loads
        loads += 1
        return original(room_id, version)

    app.load = counted  # type: ignore[method-assign]
    models = app.read_models
    if mode == "scan":
        app.read_models = None  # the tick falls back to every room of the log
    start = time.perf_counter()
    for _ in range(ticks):
        assert autopilot.tick(app, pace=3600) == 0
    elapsed = time.perf_counter() - start
    app.read_models = models
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out.put({"mode": mode, "ticks_per_s": ticks / elapsed, "loads_per_tick": loads / ticks,
             "peak_mib": peak_kib / 1024})
    app.close()


def populate(url: str, rooms: int, with_autopilot: int, due: int) -> None:
    from dune_ledger.infrastructure.demo import BOX_LAYOUT
    from dune_ledger.infrastructure.storage import open_rooms

    app = open_rooms(url)
    every = max(1, rooms // max(1, with_autopilot + due))
    box = {"type": "begin_search", "card": "nullentropy-box"}
    for i in range(rooms):
        room = app.create_room(BOX_LAYOUT)["room"]
        k = i // every
        if i % every == 0 and k < with_autopilot + due:
            seat = "emperor" if k < with_autopilot else "richese"
            assert app.execute(room, seat, {"type": "set_autopilot", "enabled": True,
                                            "profile": "medium"})["ok"]
        assert app.execute(room, "richese", box)["ok"]
    app.close()


def run(url: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    populate(url, args.rooms, args.autopilot, args.due)
    results = []
    for mode in ("scan", "index"):
        out = CTX.Queue()
        proc = CTX.Process(target=measure, args=(url, mode, args.ticks, out))
        proc.start()
        results.append(out.get(timeout=3600))
        proc.join()
    return results


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rooms", type=int, default=2000)
    p.add_argument("--autopilot", type=int, default=20, help="idle autopilot rooms")
    p.add_argument("--due", type=int, default=10, help="rooms whose autopilot has a search")
    p.add_argument("--ticks", type=int, default=5)
    p.add_argument("--db", default="sqlite",
                   help="sqlite (a temporary file) or a PostgreSQL maintenance URL "
                        "(a throwaway database is created and dropped)")
    args = p.parse_args()
    if args.db == "sqlite":
        with tempfile.TemporaryDirectory(dir=".") as tmp:
            results = run(f"sqlite:///{tmp}/ticks.db", args)
        storage = "SQLite"
    else:
        with throwaway_database(args.db, "dl_ticks") as url:
            results = run(url, args)
        storage = "PostgreSQL"
    print(f"\n{os.cpu_count()} CPUs; {storage}, {args.rooms} rooms with an open search, "
          f"{args.autopilot} with an idle autopilot seat, {args.due} with an autopilot "
          f"seat's own search, {args.ticks} ticks\n")
    print("| finding rooms | ticks/s | rooms loaded per tick | peak RSS MiB |")
    print("|---|---:|---:|---:|")
    for r in results:
        print(f"| {r['mode']} | {r['ticks_per_s']:.2f} | {r['loads_per_tick']:.0f} | "
              f"{r['peak_mib']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
