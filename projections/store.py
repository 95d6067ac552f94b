"""Where the read models live: their own tables, next to the events.

Every projection writes its rows and its tracking position in one
transaction (`Store.transaction`), which also serializes the projection's
writers across threads and processes: `BEGIN IMMEDIATE` on SQLite, a
transaction-scoped advisory lock on PostgreSQL, a lock in memory. A writer
reads the position only after taking the lock, so an event already applied
by anyone is never applied again.

Tables (shared by both SQL databases):

- `dl_projection_tracking(projection, position)`: the last notification id
  each projection applied.
- `dl_public_log(room, seq, version, entry)` and `dl_log_rooms(room,
  version, state)`: the public log, and the room state its guard reads.
- `dl_seat_views(room, seat, version, view)` and `dl_view_rooms(...)`: the
  seat-view projection (every seat's view and the public view, under seat
  `PUBLIC`) and the room state it folds events into.
- `dl_autopilot_rooms(room, seats, due)`: written by the seat-view projection,
  the rooms where some seat's autopilot is on (`seats`: JSON, faction ->
  profile), and whether one of those seats is asked for something now
  (`due`), so that the autopilot finds its work without loading every room;
  also any room with a window that has a deadline (`due`, no seats), so that
  the worker finds the deadlines to close.
  A database whose read models predate the table has it filled from
  `dl_view_rooms` when the table is created.
- `dl_token_rooms(token_hash, room)`: written by the seat-view projection, the
  room of every seat and spectator token hash ever issued, so that the HTTP
  server tells a seat token on a route without a room (`GET /rooms`, say: 403)
  from a wrong one (401). A hint only: the token is then checked against the
  room as stored.

A projection keeps each room's state in its own table so that a follower
that stopped anywhere resumes without reading the stream again.

`dl_schema(version)` records the shape of these tables and of their rows
(`READ_MODEL_VERSION`). A store opened on tables of another version (or of
none: before it was recorded) drops them and makes them again, and the
read models are rebuilt from the event log (`open_read_models`). Bump it
whenever a projector's rows or these tables change.

With a cipher key (encryption at rest, docs/security.md) the private rows, every
seat's view and the room states (which hold the deck and every hand), are
stored encrypted by the events' cipher (the eventsourcing library's AES-GCM), as
`~` and the base64 cipher text; the public view and the public log are not.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import re
import sqlite3
import threading
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from dune_ledger.application.stream import UnauthenticRow
from dune_ledger.projections.autopilot_rows import Autopilot, autopilot_entry

log = logging.getLogger("dune_ledger.read_models")
PUBLIC = "*public*"  # the seat key of the public view: never a faction name

OWNED = {"public_log": ("dl_public_log", "dl_log_rooms"),
         "seat_views": ("dl_seat_views", "dl_view_rooms", "dl_autopilot_rooms",
                        "dl_token_rooms")}
ROOMS = {"public_log": "dl_log_rooms", "seat_views": "dl_view_rooms"}

SCHEMA = [
    "CREATE TABLE IF NOT EXISTS dl_projection_tracking ("
    "projection TEXT PRIMARY KEY, position BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS dl_public_log ("
    "room TEXT NOT NULL, seq INTEGER NOT NULL, version INTEGER NOT NULL, entry TEXT NOT NULL, "
    "PRIMARY KEY (room, seq))",
    "CREATE TABLE IF NOT EXISTS dl_seat_views ("
    "room TEXT NOT NULL, seat TEXT NOT NULL, version INTEGER NOT NULL, view TEXT NOT NULL, "
    "PRIMARY KEY (room, seat))",
    *(f"CREATE TABLE IF NOT EXISTS {table} ("
      "room TEXT PRIMARY KEY, version INTEGER NOT NULL, state TEXT NOT NULL)"
      for table in ROOMS.values()),
    "CREATE TABLE IF NOT EXISTS dl_token_rooms ("
    "token_hash TEXT PRIMARY KEY, room TEXT NOT NULL)",
]
AUTOPILOT_TABLE = ("CREATE TABLE IF NOT EXISTS dl_autopilot_rooms ("
                   "room TEXT PRIMARY KEY, seats TEXT NOT NULL, due INTEGER NOT NULL)")

# The read models' schema: bump it when their tables or what a projector writes change.
# 2: the views of issue 17 (a gift offer is a response window; deadlines; actions).
# 3: every row carries its tag under the row key (issue 24: read models are never trusted).
# 4: a public log entry carries its append's first version (`append`); the log reworded.
READ_MODEL_VERSION = 4
TABLES = ("dl_projection_tracking", "dl_public_log", "dl_seat_views", *ROOMS.values(),
          "dl_autopilot_rooms", "dl_token_rooms")


def tracked(position: Any) -> int | None:
    """A stored tracking position; None when it is not one (SQLite keeps any type in
    any column): the projection then reads the log again from its start, and applies
    nothing twice (projections/projectors.py `RoomStates.advance`)."""
    return position if type(position) is int and position >= 0 else None


class ReadModelsTooNew(RuntimeError):
    """The read-model tables were made by a newer version of dune-ledger."""


def upgrade_schema(c: Any, mark: str, had_tables: bool) -> int | None:
    """Inside the store's creating transaction: drop read-model tables of another
    schema version. The version they had (0: none recorded), or None when there was
    nothing to drop."""
    c.execute("CREATE TABLE IF NOT EXISTS dl_schema (version INTEGER NOT NULL)")
    c.execute("SELECT version AS v FROM dl_schema")
    row = c.fetchone()
    found = None if row is None else int(row["v"])
    if found == READ_MODEL_VERSION:
        return None
    if found is not None and found > READ_MODEL_VERSION:
        # Dropping them would have two versions rebuild each other's tables for ever.
        raise ReadModelsTooNew(
            f"the read models are of schema version {found}, made by a newer dune-ledger "
            f"than this one ({READ_MODEL_VERSION}): run the newer version (stop every "
            "process of this one before an upgrade: docs/operations.md)")
    for table in TABLES:
        c.execute(f"DROP TABLE IF EXISTS {table}")
    c.execute("DELETE FROM dl_schema")
    c.execute(c_sql("INSERT INTO dl_schema (version) VALUES (?)", mark), (READ_MODEL_VERSION,))
    return (found or 0) if had_tables else None


Entry = tuple[str, int, int, str]  # room, seq, version, JSON
View = tuple[str, str, int, str]  # room, seat, version, JSON
RoomRow = tuple[str, int, str]  # room, version, JSON state
SEALED = "~"  # a stored JSON text never starts with it


RowKey = Callable[[bool], "bytes | None"]  # create the key file if missing? -> the key
AUTHENTIC = "!"  # a row with its tag: "!", 64 hex digits, then the (sealed) text
TAGGED = len(AUTHENTIC) + 64


class SealedRowError(ValueError):
    """A private row is encrypted and this process has no cipher key, or another one."""


class Sealer:
    """Authenticates every row it writes and reads (an HMAC-SHA256 tag under the row key
    derived from the key file, bound to the row's table, room, seat or seq and version,
    so that no row can be edited, nor moved to another seat, room or version), and
    encrypts the private rows with the events' cipher (None: off)."""

    def __init__(self, cipher: Any = None, row_key: RowKey | bytes | None = None) -> None:
        self.cipher = cipher
        # The key is asked for at the first row written or read, not before: a read of
        # a store with no key file yet creates none (the first write does).
        self.keys: RowKey | None = (lambda create: row_key) if isinstance(row_key, bytes) \
            else row_key
        self.key: bytes | None = None

    def _key(self, create: bool) -> bytes | None:
        if self.key is None and self.keys is not None:
            self.key = self.keys(create)
        return self.key

    @property
    def authenticates(self) -> bool:
        return self.keys is not None

    def tag(self, where: str, text: str, *, create: bool = True) -> str:
        key = self._key(create)
        if key is None:  # no key file yet: no row can verify
            return ""
        return hmac.new(key, f"{where}\n{text}".encode(), hashlib.sha256).hexdigest()

    def seal(self, text: str, where: str = "") -> str:
        if self.cipher is not None:
            text = SEALED + base64.b64encode(self.cipher.encrypt(text.encode())).decode()
        if not self.authenticates:
            return text
        return AUTHENTIC + self.tag(where, text) + text

    def open(self, text: str, where: str = "") -> str:
        if self.authenticates:
            if not (text.startswith(AUTHENTIC) and hmac.compare_digest(
                    text[1:TAGGED], self.tag(where, text[TAGGED:], create=False))):
                raise UnauthenticRow(where)
            text = text[TAGGED:]
        if not text.startswith(SEALED):
            return text  # written before encryption was turned on
        if self.cipher is None:
            raise SealedRowError("a read-model row is encrypted and the key file has no "
                                 "cipher key")
        try:
            return str(self.cipher.decrypt(base64.b64decode(text[1:])).decode())
        except ValueError as e:
            raise SealedRowError("a read-model row does not decrypt with the key file's "
                                 "cipher key") from e

    def seal_view(self, seat: str, text: str, where: str) -> str:
        if seat == PUBLIC and not self.authenticates:
            return text
        if seat == PUBLIC:  # public: authenticated, never encrypted
            return AUTHENTIC + self.tag(where, text) + text
        return self.seal(text, where)



