"""SIGKILL drill: worker processes run mixed commands on many rooms and are killed at random.

    .venv/bin/python -m scripts.kill_drill --db postgresql://postgres@127.0.0.1:5432/DB --seconds 20

Each worker writes an intent line to its journal before sending a command
(with a fresh `command_id`) and an ack line once the result came back. The
drill kills workers with SIGKILL at random moments and starts a new one in
the same slot, which first re-sends its predecessor's unacknowledged command
with the same `command_id`. A worker is killed only once it has had a command
accepted and acknowledged (waiting at most `--ack-timeout` seconds: a worker
that acknowledges nothing in that time is a finding), so that on a slow
machine the drill runs longer instead of killing workers that never got to
work. It goes on until `--kills` kills and `--seconds` have passed. At the
end every worker is killed, the drill recovers the last in-flight commands
itself, and then checks the store:

- no acknowledged command is lost (its events are stored, ending at the
  acknowledged version), and no rejected one left events;
- no command id was applied twice (all events of one id are one append);
- every room loads and passes the audit (replay equals the loaded state);
- every append is signed, and each signature verifies with the public key of the
  key file (checked here with `cryptography` directly, apart from the audit's own
  check), and the key file is mode 0600;
- every search left open by a killed worker is still open and its owner
  can complete it.

It prints a JSON report and exits 1 when a check fails. Workers are also
told to re-send some acknowledged commands on purpose: the repeat must
return the first result.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any
from uuid import UUID

import orjson

SEATS = [
    {"faction": "richese", "spice": 40, "hand": ["nullentropy-box", "crysknife"]},
    {"faction": "emperor", "spice": 40, "hand": ["karama-1"]},
    {"faction": "harkonnen", "spice": 40, "hand": ["shield-2", "chaumas"]},
    {"faction": "atreides", "spice": 40, "hand": []},
]
def deal(app: Any, room: str) -> None:
    """A committed room is dealt by the operator before play (RULES 9.4)."""
    dealt = app.execute(room, "operator", {"type": "deal"})
    if not dealt["ok"]:
        raise SystemExit(f"room {room} refused the deal: {dealt['error']}")


LAYOUT: dict[str, Any] = {
    "expansions": ["choam_richese"], "turn": 2, "phase": 6, "bank": 500, "seats": SEATS,
    "discard": ["shield-1", "maula-pistol", "baliset", "snooper-3"],
}


def journal_lines(path: Path) -> list[dict[str, Any]]:
    """Whole lines only: a worker killed mid-write leaves a torn last line."""
    if not path.exists():
        return []
    out = []
    for line in path.read_bytes().split(b"\n"):
        try:
            out.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            continue
    return out


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, entry: dict[str, Any]) -> None:
        # One write(2) per line: a SIGKILL cannot split it.
        os.write(self.fd, orjson.dumps(entry) + b"\n")


def unacknowledged(path: Path) -> list[dict[str, Any]]:
    acked = {e["id"] for e in journal_lines(path) if e["k"] == "ack"}
    return [e for e in journal_lines(path) if e["k"] == "intent" and e["id"] not in acked]


def send(app: Any, journal: Journal, room: str, seat: str, command: dict[str, Any],
         resent: bool = False) -> dict[str, Any]:
    if not resent:
        journal.write({"k": "intent", "id": command["command_id"], "room": room, "seat": seat,
                       "cmd": command})
    result = app.execute(room, seat, command)
    journal.write({"k": "ack", "id": command["command_id"], "room": room, "seat": seat,
                   "ok": result["ok"], "version": result["version"], "resent": resent,
                   "code": None if result["ok"] else result["error"]["code"]})
    return result


def recover(app: Any, path: Path) -> int:
    """Re-send the in-flight commands a killed worker never heard back about."""
    journal = Journal(path)
    pending = unacknowledged(path)
    for e in pending:
        landed = f"{e['seat']}:{e['id']}" in app.load(e["room"]).commands
        journal.write({"k": "in_flight", "id": e["id"], "landed": landed})
        send(app, journal, e["room"], e["seat"], e["cmd"], resent=True)
    return len(pending)


def choose(state: Any, rng: random.Random, select_rate: float) -> tuple[str, dict[str, Any]]:
    """A plausible command for some seat: mostly valid, sometimes refused."""
    from dune_ledger.domain.game import candidates, is_box

    if state.search is not None and rng.random() < select_rate:
        owner = state.search.owner
        cards = candidates(state, owner) or ["shield-1"]
        return owner, {"type": "select_card", "search": state.search.event,
                       "card": rng.choice(cards)}
    seat = rng.choice(state.seats)
    holders = [s for s in state.seats if any(is_box(c) for c in s.hand)]
    roll = rng.random()
    if holders and roll < 0.25:
        holder = rng.choice(holders)
        box = next(c for c in holder.hand if is_box(c))
        return holder.faction, {"type": "begin_search", "card": box}
    if roll < 0.6 and len(seat.hand) < seat.limit:
        return seat.faction, {"type": "draw"}
    if roll < 0.92 and seat.hand:
        return seat.faction, {"type": "discard", "card": rng.choice(seat.hand)}
    profile = rng.choice(["easy", "hard"])
    return seat.faction, {"type": "set_autopilot", "enabled": seat.autopilot is None,
                          "profile": profile}


def worker(args: argparse.Namespace) -> int:
    from dune_ledger.infrastructure.storage import open_rooms

    path = Path(args.journal)
    rooms = orjson.loads(Path(args.rooms_file).read_bytes())
    rng = random.Random()
    app = open_rooms(args.db)
    recover(app, path)
    journal = Journal(path)
    tag = f"{path.stem}-{os.getpid()}-{rng.randrange(1 << 30)}"
    done: list[dict[str, Any]] = []
    n = 0
    while True:
        n += 1
        if done and rng.random() < 0.05:
            # A client that did not trust its answer: the repeat must change nothing.
            first = rng.choice(done)
            again = app.execute(first["room"], first["seat"], first["cmd"])
            journal.write({"k": "repeat", "id": first["cmd"]["command_id"],
                           "same": again == first["result"]})
            continue
        i = rng.randrange(len(rooms))
        room = rooms[i]
        # Every fifth room has a slow searcher, so that kills find searches open.
        seat, command = choose(app.load(room).state, rng, 0.01 if i % 5 == 0 else 0.35)
        command["command_id"] = f"{tag}-{n}"
        result = send(app, journal, room, seat, command)
        if result["ok"]:
            done.append({"room": room, "seat": seat, "cmd": command, "result": result})
            done = done[-50:]


def journal_of(args: argparse.Namespace, slot: int) -> Path:
    return Path(args.dir) / f"slot-{slot}.jsonl"


def start_worker(args: argparse.Namespace, slot: int, rooms_file: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DUNE_LEDGER_SNAPSHOT_INTERVAL": str(args.snapshot_interval)}
    return subprocess.Popen(
        [sys.executable, "-m", "scripts.kill_drill", "worker", "--db", args.db,
         "--rooms-file", str(rooms_file), "--journal", str(journal_of(args, slot))],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )


def accepted(path: Path) -> int:
    """How many accepted commands the slot's journal has acknowledged so far."""
    return sum(1 for e in journal_lines(path) if e["k"] == "ack" and e["ok"])


