"""Commands per second for a begin+select mix, against the storage's raw insert rate.

    .venv/bin/python -m scripts.bench_commands  # PostgreSQL and SQLite, 1, 2 and 4 processes
    .venv/bin/python -m scripts.bench_commands --only postgresql --procs 1,8 --pairs 300

Each process runs Box searches on rooms of its own (a `begin_search` then a
`select_card`, each a full load -> decide -> save through RoomsApp); rooms
are created beforehand and not timed. The rate is all accepted commands over
the wall time from the common start to the last finish.

The baseline is measured on the same server or disk in the same run, with
the same number of processes: for PostgreSQL `pgbench` running a
single-row INSERT transaction; for SQLite raw `sqlite3` single-row INSERT
transactions on a file in WAL mode with the library's synchronous setting.
The ratio (commands/s over inserts/s) is the figure to compare between
machines; absolute numbers depend on the disk's fsync.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sqlite3
import sys
import tempfile
import time
from typing import Any

from scripts import benchcommon
from scripts.throwaway import throwaway_database

LAYOUT: dict[str, Any] = {
    "expansions": ["choam_richese"], "turn": 2, "phase": 6,
    "seats": [
        {"faction": "richese", "spice": 10, "hand": ["nullentropy-box", "crysknife"]},
        {"faction": "emperor", "spice": 10, "hand": ["karama-1"]},
        {"faction": "harkonnen", "spice": 6, "hand": ["shield-2", "chaumas"]},
    ],
    "discard": ["shield-1", "maula-pistol", "baliset", "snooper-3"],
}
PAYLOAD = "x" * 400  # about the size of a stored event

CTX = mp.get_context("spawn")

# A keyed seat signs every command it sends (RULES 9.3, fair dealing v2): the bench's
# signed figures are this same mix with the searching seat keyed and each command
# signed (the server checks each signature), against the unsigned.
SEAT_SIGNATURES = True


# --- the command mix --------------------------------------------------------------


def searcher(url: str, rooms: list[str], barrier: Any, out: Any, signed: bytes | None = None
             ) -> None:
    """`signed`: the seat key's 32 bytes, to sign each command with (the client's work,
    timed with the rest, as a seat page's would be on its own machine)."""
    from nacl.signing import SigningKey

    from dune_ledger.application.signatures import signed as sign
    from dune_ledger.infrastructure.storage import open_rooms

    key = None if signed is None else SigningKey(signed)

    def sent(room: str, command: dict[str, Any]) -> dict[str, Any]:
        return command if key is None else sign(key, room, "richese", command)

    app = open_rooms(url)
    app.load(rooms[0])  # connections and imports warm before the clock starts
    barrier.wait()
    start = time.perf_counter()
    ok = failed = 0
    for room in rooms:
        begun = app.execute(room, "richese", sent(room, {"type": "begin_search",
                                                        "card": "nullentropy-box"}))
        ok, failed = (ok + 1, failed) if begun["ok"] else (ok, failed + 1)
        search = next(e["search"] for e in begun.get("events", [])
                      if e["type"] == "SearchOpened")
        chosen = app.execute(room, "richese", sent(room, {"type": "select_card",
                                                          "search": search, "card": "shield-1"}))
        ok, failed = (ok + 1, failed) if chosen["ok"] else (ok, failed + 1)
    out.put((start, time.perf_counter(), ok, failed))
    app.close()


def run_mix(url: str, procs: int, pairs: int, signed: bool = False) -> dict[str, float]:
    from nacl.signing import SigningKey

    from dune_ledger.application.signatures import public_text
    from dune_ledger.infrastructure.storage import open_rooms

    key = SigningKey.generate() if signed else None
    app = open_rooms(url)
    # Committed rooms (RULES 9): dealt by the operator before the clock starts.
    rooms = [app.create_room(LAYOUT)["room"] for _ in range(procs * pairs)]
    for room in rooms:
        setup = [({"type": "deal"}, "operator")]
        if key is not None:
            setup.insert(0, ({"type": "seat_key", "public_key": public_text(key)}, "richese"))
        for command, seat in setup:
            if not app.execute(room, seat, command)["ok"]:
                raise SystemExit(f"the mix's room refused {command['type']}")
    app.close()
    barrier, out = CTX.Barrier(procs), CTX.Queue()
    workers = [CTX.Process(target=searcher,
                           args=(url, rooms[i * pairs:(i + 1) * pairs], barrier, out,
                                 None if key is None else bytes(key)))
               for i in range(procs)]
    for w in workers:
        w.start()
    results = [out.get(timeout=600) for _ in workers]
    for w in workers:
        w.join()
    elapsed = max(r[1] for r in results) - min(r[0] for r in results)
    ok = sum(r[2] for r in results)
    failed = sum(r[3] for r in results)
    if failed:
        raise SystemExit(f"{failed} commands were refused: the mix is broken")
    return {"commands_per_s": ok / elapsed, "commands": ok, "seconds": elapsed}


