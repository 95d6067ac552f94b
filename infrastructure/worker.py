"""`dune-ledger worker`: follows the event log (read models) and runs periodic work.

One loop, one tick every `interval` seconds:

1. the read models catch up: by polling the notification log on SQLite and
   memory, or, on PostgreSQL, a LISTEN/NOTIFY subscription runs in the
   background and the tick only checks that it is healthy;
2. every callable of `Worker.ticks` runs, in order, with the application.
   This is the one place periodic work plugs in: window deadlines
   (`close_deadlines`, RULES 4.4) and autopilot seats register
   a callable here (`TICKS.append(fn)` or `Worker(app, ticks=[fn])`). A
   callable that raises is logged and the loop goes on.

When the store goes away (PostgreSQL restarted, its connections cut, the
network down), `run_worker` closes the app, logs it, and opens the store
again after a pause that doubles from 0.5 s up to 30 s, until it is back.

At scale the worker holds no room per room of the database: the autopilot
finds the rooms where an autopilot seat is asked for something through the
read models' index (`dl_autopilot_rooms`) and loads only those, and each
projector keeps at most `DUNE_LEDGER_PROJECTION_CACHE` room states in memory
(an evicted room is read back from its projection's room table).

`dune-ledger serve` runs this same loop in a thread of its own (`Background`)
unless `--no-worker`, so one `serve` is a whole deployment. Several serve
processes and workers on one store never close a window twice or act twice
for an autopilot seat: a deadline's command id is `deadline:<event>` and an
autopilot's is `autopilot:<profile>:<version>` with `expected_version`, so the
store's compare-and-set on the room's version lets one of them append and the
others find the command done or the room moved on.
"""

from __future__ import annotations

import logging
import signal
import sqlite3
import threading
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from dune_ledger.application import autopilot
from dune_ledger.application.rooms import RoomsApp
from dune_ledger.infrastructure.observability import first_line
from dune_ledger.infrastructure.settings import current
from dune_ledger.projections.follow import can_subscribe, subscription_runner
from dune_ledger.projections.read_models import ReadModels

log = logging.getLogger("dune_ledger.worker")

# The pause before the store is opened again, doubling after each failure.
BACKOFF_FIRST, BACKOFF_MAX = 0.5, 30.0

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


def play_autopilots(app: RoomsApp) -> int:
    """The autopilot seats' moves, at the settings' DUNE_LEDGER_AUTOPILOT_PACE."""
    return autopilot.tick(app, pace=current().autopilot_pace)


# The per-tick callables every worker runs after the read models caught up: deadlines
# first, so that an autopilot answers only windows still open.
TICKS: list[Tick] = [close_deadlines, play_autopilots]


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
                if is_store_gone(e):
                    raise  # run_worker opens the store again
                log.error("%s failed: %s", getattr(fn, "__name__", fn), e)
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


def is_store_gone(e: BaseException) -> bool:
    """An error that says the store is unreachable now, not that something is wrong."""
    import psycopg
    from eventsourcing.persistence import InterfaceError, OperationalError

    from dune_ledger.infrastructure.errors import StoreUnavailable

    return isinstance(e, InterfaceError | OperationalError | psycopg.OperationalError
                      | psycopg.InterfaceError | sqlite3.OperationalError | StoreUnavailable)


def run_worker(url: str, interval: float, once: bool, *,
               backoff: tuple[float, float] = (BACKOFF_FIRST, BACKOFF_MAX),
               stopping: threading.Event | None = None) -> int:
    """Follow the log of the store at `url` until stopped (SIGTERM, SIGINT)."""
    from dune_ledger.infrastructure.storage import environment, open_rooms

    environment(url)  # a bad URL or setting is a usage error, not something to retry
    stopping = stopping or threading.Event()

    def stop(signum: int, frame: Any) -> None:
        stopping.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
    pause = backoff[0]
    while not stopping.is_set():
        app: RoomsApp | None = None
        try:
            app = open_rooms(url)
            worker = Worker(app, interval=interval)
            worker.stopping = stopping
            log.info("following the event log (%s) from position %d", worker.follower,
                     worker.models.position())
            pause = backoff[0]
            worker.run(max_ticks=1 if once else None)
            log.info("stopped at position %d", worker.models.position())
            return 0
        except Exception as e:
            if once or not is_store_gone(e):
                raise
            log.warning("the store went away (%s); opening it again in %.1f s",
                        first_line(e), pause)
        finally:
            if app is not None:
                try:
                    app.close()
                except Exception as e:  # a pool whose connections are gone
                    log.debug("closing the app: %s", e)
        stopping.wait(pause)
        pause = min(pause * 2, backoff[1])
    return 0


class Background:
    """The worker's loop in a daemon thread of the serving process; `stop()` ends it."""

    def __init__(self, url: str | None, app: RoomsApp | None = None,
                 interval: float = 0.5) -> None:
        self.stopping = threading.Event()
        if app is not None:  # memory://: the worker must share the serving app's store
            worker = Worker(app, interval=interval)
            worker.stopping = self.stopping
            target: Callable[[], Any] = worker.run
        else:
            def target() -> Any:
                return run_worker(url or "", interval, once=False, stopping=self.stopping)
        self.thread = threading.Thread(target=self._run, args=(target,), daemon=True,
                                       name="dune-ledger-worker")

    def _run(self, target: Callable[[], Any]) -> None:
        try:
            target()
        except Exception as e:  # the API goes on serving; the log says the worker stopped
            log.error("the worker stopped: %s", first_line(e))

    def start(self) -> Background:
        self.thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self.stopping.set()
        self.thread.join(timeout)
