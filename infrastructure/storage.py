"""Storage selection from one URL, and how envelopes become stored bytes.

`sqlite:///PATH` (default `sqlite:///dune-ledger.db`), `memory://`, or
`postgresql://USER[:PASSWORD]@HOST:PORT/DBNAME[?KEY=VALUE&...]` (the query's
parameters go to libpq: `sslmode`, `sslrootcert`, `application_name`, ...).
A high-availability cluster is named by libpq's multi-host form,
`postgresql://USER@HOST1:PORT1,HOST2:PORT2,HOST3:PORT3/DBNAME?target_session_attrs=read-write`:
libpq tries each host until one takes writes (docs/operations.md, "High availability").
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlparse
from uuid import UUID

import orjson
from eventsourcing.persistence import Mapper, StoredEvent, Transcoder
from eventsourcing.utils import strtobool

from dune_ledger.application.rooms import RandomnessFactory, RoomsApp
from dune_ledger.application.stream import (
    STORED_TYPES,
    Recorded,
    RoomSnapshot,
    Undecodable,
    as_room_id,
    signed,
    unsigned,
)
from dune_ledger.infrastructure import observability, randomness
from dune_ledger.infrastructure.errors import StoreUnavailable, UsageError
from dune_ledger.infrastructure.keys import Keys
from dune_ledger.infrastructure.settings import OUR_RECORDER, PREFIX, Settings, current
from dune_ledger.projections.read_models import open_read_models


class OrjsonTranscoder(Transcoder):
    def encode(self, obj: Any) -> bytes:
        return orjson.dumps(obj)

    def decode(self, data: bytes) -> Any:
        return orjson.loads(data)


class RoomMapper(Mapper[UUID]):
    """Stored topic = the domain event's type name (`FeePaid`, ...), or `RoomSnapshot`.

    The stored state is the event's JSON payload with its signature as the last key
    (application/stream.py), then, as the library's own mapper does, compressed and
    encrypted when a compressor or cipher is configured (`COMPRESSOR_TOPIC`,
    `CIPHER_TOPIC`/`CIPHER_KEY`: the key file's cipher key, infrastructure/keys.py).
    The chain hash covers the plaintext payload, so it does not change with the key.

    Stored events are trusted: loading constructs them without re-validating. An
    older `v` is upcast by the event class before construction. A row that cannot be
    read (not JSON, an unknown topic, a missing field, a cipher text that does not
    decrypt) becomes an `Undecodable`, for the reader to refuse, report or fence off.
    """

    def seal(self, plain: bytes) -> bytes:
        """Stored bytes from a stored JSON object, as the library's mapper makes them."""
        if self.compressor:
            plain = self.compressor.compress(plain)
        if self.cipher:
            plain = self.cipher.encrypt(plain)
        return plain

    def unseal(self, stored: bytes) -> bytes:
        """The stored JSON object of stored bytes. Rows written before the cipher was
        turned on are plain JSON: they are read as such (their hashes and signatures
        are checked all the same; docs/security.md, "Turning encryption on")."""
        if self.cipher:
            try:
                stored = self.cipher.decrypt(stored)
            except ValueError:
                if stored[:1] != b"{":
                    raise
                return stored
        if self.compressor:
            stored = self.compressor.decompress(stored)
        return stored

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        if isinstance(domain_event, RoomSnapshot):
            topic = "RoomSnapshot"
            state = signed(domain_event.body(), domain_event.signature)
        elif isinstance(domain_event, Recorded):
            # The bytes the chain hash covers (application/stream.Recorded.body), and
            # the append's signature when this event ends one.
            topic, state = domain_event.type, domain_event.stored_form()
        else:
            raise TypeError(f"the rooms' store keeps a room's events and snapshots, not "
                            f"{type(domain_event).__name__}")
        return StoredEvent(
            originator_id=domain_event.originator_id,
            originator_version=domain_event.originator_version,
            topic=topic,
            state=self.seal(state),
        )

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        """The event or snapshot of one stored row, or an Undecodable; one whose room
        id is not a room's (a column a database leaves untyped) belongs to no room."""
        room_id = as_room_id(stored_event.originator_id)
        if room_id is None:
            return Undecodable(None, 0, topic_text(stored_event.topic), "it names no room")
        row = self.columns(room_id, stored_event.originator_version, stored_event.topic,
                           stored_event.state)
        if isinstance(row, Undecodable):
            return row
        version, topic, state = row
        if topic == "RoomSnapshot":
            return self.snapshot(room_id, version, state)
        return self.recorded(room_id, version, topic, state)

    def stream(self, room_id: UUID, rows: Iterable[tuple[Any, Any, Any]]
               ) -> list[Recorded | Undecodable]:
        """A room's events from its stored (version, topic, bytes) rows, each as
        `to_domain_event` makes it, without a StoredEvent or a UUID per row."""
        recorded, event = self.recorded, self.event
        return [recorded(room_id, version, topic, state)
                if type(state) is bytes and type(version) is int and type(topic) is str
                else event(room_id, version, topic, state)
                for version, topic, state in rows]

    def event(self, room_id: UUID, version: Any, topic: Any, state: Any
              ) -> Recorded | Undecodable:
        """The event of one stored row of the events table, its columns as the database
        gave them."""
        row = self.columns(room_id, version, topic, state)
        return row if isinstance(row, Undecodable) else self.recorded(room_id, *row)

    @staticmethod
    def columns(room_id: UUID, version: Any, topic: Any, state: Any
                ) -> tuple[int, str, bytes] | Undecodable:
        """A stored row's version, topic and state as the database gave them, each of
        its kind; or, for a row with one that is not (NULL, or another type where a
        database leaves a column untyped), an Undecodable."""
        if type(version) is not int:
            return Undecodable(room_id, 0, topic_text(topic), "its version is not a whole number")
        if type(topic) is not str:
            return Undecodable(room_id, version, topic_text(topic), "its topic is not text")
        if isinstance(state, bytearray | memoryview):
            state = bytes(state)
        if type(state) is not bytes:
            return Undecodable(room_id, version, topic, "its stored state is not bytes")
        return version, topic, state

    def snapshot(self, room_id: UUID, version: int, stored: bytes) -> RoomSnapshot | Undecodable:
        try:
            body, signature = unsigned(self.unseal(stored))
            data = self.transcoder.decode(body)
            return RoomSnapshot(originator_id=room_id, originator_version=version,
                                state=data["state"], at=data["at"], signature=signature,
                                stored=body)
        except Exception as e:
            return Undecodable(room_id, version, "RoomSnapshot",
                               f"the snapshot cannot be read ({self.unreadable(e, stored)})")

    def recorded(self, room_id: UUID, version: int, topic: str,
                 stored: bytes) -> Recorded | Undecodable:
        """The event of one stored row (`stored`: as the store holds it, encrypted or
        not; or an exported row's plain stored JSON), or an Undecodable."""
        cls = STORED_TYPES.get(topic)
        if cls is None:
            return Undecodable(room_id, version, topic, "its event type is not one of ours")
        try:
            plain, signature = unsigned(self.unseal(stored))
            body = self.transcoder.decode(plain)
            fact = body["fact"]
            if body["v"] != cls.schema_version:
                fact = cls.upcast(fact, body["v"])
            return Recorded(
                room_id,
                version,
                cls.trusted(fact),
                body["prev"],
                body["seat"],
                body["cmd"],
                body["append"],
                body["at"],
                body["meta"],
                # An upcast payload is not what was stored: hash what was stored.
                plain,
                signature,
            )
        except Exception as e:
            return Undecodable(room_id, version, topic,
                               f"the stored event cannot be read ({self.unreadable(e, stored)})")

    def unreadable(self, e: Exception, stored: bytes) -> str:
        """What is wrong with a row, in words that name no stored value."""
        if isinstance(e, orjson.JSONDecodeError):
            if not self.cipher and stored[:1] != b"{":
                return "not JSON; if the store is encrypted, the key file lacks its cipher key"
            return "not JSON"
        if isinstance(e, ValueError) and "cipher" in str(e).lower():
            return "it does not decrypt with this key file's cipher key"
        if isinstance(e, KeyError | TypeError):
            return "a field is missing or of the wrong kind"
        return type(e).__name__


def topic_text(topic: Any) -> str:
    """A stored topic as the audit names it: itself, when it is text."""
    return topic if isinstance(topic, str) else "no topic"


def postgres_settings(settings: Settings) -> dict[str, str]:
    """The PostgreSQL pool and timeouts: the library's keys, and the two the factory
    (infrastructure/postgres.py `RoomsPostgresFactory`) reads."""
    # Pinging every borrowed connection costs a round trip per query (a fifth of a
    # command); without it a connection the server dropped fails once, the pool
    # discards it and the library retries the statement on a fresh one.
    return {
        "POSTGRES_PRE_PING": "y" if settings.pg_pre_ping else "n",
        "POSTGRES_POOL_SIZE": str(settings.pg_pool_size),
        "POSTGRES_MAX_OVERFLOW": str(settings.pg_max_overflow),
        "POSTGRES_CONNECT_TIMEOUT": str(settings.pg_connect_timeout),
        "POSTGRES_LOCK_TIMEOUT": str(settings.pg_lock_timeout),
        "POSTGRES_IDLE_IN_TRANSACTION_SESSION_TIMEOUT": str(settings.pg_idle_timeout),
        "POSTGRES_MAX_WAITING": str(settings.pg_max_waiting),
        STATEMENT_TIMEOUT_ENV: str(settings.pg_statement_timeout),
        GROUP_COMMIT_ENV: "yes" if settings.pg_group_commit else "no",
    }


# The PostgreSQL factory: the library's, with the URL's query parameters for libpq.
POSTGRES_FACTORY = "dune_ledger.infrastructure.postgres:RoomsPostgresFactory"
LIBPQ_ENV = "DUNE_LEDGER_PG_LIBPQ"  # the URL's query, as libpq keywords (urlencoded)
STATEMENT_TIMEOUT_ENV = "DUNE_LEDGER_PG_STATEMENT_TIMEOUT"  # seconds; 0: no bound
GROUP_COMMIT_ENV = "DUNE_LEDGER_PG_GROUP_COMMIT"  # yes or no
URL_KEYWORDS = ("dbname", "host", "port", "user", "password")  # the URL itself names them


def libpq_options(query: str) -> dict[str, str]:
    """A PostgreSQL URL's query parameters (`?sslmode=require`), each one of libpq's
    own connection keywords, for every connection the store opens."""
    from psycopg import pq

    known = {d.keyword.decode() for d in pq.Conninfo.get_defaults()}
    options: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in known or key in URL_KEYWORDS:
            raise UsageError(f"'{key}' in the PostgreSQL URL is not a libpq connection "
                             "parameter the query may set (e.g. sslmode, sslrootcert, "
                             "application_name, target_session_attrs)")
        options[key] = value
    return options


def postgres_hosts(url: str, netloc: str) -> tuple[str, str]:
    """The hosts and ports of a PostgreSQL URL's `USER@HOST1:PORT1,HOST2:PORT2`, each a
    comma-separated list as libpq's `host` and `port` keywords take them ('' when none)."""
    hosts, ports = [], []
    for item in netloc.rpartition("@")[2].split(","):
        host, port = item, ""
        if item.startswith("["):  # [::1]:5432
            host, _, rest = item[1:].partition("]")
            port = rest.removeprefix(":")
        elif ":" in item:
            host, _, port = item.rpartition(":")
        if not host:
            return "", ""
        if port and not port.isdigit():
            raise UsageError(f"'{url}': the port '{port}' is not a number")
        hosts.append(unquote(host))
        ports.append(port or "5432")
    return ",".join(hosts), ",".join(ports)


# Any fixed number: processes creating the tables of a fresh database take turns on it.
TABLES_LOCK_KEY = 0x64756E65


@contextmanager
def first_use_lock(env: dict[str, str]) -> Iterator[None]:
    """Serialize table creation between processes that start on the same fresh database.

    The library creates its tables, composite type and insert function on first use,
    and PostgreSQL does not make concurrent `CREATE TYPE` or `CREATE OR REPLACE
    FUNCTION` safe; a session advisory lock on a connection of its own (not one from
    the pool, which may hold a single connection) makes the starters take turns.
    """
    if env.get("PERSISTENCE_MODULE") != POSTGRES_FACTORY or \
            not strtobool(env.get("CREATE_TABLE") or "yes"):
        yield
        return
    import psycopg

    try:
        # The URL's own libpq options (a connect_timeout too) win over ours.
        keywords: dict[str, Any] = {
            "dbname": env["POSTGRES_DBNAME"], "host": env["POSTGRES_HOST"],
            "port": env["POSTGRES_PORT"], "user": env["POSTGRES_USER"],
            "password": env["POSTGRES_PASSWORD"] or None,
            "connect_timeout": max(2, int(env.get("POSTGRES_CONNECT_TIMEOUT", "5"))),
            **dict(parse_qsl(env.get(LIBPQ_ENV, ""), keep_blank_values=True))}
        conninfo = psycopg.conninfo.make_conninfo("", **keywords)
        conn = psycopg.connect(conninfo, autocommit=True)
    except psycopg.OperationalError as e:
        raise StoreUnavailable(f"cannot connect to PostgreSQL: {str(e).strip()}") from None
    with conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (TABLES_LOCK_KEY,))
        yield  # closing the connection releases the lock


