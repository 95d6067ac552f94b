#!/usr/bin/env python3
"""The events-table lock on PostgreSQL: what it costs, what dropping it breaks.

    scripts/bench_pg_lock.py                          # every recorder, 1, 2 and 4 processes
    scripts/bench_pg_lock.py --recorders lock,gate --procs 2 --pairs 100

The product's recorder (infrastructure/postgres.py, like eventsourcing's own)
takes `LOCK TABLE ... IN EXCLUSIVE MODE` in every append and holds it until
the commit, so notification ids commit in the order they were issued and a
reader following the log (`select_notifications` after its last id) never
passes an id that commits later. The recorders compared differ only in what
the append function runs before it inserts (`RoomsRecorder.append_lock`), each
selected through eventsourcing's `APPLICATION_RECORDER_TOPIC`:

- `lock`: the product's recorder (the table lock);
- `nolock`: the same without the lock (the upper bound on speed; readers may skip);
- `gate`: writers take a shared advisory lock (the gate) instead of the table
  lock, so they no longer wait for each other's commits; a reader closes the
  gate for a moment (exclusive: it waits for the writers in flight to commit),
  reads the notification sequence's last issued id, reopens it, and reads no
  further than that id. Every id at or below it is committed or rolled back.

Two measurements per recorder, each on a throwaway database dropped afterwards:

1. throughput: the begin+select mix of `bench_commands.py` (rooms of each
   process's own), 1, 2 and 4 processes, no reader;
2. the gap check: 4 writer processes run the mix while a reader follows the
   log from its last id, recording every id it is given; afterwards every id
   in the table that the reader never saw is a skipped event. Two readers:
   `poll` reads again as soon as it can (as `projections/read_models.py` does
   when asked, at its most aggressive), `listen` is the library's
   LISTEN/NOTIFY subscription (what `dune-ledger worker` follows by). The
   commands/s of the writers while the reader follows is reported too: in
   production a follower is always there.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from eventsourcing.persistence import Notification
from psycopg.sql import SQL, Identifier, Literal

from infrastructure.postgres import RoomsRecorder
from infrastructure.throwaway import throwaway_database

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_commands import CTX, LAYOUT, run_mix  # noqa: E402

GATE_KEY = 0x646C6774  # any fixed advisory-lock key of its own


class NoLockRecorder(RoomsRecorder):
    """The product's recorder without the table lock: inserts run side by side."""

    append_lock = ""


class GateRecorder(RoomsRecorder):
    """Writers share a gate until they commit; a reader closes it to learn the settled id."""

    append_lock = f"PERFORM pg_advisory_xact_lock_shared({GATE_KEY})"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        timeout = SQL("SET LOCAL lock_timeout = '{0}s'").format(self.datastore.lock_timeout)
        self.close_gate = [timeout, SQL("SELECT pg_advisory_xact_lock({0})").format(
            Literal(GATE_KEY))]
        self.last_issued = SQL("SELECT pg_sequence_last_value(pg_get_serial_sequence("
                               "{0}, 'notification_id')) AS v").format(
            Literal(f'"{self.datastore.schema}"."{self.events_table_name}"'))

    def settled(self) -> int:
        """The highest id below which no transaction is still in flight."""
        with self.datastore.transaction(commit=True) as curs:
            for statement in self.close_gate:
                curs.execute(statement, prepare=True)
            curs.execute(self.last_issued, prepare=True)
            row = curs.fetchone()
        return int(row["v"] or 0) if row else 0

    def select_notifications(self, start: int | None, limit: int, stop: int | None = None,
                             topics: Sequence[str] = (), *,
                             inclusive_of_start: bool = True) -> Sequence[Notification]:
        settled = self.settled()
        stop = settled if stop is None else min(stop, settled)
        return super().select_notifications(start, limit, stop, topics,
                                            inclusive_of_start=inclusive_of_start)

    def max_notification_id(self) -> int | None:
        top = super().max_notification_id()
        return None if top is None else min(top, self.settled())


RECORDERS = {
    "lock": None,  # the product's (infrastructure/postgres.py)
    "nolock": f"{__name__ if __name__ != '__main__' else 'bench_pg_lock'}:NoLockRecorder",
    "gate": f"{__name__ if __name__ != '__main__' else 'bench_pg_lock'}:GateRecorder",
}


def throwaway(admin_url: str) -> AbstractContextManager[str]:
    return throwaway_database(admin_url, "dl_lock")


@contextmanager
def recorder_env(topic: str | None) -> Iterator[None]:
    """Spawned writers inherit the environment: eventsourcing reads the topic from it."""
    key = "APPLICATION_RECORDER_TOPIC"
    before = os.environ.get(key)
    if topic is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = topic
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before


class Follower(threading.Thread):
    """Reads the log from its last id until told to stop, then once more; keeps every id."""

    def __init__(self, recorder: Any) -> None:
        super().__init__(daemon=True)
        self.recorder = recorder
        self.seen: list[int] = []
        self.done = threading.Event()
        self.reads = 0

    def pull(self) -> int:
        start = self.seen[-1] if self.seen else 0
        notes = self.recorder.select_notifications(start=start, limit=500,
                                                   inclusive_of_start=False)
        self.reads += 1
        self.seen.extend(n.id for n in notes)
        return len(notes)

    def run(self) -> None:
        while not self.done.is_set():
            if not self.pull():
                time.sleep(0.0005)
        while self.pull():
            pass


