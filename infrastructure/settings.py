"""The operator's settings: every `DUNE_LEDGER_*` variable of the README's
"Configuration" table, read from the environment once per process, typed, with the
table's defaults.

`current()` is this process's settings, read the first time something asks; a bad value
is a `UsageError` that names the variable and what to set (the CLI reads them at start:
exit 2). `Settings()` reads the environment anew, and `Settings(room_cache=0)` sets a
value over it (tests; `open_rooms(settings=...)`). This is the one module that reads the
environment: the other layers are handed the values they need.

eventsourcing's own variables (`POSTGRES_*`, `CREATE_TABLE`, ...) stay the library's: it
reads them itself. `APPLICATION_RECORDER_TOPIC` is read here too, to be checked at start.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from annotated_types import Ge
from pydantic import Field, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from dune_ledger.application.store import DEFAULT_ROOM_CACHE, SNAPSHOT_INTERVAL
from dune_ledger.infrastructure.errors import UsageError
from dune_ledger.projections.read_models import DEFAULT_CACHE

PREFIX = "DUNE_LEDGER_"
OUR_RECORDER = "dune_ledger.infrastructure.postgres:RoomsRecorder"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=PREFIX, env_ignore_empty=True,
                                      frozen=True, populate_by_name=True)

    # storage: sqlite:///PATH, postgresql://..., memory:// (`--db` comes first)
    db: str = "sqlite:///dune-ledger.db"
    # the signing (and cipher) key file, outside the database
    key_file: Path = Path("dune-ledger.key")
    # the operator's token for the operator routes; empty: serve listens on loopback only
    admin_token: str = Field("", repr=False)
    # other origins that may call the API and frame the seat page (comma or space separated)
    cors_origins: Annotated[tuple[str, ...], NoDecode] = ()
    # open event streams one client address may hold in one serve process
    streams_per_client: int = Field(64, ge=1)
    # a snapshot of a room every this many events
    snapshot_interval: int = Field(SNAPSHOT_INTERVAL, ge=1)
    # rooms a process keeps in memory between commands (0: none)
    room_cache: int = Field(DEFAULT_ROOM_CACHE, ge=0)
    # room states each projector keeps in memory
    projection_cache: int = Field(DEFAULT_CACHE, ge=1)
    # seconds a SQLite writer waits for the lock
    sqlite_lock_timeout: int = Field(10, ge=0)
    # PostgreSQL: connections each process keeps open, and more under load
    pg_pool_size: int = Field(2, ge=1)
    pg_max_overflow: int = Field(8, ge=0)
    # seconds to connect (libpq's connect_timeout, per host), or to wait for a pooled one
    pg_connect_timeout: int = Field(5, ge=0)
    # the library's lock timeout, seconds (0: none)
    pg_lock_timeout: int = Field(10, ge=0)
    # seconds a statement may run (0: no bound)
    pg_statement_timeout: int = Field(30, ge=0)
    # commands of one process that arrive together share a transaction
    pg_group_commit: bool = False
    # seconds a session may sit idle inside a transaction
    pg_idle_timeout: int = Field(5, ge=0)
    # requests that may queue for a connection (0: no bound)
    pg_max_waiting: int = Field(0, ge=0)
    # check each borrowed connection first (a round trip per query)
    pg_pre_ping: bool = False
    # eventsourcing's: another PostgreSQL recorder class, `module:Class` (benchmarks)
    recorder_topic: str = Field("", validation_alias="APPLICATION_RECORDER_TOPIC")
    # seconds a room's last event must age before an autopilot seat acts
    autopilot_pace: float = Field(2.0, ge=0, allow_inf_nan=False)
    log_format: Literal["text", "json"] = "text"
    # None: the command's own (INFO for serve and worker, WARNING for the others)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] | None = None
    # print the traceback of an unexpected error
    debug: bool = False

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _origins(cls, value: Any) -> Any:
        return value.replace(",", " ").split() if isinstance(value, str) else value

    @field_validator("log_format", mode="before")
    @classmethod
    def _format(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("log_level", mode="before")
    @classmethod
    def _level(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("recorder_topic")
    @classmethod
    def _recorder(cls, topic: str) -> str:
        if topic:
            from eventsourcing.postgres import PostgresApplicationRecorder
            from eventsourcing.utils import resolve_topic

            try:
                found = resolve_topic(topic)
            except Exception:  # the library raises TopicError, ImportError or AttributeError
                found = None
            if not (isinstance(found, type) and issubclass(found, PostgresApplicationRecorder)):
                raise ValueError("names no PostgreSQL recorder class (module:Class)")
        return topic


def variable(name: str) -> str:
    """The environment variable of a setting: `room_cache` is DUNE_LEDGER_ROOM_CACHE."""
    alias = Settings.model_fields[name].validation_alias
    return alias if isinstance(alias, str) else PREFIX + name.upper()


def expected(field: FieldInfo) -> str:
    """What a setting takes, in words: 'a whole number, at least 1', 'yes or no'."""
    kind = field.annotation
    if kind is bool:
        return "yes or no"
    if kind in (int, float):
        words = "a whole number" if kind is int else "a number"
        least = [m.ge for m in field.metadata if isinstance(m, Ge)]
        return f"{words}, at least {least[0]}" if least else words
    return "one of " + ", ".join(choices(kind))


def choices(kind: Any) -> list[str]:
    """The words a `Literal[...]` (or `Literal[...] | None`) allows."""
    found = get_args(kind)
    return [c for c in found if isinstance(c, str)] or [c for k in found for c in choices(k)]


def refusal(error: ValidationError) -> UsageError:
    """The usage error for bad settings: each variable, what it takes, and what it got."""
    lines = []
    for found in error.errors():
        name = next(n for n, f in Settings.model_fields.items()
                    if found["loc"][0] in (n, f.validation_alias))
        if name == "recorder_topic":
            lines.append(f"{variable(name)} '{found['input']}' {found['ctx']['error']}; "
                         "unset it for the default")
        else:
            lines.append(f"{variable(name)} must be {expected(Settings.model_fields[name])}, "
                         f"not '{found['input']}': set it so, or unset it for the default")
    return UsageError("; ".join(lines))


def read() -> Settings:
    """The settings as the environment gives them now."""
    try:
        return Settings()
    except ValidationError as e:
        raise refusal(e) from None


@functools.cache
def current() -> Settings:
    """This process's settings, read from the environment the first time they are asked for."""
    return read()


def change(**values: str | int) -> None:
    """Change settings for the rest of this process and the processes it starts (uvicorn's
    workers read theirs from the environment)."""
    os.environ.update({variable(name): str(value) for name, value in values.items()})
    current.cache_clear()


def given(name: str) -> bool:
    """Whether the operator set a setting, rather than leaving it to its default."""
    return name in current().model_fields_set
