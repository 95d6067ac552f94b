"""Shared test helpers: layouts, counting randomness, running and refusing commands;
the operator's HTTP calls and a server in a thread; stored rows changed behind the
application's back; a PostgreSQL follower; rooms played for the read models."""

from __future__ import annotations

import base64
import hashlib
import random
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

import orjson
import pytest

from dune_ledger.application.rooms import RoomsApp, token_hash
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.game import (
    OPERATOR,
    Event,
    Tx,
    decide,
    initial_state,
    parse_command,
    parse_operator_command,
)
from dune_ledger.domain.layout import build_room, parse_layout
from dune_ledger.domain.state import RoomState
from dune_ledger.infrastructure.demo import example as example  # the one reader of examples/
from dune_ledger.infrastructure.randomness import Source
from scripts.throwaway import ADMIN_URL, throwaway_database

if TYPE_CHECKING:  # the pure rules tests import this module too: no server libraries
    import httpx
    from fastapi.testclient import TestClient

    from dune_ledger.projections.read_models import ReadModels

BOX = "nullentropy-box"
# Seconds a test waits for what must happen (a process to start, answer, end; a follower
# to catch up) before it calls it a hang: a bound on a hang, never a measure of speed.
# On a loaded machine (two cores shared by several suites) a server took over 10 s to
# start and a finished process seconds to exit; a failure is seen at once where it can
# be (a process that died), not by waiting.
HANG = 300.0
# The fewest events a part of a parallel audit covers, small enough for a test's room.
PART_MIN = 40


class Counting(Source):
    """A seeded source that remembers every draw."""

    def __init__(self, seed: int = 1) -> None:
        super().__init__(random.Random(seed))


def layout(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "mode": "advanced",
        "expansions": ["choam_richese"],
        "seed": 11,
        "turn": 2,
        "phase": 6,
        "seats": [
            {"faction": "richese", "spice": 10, "hand": ["nullentropy-box", "crysknife"]},
            {"faction": "emperor", "spice": 10, "hand": ["karama-1"]},
            {"faction": "harkonnen", "spice": 6, "hand": ["shield-2", "chaumas"]},
        ],
        "discard": ["shield-1", "maula-pistol", "baliset"],
    }
    base.update(overrides)
    return base


def state_of(raw: dict[str, Any], seed: int = 5, secret: bytes | None = None) -> RoomState:
    """`secret`: a committed layout's (RULES 9)."""
    return initial_state(build_room(parse_layout(raw), "room-1", Counting(seed), secret))


def snapshot(state: RoomState) -> dict[str, Any]:
    return state.model_dump(mode="json")


def run(state: RoomState, actor: str, command: dict[str, Any],
        rng: Counting | None = None) -> Tx:
    """`actor`: a seat, or OPERATOR for the operator's commands."""
    parse = parse_operator_command if actor == OPERATOR else parse_command
    return decide(state, actor, parse(command), rng or Counting())


def rejected(state: RoomState, actor: str, command: dict[str, Any]) -> Rejection:
    """The command is refused, and nothing changed: no event, no state, no draw."""
    before = snapshot(state)
    rng = Counting()
    with pytest.raises(Rejection) as info:
        run(state, actor, command, rng)
    assert snapshot(state) == before
    assert rng.draws == 0
    return info.value


def types(tx: Tx) -> list[str]:
    return [e.type for e in tx.events]


class Factory:
    """A randomness factory for RoomsApp that keeps every source it handed out."""

    def __init__(self) -> None:
        self.sources: list[Counting] = []

    def __call__(self, seed: int | None, version: int) -> Counting:
        source = Counting(version)
        self.sources.append(source)
        return source

    @property
    def draws(self) -> int:
        return sum(s.draws for s in self.sources)


