"""PostgreSQL appends without the table lock: the server's ceiling, and followers that skip nothing.

    .venv/bin/python -m scripts.bench_pg_order  # pgbench at 1, 4, 8 clients; 1,000,000 events
    .venv/bin/python -m scripts.bench_pg_order --events 100000 --seconds 5 --clients 8

Two parts, each on a throwaway database dropped afterwards (docs/ordering.md
says why the order holds):

1. pgbench, in the same run and on the same server, 1, 4 and 8 clients:
   - `insert`: pgbench's plain single-row INSERT (the baseline);
   - `append`: the project's append statement (`RoomsRecorder.append_statement`,
     one event of the same size, its parameters written in);
   - `locked`: the append as it was before, under the events-table lock with
     the NOTIFY inside (its function is recreated here, on a table of its own).
2. The never-skips check: `--writers` processes append through the product's
   recorder (`RoomsRecorder.insert_events`, 1 to 3 events an append, to rooms
   of their own) while two followers read the log: `listen`, the LISTEN/NOTIFY
   subscription the worker follows by, and `poll`, `select_notifications`
   after the last id as the read models do. Each follower checks, as it reads,
   that ids only rise and that every room's versions come 1, 2, 3, ... (so
   no event is seen twice, out of order or skipped within its room); at the
   end its count must equal the table's. Lag is the follower's clock at
   reading minus the writer's just before its append (both on this machine).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import struct
import sys
import time
import uuid
from array import array
from typing import Any

from scripts import benchcommon
from scripts.throwaway import ADMIN_URL, throwaway_database

CTX = mp.get_context("spawn")
PAYLOAD = "x" * 400  # about the size of a stored event
STAMP = struct.Struct("!d")
ROOMS_PER_WRITER = 64


# --- 1. pgbench -------------------------------------------------------------------

# The append of the table-lock days (before docs/ordering.md), on a table of the old
# shape: ids from a sequence, the lock held from before they are drawn to the commit.
LOCKED = """
CREATE TABLE bench_locked_events (originator_id uuid NOT NULL, originator_version bigint NOT NULL,
  topic text, state bytea, notification_id bigserial,
  PRIMARY KEY (originator_id, originator_version));
CREATE FUNCTION bench_locked_append(ids uuid[], versions bigint[], topics text[], states bytea[])
RETURNS SETOF bigint LANGUAGE plpgsql AS $BODY$ BEGIN
  LOCK TABLE bench_locked_events IN EXCLUSIVE MODE;
  NOTIFY bench_locked_events;
  RETURN QUERY INSERT INTO bench_locked_events (originator_id, originator_version, topic, state)
    SELECT * FROM unnest(ids, versions, topics, states) RETURNING notification_id;
END; $BODY$;
"""


def locked_script() -> str:
    return ("SELECT id FROM bench_locked_append(ARRAY[gen_random_uuid()], ARRAY[1::bigint], "
            f"ARRAY['Bench'], ARRAY[convert_to('{PAYLOAD}', 'UTF8')]) AS id;\n")


def append_script(recorder: Any) -> str:
    """The recorder's own append statement of one event, its parameters written in."""
    statement = recorder.append_statement(1).decode()
    for n, value in ((5, "0"), (4, f"convert_to('{PAYLOAD}', 'UTF8')"), (3, "'Bench'"),
                     (2, "1"), (1, "gen_random_uuid()")):
        statement = statement.replace(f"${n}", value)
    return statement + ";\n"


def pgbench_part(clients: list[int], seconds: float) -> list[dict[str, Any]]:
    import psycopg

    from dune_ledger.infrastructure.storage import open_rooms

    rows = []
    with throwaway_database(ADMIN_URL, "dl_bench_order") as url:
        app = open_rooms(url)  # the product's tables and append statement
        append = append_script(app.recorder)
        app.close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE bench_rows (id bigserial PRIMARY KEY, payload text)")
            conn.execute(LOCKED)
        scripts = {
            "insert": f"INSERT INTO bench_rows (payload) VALUES ('{PAYLOAD}');\n",
            "append": append,
            "locked": locked_script(),
        }
        for n in clients:
            tps = {name: benchcommon.pgbench(url, script, n, seconds)
                   for name, script in scripts.items()}
            row = {"clients": n, **{f"{k}_per_s": round(v) for k, v in tps.items()},
                   "append_ratio": round(tps["append"] / tps["insert"], 2),
                   "locked_ratio": round(tps["locked"] / tps["insert"], 2)}
            print(f"pgbench {n} clients: {row}", file=sys.stderr, flush=True)
            rows.append(row)
    return rows


# --- 2. writers and followers -----------------------------------------------------


def writer(url: str, quota: int, seed: int, barrier: Any, out: Any) -> None:
    from eventsourcing.persistence import StoredEvent

    from dune_ledger.infrastructure.storage import open_rooms

    app = open_rooms(url)
    recorder = app.recorder
    rng = random.Random(seed)
    rooms = [uuid.uuid4() for _ in range(ROOMS_PER_WRITER)]
    versions = dict.fromkeys(rooms, 0)
    pad = b"x" * 200
    barrier.wait()
    start, written, appends = time.perf_counter(), 0, 0
    while written < quota:
        room = rooms[appends % len(rooms)]
        n = min(quota - written, rng.randint(1, 3))
        stamp = STAMP.pack(time.time()) + pad
        v = versions[room]
        recorder.insert_events([StoredEvent(originator_id=room, originator_version=v + i + 1,
                                            topic="Bench", state=stamp) for i in range(n)])
        versions[room] = v + n
        written += n
        appends += 1
    out.put({"events": written, "appends": appends, "start": start,
             "end": time.perf_counter()})
    app.close()


