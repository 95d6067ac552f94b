"""A process SIGKILLed at chosen points of a save leaves the whole command or nothing.

An append is one autocommitted statement (infrastructure/postgres.py), so the
kill points are: (a) while the statement is in flight, waiting on a lock of
the events table another session holds (appends take none of their own); the
server then either runs it to the end (the orphaned statement completes: the
whole command) or ends it (here:
`pg_terminate_backend`, as an operator or a server restart would: nothing);
and (b) right after the commit, before answering. A fresh process then finds
the room either as it was or with the whole command; the open search and the
suspended response window (with its passes) are where they were, the next
command goes through at once (the dead writer's lock is gone), and the
audit is clean.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from typing import Any

import psycopg
import pytest
from psycopg.sql import SQL, Identifier

from dune_ledger.application.audit import audit_room
from dune_ledger.infrastructure.storage import open_rooms
from tests.rules_support import BOX
from tests.rules_support import ambassador_layout as layout
from tests.rules_support import ambassador_seats as seats
from tests.support import HANG, until

CTX = mp.get_context("spawn")
IN_FLIGHT = ("in_flight_completed", "in_flight_terminated")


def doomed(url: str, room: str, seat: str, command: dict[str, Any], point: str,
           ready: Any, go: Any) -> None:
    from dune_ledger.application.rooms import RoomsApp

    if point == "committed":
        save = RoomsApp.save

        def save_then_die(self: Any, *args: Any, **kw: Any) -> Any:
            save(self, *args, **kw)
            os.kill(os.getpid(), signal.SIGKILL)

        RoomsApp.save = save_then_die  # type: ignore[method-assign]
    app = open_rooms(url)
    app.load(room)  # tables and connections ready before the parent takes its lock
    ready.set()
    go.wait(HANG)
    app.execute(room, seat, command)
    if point == "committed":
        raise AssertionError("the process should have been killed")
    os._exit(0)  # the parent kills it while its append waits; getting here is a failure


def waiting_append(admin: psycopg.Connection[Any], table: str) -> int | None:
    """The backend of an append that waits for a lock."""
    row = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND query LIKE %s", (f'INSERT INTO %"{table}" (notification_id%',)).fetchone()
    return None if row is None else int(row[0])


def kill_during(url: str, room: str, seat: str, command: dict[str, Any], point: str) -> None:
    ready, go = CTX.Event(), CTX.Event()
    proc = CTX.Process(target=doomed, args=(url, room, seat, command, point, ready, go))
    proc.start()
    until(lambda: ready.is_set() or not proc.is_alive(), "the process to open the store")
    assert ready.is_set(), f"the process exited with {proc.exitcode}"
    if point not in IN_FLIGHT:
        go.set()
        proc.join(timeout=HANG)
        assert proc.exitcode == -signal.SIGKILL
        return
    probe = open_rooms(url)
    schema, table = probe.recorder.datastore.schema, probe.recorder.events_table_name
    probe.close()
    with psycopg.connect(url, autocommit=True) as admin, psycopg.connect(url) as holder:
        holder.execute(SQL("LOCK TABLE {0}.{1} IN EXCLUSIVE MODE").format(
            Identifier(schema), Identifier(table)))
        go.set()
        until(lambda: waiting_append(admin, table) is not None,
              "the append to reach the server", poll=0.02)
        backend = waiting_append(admin, table)
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(timeout=HANG)
        assert proc.exitcode == -signal.SIGKILL
        if point == "in_flight_terminated":
            admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
            while waiting_append(admin, table) is not None:
                time.sleep(0.02)
        holder.rollback()  # the lock is released: an orphaned append runs to the end
        until(lambda: not admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                                        (backend,)).fetchone()[0],  # type: ignore[index]
              "the orphaned append to finish", poll=0.02)


def ok(result: dict[str, Any]) -> dict[str, Any]:
    assert result["ok"], result
    return result


def window_with_a_search(app: Any) -> tuple[str, str, str]:
    """Ecaz's income window with Atreides' pass, suspended by an open Box search."""
    hands = seats(atreides=["karama-2"], bene_gesserit=["kulon"],
                  richese={"spice": 10, "hand": [BOX]}, emperor={"spice": 10, "hand": []})
    room = app.create_room(layout(seats=hands, discard=["richese-karama", "shield-1"]))["room"]
    entered = ok(app.execute(room, "atreides", {"type": "enter_territory",
                                                "territory": "arrakeen", "via": "worm"}))
    offered = next(e for e in entered["events"] if e["type"] == "AmbassadorOffered")["event"]
    ok(app.execute(room, "ecaz", {"type": "ambassador_decide", "event": offered,
                                  "trigger": True, "beneficiary": "ecaz"}))
    window = app.load(room).state.control.response.event
    ok(app.execute(room, "atreides", {"type": "respond", "event": window, "action": "pass"}))
    opened = ok(app.execute(room, "richese", {"type": "begin_search", "card": BOX}))
    search = next(e for e in opened["events"] if e["type"] == "SearchOpened")["search"]
    return room, window, search


@pytest.mark.parametrize("point", [*IN_FLIGHT, "committed"])
def test_a_select_killed_mid_save_is_all_or_nothing(pg_url: str, point: str) -> None:
    app = open_rooms(pg_url)
    try:
        room, window, search = window_with_a_search(app)
        before = app.load(room)
        select = {"type": "select_card", "search": search, "card": "richese-karama",
                  "command_id": "sel-1"}

        kill_during(pg_url, room, "richese", select, point)
    finally:
        app.close()

    restarted = open_rooms(pg_url)
    try:
        after = restarted.load(room)
        if point == "in_flight_terminated":
            assert after.version == before.version
            assert after.state.model_dump() == before.state.model_dump()
            assert after.state.search is not None and after.state.search.event == search
            assert after.state.control.response is None  # still suspended by the search
        else:
            types = [r.type for r in restarted.records(after.id, gt=before.version)]
            assert types[:4] == ["CardRetrieved", "PileShuffled", "BoxDiscarded",
                                 "SearchClosed"]
            assert after.state.search is None
        # The client repeats its command: applied exactly once either way.
        ok(restarted.execute(room, "richese", select))
        state = restarted.load(room).state
        assert state.search is None and "richese-karama" in state.seat("richese").hand
        assert state.control.response is not None
        assert state.control.response.event == window
        assert state.control.response.passes == ["atreides"]
        assert [r.type for r in restarted.records(after.id)].count("CardRetrieved") == 1
        assert audit_room(restarted, room)["ok"]
    finally:
        restarted.close()


def test_a_pass_killed_in_flight_leaves_the_window_and_its_passes(pg_url: str) -> None:
    app = open_rooms(pg_url)
    try:
        room, window, search = window_with_a_search(app)
        ok(app.execute(room, "richese", {"type": "select_card", "search": search,
                                         "card": "shield-1"}))
        before = app.load(room)
        assert before.state.control.response is not None
    finally:
        app.close()
    kill_during(pg_url, room, "bene_gesserit",
                {"type": "respond", "event": window, "action": "pass"}, "in_flight_terminated")
    restarted = open_rooms(pg_url)
    try:
        after = restarted.load(room)
        assert after.version == before.version
        assert after.state.control.response == before.state.control.response
        assert after.state.control.response.passes == ["atreides"]
        ok(restarted.execute(room, "bene_gesserit", {"type": "respond", "event": window,
                                                     "action": "pass"}))
        assert audit_room(restarted, room)["ok"]
    finally:
        restarted.close()