def long_room(app: Any, draws: int = 100) -> str:
    """A room played by an app: draws and discards by two seats (about two events a
    command, reshuffles too), its read models caught up."""
    room = str(app.create_room(layout())["room"])
    for i in range(draws):
        seat = ("emperor", "harkonnen")[i % 2]
        assert app.execute(room, seat, {"type": "draw"})["ok"]
        card = app.load(room).state.seat(seat).hand[-1]
        assert app.execute(room, seat, {"type": "discard", "card": card})["ok"]
    app.read_models.catch_up()
    return room


def authenticate(app: RoomsApp, room_id: str, token: str) -> str | None:
    """The seat a token belongs to in the stored room, or None (the tests' check that
    a token stored or reissued is the one that opens the seat)."""
    room = app.load(room_id)
    digest = token_hash(token)
    for faction, stored in room.token_hashes.items():
        if secrets.compare_digest(stored, digest):
            return faction
    return None


@contextmanager
def database(prefix: str) -> Iterator[str]:
    """A throwaway database; a server that cannot be reached fails the test, clearly."""
    import psycopg

    try:
        with throwaway_database(ADMIN_URL, prefix) as url:
            yield url
    except psycopg.OperationalError as e:
        pytest.fail(f"PostgreSQL is not reachable at {ADMIN_URL} (scripts/services starts it): {e}")


@contextmanager
def opened(url: str, **env: str) -> Iterator[RoomsApp]:
    """The rooms app on `url`, closed at the end."""
    from dune_ledger.infrastructure.storage import open_rooms

    app = open_rooms(url, **env)
    try:
        yield app
    finally:
        app.close()


def committed_layout(**overrides: Any) -> dict[str, Any]:
    """`layout()` without a seed: a committed room (RULES 9)."""
    raw = layout(**overrides)
    del raw["seed"]
    return raw


def lines_of(data: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in data.splitlines()]


def resigned(lines: list[dict[str, Any]], key_file: Any) -> bytes:
    """The lines chained and signed again with the server's own key: a dishonest server
    can sign whatever it likes, so only the derivation can catch it."""
    from dune_ledger.application.stream import APPEND, chain_hash
    from dune_ledger.infrastructure.keys import Keys

    keys = Keys(key_file)
    head = "0" * 64
    out = []
    for i, line in enumerate(lines):
        payload = orjson.loads(line["payload"])
        payload["prev"] = head
        text = orjson.dumps(payload).decode()
        digest = chain_hash(line["room"], line["version"], line["type"], text.encode())
        last = i + 1 == len(lines) or orjson.loads(lines[i + 1]["payload"])["append"] \
            != payload["append"]
        out.append({**line, "payload": text, "prev": head, "hash": digest,
                    "sig": keys.sign(APPEND + digest.encode()) if last else None})
        head = digest
    return b"".join(orjson.dumps(line) + b"\n" for line in out)


class SeatKey:
    """A seat's Ed25519 key pair, as a seat page or `--seat-key` holds it (RULES 9.3)."""

    def __init__(self) -> None:
        from nacl.signing import SigningKey

        self.private = SigningKey.generate()
        self.public = base64.b64encode(bytes(self.private.verify_key)).decode()

    def sign(self, room: str, seat: str, command: dict[str, Any]) -> dict[str, Any]:
        """The command with a fresh `command_id` (unless it has one) and its `sig`."""
        from dune_ledger.application.signatures import signed

        return signed(self.private, room, seat, command)


def seed_commitment(room: str, seat: str, value: str) -> str:
    return hashlib.sha256(f"dune-ledger:seed:{room}:{seat}:{value}".encode()).hexdigest()


@contextmanager
def keyed_rooms(tmp_path: Path) -> Iterator[Any]:
    """The rooms app on SQLite in `tmp_path` with a server key file of its own, kept as
    `key_file` (the fair-dealing tests re-sign transcripts with it)."""
    from dune_ledger.infrastructure.keys import init_key_file
    from dune_ledger.infrastructure.storage import open_rooms

    key = tmp_path / "server.key"
    init_key_file(key)
    with open_rooms(f"sqlite:///{tmp_path}/rooms.db", key_file=str(key)) as rooms:
        rooms.key_file = key  # type: ignore[attr-defined]
        yield rooms