def environment(url: str, settings: Settings | None = None) -> dict[str, str]:
    """The eventsourcing environment for a storage URL (and the process's settings, unless
    others are given)."""
    settings = settings or current()
    env = {
        "MAPPER_TOPIC": "dune_ledger.infrastructure.storage:RoomMapper",
        "TRANSCODER_TOPIC": "dune_ledger.infrastructure.storage:OrjsonTranscoder",
    }
    parsed = urlparse(url)
    if parsed.scheme == "memory":
        env["PERSISTENCE_MODULE"] = "eventsourcing.popo"
    elif parsed.scheme == "sqlite":
        path = unquote(parsed.path)
        if url.startswith("sqlite:///"):
            path = url[len("sqlite:///"):]
        if not path:
            raise UsageError(f"no file in '{url}': use sqlite:///PATH")
        env["PERSISTENCE_MODULE"] = "eventsourcing.sqlite"
        env["APPLICATION_RECORDER_TOPIC"] = "dune_ledger.infrastructure.sqlite:RoomsSQLiteRecorder"
        env["SQLITE_DBNAME"] = path
        env["SQLITE_LOCK_TIMEOUT"] = str(settings.sqlite_lock_timeout)
    elif parsed.scheme in ("postgresql", "postgres"):
        hosts, ports = postgres_hosts(url, parsed.netloc)
        if not hosts or not parsed.path.strip("/"):
            raise UsageError(f"'{url}' needs a host and a database name")
        env["PERSISTENCE_MODULE"] = POSTGRES_FACTORY
        env[LIBPQ_ENV] = urlencode(libpq_options(parsed.query))
        # The library's own variable, when set, names another recorder (benchmarks
        # compare locking schemes with it); it must be a RoomsRecorder or the library's.
        env["APPLICATION_RECORDER_TOPIC"] = settings.recorder_topic or OUR_RECORDER
        env["POSTGRES_DBNAME"] = parsed.path.strip("/")
        env["POSTGRES_HOST"] = hosts
        env["POSTGRES_PORT"] = ports
        env["POSTGRES_USER"] = unquote(parsed.username or "postgres")
        env["POSTGRES_PASSWORD"] = unquote(parsed.password or "")
        env.update(postgres_settings(settings))
    else:
        raise UsageError(
            f"unknown storage URL '{url}': use sqlite:///PATH, postgresql://... or memory://"
        )
    return env


