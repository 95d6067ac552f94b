"""Failover drill: the PostgreSQL primary dies under load, a standby takes over, again and again.

    .venv/bin/python -m scripts.failover_drill --failovers 5

Builds a pg_auto_failover cluster on loopback (scripts/pgaf_cluster.py: a
monitor, a primary and two standbys, `number_sync_standbys` 1), and starts
`--servers` `dune-ledger serve` processes and one `dune-ledger worker` on its
multi-host URL. Clients, one per seat, send commands with command ids over
HTTP to any server, and re-send a command with the same id until it is
answered (a 503 or a dropped connection is no answer); every acknowledged
one is recorded. A stream of each room is open on every server. Then, each
failover: kill -9 the primary (its postgres and the pg_autoctl that would
restart it), wait for the monitor to promote a standby, go on writing, bring
the old primary back (it rejoins as a standby), and check that every stream
reaches the room's acknowledged version.

After the last one, read on the store itself: every acknowledged command is
stored exactly once at the acknowledged version (`lost`, `doubled`), every
room audits clean (which compares the read models with a rebuild:
`read_model_mismatches` counts those), and every stream ended at its room's
last version. It prints one JSON object and exits 0 only when `lost`,
`doubled`, `audit_failures` and `stream_gaps` are all 0.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import orjson

from scripts.kill_drill import LAYOUT, deal
from scripts.pgaf_cluster import Cluster, ensure_packages, free_port

ROOT = Path(__file__).resolve().parent.parent

OPERATOR = "failover-drill-operator"
RESEND_PAUSE = 0.2  # seconds before a command is sent again after a 503 or a lost answer


class Drill:
    """What the clients and streams record, shared between their threads."""

    def __init__(self, servers: list[str]) -> None:
        self.servers = servers
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.acks: list[dict[str, Any]] = []  # ok answers, in the order they came
        self.rejections: Counter[str] = Counter()
        self.retried = 0  # commands sent again with the same id
        self.answered_503: list[float] = []  # seconds each 503 took to come
        self.outage = threading.Event()  # set while no primary takes writes
        # GET view answers while no primary takes writes: "200" (the server's last
        # view, marked stale), "503"
        self.views_in_outage: Counter[str] = Counter()

    def ack(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self.acks.append(entry)

    def acked_versions(self) -> dict[str, int]:
        with self.lock:
            out: dict[str, int] = {}
            for a in self.acks:
                out[a["room"]] = max(out.get(a["room"], 0), a["version"])
            return out


def client(drill: Drill, n: int, room: str, seat: str, token: str) -> None:
    """One seat's player: read the view, send a draw or a discard, until told to stop."""
    rng = random.Random(n)
    headers = {"Authorization": f"Bearer {token}"}
    http = httpx.Client(timeout=10)
    i = 0
    while not drill.stopping.is_set():
        base = rng.choice(drill.servers)
        try:
            r = http.get(f"{base}/rooms/{room}/view", headers=headers)
        except httpx.TransportError:
            time.sleep(RESEND_PAUSE)
            continue
        if drill.outage.is_set():
            drill.views_in_outage[str(r.status_code)] += 1
        if r.status_code != 200 or "warning" in r.headers:
            # A 503, or the server's last view while the store is down: a player
            # decides on the room as it is, so wait for it.
            time.sleep(RESEND_PAUSE)
            continue
        view = r.json()
        kinds = {a["type"]: a for a in view["actions"]}
        hand = [c["id"] for c in view["me"]["hand"]]
        if "draw" in kinds and (len(hand) < 2 or "discard" not in kinds):
            command: dict[str, Any] = {"type": "draw"}
        elif hand:
            command = {"type": "discard", "card": rng.choice(hand)}
        else:
            time.sleep(0.1)
            continue
        i += 1
        command["command_id"] = f"c{n}-{i}"
        send(drill, http, rng, room, seat, headers, command)
    http.close()


def send(drill: Drill, http: httpx.Client, rng: random.Random, room: str, seat: str,
         headers: dict[str, str], command: dict[str, Any]) -> None:
    """Send until answered: only an answer of the store counts (ok, or a rule's refusal)."""
    sent = 0
    while True:
        if sent:
            with drill.lock:
                drill.retried += 1
            time.sleep(RESEND_PAUSE)
        sent += 1
        base = rng.choice(drill.servers)
        started = time.monotonic()
        try:
            r = http.post(f"{base}/rooms/{room}/commands", json=command, headers=headers)
        except httpx.TransportError:
            continue
        if r.status_code == 503:
            with drill.lock:
                drill.answered_503.append(time.monotonic() - started)
            continue
        body = r.json()
        if body["ok"]:
            drill.ack({"room": room, "seat": seat, "id": command["command_id"],
                       "version": body["version"], "at": time.monotonic(), "sends": sent})
        else:
            with drill.lock:
                drill.rejections[body["error"]["code"]] += 1
        return