def ok(app: RoomsApp, room: str, seat: str, command: dict[str, Any]) -> dict[str, Any]:
    """A command that must be accepted: its result."""
    result = app.execute(room, seat, command)
    assert result["ok"], result
    return dict(result)


def dealt(app: RoomsApp, room: str, seeds: dict[str, str] | None = None,
          keys: dict[str, SeatKey] | None = None) -> dict[str, Any]:
    """Take a committed room through its ceremony (RULES 9.4): every seat in `seeds`
    commits and reveals (signed when it has a key in `keys`); the operator deals when
    some seat commits no seed. The result of the append that dealt."""
    seats = [s.faction for s in app.load(room).state.seats]
    seeds = {s: f"seed of {s}" for s in seats} if seeds is None else seeds
    keys = keys or {}

    def send(seat: str, command: dict[str, Any]) -> dict[str, Any]:
        key = keys.get(seat)
        result = app.execute(room, seat, key.sign(room, seat, command) if key else command)
        assert result["ok"], result
        return dict(result)

    for seat, value in seeds.items():
        send(seat, {"type": "seed_commit", "hash": seed_commitment(room, seat, value)})
    if set(seeds) != set(seats) or not seeds:
        result = app.execute(room, "operator", {"type": "deal"})
        assert result["ok"], result
        if any(e["type"] == "Dealt" for e in result["events"]):
            return dict(result)
    last: dict[str, Any] = {}
    for seat, value in seeds.items():
        last = send(seat, {"type": "seed_reveal", "value": value})
    return last


# --- over HTTP ----------------------------------------------------------------------

ADMIN = "operator-secret"


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def create(client: TestClient, raw: dict[str, Any] | None = None) -> dict[str, Any]:
    r = client.post("/rooms", json=raw or layout(), headers=auth(ADMIN))
    assert r.status_code == 201, r.text
    return r.json()


def assert_error(r: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["ok"] is False and isinstance(body["version"], int)
    assert set(body["error"]) == {"code", "message"} and body["error"]["message"]
    if code is not None:
        assert body["error"]["code"] == code
    return body


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """uvicorn on loopback in a thread of this process, over one storage URL."""

    def __init__(self, url: str, log_level: str = "warning") -> None:
        import uvicorn

        from dune_ledger.infrastructure.http import create_app
        from dune_ledger.infrastructure.storage import open_rooms

        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(create_app(lambda: open_rooms(url), admin_token=ADMIN),
                                host="127.0.0.1", port=self.port, log_level=log_level)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        until(lambda: self.server.started or not self.thread.is_alive(), "the server to start",
              poll=0.025)
        if not self.server.started:
            raise RuntimeError("the server did not start")
        return self

    def __exit__(self, *_: Any) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=HANG)


def until(condition: Any, what: Any, *, poll: float = 0.05) -> None:
    """Wait until `condition()` holds; after HANG seconds, a failure naming `what` (text,
    or a function that gives it then: a log read so far, say)."""
    deadline = time.monotonic() + HANG
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {HANG:g} s for {what() if callable(what) else what}")
        time.sleep(poll)


def answering(base: str, proc: Any = None) -> None:
    """Wait until the server at `base` answers /healthz; `proc`, the server's process, if it
    exits first, fails the wait at once."""
    import httpx

    def up() -> bool:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the server at {base} exited with {proc.returncode}")
        try:
            return httpx.get(f"{base}/healthz", timeout=HANG).status_code == 200
        except httpx.TransportError:
            return False

    until(up, f"the server at {base} to answer")


def events(lines: Iterator[str], count: int) -> list[dict[str, str]]:
    """The next `count` SSE events (comments skipped), each as its fields."""
    out: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in lines:
        if not line:
            if current:
                out.append(current)
                current = {}
                if len(out) == count:
                    return out
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        current[name] = value.removeprefix(" ")
    raise AssertionError(f"the stream ended after {len(out)} events")