def view_at(room: str, seat: str, version: int) -> str:
    """What a seat view row's tag is bound to."""
    return f"dl_seat_views:{room}:{seat}:{version}"


def entry_at(room: str, seq: int, version: int) -> str:
    return f"dl_public_log:{room}:{seq}:{version}"


def state_at(table: str, room: str, version: int) -> str:
    return f"{table}:{room}:{version}"


class Writes(ABC):
    """What a projection may do inside its transaction."""

    @abstractmethod
    def position(self, projection: str) -> int: ...

    @abstractmethod
    def set_position(self, projection: str, position: int) -> None: ...

    @abstractmethod
    def last_seq(self, room: str) -> int: ...

    @abstractmethod
    def add_entries(self, rows: list[Entry]) -> None: ...

    @abstractmethod
    def room_state(self, projection: str, room: str) -> tuple[int, str] | None: ...

    @abstractmethod
    def put_rooms(self, projection: str, rows: list[RoomRow]) -> None: ...

    @abstractmethod
    def put_views(self, rows: list[View]) -> None: ...

    @abstractmethod
    def put_autopilot(self, rows: list[Autopilot]) -> None:
        """Record each room's autopilot seats; a room with none ("{}") leaves the index."""

    @abstractmethod
    def put_token_rooms(self, rows: list[tuple[str, str]]) -> None:
        """(token hash, room) of tokens issued."""

    @abstractmethod
    def clear(self, projection: str) -> None:
        """Drop every row the projection owns and its position (for a rebuild)."""


