"""Group commit: commands per second and latency of one `dune-ledger serve`, 32 clients.

    .venv/bin/python -m scripts.bench_group_commit  # PostgreSQL (group commit on, off), SQLite
    .venv/bin/python -m scripts.bench_group_commit --seconds 10 --rounds 2 --only postgresql

Starts `dune-ledger serve` on 127.0.0.1 (a throwaway PostgreSQL database, or a
fresh SQLite file), creates one room per client over HTTP, and lets each client
play its own room as fast as the server answers, on one kept-alive connection:
it reads its seat's view, draws until its hand is full, discards every card,
and again (the deck runs out and reshuffles). Only the commands count; their
latency is the client's, request to response. A view answered 503 (not
within 2 s) is read again and counted (`views_unavailable`).

Configurations, each `--rounds` times in turn, a new server each time:

- `grouped`: PostgreSQL with `DUNE_LEDGER_PG_GROUP_COMMIT=yes`;
- `alone`: PostgreSQL, one transaction a command (the default, and the
  engine before group commit: the baseline);
- `lone`: PostgreSQL, group commit on, one client: a lone command's latency;
- `sqlite` and `sqlite lone`: SQLite (one writer), 32 clients and one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from dune_ledger.infrastructure.demo import BOX_LAYOUT
from scripts import benchcommon

ROOT = Path(__file__).resolve().parent.parent
SEAT = "emperor"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serving(url: str, env: dict[str, str], key: Path) -> Iterator[int]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dune_ledger", "--db", url, "serve",
         "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT, env={**os.environ, "DUNE_LEDGER_KEY_FILE": str(key), **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("the server did not start")
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


class Client:
    """One kept-alive HTTP/1.1 connection."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader
        self.writer: asyncio.StreamWriter

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def call(self, method: str, path: str, token: str | None = None,
                   body: Any = None) -> tuple[int, Any]:
        data = b"" if body is None else orjson.dumps(body)
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(data)}\r\n"
        if token:
            head += f"Authorization: Bearer {token}\r\n"
        if data:
            head += "Content-Type: application/json\r\n"
        self.writer.write(head.encode() + b"\r\n" + data)
        status_line = await self.reader.readline()
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        payload = await self.reader.readexactly(length)
        return int(status_line.split()[1]), orjson.loads(payload) if payload else None

    def close(self) -> None:
        self.writer.close()


async def play(port: int, token: str, room: str, until: float,
               latencies: list[float], unavailable: list[int]) -> int:
    client = Client(port)
    await client.open()
    done = 0
    path = f"/rooms/{room}"
    while time.monotonic() < until:
        status, view = await client.call("GET", f"{path}/view", token)
        if status == 503:  # a read that did not answer in 2 s: counted, read again
            unavailable.append(1)
            await asyncio.sleep(0.05)
            continue
        if status != 200:
            raise RuntimeError(f"view: {status} {view}")
        me = view["me"]
        hand = [c["id"] for c in me["hand"]]
        commands = [{"type": "draw"}] * (me["hand_limit"] - len(hand)) or \
            [{"type": "discard", "card": card} for card in hand]
        for command in commands:
            start = time.perf_counter()
            status, result = await client.call("POST", f"{path}/commands", token, command)
            latencies.append(time.perf_counter() - start)
            if status != 200 or not result.get("ok"):
                raise RuntimeError(f"{command}: {status} {result}")
            done += 1
            if command["type"] == "draw" and time.monotonic() >= until:
                break
    client.close()
    return done


async def run_clients(port: int, clients: int, seconds: float) -> dict[str, Any]:
    setup = Client(port)
    await setup.open()
    rooms = []
    for i in range(clients):
        status, created = await setup.call("POST", "/rooms", None,
                                           {**BOX_LAYOUT, "seed": 100 + i})
        if status != 201:
            raise RuntimeError(f"create: {status} {created}")
        rooms.append((created["seats"][SEAT], created["room"]))
    setup.close()
    latencies: list[float] = []
    unavailable: list[int] = []
    start = time.monotonic()
    counts = await asyncio.gather(*(play(port, token, room, start + seconds, latencies,
                                         unavailable) for token, room in rooms))
    elapsed = time.monotonic() - start
    return {"clients": clients, "commands": sum(counts),
            "commands_per_s": round(sum(counts) / elapsed, 1),
            "median_ms": round(statistics.median(latencies) * 1000, 2),
            "p99_ms": round(benchcommon.percentile(latencies, 0.99) * 1000, 2),
            "views_unavailable": len(unavailable)}


def measure(storage: str, env: dict[str, str], clients: int, seconds: float,
            tmp: Path, name: str) -> dict[str, Any]:
    with benchcommon.database(storage, tmp, name) as url, \
            serving(url, env, tmp / "bench.key") as port:
        return asyncio.run(run_clients(port, clients, seconds))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--only", choices=["postgresql", "sqlite"])
    args = p.parse_args()
    configs: list[tuple[str, str, dict[str, str], int]] = []
    if args.only in (None, "postgresql"):
        if (why := benchcommon.pg_reachable()) is not None:
            raise SystemExit(f"PostgreSQL is not reachable: {why}")
        on = {"DUNE_LEDGER_PG_GROUP_COMMIT": "yes"}
        configs += [("grouped", "postgresql", on, args.clients),
                    ("alone", "postgresql", {}, args.clients),
                    ("lone", "postgresql", on, 1)]
    if args.only in (None, "sqlite"):
        configs += [("sqlite", "sqlite", {}, args.clients), ("sqlite lone", "sqlite", {}, 1)]
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, *_ in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name, storage, env, clients in configs:
                result = measure(storage, env, clients, args.seconds, Path(tmp),
                                 f"group{r}{name.replace(' ', '')}")
                print(f"{name} round {r + 1}: {result}", file=sys.stderr, flush=True)
                runs[name].append(result)
    medians = {name: {k: statistics.median(x[k] for x in rs) for k in
                      ("commands_per_s", "median_ms", "p99_ms")} for name, rs in runs.items()}
    report: dict[str, Any] = {"machine": benchcommon.machine(), "note": benchcommon.SHARED,
                              "runs": runs, "medians": medians}
    if "grouped" in medians:
        g, a, lone = medians["grouped"], medians["alone"], medians["lone"]
        report["ratios"] = {
            "grouped_over_alone_commands_per_s": round(g["commands_per_s"]
                                                       / a["commands_per_s"], 2),
            "grouped_median_over_lone_median": round(g["median_ms"] / lone["median_ms"], 2)}
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