# --- stored rows, changed behind the application's back ---------------------------


def tables(app: RoomsApp) -> tuple[str, str]:
    """The events and snapshots tables of this app's storage."""
    assert app.snapshots is not None
    return (app.recorder.events_table_name,  # type: ignore[attr-defined]
            app.snapshots.recorder.events_table_name)  # type: ignore[attr-defined]


def tamper(url: str, sql: str, *params: Any) -> None:
    """Change stored rows behind the application's back (`?` placeholders)."""
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            db.execute(sql, params)
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        db.execute(sql.replace("?", "%s").encode(), params)


def stored(url: str, sql: str, *params: Any) -> Any:
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            return db.execute(sql, params).fetchone()[0]
    import psycopg

    with psycopg.connect(url) as db:
        row = db.execute(sql.replace("?", "%s").encode(), params).fetchone()
        assert row is not None
        return bytes(row[0]) if isinstance(row[0], memoryview) else row[0]


def room_key(url: str, room: str) -> Any:
    """The room id as the events tables keep it."""
    return UUID(room).hex if url.startswith("sqlite") else UUID(room)


def update(url: str, app: RoomsApp, room: str, version: int, column: str, value: Any) -> None:
    """Overwrite one column of one stored event of the room."""
    events, _ = tables(app)
    tamper(url, f"UPDATE {events} SET {column} = ? WHERE originator_id = ? "
                f"AND originator_version = {version}", value, room_key(url, room))


def drawn(app: RoomsApp) -> str:
    """A room of `layout()` after four draws (five stored events)."""
    room = str(app.create_room(layout())["room"])
    for seat in ("emperor", "harkonnen", "emperor", "harkonnen"):
        assert app.execute(room, seat, {"type": "draw"})["ok"]
    return room


def datastore(url: str) -> Any:
    """The library's PostgreSQL datastore on the database of `url`, for a recorder made
    by hand (a table of the test's own), with the pool `open_rooms` gives (a follower's
    LISTEN holds a connection of its own)."""
    from urllib.parse import urlparse

    from eventsourcing.postgres import PostgresDatastore

    parsed = urlparse(url)
    return PostgresDatastore(dbname=parsed.path.strip("/"), host=parsed.hostname or "",
                             port=str(parsed.port or 5432), user=parsed.username or "postgres",
                             password=parsed.password or "", pool_size=2, max_overflow=8)


# --- the PostgreSQL notification log, as a follower reads it -----------------------

# Two seats of the Box: a room is written in one statement (seeded: a committed room
# would wait for its deal).
TWO_SEATS: dict[str, Any] = {
    "expansions": ["choam_richese"], "turn": 2, "phase": 6, "seed": 2,
    "seats": [
        {"faction": "richese", "spice": 10, "hand": ["nullentropy-box", "crysknife"]},
        {"faction": "emperor", "spice": 10, "hand": ["karama-1"]},
    ],
    "discard": ["shield-1", "maula-pistol", "baliset", "snooper-3"],
}


class Follower:
    """Reads after its last id, keeps every id it is given and each room's versions."""

    def __init__(self, recorder: Any) -> None:
        self.recorder = recorder
        self.seen: list[int] = []
        self.versions: dict[Any, list[int]] = {}
        self.rooms_seen: list[Any] = []

    def pull(self) -> int:
        notes = self.recorder.select_notifications(
            start=self.seen[-1] if self.seen else 0, limit=500, inclusive_of_start=False)
        self.seen.extend(n.id for n in notes)
        for n in notes:
            self.versions.setdefault(n.originator_id, []).append(n.originator_version)
            self.rooms_seen.append(n.originator_id)
        return len(notes)

    def in_room_order(self) -> bool:
        """Each room's events came in version order, each once, none left out."""
        return all(v == list(range(1, len(v) + 1)) for v in self.versions.values())


