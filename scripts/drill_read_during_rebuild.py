"""How long a seat's view read takes while another process runs `projections rebuild`.

    .venv/bin/python -m scripts.drill_read_during_rebuild [--rooms 8] [--draws 300]

Fills a fresh SQLite file (draws and discards), starts `dune-ledger projections
rebuild` on it in another process, and reads one seat's view in a loop until the
rebuild ends; prints the number of reads and the slowest. A read catches up for
0.25 s at most, then folds its own room. Figures: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dune_ledger.infrastructure.storage import open_rooms
from tests.support import long_room

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rooms", type=int, default=8)
    parser.add_argument("--draws", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/rebuild.db"
        with open_rooms(url) as app:
            rooms = [long_room(app, draws=args.draws) for _ in range(args.rooms)]
            events = app.recorder.max_notification_id()
        with open_rooms(url) as app:
            rebuild = subprocess.Popen(
                [sys.executable, "-m", "dune_ledger", "--db", url, "projections",
                 "rebuild"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            worst, reads = 0.0, 0
            while rebuild.poll() is None:
                started = time.monotonic()
                app.seat_view(rooms[0], "emperor")
                worst = max(worst, time.monotonic() - started)
                reads += 1
    print(f"{events} events; {reads} reads during the rebuild, the slowest {worst:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