class Stream(threading.Thread):
    """One seat's view stream on one server, resumed with Last-Event-ID when it drops."""

    def __init__(self, drill: Drill, base: str, room: str, token: str) -> None:
        super().__init__(daemon=True)  # ends with its server
        self.drill, self.base, self.room, self.token = drill, base, room, token
        self.last = 0
        self.backwards = 0  # a version not above the one before: a stream that went back
        self.reconnects = 0

    def run(self) -> None:
        http = httpx.Client(timeout=httpx.Timeout(5, read=30))
        while True:
            headers = {"Authorization": f"Bearer {self.token}",
                       "Last-Event-ID": str(self.last)}
            try:
                with http.stream("GET", f"{self.base}/rooms/{self.room}/stream",
                                 headers=headers) as r:
                    if r.status_code == 200:
                        for line in r.iter_lines():
                            if line.startswith("id:"):
                                version = int(line[3:].strip())
                                if version <= self.last:
                                    self.backwards += 1
                                self.last = max(self.last, version)
            except (httpx.HTTPError, ValueError):
                pass
            if self.drill.stopping.is_set() and self.drill.servers == []:
                return
            self.reconnects += 1
            time.sleep(RESEND_PAUSE)


def wait_until(ready: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return True
        time.sleep(0.1)
    return bool(ready())


def lagging(streams: list[Stream], versions: dict[str, int]) -> list[Stream]:
    """The streams that do not reach their room's acknowledged version within 30 s."""
    return [s for s in streams
            if not wait_until(lambda s=s: s.last >= versions.get(s.room, 0), 30)]


def start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "dune_ledger", *args], cwd=ROOT,
                                env=env, stdout=out, stderr=subprocess.STDOUT)


def run_drill(cluster: Cluster, work: Path, *, failovers: int, servers: int = 2,
              rooms: int = 3, settle: float = 3.0) -> dict[str, Any]:
    """The drill on a running cluster; the report (see the module's docstring)."""
    from dune_ledger.infrastructure.storage import open_rooms

    url = cluster.url()
    key_file = str(work / "drill.key")
    env = {**os.environ, "DUNE_LEDGER_DB": url, "DUNE_LEDGER_KEY_FILE": key_file,
           "DUNE_LEDGER_ADMIN_TOKEN": OPERATOR, "PYTHONUNBUFFERED": "1"}
    app = open_rooms(url, key_file=key_file)  # the tables, the key file, the rooms
    try:
        made = [app.create_room(LAYOUT) for _ in range(rooms)]
        for created in made:
            deal(app, created["room"])
    finally:
        app.close()
    ports = [free_port() for _ in range(servers)]
    procs = [start(["serve", "--port", str(p)], env, work / f"serve-{p}.log") for p in ports]
    procs.append(start(["worker"], env, work / "worker.log"))
    bases = [f"http://127.0.0.1:{p}" for p in ports]
    drill = Drill(bases)
    report: dict[str, Any] = {}
    per_failover: list[dict[str, Any]] = []
    streams: list[Stream] = []
    try:
        for base in bases:
            if not wait_until(lambda base=base: healthy(base), 60):
                raise RuntimeError(f"{base} did not start: see {work}")
        players = [(made[r]["room"], seat, token) for r in range(rooms)
                   for seat, token in made[r]["seats"].items()]
        threads = [threading.Thread(target=client, args=(drill, n, room, seat, token))
                   for n, (room, seat, token) in enumerate(players)]
        for t in threads:
            t.start()
        for base in bases:
            for r in range(rooms):
                seat, token = next(iter(made[r]["seats"].items()))
                streams.append(Stream(drill, base, made[r]["room"], token))
        for s in streams:
            s.start()
        time.sleep(settle)
        stream_gaps = 0
        for _ in range(failovers):
            cluster.wait_healthy()
            old = cluster.primary()
            assert old is not None
            acked_before = len(drill.acks)
            killed = time.monotonic()
            drill.outage.set()
            cluster.kill(old)
            if not wait_until(lambda old=old: cluster.primary() not in (None, old), 120):
                raise RuntimeError(f"no standby was promoted: {cluster.nodes()}")
            promoted = time.monotonic()
            wait_until(lambda since=promoted, first=acked_before: any(
                a["at"] > since for a in drill.acks[first:]), 60)
            drill.outage.clear()
            writing = time.monotonic()
            cluster.restart(old)
            cluster.wait_healthy()
            rejoined = time.monotonic()
            time.sleep(settle)
            # Every stream reaches what its room had acknowledged by now.
            behind = lagging(streams, drill.acked_versions())
            stream_gaps += len(behind)
            times = [a["at"] for a in drill.acks if killed - 2 <= a["at"] <= writing + 1]
            per_failover.append({
                "killed": old, "promoted": cluster.primary(),
                "promotion_seconds": round(promoted - killed, 2),
                "write_gap_seconds": round(max(
                    (b - a for a, b in zip(times, times[1:], strict=False)),
                    default=writing - killed), 2),
                "rejoin_seconds": round(rejoined - writing, 2),
                "streams_behind": len(behind)})
        drill.stopping.set()
        for t in threads:
            t.join(timeout=120)
        ended_behind = lagging(streams, drill.acked_versions())
        stream_gaps += len(ended_behind) + sum(s.backwards for s in streams)
        report = verify(url, key_file, [m["room"] for m in made], drill)
        gaps = [f["write_gap_seconds"] for f in per_failover]
        report.update({
            "failovers": len(per_failover),
            "stream_gaps": stream_gaps,
            "streams": len(streams),
            "stream_reconnects": sum(s.reconnects for s in streams),
            "write_gap_seconds": spread(gaps),
            "promotion_seconds": spread([f["promotion_seconds"] for f in per_failover]),
            "retried": drill.retried,
            "answered_503": len(drill.answered_503),
            "seconds_to_503": spread([round(t, 2) for t in drill.answered_503]),
            "rejections": dict(drill.rejections),
            "views_during_outage": dict(drill.views_in_outage),
            "servers": servers, "rooms": rooms, "clients": len(players),
            "per_failover": per_failover,
        })
    finally:
        drill.stopping.set()
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        drill.servers = []
    return report