def stored_ids(app: Any) -> set[int]:
    from psycopg.sql import SQL, Identifier

    recorder = app.recorder
    with recorder.datastore.transaction(commit=False) as curs:
        curs.execute(SQL("SELECT notification_id AS i FROM {0}.{1}").format(
            Identifier(recorder.datastore.schema), Identifier(recorder.events_table_name)))
        return {int(r["i"]) for r in curs.fetchall()}


def skipped(app: Any, follower: Follower) -> list[int]:
    """The stored ids the follower never read, once everything committed has settled
    (a NOTIFY just sent, say, holds it back for a moment)."""
    deadline = time.monotonic() + 10
    while follower.pull() or (app.recorder.held_back(follower.seen[-1] if follower.seen
                                                     else 0)
                              and time.monotonic() < deadline):
        pass
    assert all(a < b for a, b in zip(follower.seen, follower.seen[1:], strict=False))
    return sorted(stored_ids(app) - set(follower.seen))


# --- read models ----------------------------------------------------------------------


def play(app: Any, rooms: int = 2) -> list[str]:
    """A few rooms with a Box search, draws and discards; reads nothing."""
    made = []
    for i in range(rooms):
        room = app.create_room({**example("box"), "seed": 7 + i})["room"]
        made.append(room)
        app.execute(room, "emperor", {"type": "draw"})
        app.execute(room, "harkonnen", {"type": "discard", "card": "chaumas"})
        begun = app.execute(room, "richese", {"type": "begin_search", "card": BOX})
        search = begun["events"][-1]["search"]
        app.execute(room, "richese", {"type": "select_card", "search": search,
                                      "card": "maula-pistol"})
        app.execute(room, "atreides", {"type": "set_autopilot", "enabled": True,
                                       "profile": "easy"})
        app.execute(room, "atreides", {"type": "draw"})
    return made


def everything(models: ReadModels, rooms: list[str]) -> dict[str, Any]:
    return {room: models.snapshot(room) for room in rooms}


def fresh(app: Any, rooms: list[str]) -> dict[str, Any]:
    from dune_ledger.projections.read_models import fresh_snapshot

    return {room: fresh_snapshot(UUID(room), app.records(UUID(room))) for room in rooms}


def items(app: Any) -> list[Any]:
    notes = app.recorder.select_notifications(start=1, limit=1000)
    return app.read_models.decode(notes)


def follow_together(followers: list[ReadModels]) -> list[BaseException]:
    """Each follower catches up three times in its own thread; returns what they raised."""
    errors: list[BaseException] = []

    def follow(models: ReadModels) -> None:
        try:
            for _ in range(3):
                models.catch_up()
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=follow, args=(f,)) for f in followers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def schema_validator(spec: dict[str, Any], name: str) -> Any:
    """A JSON Schema validator of the named schema of the OpenAPI `spec`
    (`scripts.client_types.openapi`), its references resolved within it."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    resource = Resource.from_contents(spec, default_specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource("urn:openapi", resource)
    return Draft202012Validator({"$ref": f"urn:openapi#/components/schemas/{name}"},
                                registry=registry)


def schema_problems(check: Any, value: Any) -> list[str]:
    """Where `value`, as the server sends it in JSON, does not fit (`schema_validator`)."""
    import orjson

    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}"
            for e in check.iter_errors(orjson.loads(orjson.dumps(value)))]


def replayed(lines: list[dict[str, Any]]) -> Iterator[tuple[RoomState, Event]]:
    """An exported room's lines (`transfer.parse_export`) replayed with the rules alone,
    with no store: each event, upcast as a store would, and the state after it."""
    import orjson

    from dune_ledger.application.stream import STORED_TYPES
    from dune_ledger.domain.game import apply

    state = None
    for line in lines:
        cls = STORED_TYPES[line["type"]]
        body = orjson.loads(line["payload"])
        fact = body["fact"] if body["v"] == cls.schema_version else \
            cls.upcast(body["fact"], body["v"])
        event = cls.trusted(fact)
        if state is None:
            state = initial_state(event)  # type: ignore[arg-type]
        else:
            apply(state, event)
        yield state, event
