"""Where the audit of one long room spends its CPU, stage by stage.

    .venv/bin/python -m scripts.bench_audit_stages [--events 10000] [--storage sqlite]

A room of about `--events` events is built as scripts/bench.py builds its long
rooms, its read models caught up; then each stage of `application/audit.audit_room`
is timed alone, in CPU time of this process (`time.process_time`, the best of
`--passes`: what sharing the machine moves least): reading and decoding the stored
events, the chain walked alone, the rules' replay alone, `audit_records` without and
with the read models' fold, `check_room` (the stored read models against the fold),
the live state, and the whole audit. The audit's figure in scripts/bench is the
read against the whole audit; the stages say where the difference goes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

from dune_ledger.application.audit import _live_state_hash, audit_records, audit_room
from dune_ledger.application.stream import Chain, Recorded
from dune_ledger.domain.game import apply, initial_state
from dune_ledger.infrastructure.storage import open_rooms
from scripts import bench, benchcommon  # the room builder; the throwaway databases


def best_cpu(fn: Callable[[], Any], passes: int) -> float:
    """The least CPU time of `passes` calls of `fn`, in milliseconds."""
    least = float("inf")
    for _ in range(passes):
        started = time.process_time()
        fn()
        least = min(least, time.process_time() - started)
    return least * 1000


def stages(url: str, events: int, passes: int) -> list[tuple[str, float]]:
    app = open_rooms(url)
    try:
        room_id = bench.long_room(app, events + 25, seed=events)
        uid = UUID(room_id)
        models = app.read_models
        assert models is not None, "the stages need the read models"
        models.catch_up()
        records = [r for r in app.stored_records(uid) if isinstance(r, Recorded)]

        def walk() -> None:
            chain = Chain(app.signer)
            for rec in records:
                chain.step(rec)
            chain.end()

        def replay() -> None:
            state = initial_state(records[0].fact)  # type: ignore[arg-type]
            for rec in records[1:]:
                apply(state, rec.fact)

        def with_fold() -> None:
            audit_records(room_id, records, models.room_fold(uid), signer=app.signer)

        fold = models.room_fold(uid)
        audit_records(room_id, records, fold, signer=app.signer)
        return [
            ("read and decode (RoomsApp.records)", best_cpu(lambda: app.records(uid), passes)),
            ("the chain walked alone", best_cpu(walk, passes)),
            ("the rules' replay alone", best_cpu(replay, passes)),
            ("audit_records without the read models' fold",
             best_cpu(lambda: audit_records(room_id, records, None, signer=app.signer),
                      passes)),
            ("audit_records with the fold", best_cpu(with_fold, passes)),
            ("check_room (the stored read models against the fold)", best_cpu(
                lambda: models.check_room(uid, records, fold,
                                          lambda after, upto: app.records(uid, gt=after,
                                                                          lte=upto)),
                passes)),
            ("the live state", best_cpu(
                lambda: _live_state_hash(app, uid, records[-1].originator_version), passes)),
            ("the whole audit (audit_room)", best_cpu(lambda: audit_room(app, room_id),
                                                      passes)),
        ]
    finally:
        app.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=10_000)
    p.add_argument("--storage", choices=["sqlite", "postgresql"], default="sqlite")
    p.add_argument("--passes", type=int, default=7)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="dl-stages-") as tmp, \
            benchcommon.database(args.storage, Path(tmp), "stages") as url:
        rows = stages(url, args.events, args.passes)
    read, whole = rows[0][1], rows[-1][1]
    print(f"| stage, a room of about {args.events:,} events ({args.storage}) | CPU ms |")
    print("|---|---:|")
    for name, ms in rows:
        print(f"| {name} | {ms:.1f} |")
    print(f"\nthe read against the whole audit: {read / whole:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
