"""`dune-ledger serve` does the worker's duties unless `--no-worker` (INTERFACE "CLI"):
window deadlines close and autopilot seats act with no `dune-ledger worker` running,
and several serve processes plus a worker close each window once and act once for
an autopilot seat (the compare-and-set on the room's version, and command ids)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from dune_ledger.application.audit import audit_room
from tests.rules_support import BOX, layout
from tests.support import HANG, answering, free_port, opened, until

ROOT = Path(__file__).resolve().parent.parent
T0 = datetime(2026, 1, 1, tzinfo=UTC)  # rooms set up "long ago": their windows are due
PILE = ["baliset", "karama-2", "shield-1", "maula-pistol", "lasgun"]


def semuta_window(app) -> str:
    """A room whose open Semuta window passed its deadline long ago."""
    raw = layout(response_seconds=1)
    raw["seats"][1]["hand"] = ["karama-1", "semuta-drug"]
    room: str = app.create_room(raw)["room"]
    assert app.execute(room, "harkonnen", {"type": "discard", "card": "chaumas"})["ok"]
    assert app.public_view(room)["response"] is not None
    return room


def autopilot_search(app) -> str:
    """A room where Richese's autopilot must make its search's one selection."""
    room: str = app.create_room(layout(discard=list(PILE)))["room"]
    for command in ({"type": "set_autopilot", "enabled": True, "profile": "medium"},
                    {"type": "begin_search", "card": BOX}):
        assert app.execute(room, "richese", command)["ok"]
    return room


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k != "DUNE_LEDGER_ADMIN_TOKEN"}
    return {**out, "DUNE_LEDGER_AUTOPILOT_PACE": "0", "PYTHONPATH": str(ROOT)}


@contextmanager
def processes(*argvs: list[str]) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs = [subprocess.Popen([sys.executable, "-m", "dune_ledger", *argv], env=env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for argv in argvs]
    try:
        yield procs
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            _, err = p.communicate(timeout=HANG)
            assert b"Traceback" not in err, err.decode()


def serving(url: str, port: int, *flags: str) -> list[str]:
    return ["--db", url, "serve", "--host", "127.0.0.1", "--port", str(port), *flags]


def up(port: int) -> None:
    answering(f"http://127.0.0.1:{port}")


def stored_types(app, room: str) -> Counter[str]:
    return Counter(r.type for r in app.records(app.load(room).id))


def test_serve_alone_closes_a_due_window_and_no_worker_leaves_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'rooms.db'}"
    with opened(url) as app:
        app.clock = lambda: T0
        room = semuta_window(app)
    # --no-worker: the window stays open however long it waits (a worker's job).
    port = free_port()
    with processes(serving(url, port, "--no-worker")):
        up(port)
        time.sleep(2.0)  # four of a worker's ticks
        with opened(url) as app:
            assert app.public_view(room)["response"] is not None
    # serve alone: it closes the window itself, through one stored event.
    port = free_port()
    with processes(serving(url, port)), opened(url) as app:
        up(port)
        until(lambda: app.public_view(room)["response"] is None, "serve closed the window")
        assert stored_types(app, room)["ResponseDeadlinePassed"] == 1
        log = [entry["type"] for entry in app.public_log(room)]
        assert "ResponseDeadlinePassed" in log


def test_two_serves_and_a_worker_on_postgresql_close_once_and_act_once(pg_url: str) -> None:
    with opened(pg_url) as app:
        app.clock = lambda: T0
        windows = [semuta_window(app) for _ in range(4)]
        searches = [autopilot_search(app) for _ in range(3)]
    ports = [free_port(), free_port()]
    worker = ["--db", pg_url, "worker", "--interval", "0.1"]
    with processes(serving(pg_url, ports[0]), serving(pg_url, ports[1]), worker), \
            opened(pg_url) as app:
        for port in ports:
            up(port)

        def done() -> bool:
            return (all(app.public_view(r)["response"] is None for r in windows)
                    and all(app.load(r).state.search is None for r in searches))

        until(done, "every window closed and every autopilot selected")
        time.sleep(1.0)  # the slower processes' next ticks, which must find nothing to do
        for room in windows:
            counts = stored_types(app, room)
            assert counts["ResponseDeadlinePassed"] == 1, counts
            assert counts["SemutaWindowClosed"] == 1, counts
        for room in searches:
            counts = stored_types(app, room)
            assert counts["CardRetrieved"] == 1 and counts["BoxDiscarded"] == 1, counts
        for room in windows + searches:
            report = audit_room(app, room)
            assert all(report["checks"][name]["ok"] for name in report["checks"]), report