def open_rooms(url: str | None = None, *, settings: Settings | None = None,
               randomness_factory: RandomnessFactory | None = None,
               key_file: str | None = None, **extra_env: str) -> RoomsApp:
    """The rooms application on the storage of `url` (else the settings' DUNE_LEDGER_DB),
    signing with the key file (`key_file`, else the settings' DUNE_LEDGER_KEY_FILE:
    created on the first write when missing) and, when it holds a cipher key, encrypting
    at rest. `settings`: the process's unless given; `extra_env`: the library's own."""
    settings = settings or current()
    ours = sorted(name for name in extra_env if name.startswith(PREFIX))
    if ours:
        raise TypeError(f"{', '.join(ours)}: our settings are given as settings=Settings(...)")
    url = url or settings.db
    env = environment(url, settings)
    keys = Keys(key_file or settings.key_file)  # cannot be read or made: a UsageError
    env.update(keys.cipher_env())
    env.update(extra_env)
    if env.get("PERSISTENCE_MODULE") == "eventsourcing.sqlite":
        private_files(env["SQLITE_DBNAME"])
    with first_use_lock(env):
        app = RoomsApp(env, randomness=randomness_factory or randomness.for_room, signer=keys,
                       snapshot_interval=settings.snapshot_interval,
                       room_cache=settings.room_cache)
        observability.observe(app)
        # The read models live in the same database as the events (projections/).
        app.read_models = open_read_models(app, settings.projection_cache)
        if env.get("PERSISTENCE_MODULE") != "eventsourcing.popo":
            # The tables exist by now: a process that opens them again creates nothing.
            # It runs one query at a time (a part of an audit): one connection to start
            # with, not a pool's worth, since opening them delays its part.
            app.reopen = partial(open_rooms, url, settings=settings,
                                 randomness_factory=randomness_factory, key_file=key_file,
                                 **{**extra_env, "CREATE_TABLE": "no",
                                    "POSTGRES_POOL_SIZE": "1"})
        return app


def private_files(path: str) -> None:
    """The SQLite database is created 0600 (SQLite gives its -wal and -shm the mode of
    the database file), and an existing one and its companions are made 0600: hidden
    cards are in it, encrypted or not."""
    if path == ":memory:" or path.startswith("file:"):
        return
    if os.path.isdir(path):
        raise UsageError(f"the database '{path}' cannot be used: it is a directory "
                         "(give a file: sqlite:///PATH)")
    try:
        # Only a file that is not there yet is opened here: closing a descriptor of a
        # database this process already has open drops every POSIX lock SQLite holds
        # on it, and another process may then checkpoint and delete the WAL under
        # this one's connections ("database disk image is malformed").
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
    except OSError as e:
        raise UsageError(f"cannot open the database '{path}': {e.strerror}: give --db a file "
                         "in a directory that exists and that this user may write") from None
    for name in (path, f"{path}-wal", f"{path}-shm", f"{path}-journal"):
        try:
            if os.stat(name).st_mode & 0o077:
                os.chmod(name, 0o600)
        except OSError:  # not there, or not ours: SQLite will say if it cannot open it
            continue
