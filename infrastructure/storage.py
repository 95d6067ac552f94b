"""Storage selection from one URL, and how envelopes become stored bytes.

`sqlite:///PATH` (default `sqlite:///dune-ledger.db`), `memory://`, or
`postgresql://USER[:PASSWORD]@HOST:PORT/DBNAME`.
"""

from __future__ import annotations

import os
from typing import Any, cast
from urllib.parse import unquote, urlparse
from uuid import UUID

import orjson
from eventsourcing.persistence import Mapper, StoredEvent, Transcoder

from application.rooms import RandomnessFactory, RoomsApp
from application.stream import Recorded, RoomSnapshot
from domain.events import EVENT_TYPES
from infrastructure import randomness

DEFAULT_URL = "sqlite:///dune-ledger.db"


class UsageError(ValueError):
    """Bad configuration given by the user (exit 2)."""


class OrjsonTranscoder(Transcoder):
    def encode(self, obj: Any) -> bytes:
        return orjson.dumps(obj)

    def decode(self, data: bytes) -> Any:
        return orjson.loads(data)


class RoomMapper(Mapper[UUID]):
    """Stored topic = the domain event's type name (`FeePaid`, ...), or `RoomSnapshot`.

    Stored events are trusted: loading constructs them without re-validating.
    An older `v` is upcast by the event class before construction.
    """

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        if isinstance(domain_event, RoomSnapshot):
            topic, body = "RoomSnapshot", {"state": domain_event.state, "at": domain_event.at}
        else:
            rec = cast(Recorded, domain_event)
            topic, body = rec.type, rec.payload()
        return StoredEvent(
            originator_id=domain_event.originator_id,
            originator_version=domain_event.originator_version,
            topic=topic,
            state=self.transcoder.encode(body),
        )

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        body = self.transcoder.decode(stored_event.state)
        originator_id = stored_event.originator_id
        if not isinstance(originator_id, UUID):
            originator_id = UUID(str(originator_id))
        if stored_event.topic == "RoomSnapshot":
            return RoomSnapshot(
                originator_id=originator_id,
                originator_version=stored_event.originator_version,
                state=body["state"],
                at=body["at"],
            )
        cls = EVENT_TYPES[stored_event.topic]
        fact = body["fact"]
        if body["v"] != cls.schema_version:
            fact = cls.upcast(fact, body["v"])
        return Recorded(
            originator_id=originator_id,
            originator_version=stored_event.originator_version,
            fact=cls.model_construct(**fact),
            prev_hash=body["prev"],
            seat=body["seat"],
            command_id=body["cmd"],
            append=body["append"],
            at=body["at"],
            meta=body["meta"],
        )


def environment(url: str) -> dict[str, str]:
    """The eventsourcing environment for a storage URL."""
    env = {
        "MAPPER_TOPIC": "infrastructure.storage:RoomMapper",
        "TRANSCODER_TOPIC": "infrastructure.storage:OrjsonTranscoder",
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
        env["SQLITE_DBNAME"] = path
        env["SQLITE_LOCK_TIMEOUT"] = os.environ.get("DUNE_LEDGER_SQLITE_LOCK_TIMEOUT", "10")
    elif parsed.scheme in ("postgresql", "postgres"):
        if not parsed.hostname or not parsed.path.strip("/"):
            raise UsageError(f"'{url}' needs a host and a database name")
        env["PERSISTENCE_MODULE"] = "eventsourcing.postgres"
        env["POSTGRES_DBNAME"] = parsed.path.strip("/")
        env["POSTGRES_HOST"] = parsed.hostname
        env["POSTGRES_PORT"] = str(parsed.port or 5432)
        env["POSTGRES_USER"] = unquote(parsed.username or "postgres")
        env["POSTGRES_PASSWORD"] = unquote(parsed.password or "")
    else:
        raise UsageError(
            f"unknown storage URL '{url}': use sqlite:///PATH, postgresql://... or memory://"
        )
    return env


def open_rooms(url: str | None = None, *, randomness_factory: RandomnessFactory | None = None,
               **extra_env: str) -> RoomsApp:
    url = url or os.environ.get("DUNE_LEDGER_DB") or DEFAULT_URL
    env = environment(url)
    env.update(extra_env)
    return RoomsApp(env, randomness=randomness_factory or randomness.for_room)