class Store(ABC):
    @abstractmethod
    def transaction(self, projection: str) -> Any:
        """A context manager yielding `Writes`; commits on success, rolls back on error."""

    @abstractmethod
    def position(self, projection: str) -> int: ...

    def least_position(self, projections: list[str]) -> int:
        """The notification id every one of `projections` has applied."""
        return min(self.position(projection) for projection in projections)

    @abstractmethod
    def view(self, room: str, seat: str) -> tuple[int, str] | None: ...

    @abstractmethod
    def log(self, room: str, after: int = 0) -> list[str]:
        """The room's public log entries with a seq above `after`, in seq order."""

    @abstractmethod
    def log_at(self, room: str, gt: int = 0, lte: int | None = None,
               forged: list[UnauthenticRow] | None = None
               ) -> tuple[int, list[tuple[int, str]]]:
        """The version the room's log has reached (0: none, or no entry read) and
        (seq, entry) of the entries of events after version `gt`, up to `lte` (None: to
        the last), in seq order, read at once: a batch's entries are stored with that
        version. A row that fails authentication raises UnauthenticRow, or (for the
        audit) is left out and added to `forged`."""

    @abstractmethod
    def room_views(self, room: str, forged: list[UnauthenticRow] | None = None
                   ) -> tuple[int | None, dict[str, str]]:
        """The version of the room's public view (None: no views) and every view of the
        room (seat -> JSON), read at once: a projector writes them all in one go.
        `forged` as for `log_at`."""

    @abstractmethod
    def token_room(self, digest: str) -> str | None:
        """The room a token hash was issued in (a hint: check the room itself)."""

    @abstractmethod
    def autopilot_rooms(self, *, due: bool = False) -> list[str]:
        """Every room with an autopilot seat (`due`: only those where one is asked now,
        or where a window with a deadline is open)."""

    def close(self) -> None:
        return None

    # The schema version of the tables this store dropped when it opened them (0: none
    # recorded), so that the read models are rebuilt; None: nothing was dropped.
    rebuilt_from: int | None = None


