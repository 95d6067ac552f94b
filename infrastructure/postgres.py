"""The PostgreSQL recorder of the rooms' events: an append is one statement.

The library's recorder appends in a client-side transaction: lock the events
table, notify, insert a composite array, then commit, two round trips with
the table lock held in between, and the composite array encoded in Python.
Here a server function does the same under the same lock, from arrays built
of scalar parameters, in one autocommitted statement. The guarantee is the library's: an
EXCLUSIVE lock on the table from before the notification ids are drawn until
the commit, so ids commit in order and a reader following the log never
skips one that commits later (`tests/test_pg_lock.py`).

The append and the room's load, the two statements of a command, are sent
through libpq directly (`libpq_run`) on the pool's connections: psycopg's
cursor cost a tenth of a command in the client's CPU. Longer reads (an
audit's) go through the cursor, whose rows are built in C.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Sequence
from typing import Any, cast
from urllib.parse import parse_qsl
from uuid import UUID
from weakref import WeakKeyDictionary

from eventsourcing.persistence import (
    IntegrityError,
    InterfaceError,
    OperationalError,
    StoredEvent,
)
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore, PostgresFactory
from eventsourcing.utils import retry
from psycopg import Connection, errors, pq
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Composed, Identifier

from application.rooms import AppendRetried

MAX_PARAMETERS = 65535  # PostgreSQL's limit on one statement's parameters
MAX_EVENTS_PER_APPEND = (MAX_PARAMETERS - 1) // 4
PREPARED_UP_TO = 16
# An append whose connection was lost is sent again this many times in all, this many
# seconds apart (the library's retry of its statements).
APPEND_ATTEMPTS, APPEND_RETRY_WAIT = 10, 0.2
RECONNECT_TIMEOUT = 2.0  # seconds the pool retries a lost connection before it gives up
EVENT_COLUMNS = "originator_id, originator_version, topic, state"
ROOM_COLUMNS = "originator_version, topic, state"

# Parameter and result types of the statements run through libpq directly (`libpq_run`).
UUID_OID, BIGINT_OID, TEXT_OID, BYTEA_OID = 2950, 20, 25, 17
BIGINT = struct.Struct("!q")
# The statements `libpq_run` has prepared on each connection, by name.
PREPARED: WeakKeyDictionary[pq.abc.PGconn, set[bytes]] = WeakKeyDictionary()
SUCCEEDED = (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK)
PREPARED_STATEMENT_GONE = b"26000"  # invalid_sql_statement_name
READ_ONLY = b"25006"  # read_only_sql_transaction: the server is a standby now


def libpq_run(conn: Connection[Any], name: bytes, text: bytes, types: Sequence[int],
              params: Sequence[bytes], *, prepare: bool = True) -> pq.abc.PGresult:
    """One statement on `conn` straight through libpq, parameters and results in binary.

    The two statements of a command (the append and the room's load) run here.
    Through psycopg's cursor a query cost about 45 µs more of the client's CPU
    (its generator protocol, one more poll per query) than libpq's own
    `PQexecPrepared` on the same connection, which waits with the GIL released.
    `prepare`: a named statement, prepared once per connection (again if the
    session lost it); else an unnamed one. A failure raises psycopg's error, as
    a cursor would, for the library to translate.
    """
    pgconn = conn.pgconn
    formats = [1] * len(params)
    if not prepare:
        return succeeded(conn, pgconn.exec_params(text, params, types, formats, 1))
    prepared = PREPARED.setdefault(pgconn, set())
    if name not in prepared:
        succeeded(conn, pgconn.prepare(name, text, types))
        prepared.add(name)
    result = pgconn.exec_prepared(name, params, formats, 1)
    if result.error_field(pq.DiagnosticField.SQLSTATE) == PREPARED_STATEMENT_GONE:
        prepared.discard(name)  # DISCARD ALL or DEALLOCATE ran on this session
        succeeded(conn, pgconn.prepare(name, text, types))
        prepared.add(name)
        result = pgconn.exec_prepared(name, params, formats, 1)
    return succeeded(conn, result)


def succeeded(conn: Connection[Any], result: pq.abc.PGresult) -> pq.abc.PGresult:
    if result.status in SUCCEEDED:
        return result
    if result.error_field(pq.DiagnosticField.SQLSTATE) == READ_ONLY:
        # The primary this connection reached was demoted (a failover behind a proxy, or
        # a switchover): drop the connection, not just the statement, and let the library
        # retry on a fresh one, which `target_session_attrs=read-write` sends to the
        # new primary. Nothing was written.
        conn.close()
        raise errors.OperationalError("the server takes no writes now (a standby); "
                                      "connecting again")
    if conn.pgconn.status == pq.ConnStatus.BAD:
        # As psycopg reports a lost connection: the library retries the statement,
        # and the pool replaces the connection when it comes back.
        message = result.error_message.decode(errors="replace").strip()
        raise errors.OperationalError(f"the connection is lost: {message}")
    raise errors.error_from_result(result, encoding=conn.info.encoding)


class RoomsRecorder(PostgresApplicationRecorder):
    # What the append function runs before it inserts ({schema}, {table}): the lock
    # that makes ids commit in order. scripts/bench_pg_lock.py measures alternatives.
    append_lock = "LOCK TABLE {schema}.{table} IN EXCLUSIVE MODE"

    def __init__(self, datastore: PostgresDatastore, *,
                 events_table_name: str = "stored_events") -> None:
        super().__init__(datastore, events_table_name=events_table_name)
        schema = Identifier(datastore.schema)
        table = Identifier(self.events_table_name)
        function = Identifier(f"{self.events_table_name}_append")
        # The lock timeout is an argument, not part of the function's text: processes
        # started with different settings share one function.
        self.sql_create_statements.append(SQL(
            "CREATE OR REPLACE FUNCTION {schema}.{function}("
            "ids uuid[], versions bigint[], topics text[], states bytea[], lock_timeout text) "
            "RETURNS SETOF bigint LANGUAGE plpgsql AS $BODY$ "
            "BEGIN "
            "PERFORM set_config('lock_timeout', lock_timeout, true); "
            "{lock}"
            "NOTIFY {channel}; "
            "RETURN QUERY INSERT INTO {schema}.{table} "
            "(originator_id, originator_version, topic, state) "
            "SELECT * FROM unnest(ids, versions, topics, states) "
            "RETURNING notification_id; "
            "END; $BODY$"
        ).format(schema=schema, function=function, table=table,
                 lock=SQL(self.append_lock + "; " if self.append_lock else "").format(
                     schema=schema, table=table),
                 channel=Identifier(self.channel_name)))
        self.append_function = SQL("{schema}.{function}").format(schema=schema,
                                                                  function=function)
        self.append_lock_timeout = f"{datastore.lock_timeout}s"
        self.append_statements: dict[int, bytes] = {}
        self.append_name = f"{self.events_table_name}_append".encode()
        # The library names the snapshots table after the events table ("x_events",
        # "x_snapshots"): a load reads the latest snapshot and the events after it at once.
        snapshots = Identifier(self.events_table_name.removesuffix("_events") + "_snapshots")
        self.room_statement = SQL(
            "WITH s AS (SELECT {columns} "
            "FROM {schema}.{snapshots} WHERE originator_id = $1 "
            "ORDER BY originator_version DESC LIMIT 1) "
            "SELECT * FROM s UNION ALL "
            "SELECT {columns} FROM {schema}.{table} WHERE originator_id = $1 "
            "AND originator_version > COALESCE((SELECT originator_version FROM s), 0) "
            "ORDER BY originator_version"
        ).format(columns=SQL(ROOM_COLUMNS), schema=schema, snapshots=snapshots,
                 table=table).as_bytes(None)
        self.room_name = f"{self.events_table_name}_room".encode()
        self.queries: dict[object, bytes] = {}

    def append_statement(self, n: int) -> bytes:
        """The append of `n` events: one binary parameter per field ($1 to $4n+1).

        Scalars encode in C; four Python-encoded arrays cost more than the insert.
        """
        statement = self.append_statements.get(n)
        if statement is None:
            def row(field: int) -> str:
                return ", ".join(f"${field * n + i + 1}" for i in range(n))
            statement = SQL(
                "SELECT id FROM {function}(ARRAY[{ids}]::uuid[], ARRAY[{versions}]::bigint[], "
                "ARRAY[{topics}]::text[], ARRAY[{states}]::bytea[], ${timeout}) AS id"
            ).format(function=self.append_function, ids=SQL(row(0)), versions=SQL(row(1)),
                     topics=SQL(row(2)), states=SQL(row(3)),
                     timeout=SQL(str(4 * n + 1))).as_bytes(None)
            self.append_statements[n] = statement
        return statement

    def append(self, conn: Connection[Any], stored_events: Sequence[StoredEvent]) -> list[int]:
        """Run the append of `stored_events` on `conn`: their notification ids."""
        n = len(stored_events)
        if 4 * n + 1 > MAX_PARAMETERS:
            raise ValueError(f"one append of {n} events is more than PostgreSQL takes "
                             f"in one statement ({MAX_EVENTS_PER_APPEND})")
        pack = BIGINT.pack
        params = [uuid_bytes(e.originator_id) for e in stored_events]
        params += [pack(e.originator_version) for e in stored_events]
        params += [e.topic.encode() for e in stored_events]
        params += [e.state for e in stored_events]
        params.append(self.append_lock_timeout.encode())
        types = [UUID_OID] * n + [BIGINT_OID] * n + [TEXT_OID] * n + [BYTEA_OID] * n
        # Prepared for the usual few events; a long batch (an import) runs unprepared.
        result = libpq_run(conn, self.append_name + b"_%d" % n, self.append_statement(n),
                           [*types, TEXT_OID], params, prepare=n <= PREPARED_UP_TO)
        get, unpack = not_null(result), BIGINT.unpack
        return [unpack(get(i, 0))[0] for i in range(result.ntuples)]

    def insert_events(self, stored_events: Sequence[StoredEvent],
                      **kwargs: Any) -> Sequence[int] | None:
        """The append, sent again on a fresh connection when its connection is lost (as
        the library's retry does). A lost connection leaves the commit's outcome unknown:
        if a second send finds the versions taken, that may be the first send's doing,
        and the caller is told so (`AppendRetried`) to look."""
        if not stored_events:
            return []
        attempt = 0
        while True:
            attempt += 1
            try:
                with self.datastore.get_connection() as conn:
                    assert conn.autocommit  # the statement is its own transaction
                    return self.append(conn, stored_events)
            except (InterfaceError, OperationalError):
                if attempt == APPEND_ATTEMPTS:
                    raise
                time.sleep(APPEND_RETRY_WAIT)
            except IntegrityError as e:
                if attempt > 1:
                    raise AppendRetried(str(e)) from e
                raise

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def select_room(self, room_id: UUID) -> list[StoredEvent]:
        """The room's latest snapshot, if any, then every event after it: one round trip."""
        with self.datastore.get_connection() as conn:
            result = libpq_run(conn, self.room_name, self.room_statement, [UUID_OID],
                               [uuid_bytes(room_id)])
        get, unpack = not_null(result), BIGINT.unpack
        return [StoredEvent(originator_id=room_id, originator_version=unpack(get(i, 0))[0],
                            topic=get(i, 1).decode(), state=get(i, 2))
                for i in range(result.ntuples)]

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def select_events(self, originator_id: UUID | str, *, gt: int | None = None,
                      lte: int | None = None, desc: bool = False,
                      limit: int | None = None) -> Sequence[StoredEvent]:
        """The library's query, composed once per shape instead of on every call."""
        shape = (gt is not None, lte is not None, desc, limit is not None)
        return self.select(shape, lambda: self.events_query(EVENT_COLUMNS, *shape),
                           {"room": originator_id, "gt": gt, "lte": lte, "limit": limit})

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def select_stream(self, room_id: UUID, gt: int | None = None,
                      lte: int | None = None) -> list[tuple[int, str, bytes]]:
        """A room's events (after `gt`, up to `lte`) as (version, topic, stored bytes),
        for the mapper's `stream`: a long read (an audit) builds no StoredEvent and no
        UUID per row."""
        shape = (gt is not None, lte is not None)
        return self.rows(("stream", *shape),
                         lambda: self.events_query("originator_version, topic, state", *shape),
                         {"room": room_id, "gt": gt, "lte": lte})

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def select_room_ids(self) -> list[UUID]:
        """Every room with any stored event, in the order of its first: an audit of all
        rooms also finds one whose RoomCreated was deleted or renamed."""
        statement = SQL("SELECT originator_id FROM {schema}.{table} GROUP BY originator_id "
                        "ORDER BY MIN(notification_id)").format(
            schema=Identifier(self.datastore.schema), table=Identifier(self.events_table_name))
        with self.datastore.get_connection() as conn, \
                conn.cursor(row_factory=tuple_row) as curs:
            curs.execute(statement)
            return [room for room, in curs.fetchall()]

    def events_query(self, columns: str, gt: bool = False, lte: bool = False,
                     desc: bool = False, limit: bool = False) -> Composed:
        """A room's events, in version order, after %(gt)s, up to %(lte)s, %(limit)s of them."""
        return SQL(
            "SELECT {columns} FROM {schema}.{table} "
            "WHERE originator_id = %(room)s{gt}{lte} ORDER BY originator_version {order}{limit}"
        ).format(
            columns=SQL(columns),
            schema=Identifier(self.datastore.schema),
            table=Identifier(self.events_table_name),
            gt=SQL(" AND originator_version > %(gt)s" if gt else ""),
            lte=SQL(" AND originator_version <= %(lte)s" if lte else ""),
            order=SQL("DESC" if desc else "ASC"),
            limit=SQL(" LIMIT %(limit)s" if limit else ""),
        )

    def select(self, shape: object, statement: Callable[[], Composed],
               params: dict[str, Any]) -> list[StoredEvent]:
        """Events (originator_id, originator_version, topic, state) as StoredEvents."""
        return [StoredEvent(originator_id=room, originator_version=version, topic=topic,
                            state=bytes(state))
                for room, version, topic, state in self.rows(shape, statement, params)]

    def rows(self, shape: object, statement: Callable[[], Composed],
             params: dict[str, Any]) -> list[Any]:
        """Run a query of events, composed once per shape and kept as bytes; plain
        tuples, sent in binary (the stored bytes as they are, not as hex text)."""
        with self.datastore.get_connection() as conn, \
                conn.cursor(row_factory=tuple_row) as curs:
            query = self.queries.get(shape)
            if query is None:
                query = self.queries[shape] = statement().as_bytes(conn)
            curs.execute(query, params, prepare=True, binary=True)
            return curs.fetchall()


def not_null(result: pq.abc.PGresult) -> Callable[[int, int], bytes]:
    """`result.get_value`, for columns that no row leaves NULL."""
    return cast("Callable[[int, int], bytes]", result.get_value)


def uuid_bytes(value: UUID | str) -> bytes:
    return (value if isinstance(value, UUID) else UUID(value)).bytes


def writable(conn: Connection[Any]) -> None:
    """The pool's check of a connection it hands out, without a round trip: one whose
    server is gone, or has told this client it is a standby now (PostgreSQL reports
    `in_hot_standby` and `default_transaction_read_only` as they change), is dropped
    and another one taken, so that after a failover no command is sent to the old
    primary. A server that died unseen is found by the statement, whose error makes
    the pool drop the connection and the library retry on a fresh one."""
    pgconn = conn.pgconn
    if pgconn.status != pq.ConnStatus.OK or b"on" in (
            pgconn.parameter_status(b"in_hot_standby"),
            pgconn.parameter_status(b"default_transaction_read_only")):
        conn.close()  # a connection that fails the check goes back: closed, it is replaced
        raise errors.OperationalError("the pooled connection's server takes no writes now")


def connection_keywords(datastore: PostgresDatastore) -> dict[str, Any]:
    """The keywords of the pool's connections (hosts, timeouts, the URL's libpq options),
    for a connection of its own (a LISTEN)."""
    return {k: v for k, v in cast("dict[str, Any]", datastore.pool.kwargs).items()
            if k != "row_factory" and v not in (None, "")}


class RoomsPostgresFactory(PostgresFactory):
    """The library's factory; the storage URL's query parameters (infrastructure/storage.py
    `libpq_options`) go to libpq on every connection of the pool, with libpq's own
    connect_timeout set (unset, libpq waits 130 s for each host of a multi-host URL),
    and the pool checks each connection it hands out (`writable`)."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        # The library builds the pool's connection keywords itself, and gives its
        # connect timeout to the pool only (the wait for a free connection); the pool
        # opens on first use, after this.
        kwargs = self.datastore.pool.kwargs
        if isinstance(kwargs, dict):
            # libpq counts whole seconds and takes 1 as 2.
            kwargs["connect_timeout"] = max(2, int(self.env.get("POSTGRES_CONNECT_TIMEOUT")
                                                   or 5))
            kwargs.update(parse_qsl(self.env.get("DUNE_LEDGER_PG_LIBPQ") or "",
                                    keep_blank_values=True))
        if not self.datastore.pre_ping:  # the library's pre-ping is a check of its own
            self.datastore.pool._check = writable
        # The pool reconnects in the background, waiting twice as long after each failure
        # (up to minutes after an outage of seconds); giving up soon, it tries again at
        # once when a request waits for a connection, so a new primary is used within
        # seconds of its promotion.
        self.datastore.pool.reconnect_timeout = RECONNECT_TIMEOUT
