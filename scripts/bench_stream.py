"""The view stream under load: 1,000 open streams on one `dune-ledger serve` process.

    .venv/bin/python -m scripts.bench_stream [--db sqlite|PG_ADMIN_URL] [--streams 1000]
        [--rooms 10] [--commands 40]

Starts `dune-ledger serve` on 127.0.0.1 (a fresh SQLite file, or a throwaway
PostgreSQL database), creates the rooms, and opens the streams from this process
(plain asyncio sockets, spread evenly over the rooms and their seats). Then:

1. memory: the server's resident set (VmRSS) before the streams and once all
   of them have received their first view and sit idle;
2. fan-out: one command at a time in a room (draws and discards), and for each
   stream of that room the time from sending the command until its `view` event
   with the new version arrived; the median and p99 over every (command, stream).

Loopback only; every wait is bounded. Figures: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from scripts.throwaway import throwaway_database

ROOT = Path(__file__).resolve().parent.parent

ADMIN = "bench-operator"
LAYOUT: dict[str, Any] = {
    "expansions": ["choam_richese"], "turn": 2, "phase": 6, "seed": 5,
    "seats": [
        {"faction": "richese", "spice": 10, "hand": ["nullentropy-box"]},
        {"faction": "emperor", "spice": 10, "hand": []},
        {"faction": "harkonnen", "spice": 10, "hand": []},
    ],
    "discard": ["shield-1", "baliset"],
}
WAIT = 30.0  # seconds any one wait may take before the run fails


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


@contextlib.contextmanager
def serving(url: str, port: int) -> Iterator[subprocess.Popen[bytes]]:
    env = {**os.environ, "DUNE_LEDGER_ADMIN_TOKEN": ADMIN}
    proc = subprocess.Popen(
        [sys.executable, "-m", "dune_ledger", "--db", url, "serve",
         "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    break
            time.sleep(0.05)
        else:
            raise RuntimeError("the server did not start")
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


class Stream:
    """One EventSource-like reader: the arrival time of each version it was sent."""

    def __init__(self, port: int, room: str, token: str) -> None:
        self.port, self.room, self.token = port, room, token
        self.arrived: dict[int, float] = {}
        self.got = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        writer.write(f"GET /rooms/{self.room}/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     f"Authorization: Bearer {self.token}\r\n"
                     "Accept: text/event-stream\r\n\r\n".encode())
        await writer.drain()
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                if line.startswith(b"id:"):
                    self.arrived[int(line[3:].strip())] = time.perf_counter()
                    self.got.set()
        finally:
            writer.close()


async def bench(port: int, streams: int, rooms: int, commands: int, pid: int
                ) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=WAIT) as http:
        made = []
        for _ in range(rooms):
            r = await http.post("/rooms", json=LAYOUT, headers={"Authorization": f"Bearer {ADMIN}"})
            r.raise_for_status()
            made.append(r.json())
        before = rss_mib(pid)
        readers: list[Stream] = []
        for i in range(streams):
            room = made[i % rooms]
            seats = sorted(room["seats"])
            readers.append(Stream(port, room["room"], room["seats"][seats[(i // rooms) % 3]]))
        for reader in readers:
            reader.task = asyncio.create_task(reader.run())
        await asyncio.wait_for(asyncio.gather(*(r.got.wait() for r in readers)), WAIT)
        await asyncio.sleep(2)  # idle: let the server settle
        idle = rss_mib(pid)
        latencies: list[float] = []
        for n in range(commands):
            room = made[n % rooms]
            of_room = [r for r in readers if r.room == room["room"]]
            seat = ("emperor", "harkonnen")[(n // rooms) % 2]
            token = room["seats"][seat]
            view = (await http.get(f"/rooms/{room['room']}/view",
                                   headers={"Authorization": f"Bearer {token}"})).json()
            hand = [c["id"] for c in view["me"]["hand"]]
            cmd = {"type": "discard", "card": hand[0]} if hand else {"type": "draw"}
            sent = time.perf_counter()
            r = await http.post(f"/rooms/{room['room']}/commands", json=cmd,
                                headers={"Authorization": f"Bearer {token}"})
            result = r.json()
            assert result["ok"], result
            version = result["version"]
            deadline = time.monotonic() + WAIT
            while any(max(s.arrived, default=0) < version for s in of_room):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"a stream missed version {version}")
                await asyncio.sleep(0.002)
            latencies += [min(t for v, t in s.arrived.items() if v >= version) - sent
                          for s in of_room]
        for reader in readers:
            assert reader.task is not None
            reader.task.cancel()
        await asyncio.gather(*(r.task for r in readers if r.task), return_exceptions=True)
    latencies.sort()
    return {"rss_before_mib": before, "rss_idle_mib": idle,
            "median_ms": statistics.median(latencies) * 1e3,
            "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1e3,
            "deliveries": len(latencies)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="sqlite",
                        help="'sqlite' (a fresh file) or a PostgreSQL admin URL")
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--rooms", type=int, default=10)
    parser.add_argument("--commands", type=int, default=40)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4 * args.streams)), hard))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with contextlib.ExitStack() as stack:
        if args.db == "sqlite":
            url = f"sqlite:///{stack.enter_context(tempfile.TemporaryDirectory())}/stream.db"
        else:
            url = stack.enter_context(throwaway_database(args.db, "dl_bench"))
        proc = stack.enter_context(serving(url, port))
        out = asyncio.run(bench(port, args.streams, args.rooms, args.commands, proc.pid))
    store = "SQLite" if args.db == "sqlite" else "PostgreSQL"
    print(f"{store}: {args.streams} streams over {args.rooms} rooms, {args.commands} commands, "
          f"{out['deliveries']} deliveries")
    print(f"  command to every stream of its room: median {out['median_ms']:.1f} ms, "
          f"p99 {out['p99_ms']:.1f} ms")
    print(f"  server memory: {out['rss_before_mib']:.1f} MiB before the streams, "
          f"{out['rss_idle_mib']:.1f} MiB with them idle "
          f"(+{out['rss_idle_mib'] - out['rss_before_mib']:.1f} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