def worked(proc: subprocess.Popen[bytes], path: Path, before: int, timeout: float) -> bool:
    """Wait until the worker of a slot has had a command accepted since it started (the
    slot's journal held `before` then); False when it has not within `timeout` seconds,
    or died."""
    deadline = time.monotonic() + timeout
    while accepted(path) <= before:
        if proc.poll() is not None or time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def signature_checker() -> tuple[Any, Path]:
    """A verifier of the key file's public key, made here from its raw bytes, and the
    key file's path."""
    import base64

    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from dune_ledger.infrastructure.keys import key_path, public_key_info

    public = Ed25519PublicKey.from_public_bytes(
        base64.b64decode(public_key_info()["public_key"]))

    def good(message: bytes, signature: str | None) -> bool:
        if signature is None:
            return False
        try:
            public.verify(base64.b64decode(signature), message)
            return True
        except (InvalidSignature, ValueError):
            return False

    return good, key_path()


def verify(app: Any, rooms: list[str], journals: list[Path]) -> dict[str, Any]:
    from dune_ledger.application.audit import audit_room
    from dune_ledger.application.stream import APPEND

    entries = [e for path in journals for e in journal_lines(path)]
    acks = [e for e in entries if e["k"] == "ack"]
    spans: dict[tuple[str, str, str], set[tuple[int, int]]] = defaultdict(set)
    appends: dict[tuple[str, str, str], set[int]] = defaultdict(set)
    events = 0
    good, key_file = signature_checker()
    signed_appends = 0
    bad_signatures: list[str] = []
    for room in rooms:
        records = app.records(UUID(room))  # as stored: a room that no longer loads too
        events += len(records)
        last: dict[int, int] = {}
        for rec in records:
            last[rec.append] = rec.originator_version
        for rec in records:
            if last[rec.append] == rec.originator_version:  # the last event of its append
                signed_appends += 1
                if not good(APPEND + rec.hash().encode(), rec.signature):
                    bad_signatures.append(f"{room}@{rec.originator_version}")
        for rec in records:
            if rec.command_id is not None and rec.seat is not None:
                key = (room, rec.seat, rec.command_id)
                appends[key].add(rec.append)
                spans[key].add((rec.append, last[rec.append]))

    lost, rejected_but_stored = [], []
    for a in acks:
        key = (a["room"], a["seat"], a["id"])
        if a["ok"]:
            if {last for _, last in spans.get(key, set())} != {a["version"]}:
                lost.append(a["id"])
        elif key in spans and not a["resent"]:
            # (a re-send may be refused when its first send had already landed)
            rejected_but_stored.append(a["id"])
    twice = sorted(k[2] for k, v in appends.items() if len(v) > 1)
    intents = {e["id"] for e in entries if e["k"] == "intent"}
    acked_ids = {a["id"] for a in acks}
    audits = [audit_room(app, room) for room in rooms]
    return {
        "rooms": len(rooms),
        "events": events,
        "commands_sent": len(intents),
        "acknowledged": len(acked_ids),
        "acknowledged_ok": len({a["id"] for a in acks if a["ok"]}),
        "rejections": Counter(a["code"] for a in acks if not a["ok"]),
        # Commands a kill caught in flight: stored before the kill (the worker died
        # before its ack) or not; the re-send returned the first result or applied it once.
        "in_flight_stored_before_kill": sum(1 for e in entries
                                            if e["k"] == "in_flight" and e["landed"]),
        "in_flight_not_stored": sum(1 for e in entries
                                    if e["k"] == "in_flight" and not e["landed"]),
        "stored_without_ack": len({k[2] for k in appends if not k[2].startswith("drill-end-")}
                                  - acked_ids),
        "repeats": sum(1 for e in entries if e["k"] == "repeat"),
        "repeats_differing": sum(1 for e in entries if e["k"] == "repeat" and not e["same"]),
        "lost": lost[:20],
        "applied_twice": twice[:20],
        "rejected_but_stored": rejected_but_stored[:20],
        "audit_failures": [a["room"] for a in audits if not a["ok"]],
        "appends_signature_checked": signed_appends,
        "bad_signatures": bad_signatures[:20],
        "key_file_mode": oct(key_file.stat().st_mode & 0o777),
    }