# --- baselines --------------------------------------------------------------------


pgbench_binary = benchcommon.pgbench_binary


def pgbench_inserts(url: str, procs: int, seconds: float) -> float:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_rows "
                     "(id bigserial PRIMARY KEY, payload text NOT NULL)")
    return benchcommon.pgbench(
        url, f"INSERT INTO bench_rows (payload) VALUES ('{PAYLOAD}');\n", procs, seconds)


def sqlite_inserter(path: str, seconds: float, barrier: Any, out: Any) -> None:
    conn = sqlite3.connect(path, isolation_level=None, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")  # what eventsourcing's SQLite module sets
    barrier.wait()
    n = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        conn.execute("BEGIN")
        conn.execute("INSERT INTO rows (payload) VALUES (?)", (PAYLOAD,))
        conn.execute("COMMIT")
        n += 1
    out.put(n)
    conn.close()


def sqlite_inserts(path: str, procs: int, seconds: float) -> tuple[float, str]:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY, payload TEXT)")
    synchronous = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[
        conn.execute("PRAGMA synchronous").fetchone()[0]]
    conn.close()
    barrier, out = CTX.Barrier(procs), CTX.Queue()
    workers = [CTX.Process(target=sqlite_inserter, args=(path, seconds, barrier, out))
               for _ in range(procs)]
    for w in workers:
        w.start()
    total = sum(out.get(timeout=600) for _ in workers)
    for w in workers:
        w.join()
    return total / seconds, synchronous


# --- the run ----------------------------------------------------------------------


def library_synchronous(url: str) -> str:
    """The synchronous setting the library's SQLite connections actually run with."""
    from dune_ledger.infrastructure.storage import open_rooms

    app = open_rooms(url)
    try:
        with app.recorder.datastore.transaction(commit=False) as cursor:  # type: ignore[attr-defined]
            cursor.execute("PRAGMA synchronous")
            value = cursor.fetchone()[0]
    finally:
        app.close()
    return {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[value]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pg-admin", default=os.environ.get(
        "DUNE_LEDGER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres"),
        help="a maintenance URL: the bench creates and drops its own database")
    p.add_argument("--procs", default="1,2,4")
    p.add_argument("--pairs", type=int, default=200, help="searches (2 commands) per process")
    p.add_argument("--seconds", type=float, default=5.0, help="length of each baseline run")
    p.add_argument("--only", choices=["postgresql", "sqlite"])
    args = p.parse_args()
    counts = [int(n) for n in args.procs.split(",")]
    rows: list[tuple[str, int, float, float, str]] = []

    if args.only in (None, "postgresql"):
        import psycopg

        with throwaway_database(args.pg_admin, "dl_bench") as url:
            with psycopg.connect(url, autocommit=True) as conn:
                settings = {k: conn.execute(f"SHOW {k}").fetchone()[0]  # type: ignore[index]
                            for k in ("synchronous_commit", "fsync", "server_version")}
            for n in counts:
                mix = run_mix(url, n, args.pairs)
                base = pgbench_inserts(url, n, args.seconds)
                rows.append(("PostgreSQL", n, mix["commands_per_s"], base,
                             "pgbench single-row INSERT"))
                print(f"postgresql x{n}: {mix['commands_per_s']:.0f} commands/s, "
                      f"pgbench {base:.0f} tps", file=sys.stderr)
        print(f"PostgreSQL {settings['server_version']}, synchronous_commit="
              f"{settings['synchronous_commit']}, fsync={settings['fsync']}")

    if args.only in (None, "sqlite"):
        with tempfile.TemporaryDirectory(dir=".") as tmp:
            for n in counts:
                url = f"sqlite:///{tmp}/bench-{n}.db"
                mix = run_mix(url, n, args.pairs)
                sync = library_synchronous(url)
                base, raw_sync = sqlite_inserts(f"{tmp}/raw-{n}.db", n, args.seconds)
                assert raw_sync == sync, (raw_sync, sync)
                rows.append(("SQLite", n, mix["commands_per_s"], base,
                             f"sqlite3 single-row INSERT (WAL, synchronous={sync})"))
                print(f"sqlite x{n}: {mix['commands_per_s']:.0f} commands/s, "
                      f"raw {base:.0f} inserts/s", file=sys.stderr)

    print(f"\n{os.cpu_count()} CPUs; begin+select mix, {args.pairs} searches per process\n")
    print("| storage | processes | commands/s | baseline inserts/s | ratio | baseline |")
    print("|---|---:|---:|---:|---:|---|")
    for storage, n, rate, base, what in rows:
        print(f"| {storage} | {n} | {rate:.0f} | {base:.0f} | {rate / base:.2f} | {what} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