# --- memory -------------------------------------------------------------------------


class MemoryWrites(Writes):
    """Staged writes: nothing reaches the store unless the transaction commits."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.ops: list[tuple[str, Any]] = []

    def position(self, projection: str) -> int:
        return self.store.positions.get(projection, 0)

    def set_position(self, projection: str, position: int) -> None:
        if position <= self.position(projection):
            raise RuntimeError(f"{projection} is already at {self.position(projection)}")
        self.ops.append(("position", (projection, position)))

    def last_seq(self, room: str) -> int:
        return len(self.store.entries.get(room, []))

    def add_entries(self, rows: list[Entry]) -> None:
        self.ops.append(("entries", rows))

    def room_state(self, projection: str, room: str) -> tuple[int, str] | None:
        return self.store.rooms.get((projection, room))

    def put_rooms(self, projection: str, rows: list[RoomRow]) -> None:
        self.ops.append(("rooms", (projection, rows)))

    def put_views(self, rows: list[View]) -> None:
        self.ops.append(("views", rows))

    def put_autopilot(self, rows: list[Autopilot]) -> None:
        self.ops.append(("autopilot", rows))

    def put_token_rooms(self, rows: list[tuple[str, str]]) -> None:
        self.ops.append(("tokens", rows))

    def clear(self, projection: str) -> None:
        self.ops.append(("clear", projection))

    def commit(self) -> None:
        s = self.store
        for kind, arg in self.ops:
            if kind == "position":
                s.positions[arg[0]] = arg[1]
            elif kind == "entries":
                for room, seq, version, entry in arg:
                    log = s.entries.setdefault(room, [])
                    if seq != len(log) + 1:
                        raise RuntimeError(f"log entry {seq} of {room} out of order")
                    log.append((version, entry))
            elif kind == "rooms":
                projection, rows = arg
                for room, version, state in rows:
                    s.rooms[(projection, room)] = (version, state)
            elif kind == "views":
                for room, seat, version, view in arg:
                    s.views.setdefault(room, {})[seat] = (version, view)
            elif kind == "autopilot":
                for room, seats, due in arg:
                    if seats == "{}" and not due:
                        s.autopilot.pop(room, None)
                    else:
                        s.autopilot[room] = (seats, due)
            elif kind == "tokens":
                s.token_rooms.update(arg)
            elif kind == "clear":
                s.positions.pop(arg, None)
                if arg == "public_log":
                    s.entries.clear()
                else:
                    s.views.clear()
                    s.autopilot.clear()
                    s.token_rooms.clear()
                s.rooms = {k: v for k, v in s.rooms.items() if k[0] != arg}


class MemoryStore(Store):
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.positions: dict[str, int] = {}
        self.entries: dict[str, list[tuple[int, str]]] = {}
        self.views: dict[str, dict[str, tuple[int, str]]] = {}
        self.rooms: dict[tuple[str, str], tuple[int, str]] = {}
        self.autopilot: dict[str, tuple[str, bool]] = {}
        self.token_rooms: dict[str, str] = {}

    @contextmanager
    def transaction(self, projection: str) -> Iterator[Writes]:
        with self.lock:
            writes = MemoryWrites(self)
            yield writes
            writes.commit()

    def position(self, projection: str) -> int:
        with self.lock:
            return self.positions.get(projection, 0)

    def view(self, room: str, seat: str) -> tuple[int, str] | None:
        with self.lock:
            return self.views.get(room, {}).get(seat)

    def log(self, room: str, after: int = 0) -> list[str]:
        with self.lock:
            return [entry for _, entry in self.entries.get(room, [])[after:]]

    def log_at(self, room: str, gt: int = 0, lte: int | None = None,
               forged: list[UnauthenticRow] | None = None
               ) -> tuple[int, list[tuple[int, str]]]:
        with self.lock:
            reached = self.rooms.get(("public_log", room))
            entries = [(seq, entry) for seq, (version, entry)
                       in enumerate(self.entries.get(room, []), start=1)
                       if version > gt and (lte is None or version <= lte)]
            return (reached[0] if reached is not None and entries else 0), entries

    def room_views(self, room: str, forged: list[UnauthenticRow] | None = None
                   ) -> tuple[int | None, dict[str, str]]:
        with self.lock:
            rows = self.views.get(room, {})
            public = rows.get(PUBLIC)
            return (None if public is None else public[0],
                    {seat: view for seat, (_, view) in rows.items()})

    def autopilot_rooms(self, *, due: bool = False) -> list[str]:
        with self.lock:
            return sorted(room for room, (_, asked) in self.autopilot.items()
                          if asked or not due)

    def token_room(self, digest: str) -> str | None:
        with self.lock:
            return self.token_rooms.get(digest)


# --- SQL (SQLite and PostgreSQL) ------------------------------------------------------


class SQLWrites(Writes):
    def __init__(self, cursor: Any, mark: str, sealer: Sealer | None = None) -> None:
        self.c = cursor
        self.mark = mark
        self.sealer = sealer or Sealer()

    def q(self, sql: str) -> str:
        return sql.replace("?", self.mark)

    def one(self, sql: str, params: tuple[Any, ...]) -> Any:
        self.c.execute(self.q(sql), params)
        return self.c.fetchone()

    def many(self, sql: str, rows: list[Any]) -> None:
        if rows:
            self.c.executemany(self.q(sql), rows)

    def position(self, projection: str) -> int:
        row = self.one("SELECT position AS p FROM dl_projection_tracking WHERE projection = ?",
                       (projection,))
        if row is None:
            return 0
        found = tracked(row["p"])
        if found is None:  # edited behind the store's back: the log is read again
            log.warning("read models: the tracking position of %s is not a notification "
                        "id: the log is read again from its start", projection)
            self.c.execute(self.q("DELETE FROM dl_projection_tracking WHERE projection = ?"),
                           (projection,))
            return 0
        return found

    def set_position(self, projection: str, position: int) -> None:
        # The guard in WHERE makes a stale writer fail instead of moving the position back.
        row = self.one(
            "INSERT INTO dl_projection_tracking (projection, position) VALUES (?, ?) "
            "ON CONFLICT (projection) DO UPDATE SET position = excluded.position "
            "WHERE dl_projection_tracking.position < excluded.position RETURNING position",
            (projection, position),
        )
        if row is None:
            raise RuntimeError(f"{projection} has already applied notification {position}")

    def last_seq(self, room: str) -> int:
        row = self.one("SELECT MAX(seq) AS m FROM dl_public_log WHERE room = ?", (room,))
        return 0 if row is None or row["m"] is None else int(row["m"])

    def add_entries(self, rows: list[Entry]) -> None:
        seal = self.sealer.seal_view
        self.many("INSERT INTO dl_public_log (room, seq, version, entry) VALUES (?, ?, ?, ?)",
                  [(room, seq, version, seal(PUBLIC, entry, entry_at(room, seq, version)))
                   for room, seq, version, entry in rows])

    def room_state(self, projection: str, room: str) -> tuple[int, str] | None:
        table = ROOMS[projection]
        row = self.one(f"SELECT version AS v, state AS s FROM {table} WHERE room = ?", (room,))
        if row is None:
            return None
        version = int(row["v"])
        return version, self.sealer.open(str(row["s"]), state_at(table, room, version))

    def put_rooms(self, projection: str, rows: list[RoomRow]) -> None:
        seal, table = self.sealer.seal, ROOMS[projection]
        self.many(
            f"INSERT INTO {table} (room, version, state) VALUES (?, ?, ?) "
            "ON CONFLICT (room) DO UPDATE SET version = excluded.version, state = excluded.state",
            [(room, version, seal(state, state_at(table, room, version)))
             for room, version, state in rows],
        )

    def put_views(self, rows: list[View]) -> None:
        seal = self.sealer.seal_view
        self.many(
            "INSERT INTO dl_seat_views (room, seat, version, view) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (room, seat) DO UPDATE SET version = excluded.version, "
            "view = excluded.view",
            [(room, seat, version, seal(seat, view, view_at(room, seat, version)))
             for room, seat, version, view in rows],
        )

    def put_autopilot(self, rows: list[Autopilot]) -> None:
        # A room without autopilot seats is kept while a window with a deadline is open
        # (`due`): the worker closes it when the deadline passes (RULES 4.4).
        self.many("DELETE FROM dl_autopilot_rooms WHERE room = ?",
                  [(room,) for room, seats, due in rows if seats == "{}" and not due])
        self.many("INSERT INTO dl_autopilot_rooms (room, seats, due) VALUES (?, ?, ?) "
                  "ON CONFLICT (room) DO UPDATE SET seats = excluded.seats, due = excluded.due",
                  [(room, seats, int(due)) for room, seats, due in rows
                   if seats != "{}" or due])

    def put_token_rooms(self, rows: list[tuple[str, str]]) -> None:
        self.many("INSERT INTO dl_token_rooms (token_hash, room) VALUES (?, ?) "
                  "ON CONFLICT (token_hash) DO NOTHING", rows)

    def clear(self, projection: str) -> None:
        for table in OWNED[projection]:
            self.c.execute(f"DELETE FROM {table}")
        self.c.execute(self.q("DELETE FROM dl_projection_tracking WHERE projection = ?"),
                       (projection,))


class SQLStore(Store):
    """The shared queries; subclasses bring a connection and a lock."""

    mark = "?"
    plain_rows: Any = None  # the cursor's row factory for plain tuples
    sealer = Sealer()

    @abstractmethod
    def _read(self) -> Any:
        """A context manager yielding a cursor for reads."""

    def _rows(self, sql: str, params: tuple[Any, ...], *, plain: bool = False) -> list[Any]:
        """Rows by column name, or (`plain`: for a long read, such as a room's whole
        log in an audit, where a mapping per row cost half the read) plain tuples."""
        with self._read() as c:
            if plain:
                c.row_factory = self.plain_rows
            c.execute(self._statement(sql), params)
            return list(c.fetchall())

    def _statement(self, sql: str) -> str:
        """A read's SQL as this database takes it."""
        return sql.replace("?", self.mark)

    def position(self, projection: str) -> int:
        rows = self._rows("SELECT position AS p FROM dl_projection_tracking WHERE projection = ?",
                          (projection,))
        return (tracked(rows[0]["p"]) or 0) if rows else 0

    def least_position(self, projections: list[str]) -> int:
        # In one query: every read of a view or the log catches up, and asks this first.
        marks = ", ".join("?" * len(projections))
        (row,) = self._rows("SELECT COUNT(*) AS n, MIN(position) AS p FROM "
                            f"dl_projection_tracking WHERE projection IN ({marks})",
                            tuple(projections))
        return (tracked(row["p"]) or 0) if row["n"] == len(set(projections)) else 0

    def view(self, room: str, seat: str) -> tuple[int, str] | None:
        rows = self._rows("SELECT version AS v, view AS j FROM dl_seat_views "
                          "WHERE room = ? AND seat = ?", (room, seat))
        if not rows:
            return None
        version = int(rows[0]["v"])
        return version, self.sealer.open(str(rows[0]["j"]), view_at(room, seat, version))

    def log(self, room: str, after: int = 0) -> list[str]:
        rows = self._rows("SELECT seq, version, entry FROM dl_public_log WHERE room = ? "
                          "AND seq > ? ORDER BY seq", (room, after), plain=True)
        open_row = self.sealer.open
        return [open_row(str(entry), entry_at(room, int(seq), int(version)))
                for seq, version, entry in rows]

    def log_at(self, room: str, gt: int = 0, lte: int | None = None,
               forged: list[UnauthenticRow] | None = None
               ) -> tuple[int, list[tuple[int, str]]]:
        # One statement, one snapshot: the version is read once, beside every entry.
        upto = "" if lte is None else " AND version <= ?"
        rows = self._rows("SELECT (SELECT version FROM dl_log_rooms WHERE room = ?), seq, "
                          f"version, entry FROM dl_public_log WHERE room = ? AND version > ?"
                          f"{upto} ORDER BY seq",
                          (room, room, gt) if lte is None else (room, room, gt, lte),
                          plain=True)
        entries = [(int(seq), self._open(str(entry), entry_at(room, int(seq), int(version)),
                                         forged)) for _, seq, version, entry in rows]
        return (int(rows[0][0] or 0) if rows else 0), \
            [(seq, entry) for seq, entry in entries if entry is not None]

    def room_views(self, room: str, forged: list[UnauthenticRow] | None = None
                   ) -> tuple[int | None, dict[str, str]]:
        rows = self._rows("SELECT seat AS s, version AS v, view AS j FROM dl_seat_views "
                          "WHERE room = ?", (room,))
        version = next((int(r["v"]) for r in rows if r["s"] == PUBLIC), None)
        views = {str(r["s"]): self._open(str(r["j"]), view_at(room, str(r["s"]), int(r["v"])),
                                         forged) for r in rows}
        return version, {seat: view for seat, view in views.items() if view is not None}

    def _open(self, text: str, where: str, forged: list[UnauthenticRow] | None
              ) -> str | None:
        try:
            return self.sealer.open(text, where)
        except UnauthenticRow as e:
            if forged is None:
                raise
            forged.append(e)
            return None

    def token_room(self, digest: str) -> str | None:
        rows = self._rows("SELECT room AS r FROM dl_token_rooms WHERE token_hash = ?",
                          (digest,))
        return str(rows[0]["r"]) if rows else None

    def autopilot_rooms(self, *, due: bool = False) -> list[str]:
        where = " WHERE due = 1" if due else ""
        return [str(r["r"]) for r in self._rows(
            f"SELECT room AS r FROM dl_autopilot_rooms{where} ORDER BY room", ())]