def follower(url: str, kind: str, total: int, timeout: float, out: Any) -> None:
    from dune_ledger.infrastructure.storage import open_rooms

    app = open_rooms(url)
    recorder = app.recorder
    last_id, seen, faults = 0, 0, 0
    versions: dict[Any, int] = {}
    lags = array("d")
    first_fault = ""

    def check(note: Any) -> None:
        nonlocal last_id, seen, faults, first_fault
        now = time.time()
        expected = versions.get(note.originator_id, 0) + 1
        if note.id <= last_id or note.originator_version != expected:
            faults += 1
            first_fault = first_fault or (f"id {note.id} after {last_id}, version "
                                          f"{note.originator_version} where {expected} was due")
        last_id = note.id
        versions[note.originator_id] = note.originator_version
        lags.append(now - STAMP.unpack_from(note.state)[0])
        seen += 1

    out.put(("ready", kind))
    deadline = time.monotonic() + timeout
    if kind == "listen":
        with recorder.subscribe(gt=0) as subscription:
            for note in subscription:
                check(note)
                if seen >= total or time.monotonic() > deadline:
                    break
    else:
        while seen < total and time.monotonic() < deadline:
            notes = recorder.select_notifications(start=last_id, limit=500,
                                                  inclusive_of_start=False)
            for note in notes:
                check(note)
            if not notes:
                time.sleep(0.001)
    # After the writers: the table's own count, and every room's last version.
    with recorder.datastore.transaction(commit=False) as curs:
        curs.execute("SELECT count(*) AS n FROM duneledger_events")
        stored = curs.fetchone()["n"]
        curs.execute("SELECT originator_id AS r, max(originator_version) AS v "
                     "FROM duneledger_events GROUP BY originator_id")
        last = {row["r"]: row["v"] for row in curs.fetchall()}
    app.close()
    out.put(("done", kind, {
        "seen": seen, "stored": stored, "faults": faults, "first_fault": first_fault,
        "rooms_complete": sum(versions.get(r, 0) == v for r, v in last.items()),
        "rooms": len(last),
        "lag_ms": {"median": round(benchcommon.percentile(lags, 0.5) * 1000, 1),
                   "p99": round(benchcommon.percentile(lags, 0.99) * 1000, 1),
                   "max": round(max(lags, default=0) * 1000, 1)}}))


def follow_part(events: int, writers: int, timeout: float) -> dict[str, Any]:
    from dune_ledger.infrastructure.storage import open_rooms

    with throwaway_database(ADMIN_URL, "dl_bench_follow") as url:
        open_rooms(url).close()
        out = CTX.Queue()
        followers = [CTX.Process(target=follower, args=(url, kind, events, timeout, out))
                     for kind in ("listen", "poll")]
        for f in followers:
            f.start()
        for _ in followers:
            out.get(timeout=120)  # each follower is following before the writers start
        barrier, done = CTX.Barrier(writers), CTX.Queue()
        quota = [events // writers + (i < events % writers) for i in range(writers)]
        procs = [CTX.Process(target=writer, args=(url, quota[i], i, barrier, done))
                 for i in range(writers)]
        for p in procs:
            p.start()
        wrote = [done.get(timeout=timeout) for _ in procs]
        for p in procs:
            p.join()
        results = {}
        for _ in followers:
            _, kind, result = out.get(timeout=timeout)
            results[kind] = result
        for f in followers:
            f.join()
    seconds = max(w["end"] for w in wrote) - min(w["start"] for w in wrote)
    return {"events": sum(w["events"] for w in wrote), "writers": writers,
            "appends_per_s": round(sum(w["appends"] for w in wrote) / seconds),
            "events_per_s": round(sum(w["events"] for w in wrote) / seconds),
            "seconds": round(seconds, 1), "followers": results,
            "never_skipped": all(r["faults"] == 0 and r["seen"] == r["stored"] == events
                                 and r["rooms_complete"] == r["rooms"]
                                 for r in results.values())}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", default="1,4,8", help="pgbench client counts")
    p.add_argument("--seconds", type=float, default=8.0, help="length of each pgbench run")
    p.add_argument("--events", type=int, default=1_000_000, help="events the writers append")
    p.add_argument("--writers", type=int, default=8)
    p.add_argument("--timeout", type=float, default=3600.0)
    p.add_argument("--skip", choices=["pgbench", "follow"])
    args = p.parse_args()
    if (why := benchcommon.pg_reachable()) is not None:
        raise SystemExit(f"PostgreSQL is not reachable at {ADMIN_URL}: {why}")
    report: dict[str, Any] = {"machine": benchcommon.machine(), "note": benchcommon.SHARED}
    if args.skip != "pgbench":
        report["pgbench"] = pgbench_part([int(n) for n in args.clients.split(",")],
                                         args.seconds)
    if args.skip != "follow":
        report["follow"] = follow_part(args.events, args.writers, args.timeout)
    print(json.dumps(report, indent=2))
    return 0 if report.get("follow", {}).get("never_skipped", True) else 1


if __name__ == "__main__":
    raise SystemExit(main())