class Listener(threading.Thread):
    """The library's LISTEN/NOTIFY subscription (what the worker follows by): a read
    after each commit's notification, from the last id it delivered."""

    def __init__(self, recorder: Any) -> None:
        super().__init__(daemon=True)
        self.recorder = recorder
        self.seen: list[int] = []
        self.done = threading.Event()
        self.subscription = recorder.subscribe(gt=None)
        self.reads = 0

    def run(self) -> None:
        with self.subscription as notes:
            for n in notes:
                self.seen.append(n.id)

    def finish(self, last: int) -> None:
        deadline = time.monotonic() + 30
        while (not self.seen or self.seen[-1] < last) and time.monotonic() < deadline:
            time.sleep(0.01)
        self.subscription.stop()
        self.join()


def stored_ids(recorder: Any) -> set[int]:
    with recorder.datastore.transaction(commit=False) as curs:
        curs.execute(SQL("SELECT notification_id AS i FROM {0}.{1}").format(
            Identifier(recorder.datastore.schema), Identifier(recorder.events_table_name)))
        return {int(r["i"]) for r in curs.fetchall()}


def gap_check(url: str, procs: int, pairs: int, follow: str = "poll") -> dict[str, Any]:
    """Writers run the mix while a follower reads; which stored ids did it never see?"""
    from infrastructure.storage import open_rooms

    app = open_rooms(url)
    follower: Any = Follower(app.recorder) if follow == "poll" else Listener(app.recorder)
    follower.start()
    try:
        mix = run_mix(url, procs, pairs)
    finally:
        stored = stored_ids(app.recorder)
        if follow == "poll":
            follower.done.set()
            follower.join()
        else:
            follower.finish(max(stored, default=0))
    app.close()
    seen = follower.seen
    in_order = all(a < b for a, b in zip(seen, seen[1:], strict=False))
    skipped = sorted(stored - set(seen))
    return {"follow": follow, "stored": len(stored), "seen": len(seen), "skipped": skipped,
            "in_order": in_order,
            "commands_per_s": mix["commands_per_s"]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pg-admin", default=os.environ.get(
        "DUNE_LEDGER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres"),
        help="a maintenance URL: the bench creates and drops its own databases")
    p.add_argument("--recorders", default="lock,nolock,gate")
    p.add_argument("--procs", default="1,2,4")
    p.add_argument("--pairs", type=int, default=200, help="searches (2 commands) per process")
    p.add_argument("--gap-procs", type=int, default=4)
    p.add_argument("--gap-pairs", type=int, default=300)
    p.add_argument("--rounds", type=int, default=1, help="repeat each measurement, keep each")
    args = p.parse_args()
    chosen = args.recorders.split(",")
    counts = [int(n) for n in args.procs.split(",")]
    speed: dict[tuple[str, int], list[float]] = {}
    gaps: dict[str, list[dict[str, Any]]] = {}
    for _ in range(args.rounds):
        # Interleaved, so the machine's noise falls on every recorder alike.
        for name in chosen:
            with recorder_env(RECORDERS[name]):
                for n in counts:
                    with throwaway(args.pg_admin) as url:
                        rate = run_mix(url, n, args.pairs)["commands_per_s"]
                    speed.setdefault((name, n), []).append(rate)
                    print(f"{name} x{n}: {rate:.0f} commands/s", file=sys.stderr)
                for follow in ("poll", "listen"):
                    with throwaway(args.pg_admin) as url:
                        found = gap_check(url, args.gap_procs, args.gap_pairs, follow)
                    gaps.setdefault(name, []).append(found)
                    print(f"{name} gap check ({follow}): {len(found['skipped'])} skipped of "
                          f"{found['stored']}, {found['commands_per_s']:.0f} commands/s",
                          file=sys.stderr)

    print(f"\n{os.cpu_count()} CPUs; begin+select mix, {args.pairs} searches per process; "
          f"median of {args.rounds}\n")
    print("| recorder | " + " | ".join(f"{n} proc commands/s" for n in counts)
          + " | vs lock (max procs) |")
    print("|---|" + "---:|" * (len(counts) + 1))

    def med(xs: list[float]) -> float:
        return sorted(xs)[len(xs) // 2]

    base = med(speed.get(("lock", counts[-1]), [0.0]))
    for name in chosen:
        rates = [med(speed[(name, n)]) for n in counts]
        ratio = f"{rates[-1] / base:.2f}" if base else "-"
        print(f"| {name} | " + " | ".join(f"{r:.0f}" for r in rates) + f" | {ratio} |")
    print(f"\nGap check: {args.gap_procs} writer processes × {args.gap_pairs} searches, "
          "one follower reading after its last id (poll: as fast as it can; listen: the "
          "library's LISTEN/NOTIFY subscription); every run, then the median rate\n")
    print("| recorder | follower | events stored | skipped by the follower | ids in order | "
          "commands/s while followed (median) |")
    print("|---|---|---:|---:|---|---:|")
    for name in chosen:
        for follow in ("poll", "listen"):
            runs = [g for g in gaps[name] if g["follow"] == follow]
            print(f"| {name} | {follow} | {', '.join(str(g['stored']) for g in runs)} | "
                  f"{', '.join(str(len(g['skipped'])) for g in runs)} | "
                  f"{'yes' if all(g['in_order'] for g in runs) else 'no'} | "
                  f"{med([g['commands_per_s'] for g in runs]):.0f} |")
    unsafe = [n for n in chosen if n != "nolock" and any(g["skipped"] for g in gaps[n])]
    if unsafe:
        print(f"\nSKIPPED EVENTS with {', '.join(unsafe)}", file=sys.stderr)
        return 1
    return 0


_ = (CTX, LAYOUT)  # re-exported for tests that drive the mix directly

if __name__ == "__main__":
    sys.exit(main())