def finish_open_searches(app: Any, rooms: list[str]) -> dict[str, int]:
    """A search left open by a killed worker must still be open and completable."""
    from dune_ledger.domain.game import candidates

    found = completed = 0
    for room in rooms:
        state = app.load(room).state
        if state.search is None:
            continue
        found += 1
        owner = state.search.owner
        cards = candidates(state, owner)
        if not cards:
            continue
        result = app.execute(room, owner, {"type": "select_card", "search": state.search.event,
                                           "card": cards[0], "command_id": f"drill-end-{room}"})
        completed += bool(result["ok"])
    return {"open_searches_after_restart": found, "open_searches_completed": completed}


def drill(args: argparse.Namespace) -> int:
    from dune_ledger.infrastructure.storage import open_rooms

    workdir = Path(args.dir)
    workdir.mkdir(parents=True, exist_ok=True)
    for old in workdir.glob("slot-*.jsonl"):
        old.unlink()
    rng = random.Random(args.seed)
    app = open_rooms(args.db)
    rooms = [app.create_room(LAYOUT)["room"] for _ in range(args.rooms)]
    for room in rooms:
        deal(app, room)
    app.close()
    rooms_file = workdir / "rooms.json"
    rooms_file.write_bytes(orjson.dumps(rooms))

    started = time.monotonic()
    procs = {slot: start_worker(args, slot, rooms_file) for slot in range(args.workers)}
    # Accepted commands each slot's journal held when its worker started.
    before = dict.fromkeys(procs, 0)
    kills = crashed = stalled = 0
    while kills < args.kills or time.monotonic() - started < args.seconds:
        slot = rng.randrange(args.workers)
        if not worked(procs[slot], journal_of(args, slot), before[slot], args.ack_timeout):
            stalled += procs[slot].poll() is None
        time.sleep(rng.uniform(0.3, 1.7) * args.kill_every)  # a moment in its work
        for other, proc in list(procs.items()):
            if proc.poll() is not None:  # a worker that died by itself is a finding
                crashed += 1
                err = proc.stderr.read().decode()[-2000:] if proc.stderr else ""
                print(f"worker {other} exited with {proc.returncode}: {err}", file=sys.stderr)
                before[other] = accepted(journal_of(args, other))
                procs[other] = start_worker(args, other, rooms_file)
        procs[slot].send_signal(signal.SIGKILL)
        procs[slot].wait()
        kills += 1
        before[slot] = accepted(journal_of(args, slot))
        procs[slot] = start_worker(args, slot, rooms_file)
    for proc in procs.values():  # the end is a crash too
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    kills += len(procs)

    journals = sorted(workdir.glob("slot-*.jsonl"))
    app = open_rooms(args.db)  # a restarted process
    try:
        recovered = sum(recover(app, path) for path in journals)
        searches = finish_open_searches(app, rooms)
        report = verify(app, rooms, journals)
    finally:
        app.close()
    report.update(searches)
    report.update({"workers": args.workers, "kills": kills, "workers_crashed": crashed,
                   "workers_stalled": stalled, "recovered_at_end": recovered,
                   "seconds": round(time.monotonic() - started, 1)})
    failed = (report["lost"] or report["applied_twice"] or report["rejected_but_stored"]
              or report["audit_failures"] or report["repeats_differing"] or crashed or stalled
              or report["bad_signatures"] or report["key_file_mode"] != "0o600"
              or report["stored_without_ack"]
              or report["open_searches_completed"] != report["open_searches_after_restart"])
    report["ok"] = not failed
    print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
    return 1 if failed else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="mode")
    w = sub.add_parser("worker", help=argparse.SUPPRESS)
    w.add_argument("--db", required=True)
    w.add_argument("--rooms-file", required=True)
    w.add_argument("--journal", required=True)
    p.add_argument("--db", default=os.environ.get("DUNE_LEDGER_DB"),
                   help="storage URL (default $DUNE_LEDGER_DB)")
    p.add_argument("--rooms", type=int, default=20)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--seconds", type=float, default=20.0,
                   help="keep killing for at least this long")
    p.add_argument("--kills", type=int, default=0, help="and for at least this many kills")
    p.add_argument("--kill-every", type=float, default=0.5,
                   help="mean seconds a worker works on after its first accepted command")
    p.add_argument("--ack-timeout", type=float, default=120.0,
                   help="seconds a worker has to get a command accepted before it is killed "
                        "anyway (and the drill fails)")
    p.add_argument("--snapshot-interval", type=int, default=7)
    p.add_argument("--seed", type=int, default=None, help="seeds the kill schedule only")
    p.add_argument("--dir", default="kill-drill", help="where the journals go")
    p.add_argument("--key-file", default=os.environ.get("DUNE_LEDGER_KEY_FILE"),
                   help="the key file every process signs with (default "
                        "$DUNE_LEDGER_KEY_FILE, else drill.key in --dir)")
    args = p.parse_args()
    if args.mode != "worker":
        # The workers inherit it: every process signs with the same key.
        Path(args.dir).mkdir(parents=True, exist_ok=True)
        os.environ["DUNE_LEDGER_KEY_FILE"] = args.key_file or str(Path(args.dir) / "drill.key")
    if args.mode == "worker":
        return worker(args)
    if not args.db:
        p.error("give --db URL (or set DUNE_LEDGER_DB)")
    return drill(args)


if __name__ == "__main__":
    sys.exit(main())