def create_autopilot_index(c: Any, existed: bool, mark: str, sealer: Sealer) -> None:
    """Create the autopilot index; fill it from the stored room states if it is new."""
    c.execute(AUTOPILOT_TABLE)
    if existed:
        return
    # Only rooms that mention an autopilot profile are parsed (and the encrypted ones).
    c.execute(c_sql("SELECT room AS r, version AS v, state AS s FROM dl_view_rooms "
                    "WHERE state LIKE ? OR state LIKE ?", mark),
              ('%"autopilot":"%', f"%{SEALED}%"))
    rows = []
    for r in c.fetchall():
        try:
            where = state_at("dl_view_rooms", str(r["r"]), int(r["v"]))
            rows.append(autopilot_entry(str(r["r"]), sealer.open(str(r["s"]), where)))
        except Exception:  # a damaged room's state: the projector fences it off
            continue
    SQLWrites(c, mark).put_autopilot([row for row in rows if row[1] != "{}"])


def c_sql(sql: str, mark: str) -> str:
    return sql.replace("?", mark)


class SQLiteStore(SQLStore):
    """Its own connection to the events' database file, writes under BEGIN IMMEDIATE."""

    def __init__(self, path: str, timeout: float = 10.0, create: bool = True,
                 cipher: Any = None, row_key: RowKey | None = None) -> None:
        self.path = path
        self.sealer = Sealer(cipher, row_key)
        self.lock = threading.RLock()
        self.conn = sqlite3.connect(path, timeout=timeout, isolation_level=None,
                                    check_same_thread=False)
        self.conn.row_factory = sqlite3.Row
        if not create:  # the tables are there (a process opened the database before)
            return
        with self.lock:
            self.conn.execute("PRAGMA journal_mode=WAL")
            c = self.conn.cursor()
            c.execute("BEGIN IMMEDIATE")
            try:
                had = c.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                                "AND name = 'dl_projection_tracking'").fetchone() is not None
                self.rebuilt_from = upgrade_schema(c, self.mark, had)
                for statement in SCHEMA:
                    c.execute(statement)
                existed = c.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                                    "AND name = 'dl_autopilot_rooms'").fetchone() is not None
                create_autopilot_index(c, existed, self.mark, self.sealer)
            except BaseException:  # the lock and the connection go with the failure
                self.conn.rollback()
                self.conn.close()
                raise
            self.conn.commit()

    @contextmanager
    def transaction(self, projection: str) -> Iterator[Writes]:
        with self.lock:
            c = self.conn.cursor()
            c.execute("BEGIN IMMEDIATE")
            try:
                yield SQLWrites(c, self.mark, self.sealer)
            except BaseException:
                self.conn.rollback()
                raise
            self.conn.commit()

    @contextmanager
    def _read(self) -> Iterator[Any]:
        with self.lock:
            yield self.conn.cursor()

    def close(self) -> None:
        with self.lock:
            self.conn.close()


