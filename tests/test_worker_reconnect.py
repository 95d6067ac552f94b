"""The worker outlives its store going away: PostgreSQL cuts every connection
(pg_terminate_backend), the worker says so in its log, opens the store again
with backoff, and goes on following the log."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import orjson
import psycopg
import pytest

from dune_ledger.infrastructure.storage import open_rooms
from tests.support import HANG, database, layout, until


@pytest.fixture
def own_pg() -> Iterator[str]:
    with database("dl_worker") as url:
        yield url


class Lines:
    """A process's stderr, read as it comes, one JSON log line at a time."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[dict[str, object]] = []
        self.raw: list[str] = []
        self.thread = threading.Thread(target=self.read, args=(proc,), daemon=True)
        self.thread.start()

    def read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            self.raw.append(line)
            if line.startswith("{"):
                self.lines.append(orjson.loads(line))

    def wait_for(self, message: str, count: int = 1) -> None:
        until(lambda: sum(message in str(line["message"]) for line in self.lines) >= count,
              lambda: f"{message!r} in the log: {''.join(self.raw)}")


def listening(admin_url: str, dbname: str) -> bool:
    """Whether the worker's follower has sent its LISTEN: it logs that it follows the
    log before it starts the follower, and connections cut before the LISTEN, where
    the pool replaces them unseen, leave nothing to notice."""
    with psycopg.connect(admin_url, autocommit=True) as admin:
        row = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
                            "AND query LIKE 'LISTEN %%'", (dbname,)).fetchone()
    return row is not None and row[0] > 0


def applied_up_to_head(admin_url: str, dbname: str) -> bool:
    with psycopg.connect(admin_url.rsplit("/", 1)[0] + f"/{dbname}") as c:
        head = c.execute("SELECT max(notification_id) FROM duneledger_events"
                         ).fetchone()
        low = c.execute("SELECT min(position) FROM dl_projection_tracking").fetchone()
    return head is not None and low is not None and low[0] is not None and low[0] >= head[0]


def test_the_worker_opens_the_store_again_after_its_connections_are_cut(
        own_pg: str, pg_admin_url: str, tmp_path: Path):
    env = {**os.environ, "DUNE_LEDGER_LOG_FORMAT": "json"}
    proc = subprocess.Popen([sys.executable, "-m", "dune_ledger", "--db", own_pg,
                             "worker", "--interval", "0.1"], stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path, env=env)
    try:
        lines = Lines(proc)
        lines.wait_for("following the event log")
        dbname = own_pg.rsplit("/", 1)[1]
        until(lambda: listening(pg_admin_url, dbname), "the worker's LISTEN")
        with psycopg.connect(pg_admin_url, autocommit=True) as admin:
            cut = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()", (dbname,)).fetchone()
        assert cut is not None and cut[0] >= 1
        lines.wait_for("the store went away")
        lines.wait_for("following the event log", count=2)
        gone = next(line for line in lines.lines if "went away" in str(line["message"]))
        assert gone["level"] == "warning" and gone["logger"] == "dune_ledger.worker"

        # Still following: commands written now (and never read) reach the read models.
        with open_rooms(own_pg) as app:
            room = app.create_room(layout())["room"]
            for _ in range(3):
                assert app.execute(room, "emperor", {"type": "draw"})["ok"]
        until(lambda: applied_up_to_head(pg_admin_url, dbname),
              lambda: f"the read models to catch up: {''.join(lines.raw)}", poll=0.1)
        assert proc.poll() is None  # it never died
    finally:
        proc.terminate()
        proc.wait(timeout=HANG)
    assert proc.returncode == 0
    assert "Traceback" not in "".join(lines.raw)
