"""The audit's speed (issue 28 item 1), each figure against a baseline of the same run.

    .venv/bin/python -m scripts.bench_audit [--storage sqlite,postgresql]
        [--events 100000] [--rooms 10000] [--room-events 50] [--passes 3]

1. One long room of `--events` events, built with the real rules one command per
   append (scripts/bench.py `long_room`: a signature on every append). Timed in
   turn, each the median of `--passes`: reading and decoding its stored events
   (`RoomsApp.records`, the floor any audit pays), the audit in one process
   (`application/audit.audit_room`: every hash, every signature present, the
   last one verified, every rule check, the live state and the read models),
   and the chain walked verifying every append's signature
   (`application/stream.Chain(every=True)`, what the audit did before).
2. `audit --all` over `--rooms` rooms of about `--room-events` events each
   (`application/audit.audit_all`, as `dune-ledger audit --all` runs it), against
   reading and decoding the same rooms' events one room at a time.

It prints a JSON report on stdout and one line a figure on stderr. Throwaway
databases (a SQLite file in a temporary folder, a PostgreSQL database made and
dropped) and the room builder are scripts/bench.py's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

from dune_ledger.application.audit import audit_all, audit_room
from dune_ledger.application.rooms import RoomsApp, token_hash
from dune_ledger.application.stream import Chain, Room
from dune_ledger.domain.game import build_room, initial_state, parse_layout
from dune_ledger.infrastructure import randomness
from dune_ledger.infrastructure.storage import open_rooms
from scripts import bench  # the room builder, throwaway databases, the timer (scripts/bench.py)

ROOMS_PER_SAVE = 250


def per_s(events: int, seconds: float) -> int:
    return round(events / seconds)


def timed(fn: Any, passes: int) -> tuple[float, float]:
    """The median wall time of `fn` and the median CPU time this process spent in it:
    on a shared machine the second says what the code costs, the first what it took."""
    walls, cpus = [], []
    for _ in range(passes):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return statistics.median(walls), statistics.median(cpus)


def walk_every_signature(app: RoomsApp, uid: UUID) -> None:
    chain = Chain(app.signer, every=True)
    for rec in app.records(uid):
        chain.step(rec)
    chain.end()


def long_room_figures(app: RoomsApp, events: int, passes: int) -> dict[str, Any]:
    room = bench.long_room(app, events, seed=7)
    uid = UUID(room)
    assert app.read_models is not None
    app.read_models.catch_up()  # the audit compares them: bring them level first
    report = audit_room(app, room)
    assert report["ok"], report
    stored = int(report["events"])
    appends = sum(1 for r in app.records(uid) if r.append == r.originator_version)
    read, read_cpu = timed(lambda: app.records(uid), passes)
    audit, audit_cpu = timed(lambda: audit_room(app, room), passes)
    every, every_cpu = timed(lambda: walk_every_signature(app, uid), passes)
    figures = {"events": stored, "appends": appends,
               "audit_events_per_s": per_s(stored, audit),
               "audit_events_per_cpu_s": per_s(stored, audit_cpu),
               "read_decode_events_per_s": per_s(stored, read),
               "read_decode_events_per_cpu_s": per_s(stored, read_cpu),
               "audit_vs_read": round(read / audit, 3),
               "walk_every_signature_events_per_s": per_s(stored, every),
               "walk_every_signature_events_per_cpu_s": per_s(stored, every_cpu)}
    bench.say(f"audit of {stored} events ({appends} appends): {per_s(stored, audit):,}/s "
              f"({per_s(stored, audit_cpu):,} per CPU second); read+decode "
              f"{per_s(stored, read):,}/s ({per_s(stored, read_cpu):,}); the chain walked "
              f"verifying every signature {per_s(stored, every):,}/s "
              f"({per_s(stored, every_cpu):,})")
    return figures


def small_rooms(app: RoomsApp, count: int, events: int) -> list[str]:
    """`count` rooms of about `events` events each, one command per append, saved many
    rooms at a time."""
    pending: list[Room] = []
    ids = []
    for i in range(count):
        layout = parse_layout(bench.long_layout(i))
        rid = uuid4()
        created = build_room(layout, str(rid), randomness.for_room(layout.seed, 0))
        room = Room(rid, initial_state(created))
        room.record([created], None, seat=None, command_id=None, at=bench.now(),
                    meta={"token_hashes": {s.faction: token_hash(secrets.token_urlsafe(8))
                                           for s in layout.seats}})
        rng, turn = random.Random(i), 0
        while room.version < events:
            seat, _, tx = bench.next_move(room.state, room.version, turn, rng)
            room.record(tx.events, tx.state, seat=seat, command_id=None, at=bench.now())
            turn += 1
        pending.append(room)
        ids.append(str(rid))
        if len(pending) >= ROOMS_PER_SAVE:
            app.save(*pending)
            pending = []
    if pending:
        app.save(*pending)
    return ids


def many_rooms_figures(app: RoomsApp, count: int, events: int, passes: int
                       ) -> dict[str, Any]:
    started = time.perf_counter()
    ids = small_rooms(app, count, events)
    bench.say(f"built {count} rooms in {time.perf_counter() - started:.1f} s")
    assert app.read_models is not None
    app.read_models.catch_up()
    reports = audit_all(app)
    assert len(reports) == count and all(r["ok"] for r in reports), \
        [r for r in reports if not r["ok"]][:1]
    stored = sum(int(r["events"]) for r in reports)
    uids = [UUID(r) for r in ids]

    def read_all() -> None:
        for uid in uids:
            app.records(uid)

    read, read_cpu = timed(read_all, passes)
    audit, audit_cpu = timed(lambda: audit_all(app), passes)
    bench.say(f"audit --all over {count} rooms, {stored} events: {per_s(stored, audit):,}/s "
              f"({per_s(stored, audit_cpu):,} per CPU second, {audit / count * 1000:.2f} ms "
              f"a room); read+decode {per_s(stored, read):,}/s ({per_s(stored, read_cpu):,})")
    return {"rooms": count, "events": stored, "audit_events_per_s": per_s(stored, audit),
            "audit_events_per_cpu_s": per_s(stored, audit_cpu),
            "audit_ms_per_room": round(audit / count * 1000, 3),
            "read_decode_events_per_s": per_s(stored, read),
            "read_decode_events_per_cpu_s": per_s(stored, read_cpu),
            "audit_vs_read": round(read / audit, 3)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--storage", default="sqlite,postgresql")
    p.add_argument("--events", type=int, default=100_000)
    p.add_argument("--rooms", type=int, default=10_000)
    p.add_argument("--room-events", type=int, default=50)
    p.add_argument("--passes", type=int, default=3)
    p.add_argument("--only", default="long,many", help="the figures: long, many or both")
    args = p.parse_args(argv)
    keys = tempfile.mkdtemp(prefix="dl-bench-audit-keys-")  # never a key file in the checkout
    os.environ.setdefault("DUNE_LEDGER_KEY_FILE", str(Path(keys) / "bench.key"))
    report: dict[str, Any] = {"machine": bench.machine(), "commit": bench.code_commit(),
                              "figures": []}
    with tempfile.TemporaryDirectory(prefix="dl-bench-audit-") as tmp:
        for storage in args.storage.split(","):
            for name, run in (("long", lambda app: long_room_figures(
                    app, args.events, args.passes)), ("many", lambda app: many_rooms_figures(
                    app, args.rooms, args.room_events, args.passes))):
                if name not in args.only.split(","):
                    continue
                with bench.database(storage, Path(tmp), f"audit_{name}") as url, \
                        open_rooms(url) as app:
                    report["figures"].append({"storage": storage, "figure": name,
                                              **run(app)})
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
