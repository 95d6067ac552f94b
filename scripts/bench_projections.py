"""Benchmark the read models: rebuild throughput and follower lag, in one run.

    .venv/bin/python -m scripts.bench_projections [--db URL] [--rooms N] [--commands N]
        [--rate PER_SECOND] [--seconds S] [--interval S]

1. Rebuild: fills a database with rooms (draws, discards, reshuffles and one
   Box search each), then times, on the same notification log: reading it
   (`select_notifications` in batches of 500), reading and decoding it (the
   mapper), and `projections rebuild` (both projectors, stored). Each is the
   median of three passes; the table gives events per second and the ratio
   to the raw read.
2. Lag: a `dune-ledger worker` process follows the log while this process
   writes commands at a steady rate; a monitor polls the stored positions
   and reports how long after its command returned each event was applied.
3. Reads: the median time of a seat's view and of the public log as the
   HTTP routes read them (`RoomsApp.seat_view`, `RoomsApp.public_log`: catch
   up, then the stored rows), against one `SELECT 1` round trip to the same
   database through its driver, in turn.

Without --db it uses a fresh SQLite file in a temporary directory.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from dune_ledger.infrastructure.demo import BOX_LAYOUT
from dune_ledger.infrastructure.storage import open_rooms
from dune_ledger.projections.read_models import ReadModels
from scripts import benchcommon

ROOT = Path(__file__).resolve().parent.parent

SEATS = ("emperor", "harkonnen", "atreides")


def one_command(app: Any, room: str, turn: int) -> dict[str, Any]:
    """Draw until the hand is full, then discard: the deck runs out and reshuffles."""
    seat = SEATS[turn % len(SEATS)]
    state = app.load(room).state
    me = state.seat(seat)
    if len(me.hand) < me.limit and (state.deck or state.discard):
        return app.execute(room, seat, {"type": "draw"})
    return app.execute(room, seat, {"type": "discard", "card": me.hand[0]})


def new_room(app: Any, seed: int) -> str:
    room = app.create_room({**BOX_LAYOUT, "seed": seed})["room"]
    begun = app.execute(room, "richese", {"type": "begin_search", "card": "nullentropy-box"})
    app.execute(room, "richese", {"type": "select_card", "search": begun["events"][-1]["search"],
                                  "card": "maula-pistol"})
    return room


def fill(app: Any, rooms: int, commands: int) -> None:
    for i in range(rooms):
        room = new_room(app, i)
        for turn in range(commands):
            one_command(app, room, turn)


def timed(fn: Any, passes: int = 3) -> float:
    return benchcommon.timed(fn, passes)


def read_log(app: Any, decode: bool) -> int:
    start, n = 0, 0
    while True:
        notes = app.recorder.select_notifications(start=start, limit=500,
                                                  inclusive_of_start=False)
        if not notes:
            return n
        if decode:
            for note in notes:
                app.mapper.to_domain_event(note)
        n += len(notes)
        start = notes[-1].id


def bench_rebuild(url: str, rooms: int, commands: int) -> list[tuple[str, float, float]]:
    with open_rooms(url) as app:
        started = time.perf_counter()
        fill(app, rooms, commands)
        events = int(app.recorder.max_notification_id() or 0)
        print(f"filled {rooms} rooms, {events} events in "
              f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
        models = app.read_models
        assert isinstance(models, ReadModels)
        raw = timed(lambda: read_log(app, decode=False))
        decoded = timed(lambda: read_log(app, decode=True))
        rebuild = timed(models.rebuild)
        return [
            ("read the notification log", events, events / raw),
            ("read and decode it", events, events / decoded),
            ("rebuild both read models", events, events / rebuild),
        ]


def bench_lag(url: str, rate: float, seconds: float, interval: float) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open_rooms(url) as app:
        rooms = [new_room(app, 1000 + i) for i in range(8)]
        app.read_models.catch_up()  # type: ignore[union-attr]
        worker = subprocess.Popen(
            [sys.executable, "-m", "dune_ledger", "--db", url, "worker",
             "--interval", str(interval)],
            env=env, stderr=subprocess.DEVNULL,
        )
        monitor_models = app.read_models
        assert isinstance(monitor_models, ReadModels)
        written: dict[int, float] = {}
        applied: dict[int, float] = {}
        done = threading.Event()

        def monitor() -> None:
            seen = monitor_models.position()
            while not done.is_set() or seen < max(written, default=0):
                position = monitor_models.position()
                now = time.perf_counter()
                for nid in range(seen + 1, position + 1):
                    applied[nid] = now
                seen = max(seen, position)
                time.sleep(0.002)
                if done.is_set() and now - stop_at > 30:
                    return

        time.sleep(1.0)  # let the worker start
        stop_at = float("inf")
        watcher = threading.Thread(target=monitor)
        watcher.start()
        gap = 1.0 / rate
        started = time.perf_counter()
        turn = 0
        while time.perf_counter() - started < seconds:
            due = started + turn * gap
            pause = due - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            one_command(app, rooms[turn % len(rooms)], turn)
            written[int(app.recorder.max_notification_id() or 0)] = time.perf_counter()
            turn += 1
        stop_at = time.perf_counter()
        done.set()
        watcher.join()
        worker.terminate()
        worker.wait(10)
        lags = sorted((applied[n] - t) * 1000 for n, t in written.items() if n in applied)
        achieved = turn / (stop_at - started)
        return {
            "commands": turn, "rate": achieved, "measured": len(lags),
            "p50": lags[len(lags) // 2], "p95": lags[int(len(lags) * 0.95)], "max": lags[-1],
        }


def raw_round_trip(url: str) -> Any:
    """One `SELECT 1` on the same database, through its driver: the baseline."""
    if url.startswith("sqlite"):
        import sqlite3

        conn: Any = sqlite3.connect(url.split("sqlite:///", 1)[1])
    else:
        import psycopg

        from dune_ledger.infrastructure.storage import environment

        env = environment(url)
        conn = psycopg.connect(host=env["POSTGRES_HOST"], port=env["POSTGRES_PORT"],
                               user=env["POSTGRES_USER"], password=env["POSTGRES_PASSWORD"],
                               dbname=env["POSTGRES_DBNAME"], autocommit=True)
    return lambda: conn.execute("SELECT 1").fetchall()


def bench_reads(url: str, samples: int = 500) -> list[tuple[str, float]]:
    """Median seconds of each read, sampled in turn with the baseline."""
    with open_rooms(url) as app:
        room = new_room(app, 2000)
        app.read_models.catch_up()  # type: ignore[union-attr]
        reads = {"one SELECT 1 round trip (baseline)": raw_round_trip(url),
                 "a seat's view (catch-up included)": lambda: app.seat_view(room, "richese"),
                 "the public log (catch-up included)": lambda: app.public_log(room)}
        times: dict[str, list[float]] = {name: [] for name in reads}
        for _ in range(samples):
            for name, read in reads.items():
                started = time.perf_counter()
                read()
                times[name].append(time.perf_counter() - started)
        return [(name, statistics.median(t)) for name, t in times.items()]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--db", help="storage URL (default: a fresh SQLite file)")
    p.add_argument("--rooms", type=int, default=100)
    p.add_argument("--commands", type=int, default=40, help="commands per room")
    p.add_argument("--rate", type=float, default=50.0, help="commands per second (lag)")
    p.add_argument("--seconds", type=float, default=10.0, help="length of the lag run")
    p.add_argument("--interval", type=float, default=0.05, help="worker poll interval")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.db or f"sqlite:///{Path(tmp) / 'bench.db'}"
        kind = url.split(":", 1)[0]
        rows = bench_rebuild(url, args.rooms, args.commands)
        lag = bench_lag(url, args.rate, args.seconds, args.interval)
        reads = bench_reads(url)
    raw = rows[0][2]
    print(f"\nRead models on {kind} ({int(rows[0][1])} events, median of 3 passes)\n")
    print("| pass | events/s | vs raw read |")
    print("|---|---:|---:|")
    for name, _, rate in rows:
        print(f"| {name} | {rate:,.0f} | {rate / raw:.2f} |")
    follower = ("LISTEN/NOTIFY" if kind.startswith("postgres")
                else f"polling every {args.interval} s")
    print(f"\nProjection lag behind a steady command stream ({lag['rate']:.0f} commands/s for "
          f"{args.seconds:g} s, worker process {follower}, {lag['measured']} events measured)\n")
    print("| p50 | p95 | max |")
    print("|---:|---:|---:|")
    print(f"| {lag['p50']:.0f} ms | {lag['p95']:.0f} ms | {lag['max']:.0f} ms |")
    base = reads[0][1]
    print("\nReads as the HTTP routes make them (median of 500, in turn)\n")
    print("| read | ms | vs SELECT 1 |")
    print("|---|---:|---:|")
    for name, seconds in reads:
        print(f"| {name} | {seconds * 1000:.3f} | {seconds / base:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
