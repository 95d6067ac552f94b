"""Two `dune-ledger serve` processes on one PostgreSQL: the store decides between them."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support import ADMIN, HANG, answering, auth, free_port, layout


@pytest.fixture
def servers(pg_url: str) -> Iterator[list[str]]:
    env = {**os.environ, "DUNE_LEDGER_ADMIN_TOKEN": ADMIN}
    ports = [free_port(), free_port()]
    procs = [subprocess.Popen(
        [sys.executable, "-m", "dune_ledger", "--db", pg_url, "serve",
         "--host", "127.0.0.1", "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for port in ports]
    bases = [f"http://127.0.0.1:{port}" for port in ports]
    try:
        for base, proc in zip(bases, procs, strict=True):
            answering(base, proc)
        yield bases
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=HANG)


def together(calls: list[Any]) -> list[httpx.Response]:
    barrier = threading.Barrier(len(calls))
    out: list[httpx.Response | None] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        out[i] = calls[i]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert all(r is not None for r in out)
    return out  # type: ignore[return-value]


def test_two_servers_racing_one_begin_charge_one_fee(servers: list[str]) -> None:
    a, b = servers
    created = httpx.post(f"{a}/rooms", json=layout(), headers=auth(ADMIN), timeout=30).json()
    room, token = created["room"], created["seats"]["richese"]
    begin = {"type": "begin_search", "card": "nullentropy-box"}
    responses = together([
        lambda base=base, i=i: httpx.post(f"{base}/rooms/{room}/commands", headers=auth(token),
                                          json={**begin, "command_id": f"b{i}"})
        for i, base in enumerate([a, b, a, b])])

    assert sorted(r.status_code for r in responses) == [200, 422, 422, 422]
    assert {r.json()["error"]["code"] for r in responses if r.status_code == 422} == {"locked"}
    # Each server reads what the other wrote.
    for base in (a, b):
        view = httpx.get(f"{base}/rooms/{room}/view", headers=auth(token)).json()
        assert view["me"]["spice"] == 8 and view["nullentropy"]["search"] is not None
        log = httpx.get(f"{base}/rooms/{room}/log", headers=auth(token)).json()
        assert [e["type"] for e in log].count("FeePaid") == 1
    audit = httpx.get(f"{b}/rooms/{room}/audit", headers=auth(ADMIN)).json()
    assert audit["ok"], audit["checks"]


def test_one_command_id_through_two_servers_applies_once(servers: list[str]) -> None:
    a, b = servers
    created = httpx.post(f"{b}/rooms", json=layout(), headers=auth(ADMIN), timeout=30).json()
    room, token = created["room"], created["seats"]["emperor"]
    draw = {"type": "draw", "command_id": "one-draw"}
    responses = together([
        lambda base=base: httpx.post(f"{base}/rooms/{room}/commands", headers=auth(token),
                                     json=draw) for base in (a, b, a, b)])

    assert [r.status_code for r in responses] == [200] * 4
    assert len({r.text for r in responses}) == 1
    view = httpx.get(f"{a}/rooms/{room}/view", headers=auth(token)).json()
    assert view["version"] == 2 and len(view["me"]["hand"]) == 2
