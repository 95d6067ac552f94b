"""High availability: the engine as a client of a PostgreSQL cluster that fails over.

The URL's multi-host form, libpq's connect timeout, and the pool's dropping of
connections whose server takes no writes run on the ordinary PostgreSQL; one
real failover (scripts/failover_drill.py on a pg_auto_failover cluster built by
scripts/pgaf_cluster.py) runs when its packages are installed (scripts/services
installs them).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import orjson
import psycopg
import pytest
from fastapi.testclient import TestClient

from dune_ledger.infrastructure.errors import UsageError
from dune_ledger.infrastructure.http import STALE, create_app
from dune_ledger.infrastructure.postgres import RoomsRecorder, libpq_run
from dune_ledger.infrastructure.storage import environment
from scripts.pgaf_cluster import PACKAGES, packages_missing
from scripts.throwaway import ADMIN_URL
from tests.support import database, layout, opened

ROOT = Path(__file__).resolve().parent.parent


def test_a_multi_host_url_names_every_host_for_libpq() -> None:
    env = environment("postgresql://u@10.0.0.1:5433,10.0.0.2,[::1]:5435/rooms"
                      "?target_session_attrs=read-write")
    assert (env["POSTGRES_HOST"], env["POSTGRES_PORT"]) == (
        "10.0.0.1,10.0.0.2,::1", "5433,5432,5435")
    assert env["DUNE_LEDGER_PG_LIBPQ"] == "target_session_attrs=read-write"
    with pytest.raises(UsageError, match="port 'x' is not a number"):
        environment("postgresql://u@10.0.0.1:x,10.0.0.2/rooms")
    with pytest.raises(UsageError, match="needs a host"):
        environment("postgresql://u@10.0.0.1,/rooms")


def test_libpq_gets_a_connect_timeout_unless_the_url_sets_one(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUNE_LEDGER_PG_CONNECT_TIMEOUT", "1")
    with opened(pg_url) as app:  # libpq takes 1 as 2: the pool's keyword says what it does
        assert app.recorder.datastore.pool.kwargs["connect_timeout"] == 2  # type: ignore[attr-defined]
    with opened(f"{pg_url}?connect_timeout=7") as app:
        assert app.recorder.datastore.pool.kwargs["connect_timeout"] == "7"  # type: ignore[attr-defined]


def test_the_pool_drops_a_connection_whose_server_takes_no_writes(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A server that turned standby tells its clients (default_transaction_read_only and
    # in_hot_standby are reported as they change): here a session says so of itself.
    monkeypatch.setenv("DUNE_LEDGER_PG_POOL_SIZE", "1")
    monkeypatch.setenv("DUNE_LEDGER_PG_MAX_OVERFLOW", "0")
    with opened(pg_url) as app:
        room = app.create_room(layout())["room"]
        pool = app.recorder.datastore.pool  # type: ignore[attr-defined]
        with pool.connection() as conn:
            conn.execute("SET default_transaction_read_only = on")
            read_only = conn
        with pool.connection() as conn:
            assert conn is not read_only and read_only.closed
            assert conn.execute("SHOW default_transaction_read_only").fetchone()[
                "default_transaction_read_only"] == "off"
        assert app.execute(room, "emperor", {"type": "draw", "command_id": "d1"})["ok"]


def test_a_write_refused_as_read_only_drops_its_connection_for_a_retry(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SET default_transaction_read_only = on")
        with pytest.raises(psycopg.OperationalError, match="takes no writes"):
            libpq_run(conn, b"probe", b"CREATE TABLE dl_read_only_probe (x int)", [], [],
                      prepare=False)
        assert conn.closed  # the pool discards it; the library retries on a fresh one


@pytest.mark.parametrize("command_id", [None, "d1"])
def test_an_append_whose_answer_was_lost_after_its_commit_lands_once(
        pg_url: str, monkeypatch: pytest.MonkeyPatch, command_id: str | None) -> None:
    # As when the primary dies between its commit and the answer: the store retries the
    # append on a fresh connection, and the retry finds the version taken by itself.
    real, lost = RoomsRecorder.append, []

    def commit_then_lose_the_answer(self: RoomsRecorder, conn: psycopg.Connection,  # type: ignore[type-arg]
                                    events: list) -> list[int]:  # type: ignore[type-arg]
        ids = real(self, conn, events)
        if not lost:
            lost.append(ids)
            raise psycopg.OperationalError("the connection is lost: server closed it")
        return ids

    with opened(pg_url) as app:
        room = app.create_room(layout())["room"]
        monkeypatch.setattr(RoomsRecorder, "append", commit_then_lose_the_answer)
        command = {"type": "draw", **({"command_id": command_id} if command_id else {})}
        result = app.execute(room, "emperor", command)
        monkeypatch.undo()
        assert lost and result["ok"] and result["version"] == 2
        records = app.records(app.load(room).id)
        assert [r.type for r in records].count("CardDrawn") == 1 and len(records) == 2


def test_while_the_store_is_down_a_seat_gets_its_last_view_and_commands_get_503(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUNE_LEDGER_PG_CONNECT_TIMEOUT", "1")
    with database("dl_ha") as url, opened(url) as app, \
            TestClient(create_app(app)) as client:
        made = app.create_room(layout())
        room, seats = made["room"], made["seats"]

        def get(seat: str) -> httpx.Response:
            return client.get(f"/rooms/{room}/view",
                              headers={"Authorization": f"Bearer {seats[seat]}"})
        seen = get("emperor")
        assert seen.status_code == 200 and "warning" not in seen.headers
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            # No server takes the connections any more, as while no primary is reachable.
            admin.execute(f'DROP DATABASE "{url.rsplit("/", 1)[1]}" WITH (FORCE)')
        command = client.post(f"/rooms/{room}/commands", json={"type": "draw"},
                              headers={"Authorization": f"Bearer {seats['emperor']}"})
        assert command.status_code == 503 and command.json()["error"]["code"] == "unavailable"
        stale = get("emperor")
        assert stale.status_code == 200 and stale.json() == seen.json()
        assert stale.headers["warning"] == STALE["Warning"]
        assert stale.headers["etag"] == seen.headers["etag"]
        # Only a seat's own last view: richese's token is known (the room's hashes were
        # read), but this process never answered it a view, so it waits for the store.
        assert get("richese").status_code == 503


@pytest.mark.skipif(bool(packages_missing()), reason=(
    f"pg_auto_failover is not installed ({', '.join(PACKAGES)}; scripts/services "
    "installs them)"))
@pytest.mark.skipif(os.geteuid() != 0, reason="the cluster runs as the postgres user: root "
                    "starts it")
def test_one_failover_loses_nothing_acknowledged_and_doubles_nothing(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "scripts.failover_drill", "--failovers", "1",
         "--rooms", "2", "--settle", "2"], capture_output=True, timeout=300, cwd=ROOT)
    report = orjson.loads(done.stdout.splitlines()[-1])
    assert done.returncode == 0, (report, done.stderr.decode()[-3000:])
    assert report["failovers"] == 1
    (failover,) = report["per_failover"]
    assert failover["promoted"] != failover["killed"]
    # Writes before and after it; players kept reading through it (the outage lasts seconds).
    assert report["acknowledged"] > 0 and sum(report["views_during_outage"].values()) > 0
    assert (report["lost"], report["doubled"], report["stored_without_ack"]) == (0, 0, 0)
    assert (report["audit_failures"], report["read_model_mismatches"]) == (0, 0)
    assert report["stream_gaps"] == 0 and report["streams"] == 4
