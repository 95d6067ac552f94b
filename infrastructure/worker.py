"""`dune-ledger worker`: follows the event log (read models) and runs periodic work.

One loop, one tick every `interval` seconds:

1. the read models catch up: by polling the notification log on SQLite and
   memory, or, on PostgreSQL, a LISTEN/NOTIFY subscription runs in the
   background and the tick only checks that it is healthy;
2. every callable of `Worker.ticks` runs, in order, with the application.
   This is the one place periodic work plugs in: window deadlines
   (`close_deadlines`, RULES 4.4) and autopilot seats register
   a callable here (`TICKS.append(fn)` or `Worker(app, ticks=[fn])`). A
   callable that raises is reported on stderr and the loop goes on.

At scale the worker holds no room per room of the database: the autopilot
finds the rooms where an autopilot seat is asked for something through the
read models' index (`dl_autopilot_rooms`) and loads only those, and each
projector keeps at most `DUNE_LEDGER_PROJECTION_CACHE` room states in memory
(an evicted room is read back from its projection's room table).
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from application import autopilot
from application.rooms import RoomsApp
from projections.follow import can_subscribe, subscription_runner
from projections.read_models import ReadModels

Tick = Callable[[RoomsApp], Any]


def close_deadlines(app: RoomsApp, now: datetime | None = None) -> int:
    """Close every open window whose deadline has passed (RULES 4.4), each by an
    append of its own through `RoomsApp.close_expired`; returns how many closed.

    The rooms come from the read models' index of rooms the worker must look at."""
    closed = 0
    for room in autopilot.candidate_rooms(app):
        result = app.close_expired(room, now)
        if result is not None and result["ok"]:
            closed += 1
    return closed


# The per-tick callables every worker runs after the read models caught up: deadlines
# first, so that an autopilot answers only windows still open.
TICKS: list[Tick] = [close_deadlines, autopilot.tick]


class Worker:
    def __init__(self, app: RoomsApp, *, interval: float = 0.5,
                 ticks: Iterable[Tick] | None = None, subscribe: bool | None = None) -> None:
        if app.read_models is None or not isinstance(app.read_models, ReadModels):
            raise RuntimeError("the worker needs an app opened with storage.open_rooms")
        self.app = app
        self.models: ReadModels = app.read_models
        self.interval = interval
        self.ticks: list[Tick] = list(TICKS if ticks is None else ticks)
        self.subscribe = can_subscribe(app) if subscribe is None else subscribe
        self.runner: Any = None
        self.stopping = threading.Event()
        self.applied = 0

    @property
    def follower(self) -> str:
        return "listen/notify" if self.subscribe else "polling"

    def start(self) -> None:
        if self.subscribe and self.runner is None:
            self.runner = subscription_runner(self.app, self.models)

    def tick(self) -> int:
        """One round: catch up (or check the subscription), then the per-tick callables."""
        applied = 0
        if self.runner is None:
            applied = self.models.catch_up()
        elif self.runner.is_interrupted.is_set() and not self.stopping.is_set():
            self.runner.run_forever(timeout=0)  # re-raises what stopped it
            raise RuntimeError("the log subscription stopped")
        self.applied += applied
        # --- the per-tick callables (autopilot and any later periodic work) ---
        for fn in self.ticks:
            try:
                fn(self.app)
            except Exception as e:  # one failing job must not stop the projections
                print(f"worker: {getattr(fn, '__name__', fn)} failed: {e}", file=sys.stderr)
        return applied

    def run(self, max_ticks: int | None = None) -> None:
        self.start()
        try:
            done = 0
            while not self.stopping.is_set():
                self.tick()
                done += 1
                if max_ticks is not None and done >= max_ticks:
                    break
                self.stopping.wait(self.interval)
        finally:
            self.close()

    def stop(self) -> None:
        self.stopping.set()

    def close(self) -> None:
        if self.runner is not None:
            runner, self.runner = self.runner, None
            runner.__exit__(None, None, None)


def run_worker(app: RoomsApp, interval: float, once: bool) -> int:
    worker = Worker(app, interval=interval)

    def stop(signum: int, frame: Any) -> None:
        worker.stop()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
    print(f"worker: following the event log ({worker.follower}) from position "
          f"{worker.models.position()}", file=sys.stderr)
    worker.run(max_ticks=1 if once else None)
    print(f"worker: stopped at position {worker.models.position()}", file=sys.stderr)
    return 0
