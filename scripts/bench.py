"""Every benchmark of issue #7 in one run, each figure a ratio against a baseline of the same run.

    scripts/bench [--quick | --smoke] [--storage sqlite,postgresql] [--markdown]
        [--before BEFORE.json]

Figures (sizes are for the full run; --quick and --smoke shrink them):

- commands: begin+select commands per second, one room per client, 1, 2 and
  4 processes (scripts/bench_commands.py), against pgbench single-row INSERTs
  (PostgreSQL) and raw sqlite3 INSERTs with the library's durability (SQLite),
  each mix paired with its own baseline; the median of 3 such pairs.
- replay: events per second auditing (application/audit.audit_room) a room of
  10,000 and one of 100,000 events, in one process and as `dune-ledger audit`
  does it (in parts, one process per CPU; the report must be the same), against
  merely reading and decoding the same stored events in one process
  (RoomsApp.records). The app's first audit in parts starts its part processes
  and is timed apart; the audits in parts after it use them.
- load: a full replay (every stored event folded, no snapshot) against
  RoomsApp.load with snapshots, and with the room kept in memory after its last
  command (RoomsApp.current: the kept room brought up to date with one query);
  the state hashes must be identical.
- cost growth: command latency (RoomsApp.execute) at versions 10, 10,000 and
  100,000 of a room, snapshots on, as a ratio to version 10.
- memory: peak RSS of a `dune-ledger worker --once` process on a database of
  10,000 rooms each with an open search, against a bare Python process that
  imports the same modules.
- bidding (issue 35, scripts/bench_bidding.py): a bid or a pass against a `draw`, and
  a whole six-seat round applied, audited and projected per command against a Box
  search's, in CPU time.
- integrity (issue 18): command latency (RoomsApp.execute, a decided draw,
  discard or Box search) and load latency (RoomsApp.load: the snapshot and the
  events after it, verified) with the key file's Ed25519 signatures, against the
  same with a signer that signs and checks nothing, and the audit of a room of
  about 60 events saved one command at a time (a signature each); and with
  encryption at rest (a cipher key) against without. Each pair runs in the same
  run, in turn.

Long rooms are produced with the real rules (domain.rules.decide on the room
state with a seeded source: draws, discards and Box searches by several
seats) and appended in batches of one snapshot interval through the Room aggregate and
RoomsApp.save, not one command each.

The JSON report goes to stdout; the markdown table to stderr (or stdout with
--markdown). With --before, the table puts an earlier report's figures beside
this run's. The code measured is whatever `import dune_ledger` finds: run from a
checkout's root (`python -m scripts.bench`, as scripts/bench does), that checkout's; from
elsewhere, PYTHONPATH's (another worktree) before this one's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from dune_ledger.application.audit import audit_room, state_hash
from dune_ledger.application.rooms import RoomsApp
from dune_ledger.application.stream import Room, project_room
from dune_ledger.domain.game import CARDS, Rejection, decide
from dune_ledger.infrastructure import randomness
from dune_ledger.infrastructure.demo import BOX_LAYOUT
from dune_ledger.infrastructure.storage import open_rooms
from scripts import (
    bench_bidding,  # the Bidding round's figures (scripts/bench_bidding.py)
    bench_commands,  # the command mix and its baselines (scripts/bench_commands.py)
    benchcommon,  # timing, throwaway databases, the machine (scripts/benchcommon.py)
)
from scripts.throwaway import ADMIN_URL

try:
    from dune_ledger.domain.game import parse_command
except ImportError:  # pragma: no cover - older trees
    parse_command = None  # type: ignore[assignment]

# The CPUs this process may use: `dune-ledger audit` audits a long room in as many parts.
CPUS = len(os.sched_getaffinity(0))
AUDIT_PASSES = 3  # each audit figure is the median of this many
CODE_ROOT = Path(sys.modules["dune_ledger"].__file__ or ".").resolve().parent.parent
if not Path(sys.modules["dune_ledger.application.rooms"].__file__ or "").resolve().is_relative_to(
        CODE_ROOT):
    # pyproject.toml's package-dir: a checkout on PYTHONPATH brings its dune_ledger/ but
    # not its layers, which would come from whatever is installed.
    raise SystemExit(f"bench: the layers imported are not {CODE_ROOT}'s: measure a "
                     "checkout with its own environment (python3 -m venv .venv && "
                     ".venv/bin/pip install -e . there, then PYTHON=.venv/bin/python)")

SIZES: dict[str, dict[str, Any]] = {
    # A mix of `pairs` searches per process runs about as long as its baseline run
    # (`seconds`), the two in turn `rounds` times: the machine's speed drifts.
    "full": {"rooms": [10_000, 100_000], "versions": [10, 10_000, 100_000], "open_rooms": 10_000,
             "pairs": 1_000, "seconds": 2.0, "samples": 40, "loads": 20, "procs": [1, 2, 4],
             "rounds": 5},
    "quick": {"rooms": [1_000, 10_000], "versions": [10, 1_000, 10_000], "open_rooms": 500,
              "pairs": 60, "seconds": 1.5, "samples": 20, "loads": 10, "procs": [1, 4],
              "rounds": 1},
    "smoke": {"rooms": [200, 600], "versions": [10, 200, 600], "open_rooms": 30,
              "pairs": 5, "seconds": 0.3, "samples": 3, "loads": 2, "procs": [1, 4],
              "rounds": 1},
}
# Events per save while building a long room: one snapshot interval, so that its
# snapshots fall about every 50 events, as in play (an audit in parts starts at them).
BATCH = 50
TAIL = 300  # a long room's last events are saved one command at a time
ROOMS_PER_SAVE = 250  # rooms per save while filling the worker's database
SPICE = 1_000_000  # enough for every Box fee of a long room

notes: list[str] = []


def note(text: str) -> None:
    notes.append(text)
    print(f"bench: {text}", file=sys.stderr)


def say(text: str) -> None:
    print(f"bench: {text}", file=sys.stderr, flush=True)


median_time = benchcommon.timed


# --- producing rooms with the real rules -------------------------------------------


def long_layout(seed: int) -> dict[str, Any]:
    seats = [{**s, "spice": SPICE} for s in BOX_LAYOUT["seats"]]
    return {**BOX_LAYOUT, "seed": seed, "seats": seats}


def command(raw: dict[str, Any]) -> Any:
    if parse_command is None:  # pragma: no cover
        raise RuntimeError("domain.commands.parse_command is missing")
    return parse_command(raw)


def choices(state: Any, turn: int, rng: random.Random) -> Iterator[tuple[str, dict[str, Any]]]:
    """Commands worth trying next, best first: the first accepted one is played."""
    seats = [s.faction for s in state.seats]
    search = state.search
    if search is not None:
        for cid in search.discard:
            if not CARDS[cid].is_box:
                yield search.owner, {"type": "select_card", "search": search.event, "card": cid}
                break
    response = state.control.response
    if response is not None:
        for seat in seats:
            yield seat, {"type": "semuta", "event": response.event, "action": "pass"}
            yield seat, {"type": "respond", "event": response.event, "action": "pass"}
    order = seats[turn % len(seats):] + seats[:turn % len(seats)]
    for seat in order:
        me = state.seat(seat)
        box = next((c for c in me.hand if CARDS[c].is_box), None)
        if box is not None and rng.random() < 0.5:
            yield seat, {"type": "begin_search", "card": box}
        if len(me.hand) < me.limit and (state.deck or state.discard) and rng.random() < 0.6:
            yield seat, {"type": "draw"}
        if me.hand:
            yield seat, {"type": "discard", "card": rng.choice(me.hand)}
        yield seat, {"type": "draw"}


def next_move(state: Any, version: int, turn: int,
              rng: random.Random) -> tuple[str, dict[str, Any], Any]:
    """The first acceptable command and its decision (drawing from a seeded source)."""
    for seat, raw in choices(state, turn, rng):
        try:
            tx = decide(state, seat, command(raw), randomness.for_room(state.seed, version))
        except Rejection:
            continue
        return seat, raw, tx
    raise RuntimeError(f"no command is accepted at version {version}")


def now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat()


def grow(app: RoomsApp, room_id: str, target: int, seed: int) -> int:
    """Append decided commands to a room until it holds `target` events.

    Saves in batches, except the last TAIL events: one save per command there,
    as in play, so the room's newest snapshots fall where commands put them
    (a batch save would leave a snapshot at the very last event).
    """
    room = app.load(room_id)
    rng = random.Random(seed)
    turn = 0
    while room.version < target:
        seat, _, tx = next_move(room.state, room.version, turn, rng)
        room.record(tx.events, tx.state, seat=seat, command_id=None, at=now())
        turn += 1
        if len(room.pending) >= BATCH or room.version >= target - TAIL:
            app.save(room)
    if room.pending:
        app.save(room)
    app.kept.keep(room)  # as a process keeps the room after its last command
    return int(room.version)


def long_room(app: RoomsApp, events: int, seed: int) -> str:
    room_id = str(app.create_room(long_layout(seed))["room"])
    started = time.perf_counter()
    version = grow(app, room_id, events, seed)
    say(f"built a room of {version} events in {time.perf_counter() - started:.1f} s")
    return room_id


def rooms_with_open_searches(app: RoomsApp, count: int) -> None:
    """`count` rooms, each with a paid Box search still open, saved many rooms at a time."""
    try:
        from dune_ledger.application.rooms import token_hash
        from dune_ledger.domain.game import build_room, initial_state, parse_layout
        fast = True
    except ImportError:  # pragma: no cover - an API moved: one command at a time
        fast = False
        note("open rooms built one command at a time (the batch API moved)")
    from uuid import uuid4

    pending: list[Room] = []
    for i in range(count):
        layout_raw = {**BOX_LAYOUT, "seed": i}
        if fast:
            layout = parse_layout(layout_raw)
            rid = uuid4()
            created = build_room(layout, str(rid), randomness.for_room(layout.seed, 0))
            room = Room(rid, initial_state(created))
            room.record([created], None, seat=None, command_id=None, at=now(),
                        meta={"token_hashes": {s.faction: token_hash(secrets.token_urlsafe(8))
                                               for s in layout.seats}})
            tx = decide(room.state, "richese",
                        command({"type": "begin_search", "card": "nullentropy-box"}),
                        randomness.for_room(layout.seed, room.version))
            room.record(tx.events, tx.state, seat="richese", command_id=None, at=now())
            assert room.state.search is not None
            pending.append(room)
            if len(pending) >= ROOMS_PER_SAVE:
                app.save(*pending)
                pending = []
        else:  # pragma: no cover
            rid2 = app.create_room(layout_raw)["room"]
            app.execute(rid2, "richese", {"type": "begin_search", "card": "nullentropy-box"})
    if pending:
        app.save(*pending)


# --- storage ------------------------------------------------------------------------


def pg_admin_url() -> str:
    return ADMIN_URL


pg_reachable = benchcommon.pg_reachable
database = benchcommon.database


LABEL = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}


# --- the figures ----------------------------------------------------------------------


def bench_throughput(storage: str, tmp: Path, size: dict[str, Any]) -> list[dict[str, Any]]:
    """Each process count: `rounds` pairs of (mix, baseline) back to back; the medians.

    The machine is shared, so a single pair can land on a busy second; pairing
    each mix with its own baseline keeps the ratio honest, the median keeps it steady.
    """
    rows = []
    if storage == "postgresql":
        try:
            bench_commands.pgbench_binary()
        except SystemExit as e:
            note(f"PostgreSQL command figures skipped: {e}")
            return rows
    # Unsigned, then (once the code has them) signed by a keyed seat (RULES 9.3): each
    # mix in turn with its own baseline.
    variants = [False, True] if bench_commands.SEAT_SIGNATURES else [False]
    for procs in size["procs"]:
        for signed in variants:
            rates, bases, ratios = [], [], []
            with database(storage, tmp, f"mix{procs}{'s' if signed else ''}") as url:
                for _ in range(size["rounds"]):
                    mix = bench_commands.run_mix(url, procs, size["pairs"], signed=signed)
                    base, what = throughput_baseline(storage, url, tmp, procs, size["seconds"])
                    rates.append(mix["commands_per_s"])
                    bases.append(base)
                    ratios.append(mix["commands_per_s"] / base)
                    say(f"{storage} x{procs}{' signed' if signed else ''}: "
                        f"{rates[-1]:.0f} commands/s, baseline {base:.0f}/s")
            rows.append({"storage": storage, "processes": procs, "signed": signed,
                         "commands_per_s": round(statistics.median(rates), 1),
                         "baseline_per_s": round(statistics.median(bases), 1),
                         "ratio": round(statistics.median(ratios), 3),
                         "ratios": [round(r, 3) for r in ratios], "baseline": what})
    if not bench_commands.SEAT_SIGNATURES:
        note(f"{LABEL[storage]}: commands signed by a keyed seat (RULES 9.3) not measured: "
             "this code has no seat signatures yet")
    return rows


def throughput_baseline(storage: str, url: str, tmp: Path, procs: int,
                        seconds: float) -> tuple[float, str]:
    """Raw single-row inserts per second on the same store, and what they are."""
    if storage == "postgresql":
        return bench_commands.pgbench_inserts(url, procs, seconds), "pgbench single-row INSERT"
    sync = bench_commands.library_synchronous(url)
    base, raw_sync = bench_commands.sqlite_inserts(str(tmp / f"raw-{procs}.db"), procs, seconds)
    if raw_sync != sync:
        note(f"SQLite baseline ran at synchronous={raw_sync}, the library at {sync}")
    return base, f"sqlite3 single-row INSERT (WAL, synchronous={raw_sync})"


def bench_replay_and_load(app: RoomsApp, room_id: str, events: int,
                          storage: str, loads: int) -> tuple[dict[str, Any], dict[str, Any]]:
    from uuid import UUID

    uid = UUID(room_id)
    if app.read_models is not None:
        app.read_models.catch_up()  # the audit compares them: bring them level first
    passes = 3 if events <= 20_000 else 1
    read = median_time(lambda: app.records(uid), passes)
    # In one process, and as `dune-ledger audit` runs it (in parts, one process per
    # CPU: the same report), in turn so that noise falls on both alike. The app's first
    # audit in parts starts its part processes (timed apart); the others use them.
    if app.part_processes is not None:
        app.part_processes.close()
        app.part_processes = None
    report = audit_room(app, room_id)
    started = time.perf_counter()
    same = audit_room(app, room_id, CPUS) == report
    first_in_parts = time.perf_counter() - started
    one, in_parts = [], []
    for _ in range(AUDIT_PASSES):
        started = time.perf_counter()
        report = audit_room(app, room_id)
        one.append(time.perf_counter() - started)
        started = time.perf_counter()
        same &= audit_room(app, room_id, CPUS) == report
        in_parts.append(time.perf_counter() - started)
    audit, audit_in_parts = statistics.median(one), statistics.median(in_parts)
    stored = report["events"]
    replay = {
        "storage": storage, "size": events, "events": stored,
        "audit_events_per_s": round(stored / audit), "audit_s": round(audit, 3),
        "read_decode_events_per_s": round(stored / read), "read_decode_s": round(read, 3),
        "ratio": round(read / audit, 3), "audit_ok": report["ok"],
        "processes": CPUS, "parts_events_per_s": round(stored / audit_in_parts),
        "parts_s": round(audit_in_parts, 3), "parts_ratio": round(read / audit_in_parts, 3),
        "parts_report_same": same, "audit_passes": AUDIT_PASSES,
        "parts_first_events_per_s": round(stored / first_in_parts),
        "parts_first_s": round(first_in_parts, 3),
    }
    say(f"audit of {stored} events: {stored / audit:,.0f} events/s, "
        f"{stored / audit_in_parts:,.0f}/s in {CPUS} processes "
        f"({stored / first_in_parts:,.0f}/s starting them), "
        f"read+decode {stored / read:,.0f}/s")

    def full_replay() -> Any:
        return project_room(None, app.events.get(uid))

    full = median_time(full_replay, passes)
    full_hash = state_hash(full_replay().state)
    snap = median_time(lambda: app.load(uid), loads)
    snap_hash = state_hash(app.load(uid).state)
    def kept() -> Room:
        # What a command starts from when this process saved the room last.
        room = app.current(uid)
        app.kept.keep(room)
        return room

    app.kept.keep(app.load(uid))  # as after the room's last command here
    warm = median_time(kept, loads)
    interval = app.snapshotting_intervals.get(Room)
    warm_hash = state_hash(kept().state)
    load = {
        "storage": storage, "size": events, "events": stored,
        "full_replay_ms": round(full * 1000, 2),
        "snapshot_interval": interval,
        "snapshot_load_ms": round(snap * 1000, 3), "cache_load_ms": round(warm * 1000, 3),
        "snapshot_speedup": round(full / snap, 1), "cache_speedup": round(full / warm, 1),
        "snapshot_hash_matches": snap_hash == full_hash,
        "cache_hash_matches": warm_hash == full_hash,
        "audit_hash_matches": report["state_hash"] == full_hash,
    }
    say(f"load of {stored} events: full {full * 1000:.0f} ms, snapshot {snap * 1000:.2f} ms, "
        f"cache {warm * 1000:.2f} ms")
    return replay, load


def latencies(app: RoomsApp, rooms: list[str], samples: int, seed: int) -> list[float]:
    """Median wall time of RoomsApp.execute on each room, sampled in turn so that
    warm-up and noise fall on every room alike."""
    rng = random.Random(seed)
    times: list[list[float]] = [[] for _ in rooms]
    for turn in range(samples):
        for i, room_id in enumerate(rooms):
            room = app.load(room_id)  # untimed: only to choose a command the rules accept
            seat, raw, _ = next_move(room.state, room.version, turn, rng)
            started = time.perf_counter()
            result = app.execute(room_id, seat, raw)
            times[i].append(time.perf_counter() - started)
            if not result["ok"]:
                raise RuntimeError(f"a sampled command was refused: {result['error']}")
    return [statistics.median(t) for t in times]


def bench_storage_rooms(storage: str, tmp: Path, size: dict[str, Any]
                        ) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                   list[dict[str, Any]]]:
    """Replay, load and cost growth share the long rooms of one database."""
    replays, loads, growth = [], [], []
    with database(storage, tmp, "long") as url:
        app = open_rooms(url)
        try:
            # Long rooms end half a snapshot interval past a snapshot: the average
            # number of events a load folds on top of one.
            half = int(app.snapshotting_intervals.get(Room, 200)) // 2
            lengths = sorted(set(size["rooms"]) | set(size["versions"]))
            rooms = {n: long_room(app, n + (half if n > 100 else 0), seed=n) for n in lengths}
            for n in size["rooms"]:
                replay, load = bench_replay_and_load(app, rooms[n], n, storage,
                                                     size["loads"])
                replays.append(replay)
                loads.append(load)
            warm_up = long_room(app, 10, seed=1)
            latencies(app, [warm_up], 5, seed=1)
            versions = {n: app.load(rooms[n]).version for n in size["versions"]}
            medians = latencies(app, [rooms[n] for n in size["versions"]], size["samples"],
                                seed=2)
            for n, median in zip(size["versions"], medians, strict=True):
                growth.append({"storage": storage, "size": n, "version": versions[n],
                               "latency_ms": round(median * 1000, 3),
                               "ratio_to_first": round(median / medians[0], 2)})
                say(f"{storage}: command latency at version {versions[n]}: "
                    f"{median * 1000:.2f} ms")
        finally:
            app.close()
    return replays, loads, growth


CHILD = """
import json, resource, sys
{imports}
rc = {run}
with open(sys.argv[1], "w") as out:
    json.dump({{"rc": rc, "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}}, out)
"""
WORKER_MODULES = tuple(f"dune_ledger.{name}" for name in (
    "infrastructure.cli", "infrastructure.worker", "infrastructure.storage",
    "application.autopilot", "projections.read_models"))


def child_rss(tmp: Path, imports: str, run: str, name: str, timeout: float) -> dict[str, Any]:
    out = tmp / f"{name}.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(CODE_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    # Linux carries a process's peak RSS across fork and exec: a child started from
    # this (large) process would report our peak as its own. A shell in between
    # forks the child from a small process, so the child's getrusage is its own.
    done = subprocess.run(["sh", "-c", '"$@"; exit $?', "sh", sys.executable, "-c",
                           CHILD.format(imports=imports, run=run), str(out)],
                          env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0 or not out.exists():
        raise RuntimeError(f"{name} failed ({done.returncode}): {done.stderr[-2000:]}")
    return dict(json.loads(out.read_text()))


def bench_memory(storage: str, tmp: Path, count: int) -> dict[str, Any]:
    with database(storage, tmp, "worker") as url:
        app = open_rooms(url)
        started = time.perf_counter()
        rooms_with_open_searches(app, count)
        app.close()
        say(f"{count} rooms with an open search in {time.perf_counter() - started:.1f} s")
        imports = "\n".join(f"import {m}" for m in WORKER_MODULES)
        started = time.perf_counter()
        worker = child_rss(tmp, imports, f"dune_ledger.infrastructure.cli.main(['--db', {url!r}, "
                           "'worker', '--once'])", "worker", timeout=3600)
        seconds = time.perf_counter() - started
        bare = child_rss(tmp, imports, "0", "bare", timeout=600)
    peak, base = worker["maxrss_kib"] / 1024, bare["maxrss_kib"] / 1024
    say(f"worker over {count} open rooms: peak RSS {peak:.0f} MiB (bare imports {base:.0f} MiB)")
    return {"storage": storage, "rooms": count, "worker_peak_rss_mib": round(peak, 1),
            "bare_rss_mib": round(base, 1), "ratio": round(peak / base, 2),
            "worker_seconds": round(seconds, 2), "worker_rc": worker["rc"]}


class NoSigning:
    """A signer that signs and checks nothing, as long as a real one: the baseline
    of what the signatures cost."""

    def sign(self, message: bytes) -> str:
        return "A" * 86 + "=="

    def verify(self, message: bytes, signature: str) -> bool:
        return True


def bench_integrity(storage: str, tmp: Path, size: dict[str, Any]) -> list[dict[str, Any]]:
    """Per command, per load and per audit: signed against unsigned, encrypted against
    plain."""
    from dune_ledger.infrastructure.keys import Keys

    keys = {"plain": tmp / "plain.key", "cipher": tmp / "cipher.key"}
    for name, path in keys.items():
        if not path.exists():
            Keys(path).create(cipher=name == "cipher", announce=False)
    variants = {"signed": ("plain", True), "unsigned": ("plain", False),
                "encrypted": ("cipher", True)}
    apps: dict[str, RoomsApp] = {}
    rooms: dict[str, list[str]] = {}
    count = max(3, size["samples"] // 4)
    with contextlib.ExitStack() as stack:
        for name, (key, signing) in variants.items():
            url = stack.enter_context(database(storage, tmp, f"integrity_{name}"))
            app = open_rooms(url, key_file=str(keys[key]))
            stack.callback(app.close)
            if not signing:
                app.signer = NoSigning()
            apps[name] = app
            rooms[name] = [long_room(app, 60, seed=i) for i in range(count)]
        rng = random.Random(3)
        # Wall time, and this process's CPU time (the signatures and the cipher are CPU;
        # a SQLite commit's wait for the disk is not, and varies far more).
        commands: dict[str, list[float]] = {name: [] for name in variants}
        loads: dict[str, list[float]] = {name: [] for name in variants}
        cpu: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in variants}
        for turn in range(size["samples"]):
            for name, app in apps.items():  # in turn: noise falls on every variant alike
                for room_id in rooms[name]:
                    room = app.load(room_id)
                    seat, raw, _ = next_move(room.state, room.version, turn, rng)
                    app.kept.keep(room)  # as after this process's last command
                    started, used = time.perf_counter(), time.process_time()
                    result = app.execute(room_id, seat, raw)
                    commands[name].append(time.perf_counter() - started)
                    cpu[name][0].append(time.process_time() - used)
                    if not result["ok"]:
                        raise RuntimeError(f"a sampled command was refused: {result['error']}")
                    started, used = time.perf_counter(), time.process_time()
                    app.load(room_id)
                    loads[name].append(time.perf_counter() - started)
                    cpu[name][1].append(time.process_time() - used)
        # The audit checks every append's signature (one per command in these rooms).
        audits = {name: median_time(lambda app=app, name=name: audit_room(app, rooms[name][0]),
                                    AUDIT_PASSES) for name, app in apps.items()}
    median = {name: (statistics.median(commands[name]), statistics.median(loads[name]),
                     audits[name]) for name in variants}
    rows = []
    for what, name, base in (("signing", "signed", "unsigned"),
                             ("encryption", "encrypted", "signed")):
        for i, kind in enumerate(("command", "load", "audit")):
            ratio = median[name][i] / median[base][i]
            row = {"storage": storage, "cost": what, "of": kind,
                   "ms": round(median[name][i] * 1000, 3),
                   "baseline_ms": round(median[base][i] * 1000, 3),
                   "ratio": round(ratio, 3), "samples": len(commands[name])}
            if kind != "audit":  # (process_time's tick is too coarse for one sample alone:
                # the ratio of the sums over every sample)
                used, base_used = sum(cpu[name][i]), sum(cpu[base][i])
                row.update({"cpu_ms": round(used / len(cpu[name][i]) * 1000, 3),
                            "cpu_baseline_ms": round(base_used / len(cpu[base][i]) * 1000, 3),
                            "cpu_ratio": round(used / base_used, 3) if base_used else None})
            rows.append(row)
            say(f"{storage}: {what} per {kind}: {median[name][i] * 1000:.3f} ms vs "
                f"{median[base][i] * 1000:.3f} ms ({ratio:.3f})")
    return rows


# --- the report ---------------------------------------------------------------------


machine = benchcommon.machine


def code_commit() -> str | None:
    return benchcommon.code_commit(CODE_ROOT)


class Row(NamedTuple):
    """One line of the table: `value` is the ratio as a number, `higher` whether more is
    better (a command's rate against the inserts) or worse (a cost against its baseline)."""

    figure: str
    storage: str
    measured: str
    ratio: str
    goal: str
    value: float
    higher: bool


def table_rows(report: dict[str, Any]) -> list[Row]:
    """One line per figure."""
    f = report["figures"]
    rows = []
    for r in f.get("commands", []):
        n = r["processes"]
        goal = "≥ 0.5" if n == 1 else "≥ 1.3 × 1 process" if n == 4 and \
            r["storage"] == "postgresql" else "more /s than 1" if n == 4 else ""
        signed = ", signed" if r.get("signed") else ""
        rows.append(Row(f"commands, {n} process{'es' if n > 1 else ''}{signed}",
                        LABEL[r["storage"]],
                        f"{r['commands_per_s']:,.0f}/s vs {r['baseline_per_s']:,.0f}/s inserts",
                        f"{r['ratio']:.2f}", goal, r["ratio"], True))
    for r in f.get("replay", []):
        rows.append(Row(f"audit, {r['size']:,}-event room", LABEL[r["storage"]],
                        f"{r['audit_events_per_s']:,}/s vs {r['read_decode_events_per_s']:,}/s "
                        "read", f"{r['ratio']:.2f}", "≥ 0.5", r["ratio"], True))
        if "processes" in r and r["processes"] > 1:
            same = "" if r["parts_report_same"] else ", REPORT DIFFERS"
            rows.append(Row(f"audit, {r['size']:,}-event room, {r['processes']} processes",
                            LABEL[r["storage"]],
                            f"{r['parts_events_per_s']:,}/s vs "
                            f"{r['read_decode_events_per_s']:,}/s read",
                            f"{r['parts_ratio']:.2f}{same}", "", r["parts_ratio"], True))
            if "parts_first_s" in r:  # reports from before 2026-11-30 lack it
                first = r["read_decode_s"] / r["parts_first_s"]
                rows.append(Row(f"audit, {r['size']:,}-event room, {r['processes']} "
                                "processes, starting them", LABEL[r["storage"]],
                                f"{r['parts_first_events_per_s']:,}/s vs "
                                f"{r['read_decode_events_per_s']:,}/s read",
                                f"{first:.2f}", "", first, True))
    for r in f.get("load", []):
        goal = "≥ 100×, same hash" if r["size"] >= 100_000 else "same hash"
        for key, name in (("snapshot", "snapshots"), ("cache", "kept room")):
            same = "" if r[f"{key}_hash_matches"] else ", HASH DIFFERS"
            rows.append(Row(f"load, {r['size']:,}-event room, {name}", LABEL[r["storage"]],
                            f"{r[f'{key}_load_ms']:.2f} ms vs {r['full_replay_ms']:,.0f} ms "
                            "replay", f"{r[f'{key}_speedup']:,.0f}×{same}", goal,
                            r[f"{key}_speedup"], True))
    for r in f.get("growth", []):
        rows.append(Row(f"command latency, version {r['size']:,}", LABEL[r["storage"]],
                        f"{r['latency_ms']:.2f} ms", f"{r['ratio_to_first']:.2f}",
                        "≈ 1 (flat)", r["ratio_to_first"], False))
    for r in f.get("integrity", []):
        base = "unsigned" if r["cost"] == "signing" else "plain"
        rows.append(Row(f"{r['cost']} cost per {r['of']}", LABEL[r["storage"]],
                        f"{r['ms']:.3f} ms vs {r['baseline_ms']:.3f} ms {base}",
                        f"{r['ratio']:.3f}", "≤ 1.10" if r["of"] == "command" else "",
                        r["ratio"], False))
        if r.get("cpu_ratio") is not None:
            rows.append(Row(f"{r['cost']} cost per {r['of']}, CPU", LABEL[r["storage"]],
                            f"{r['cpu_ms']:.3f} ms vs {r['cpu_baseline_ms']:.3f} ms {base}",
                            f"{r['cpu_ratio']:.3f}", "≤ 1.10" if r["of"] == "command" else "",
                            r["cpu_ratio"], False))
    for r in f.get("bidding", []):
        b, w = r["bid_vs_draw"], r["round_vs_search"]
        rows.append(Row("a bid or a pass vs a draw, CPU", LABEL[r["storage"]],
                        f"{b['bid_or_pass_ms']:.3f} ms vs {b['draw_ms']:.3f} ms",
                        f"{b['ratio']:.2f}", "≤ 1.2", b["ratio"], False))
        rows.append(Row(f"a six-seat round ({w['commands_per_round']} commands) applied, "
                        "audited, projected, per command vs a Box search's, CPU",
                        LABEL[r["storage"]],
                        f"{w['round_ms_per_command']:.3f} ms vs "
                        f"{w['search_ms_per_command']:.3f} ms", f"{w['ratio']:.2f}", "",
                        w["ratio"], False))
    for r in f.get("memory", []):
        rows.append(Row(f"worker peak RSS, {r['rooms']:,} open rooms", LABEL[r["storage"]],
                        f"{r['worker_peak_rss_mib']:.0f} MiB vs {r['bare_rss_mib']:.0f} MiB "
                        "bare", f"{r['ratio']:.2f}", "", r["ratio"], False))
    return rows


# A figure whose ratio is worse than before by more than this share is flagged.
WORSE = 0.10
# The reports `--before` compares with when given no file: the last release's, one per
# size of run (scripts/baseline/quick.json, full.json).
BASELINES = Path(__file__).resolve().parent / "baseline"


def cost(row: Row, old: float) -> float:
    """How much more the figure costs than before: 1.25 is a quarter worse."""
    if row.higher:
        return old / row.value if row.value else float("inf")
    return row.value / old if old else float("inf")


def regressions(report: dict[str, Any], before: dict[str, Any]) -> list[str]:
    """The figures that cost more than a tenth more than in `before`."""
    old = {(r.figure, r.storage): r.value for r in table_rows(before)}
    return [f"{r.figure}, {r.storage}: {cost(r, old[r.figure, r.storage]):.2f} × before"
            for r in table_rows(report)
            if (r.figure, r.storage) in old and cost(r, old[r.figure, r.storage]) > 1 + WORSE]


def markdown(report: dict[str, Any], before: dict[str, Any] | None = None) -> str:
    m = report["machine"]
    head = (f"{report['mode']} run, {m['cpus']} CPUs, {m['memory_gib']:.0f} GiB, "
            f"Python {m['python']}; code at {report['code']['commit']}")
    lines = [head, ""]
    if before is None:
        lines += ["| figure | storage | measured vs baseline | ratio | goal |",
                  "|---|---|---|---:|---|"]
        lines += [f"| {r.figure} | {r.storage} | {r.measured} | {r.ratio} | {r.goal} |"
                  for r in table_rows(report)]
    else:
        old = {(r.figure, r.storage): r for r in table_rows(before)}
        lines[0] = f"{head}; before: code at {before['code']['commit']}"
        lines += ["| figure | storage | before | ratio | after | ratio | cost vs before "
                  "| goal |", "|---|---|---|---:|---|---:|---:|---|"]
        for r in table_rows(report):
            o = old.get((r.figure, r.storage))
            if o is None:
                lines.append(f"| {r.figure} | {r.storage} | - | - | {r.measured} | "
                             f"{r.ratio} | | {r.goal} |")
                continue
            more = cost(r, o.value)
            flag = f"**{more:.2f}**" if more > 1 + WORSE else f"{more:.2f}"
            lines.append(f"| {r.figure} | {r.storage} | {o.measured} | {o.ratio} | "
                         f"{r.measured} | {r.ratio} | {flag} | {r.goal} |")
    if report["notes"]:
        lines += ["", *[f"- {n}" for n in report["notes"]]]
    if before is not None:
        worse = regressions(report, before)
        lines += ["", f"Costing more than a tenth more than before ({len(worse)}): "
                  + ("; ".join(worse) if worse else "none") + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="CI-sized: well under a minute")
    mode.add_argument("--smoke", action="store_true", help="tiny: only checks every figure runs")
    p.add_argument("--storage", default="sqlite,postgresql",
                   help="comma-separated: sqlite, postgresql (skipped when unreachable)")
    p.add_argument("--only", default="commands,replay,memory,integrity,bidding",
                   help="figure groups: commands, replay (replay, load, growth), memory, "
                        "integrity (signing and encryption), bidding")
    p.add_argument("--markdown", action="store_true", help="the table on stdout, not the JSON")
    p.add_argument("--before", type=Path, nargs="?", const=Path("-"),
                   help="an earlier JSON report to show beside this run, each figure's cost "
                        "against it and those more than a tenth worse; alone, the last "
                        "release's report kept in scripts/baseline/ for this size of run")
    args = p.parse_args(argv)
    name = "smoke" if args.smoke else "quick" if args.quick else "full"
    size = SIZES[name]
    groups = set(args.only.split(","))
    storages = [s.strip() for s in args.storage.split(",") if s.strip()]
    if "postgresql" in storages and (why := pg_reachable()) is not None:
        storages.remove("postgresql")
        note(f"PostgreSQL skipped: not reachable at {pg_admin_url()} ({why})")
    figures: dict[str, list[dict[str, Any]]] = {
        "commands": [], "replay": [], "load": [], "growth": [], "memory": [],
        "integrity": [], "bidding": []}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dl-bench-") as tmpdir:
        tmp = Path(tmpdir)
        for storage in storages:
            if "commands" in groups:
                figures["commands"] += bench_throughput(storage, tmp, size)
            if "replay" in groups:
                replays, loads, growth = bench_storage_rooms(storage, tmp, size)
                figures["replay"] += replays
                figures["load"] += loads
                figures["growth"] += growth
            if "integrity" in groups:
                figures["integrity"] += bench_integrity(storage, tmp, size)
            if "bidding" in groups:
                with database(storage, tmp, "bidding") as url:
                    measured = bench_bidding.bench_bidding(url, size["samples"] * 5,
                                                           size["rounds"] + 2)
                figures["bidding"].append({"storage": storage, **measured})
            if "memory" in groups and storage == "sqlite":
                figures["memory"].append(bench_memory(storage, tmp, size["open_rooms"]))
    report = {
        "mode": name, "machine": machine(),
        "code": {"root": str(CODE_ROOT), "commit": code_commit()},
        "seconds": round(time.perf_counter() - started, 1),
        "settings": {**size,
                     "snapshot_interval": os.environ.get("DUNE_LEDGER_SNAPSHOT_INTERVAL")
                     or "the application's default (see figures.load)"},
        "figures": figures, "notes": notes,
    }
    before = None
    if args.before is not None:
        kept = args.before if args.before != Path("-") else BASELINES / f"{name}.json"
        try:
            before = json.loads(kept.read_text())
        except (OSError, ValueError) as e:
            raise SystemExit(f"bench: cannot read the earlier report {kept}: {e}") from None
        report["worse_than_before"] = regressions(report, before)
    table = markdown(report, before)
    if args.markdown:
        print(table)
    else:
        print(json.dumps(report, indent=2))
        print(table, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