def spread(values: list[float]) -> dict[str, float | None]:
    return {"median": round(statistics.median(values), 2) if values else None,
            "max": max(values, default=None)}


def healthy(base: str) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(f"{base}/readyz", timeout=2).status_code == 200
    return False


def verify(url: str, key_file: str, rooms: list[str], drill: Drill) -> dict[str, Any]:
    """What the store holds, against what the clients were told."""
    from dune_ledger.application.audit import audit_room
    from dune_ledger.infrastructure.storage import open_rooms

    app = open_rooms(url, key_file=key_file)
    try:
        assert app.read_models is not None
        app.read_models.catch_up()
        appends: dict[tuple[str, str, str], set[tuple[int, int]]] = defaultdict(set)
        for room in rooms:
            records = app.records(UUID(room))
            last: dict[int, int] = {}
            for rec in records:
                last[rec.append] = rec.originator_version
            for rec in records:
                if rec.command_id is not None and rec.seat is not None:
                    appends[(room, rec.seat, rec.command_id)].add((rec.append, last[rec.append]))
        acked = {(a["room"], a["seat"], a["id"]): a["version"] for a in drill.acks}
        lost = [k[2] for k, version in acked.items()
                if {end for _, end in appends.get(k, set())} != {version}]
        doubled = [k[2] for k, spans in appends.items() if len(spans) > 1]
        audits = [audit_room(app, room) for room in rooms]
    finally:
        app.close()
    return {
        "acknowledged": len(acked),
        "lost": len(lost), "lost_ids": lost[:20],
        "doubled": len(doubled), "doubled_ids": doubled[:20],
        "stored_without_ack": len(set(appends) - set(acked)),
        "audit_failures": sum(1 for a in audits if not a["ok"]),
        "read_model_mismatches": sum(
            1 for a in audits if not a["checks"].get("read_models_match", {}).get("ok", True)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--failovers", type=int, default=5)
    parser.add_argument("--servers", type=int, default=2, help="serve processes")
    parser.add_argument("--rooms", type=int, default=3, help="rooms (a client per seat)")
    parser.add_argument("--settle", type=float, default=3.0,
                        help="seconds of writes before each failover and after each rejoin")
    parser.add_argument("--keep", action="store_true", help="keep the logs' directory")
    args = parser.parse_args()
    if args.failovers < 1:
        parser.error("--failovers must be at least 1")
    if not ensure_packages():
        print(orjson.dumps({"error": "pg_auto_failover is not installed and apt-get could "
                            "not install it (as root): pg-auto-failover-cli "
                            "postgresql-15-auto-failover"}).decode())
        return 2
    work = Path(tempfile.mkdtemp(prefix="dl_failover_"))
    started = time.monotonic()
    try:
        with Cluster() as cluster:
            report = run_drill(cluster, work, failovers=args.failovers,
                               servers=args.servers, rooms=args.rooms, settle=args.settle)
    except (RuntimeError, TimeoutError) as e:  # the cluster or a server did not come up
        print(orjson.dumps({"error": str(e)}).decode())
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    report["seconds"] = round(time.monotonic() - started, 1)
    report["logs"] = str(work) if args.keep else None
    print(orjson.dumps(report).decode())
    failed = any(report[k] for k in ("lost", "doubled", "audit_failures", "stream_gaps"))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