class PostgresStore(SQLStore):
    """Uses the events' datastore (its pool and schema); one advisory lock per projection."""

    mark = "%s"

    def __init__(self, datastore: Any, create: bool = True, cipher: Any = None,
                 row_key: RowKey | None = None) -> None:
        from psycopg.rows import tuple_row

        self.datastore = datastore
        self.sealer = Sealer(cipher, row_key)
        self.plain_rows = tuple_row
        schema = getattr(datastore, "schema", "public")
        self.search_path = f'SET LOCAL search_path TO "{schema}"'
        self.schema_prefix = f'"{schema}".'
        self.statements: dict[str, str] = {}  # a read's SQL -> as sent (a fixed few)
        if not create:  # the tables are there (a process opened the database before)
            return
        with datastore.transaction(commit=True) as c:
            c.execute(self.search_path)
            c.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("dl_schema"),))
            c.execute("SELECT to_regclass('dl_projection_tracking') IS NOT NULL AS e")
            self.rebuilt_from = upgrade_schema(c, self.mark, bool(c.fetchone()["e"]))
            for statement in SCHEMA:
                c.execute(statement)
            c.execute("SELECT to_regclass('dl_autopilot_rooms') IS NOT NULL AS e")
            create_autopilot_index(c, bool(c.fetchone()["e"]), self.mark, self.sealer)

    @contextmanager
    def transaction(self, projection: str) -> Iterator[Writes]:
        with self.datastore.transaction(commit=True) as c:
            c.execute(self.search_path)
            c.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(projection),))
            yield SQLWrites(c, self.mark, self.sealer)

    @contextmanager
    def _read(self) -> Iterator[Any]:
        # A read is one statement, autocommitted: a snapshot of its own. Its tables are
        # named with their schema (`_statement`): a SET LOCAL search_path needs a
        # transaction, and BEGIN, SET and ROLLBACK were three round trips of four.
        with self.datastore.get_connection() as conn:
            yield conn.cursor()

    def _statement(self, sql: str) -> str:
        found = self.statements.get(sql)
        if found is None:
            found = TABLE_NAME.sub(lambda m: self.schema_prefix + m.group(), sql)
            found = self.statements[sql] = found.replace("?", self.mark)
        return found


TABLE_NAME = re.compile(r"\bdl_\w+")  # every read-model table, and nothing else, is dl_*


def lock_key(name: str) -> int:
    """A stable 32-bit key for an advisory lock."""
    return zlib.crc32(f"dune-ledger:{name}".encode())
