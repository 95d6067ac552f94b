"""The PostgreSQL recorder of the rooms' events: an append is one statement.

Notification ids follow commit order without a lock (docs/ordering.md): an
append numbers its events after its own transaction id (`ID_SHIFT` bits for
the events of one transaction), and a follower reads only ids below the
oldest transaction still running (`pg_snapshot_xmin`), every one of which has
committed or rolled back for good. Appends to different rooms commit in
parallel and a reader following the log never skips an id that commits later
(`tests/test_pg_lock.py`). The NOTIFY that wakes followers is sent after the
commit, at most one every few milliseconds per process (`Notifier`): inside
the append it would serialize every commit on PostgreSQL's notification queue lock.

The append and the room's load, the two statements of a command, are sent
through libpq directly (`libpq_run`) on the pool's connections: psycopg's
cursor cost a tenth of a command in the client's CPU. Longer reads (an
audit's) go through the cursor, whose rows are built in C.
"""

from __future__ import annotations

import hashlib
import select
import struct
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast
from urllib.parse import parse_qsl
from uuid import UUID
from weakref import WeakKeyDictionary

import psycopg
from eventsourcing.persistence import (
    DatabaseError,
    DataError,
    IntegrityError,
    InterfaceError,
    InternalError,
    Notification,
    NotSupportedError,
    OperationalError,
    PersistenceError,
    ProgrammingError,
    StoredEvent,
    Subscription,
)
from eventsourcing.postgres import (
    PostgresAggregateRecorder,
    PostgresApplicationRecorder,
    PostgresDatastore,
    PostgresFactory,
    PostgresSubscription,
)
from eventsourcing.utils import retry
from psycopg import Connection, errors, pq
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Composed, Identifier, Literal

from dune_ledger.application.rooms import AppendRetried

T = TypeVar("T")
MAX_PARAMETERS = 65535  # PostgreSQL's limit on one statement's parameters
MAX_EVENTS_PER_APPEND = (MAX_PARAMETERS - 1) // 4
PREPARED_UP_TO = 16
# An append whose connection was lost is sent again this many times in all, this many
# seconds apart (the library's retry of its statements).
APPEND_ATTEMPTS, APPEND_RETRY_WAIT = 10, 0.2
RECONNECT_TIMEOUT = 2.0  # seconds the pool retries a lost connection before it gives up
CLOSE_WAIT = 5.0  # seconds a closing store waits for a NOTIFY in flight (`Notifier.close`)
# A notification id is the appending transaction's id shifted left by ID_SHIFT bits
# plus the event's place in that transaction: ids rise in transaction-id order, and
# 2**ID_SHIFT events fit one transaction (PostgreSQL's 64-bit transaction ids stay
# below 2**43 for some 280 years at a million transactions a second).
ID_SHIFT = 20
# The advisory lock of a recorder's table creation (`RoomsRecorder._create_table`).
DDL_LOCK_KEY = 0x64756E66
MAX_ID = (1 << 63) - 1
NAME_BYTES = 63  # PostgreSQL's NAMEDATALEN - 1: longer names are cut
LONGEST_SUFFIX = "_append_parts"  # of the names made from the table's (`name_base`)
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
    if name in prepared:
        result = pgconn.exec_prepared(name, params, formats, 1)
        if result.error_field(pq.DiagnosticField.SQLSTATE) != PREPARED_STATEMENT_GONE:
            return succeeded(conn, result)
        prepared.discard(name)  # DISCARD ALL or DEALLOCATE ran on this session
    made, result = prepare_and_run(conn, name, text, types, params, formats)
    succeeded(conn, made)  # the prepare's error, if it failed
    prepared.add(name)  # prepared, whether or not this run succeeds
    return succeeded(conn, result)


def prepare_and_run(conn: Connection[Any], name: bytes, text: bytes, types: Sequence[int],
                    params: Sequence[bytes], formats: list[int]
                    ) -> tuple[pq.abc.PGresult, pq.abc.PGresult]:
    """Prepare and run a statement in one round trip (a pipeline): the prepare's result
    and the run's. Once both are sent, the server runs the statement even if this
    process dies while the prepare waits (an INSERT's prepare takes the table's lock,
    as its run would)."""
    pgconn = conn.pgconn
    results: list[pq.abc.PGresult] = []
    pgconn.enter_pipeline_mode()
    try:
        pgconn.send_prepare(name, text, types)
        pgconn.send_query_prepared(name, params, formats, 1)
        pgconn.pipeline_sync()
        while True:
            wait_for_result(pgconn)
            result = pgconn.get_result()
            if result is None:
                if pgconn.status == pq.ConnStatus.BAD:
                    raise errors.OperationalError("the connection is lost")
                continue  # the end of one statement's results
            if result.status == pq.ExecStatus.PIPELINE_SYNC:
                break
            results.append(result)
    finally:
        if pgconn.status != pq.ConnStatus.BAD:
            pgconn.exit_pipeline_mode()
    return results[0], results[-1]


def wait_for_result(pgconn: pq.abc.PGconn) -> None:
    """Send what is queued and wait until the next result is whole, with the GIL released.

    `PQgetResult` waits holding the GIL, so no other thread of the process runs while a
    statement waits for a lock, not even the one whose transaction holds it: serve's
    worker thread creating its tables stood still in its transaction, and a fresh
    serve's first POST /rooms waited until the server ended that idle transaction
    (DUNE_LEDGER_PG_IDLE_TIMEOUT, 5 s)."""
    poller = select.poll()
    poller.register(pgconn.socket, select.POLLOUT)
    while pgconn.flush():  # the connection is nonblocking: it sends as the socket takes
        poller.poll()
    poller.modify(pgconn.socket, select.POLLIN)
    while pgconn.is_busy():
        poller.poll()
        pgconn.consume_input()


# The library's names for psycopg's errors, in the order its `get_connection` tries them.
LIBRARY_ERRORS: tuple[tuple[type[psycopg.Error], type[PersistenceError]], ...] = (
    (psycopg.InterfaceError, InterfaceError), (psycopg.OperationalError, OperationalError),
    (psycopg.DataError, DataError), (psycopg.IntegrityError, IntegrityError),
    (psycopg.InternalError, InternalError), (psycopg.ProgrammingError, ProgrammingError),
    (psycopg.NotSupportedError, NotSupportedError), (psycopg.DatabaseError, DatabaseError),
    (psycopg.Error, PersistenceError))


def pooled(datastore: PostgresDatastore, run: Callable[[Connection[Any]], T]) -> T:
    """`run` on a connection of the pool, for the two statements of a command (the
    append, the room's load), as the library's `get_connection` lends it: its errors
    as the library names them (its retries and ours look for those).

    Straight from the pool: the library's way is two generator context managers, a
    check that the pool is open, and the connection's commit on the way out (a lock
    and a generator for an autocommit connection that has nothing to commit). The
    bench's begin+select mix on PostgreSQL: 1.73 M to 1.67 M instructions a command
    of the client (callgrind, 200 commands).
    """
    pool = datastore.pool
    if pool.closed:  # not opened yet: the library's way opens it
        with datastore.get_connection() as conn:
            return run(conn)
    try:
        conn = pool.getconn()
        try:
            return run(conn)
        finally:
            pool.putconn(conn)
    except psycopg.Error as e:
        ours = next(ours for theirs, ours in LIBRARY_ERRORS if isinstance(e, theirs))
        raise ours(str(e)) from e


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


def name_base(table: str) -> str:
    """What the names of a table's functions and prepared statements begin with: the
    table's name, or, when that leaves no room for the longest suffix (PostgreSQL cuts
    every name at 63 bytes, and two names cut alike are one: `..._settled_max` became
    `..._settled`, calling itself), its start and a hash of the whole."""
    room = NAME_BYTES - len(LONGEST_SUFFIX)
    if len(table.encode()) <= room:
        return table
    digest = hashlib.sha256(table.encode()).hexdigest()[:8]
    return f"{table.encode()[:room - 9].decode(errors='ignore')}_{digest}"


class RoomsRecorder(PostgresApplicationRecorder):
    def __init__(self, datastore: PostgresDatastore, *,
                 events_table_name: str = "stored_events") -> None:
        super().__init__(datastore, events_table_name=events_table_name)
        self.name_base = name_base(self.events_table_name)
        self.sql_create_statements += self.functions()
        schema = Identifier(datastore.schema)
        table = Identifier(self.events_table_name)
        parts_function = Identifier(f"{self.name_base}_append_parts")
        self.parts_function = SQL("{schema}.{function}").format(schema=schema,
                                                                 function=parts_function)
        follow = Identifier(f"{self.name_base}_follow")
        settled = Identifier(f"{self.name_base}_settled")
        last = Identifier(f"{self.name_base}_settled_max")
        self.follow_statement = SQL(
            "SELECT * FROM {schema}.{follow}(%(after)s, %(below)s, %(topics)s, %(limit)s)"
        ).format(schema=schema, follow=follow)
        self.settled_max_statement = SQL("SELECT {schema}.{last}()").format(
            schema=schema, last=last)
        self.held_back_statement = SQL(
            "SELECT EXISTS (SELECT 1 FROM {schema}.{table} "
            "WHERE notification_id > %(after)s "
            "AND notification_id >= (SELECT {schema}.{settled}()))"
        ).format(schema=schema, table=table, settled=settled)
        self.unread_statement = SQL(
            "SELECT EXISTS (SELECT 1 FROM {schema}.{table} WHERE notification_id > %(after)s)"
        ).format(schema=schema, table=table)
        self.append_statements: dict[int, bytes] = {}
        self.append_name = f"{self.name_base}_append".encode()
        self.notifier = Notifier(self)
        # The factory leaves it on only when DUNE_LEDGER_PG_GROUP_COMMIT says yes.
        self.group: GroupCommit | None = GroupCommit(self.append_parts)
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
        self.room_name = f"{self.name_base}_room".encode()
        self.queries: dict[object, bytes] = {}

    def functions(self) -> list[Composed]:
        """The table's functions, created with it, then the upgrade of a store made before."""
        schema = Identifier(self.datastore.schema)
        table = Identifier(self.events_table_name)
        statements: list[Composed] = []
        # Group commit (`GroupCommit`): the appends of several commands in one statement,
        # each in a subtransaction of its own, so that one room's lost compare-and-set
        # (a unique violation) leaves the others stored. Returns each stored part's
        # first id; its ids run on from it.
        parts_function = Identifier(f"{self.name_base}_append_parts")
        statements.append(SQL(
            "CREATE OR REPLACE FUNCTION {schema}.{function}("
            "ids uuid[], versions bigint[], topics text[], states bytea[], parts bigint[]) "
            "RETURNS TABLE (part bigint, first bigint) LANGUAGE plpgsql AS $BODY$ "
            "DECLARE "
            "base bigint := pg_current_xact_id()::text::bigint << {shift}; "
            "done bigint := 0; "
            "at bigint := 1; "
            "BEGIN "
            "FOR k IN 1 .. cardinality(parts) LOOP "
            "BEGIN "
            "INSERT INTO {schema}.{table} "
            "(notification_id, originator_id, originator_version, topic, state) "
            "SELECT base + done + e.n, e.i, e.v, e.t, e.s FROM unnest("
            "ids[at:at + parts[k] - 1], versions[at:at + parts[k] - 1], "
            "topics[at:at + parts[k] - 1], states[at:at + parts[k] - 1]) "
            "WITH ORDINALITY AS e(i, v, t, s, n); "
            "part := k; first := base + done + 1; "
            "RETURN NEXT; "
            "done := done + parts[k]; "
            "EXCEPTION WHEN unique_violation THEN NULL; "
            "END; "
            "at := at + parts[k]; "
            "END LOOP; "
            "END; $BODY$"
        ).format(schema=schema, function=parts_function, table=table,
                 shift=SQL(str(ID_SHIFT))))
        # What a follower may read: ids below the lowest a transaction of this database
        # still running (or yet to start) can hold, every one of which has committed
        # or rolled back for good (docs/ordering.md). Transactions of other databases
        # of the server do not hold the followers back, as `pg_snapshot_xmin` would.
        # Its first statement's snapshot, then the running ones, then (the caller's
        # next statement) the rows: in that order, or a commit in between is passed.
        settled = Identifier(f"{self.name_base}_settled")
        statements.append(SQL(
            "CREATE OR REPLACE FUNCTION {schema}.{settled}() RETURNS bigint "
            "LANGUAGE plpgsql VOLATILE AS $BODY$ "
            "DECLARE x bigint; low bigint; "
            "BEGIN "
            "IF current_setting('transaction_isolation') <> 'read committed' THEN "
            "RAISE EXCEPTION 'follow the log in read committed transactions'; END IF; "
            "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint INTO x; "
            "PERFORM pg_stat_clear_snapshot(); "
            # backend_xid has 32 bits: below x, within 2**31 of it
            "SELECT MIN(x - ((x % 4294967296 - backend_xid::text::bigint + 4294967296) "
            "% 4294967296)) INTO low FROM pg_stat_activity "
            "WHERE datname = current_database() AND backend_xid IS NOT NULL; "
            "RETURN LEAST(x, COALESCE(low, x)) << {shift}; "
            "END; $BODY$"
        ).format(schema=schema, settled=settled, shift=SQL(str(ID_SHIFT))))
        follow = Identifier(f"{self.name_base}_follow")
        statements.append(SQL(
            "CREATE OR REPLACE FUNCTION {schema}.{follow}("
            "after bigint, below bigint, topics text[], lim bigint) "
            "RETURNS TABLE (notification_id bigint, originator_id uuid, "
            "originator_version bigint, topic text, state bytea) "
            "LANGUAGE plpgsql VOLATILE AS $BODY$ "
            "DECLARE bound bigint; "
            "BEGIN "
            "SELECT LEAST({schema}.{settled}(), below) INTO bound; "
            "RETURN QUERY SELECT e.notification_id, e.originator_id, e.originator_version, "
            "e.topic, e.state FROM {schema}.{table} e "
            "WHERE e.notification_id > after AND e.notification_id < bound "
            "AND (topics IS NULL OR e.topic = ANY(topics)) "
            "ORDER BY e.notification_id LIMIT lim; "
            "END; $BODY$"
        ).format(schema=schema, follow=follow, settled=settled, table=table))
        last = Identifier(f"{self.name_base}_settled_max")
        statements.append(SQL(
            "CREATE OR REPLACE FUNCTION {schema}.{last}() RETURNS bigint "
            "LANGUAGE plpgsql VOLATILE AS $BODY$ "
            "DECLARE bound bigint; m bigint; "
            "BEGIN "
            "SELECT {schema}.{settled}() INTO bound; "
            "SELECT MAX(e.notification_id) INTO m FROM {schema}.{table} e "
            "WHERE e.notification_id < bound; "
            "RETURN m; "
            "END; $BODY$"
        ).format(schema=schema, last=last, settled=settled, table=table))
        statements.append(self.upgrade())
        return statements

    def upgrade(self) -> Composed:
        """The upgrade of a store made before."""
        schema = Identifier(self.datastore.schema)
        table = Identifier(self.events_table_name)
        function = Identifier(f"{self.name_base}_append")
        # A store made before (ids from a sequence, under a table lock) takes the new ids
        # as they are: they start above its last. One that runs ahead of this server's
        # transaction ids (restored on another server) is refused: numbering on would
        # break the log's order.
        return SQL(
            "DO $BODY$ BEGIN "
            "IF (SELECT MAX(notification_id) FROM {schema}.{table}) >= "
            "(pg_snapshot_xmax(pg_current_snapshot())::text::bigint << {shift}) THEN "
            "RAISE EXCEPTION 'the store''s notification ids run ahead of this server''s "
            "transaction ids (was it restored on another server?): export its rooms "
            "(CREATE_TABLE=no dune-ledger export --all -o rooms.jsonl) and import them "
            "into a new store (docs/ordering.md)' "
            "USING ERRCODE = 'object_not_in_prerequisite_state'; "
            "END IF; "
            "IF EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = {s} "
            "AND table_name = {t} AND column_name = 'notification_id' "
            "AND column_default IS NOT NULL) THEN "
            "ALTER TABLE {schema}.{table} ALTER COLUMN notification_id DROP DEFAULT; "
            "END IF; "
            "DROP FUNCTION IF EXISTS {schema}.{function}(uuid[], bigint[], text[], bytea[], text); "
            "DROP FUNCTION IF EXISTS {schema}.{function}(uuid[], bigint[], text[], bytea[]); "
            "END $BODY$"
        ).format(schema=schema, table=table, function=function, shift=SQL(str(ID_SHIFT)),
                 s=Literal(self.datastore.schema), t=Literal(self.events_table_name))

    def _create_table(self, curs: Any) -> None:
        """The library's statements, one process at a time: concurrent `CREATE OR REPLACE
        FUNCTION`s of one function fail ("tuple concurrently updated"), and a process
        whose follower opens the store again (a worker after its connections were cut)
        creates outside `open_rooms`' lock (infrastructure/storage.py `first_use_lock`,
        a session lock of another key, which this must not wait for: the same process
        may hold it). The lock ends with this transaction."""
        curs.execute("SELECT pg_advisory_xact_lock(%s)", (DDL_LOCK_KEY,))
        super()._create_table(curs)

    def append_statement(self, n: int) -> bytes:
        """The append of `n` events: one binary parameter per field ($1 to $4n), then
        how many events the transaction appended before ($4n+1).

        A plain INSERT: through a PL/pgSQL function (the lock's days) an append of one
        event took 53-57 µs of the server against 35-42 µs (20,000 in one session,
        machine shared). Scalars encode in C; four Python-encoded arrays cost more
        than the insert.
        """
        statement = self.append_statements.get(n)
        if statement is None:
            def row(field: int) -> str:
                return ", ".join(f"${field * n + i + 1}" for i in range(n))
            statement = SQL(
                "INSERT INTO {schema}.{table} "
                "(notification_id, originator_id, originator_version, topic, state) "
                "SELECT (pg_current_xact_id()::text::bigint << {shift}) + ${before} + n, "
                "i, v, t, s FROM unnest(ARRAY[{ids}]::uuid[], ARRAY[{versions}]::bigint[], "
                "ARRAY[{topics}]::text[], ARRAY[{states}]::bytea[]) "
                "WITH ORDINALITY AS e(i, v, t, s, n) RETURNING notification_id"
            ).format(schema=Identifier(self.datastore.schema),
                     table=Identifier(self.events_table_name), shift=SQL(str(ID_SHIFT)),
                     before=SQL(str(4 * n + 1)), ids=SQL(row(0)), versions=SQL(row(1)),
                     topics=SQL(row(2)), states=SQL(row(3))).as_bytes(None)
            self.append_statements[n] = statement
        return statement

    def append(self, conn: Connection[Any], stored_events: Sequence[StoredEvent],
               before: int = 0) -> list[int]:
        """Run the append of `stored_events` on `conn`, after `before` events its
        transaction appended already: their notification ids."""
        n = len(stored_events)
        if 4 * n + 1 > MAX_PARAMETERS:
            raise ValueError(f"one append of {n} events is more than PostgreSQL takes "
                             f"in one statement ({MAX_EVENTS_PER_APPEND})")
        if before + n >= 1 << ID_SHIFT:
            raise ValueError(f"one transaction appends at most {(1 << ID_SHIFT) - 1} events")
        pack = BIGINT.pack
        params = [uuid_bytes(e.originator_id) for e in stored_events]
        params += [pack(e.originator_version) for e in stored_events]
        params += [e.topic.encode() for e in stored_events]
        params += [e.state for e in stored_events]
        params.append(pack(before))
        types = [UUID_OID] * n + [BIGINT_OID] * n + [TEXT_OID] * n + [BYTEA_OID] * n
        # Prepared for the usual few events; a long batch (an import) runs unprepared.
        result = libpq_run(conn, self.append_name + b"_%d" % n, self.append_statement(n),
                           [*types, BIGINT_OID], params, prepare=n <= PREPARED_UP_TO)
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
        # Group commit (off unless asked for) does not send a lost append again: its
        # caller gets the error, and a command id makes the client's retry safe.
        ids = self.group.append(stored_events) if self.group else self.append_resent(
            stored_events)
        self.notifier.appended()
        return ids

    def append_resent(self, stored_events: Sequence[StoredEvent]) -> list[int]:
        attempt = 0
        while True:
            attempt += 1
            try:
                return self.append_alone(stored_events)
            except (InterfaceError, OperationalError):
                if attempt == APPEND_ATTEMPTS:
                    raise
                time.sleep(APPEND_RETRY_WAIT)
            except IntegrityError as e:
                if attempt > 1:
                    raise AppendRetried(str(e)) from e
                raise

    def append_alone(self, stored_events: Sequence[StoredEvent]) -> list[int]:
        def run(conn: Connection[Any]) -> list[int]:
            assert conn.autocommit  # the statement is its own transaction
            return self.append(conn, stored_events)
        return pooled(self.datastore, run)

    def append_parts(self, parts: Sequence[Sequence[StoredEvent]]) -> list[list[int] | None]:
        """Several appends (each one command's, or one save's) in one statement, one
        transaction, one commit: each part's ids, or None for a part that lost its
        compare-and-set (the others are stored all the same)."""
        if len(parts) == 1:
            try:
                return [self.append_alone(parts[0])]
            except IntegrityError:
                return [None]
        events = [e for part in parts for e in part]
        n, k = len(events), len(parts)
        if 4 * n + k > MAX_PARAMETERS:
            raise ValueError(f"one group of {n} events is more than PostgreSQL takes "
                             "in one statement")
        pack = BIGINT.pack
        params = [uuid_bytes(e.originator_id) for e in events]
        params += [pack(e.originator_version) for e in events]
        params += [e.topic.encode() for e in events]
        params += [e.state for e in events]
        params += [pack(len(part)) for part in parts]
        types = [UUID_OID] * n + [BIGINT_OID] * n + [TEXT_OID] * n + [BYTEA_OID] * n + \
            [BIGINT_OID] * k

        def row(field: int, size: int) -> str:
            return ", ".join(f"${field * n + i + 1}" for i in range(size))
        statement = SQL(
            "SELECT part, first FROM {function}(ARRAY[{ids}]::uuid[], "
            "ARRAY[{versions}]::bigint[], ARRAY[{topics}]::text[], ARRAY[{states}]::bytea[], "
            "ARRAY[{parts}]::bigint[])"
        ).format(function=self.parts_function, ids=SQL(row(0, n)), versions=SQL(row(1, n)),
                 topics=SQL(row(2, n)), states=SQL(row(3, n)), parts=SQL(row(4, k)))
        with self.datastore.get_connection() as conn:
            result = libpq_run(conn, b"", statement.as_bytes(None), types, params,
                               prepare=False)
        get, unpack = not_null(result), BIGINT.unpack
        stored: list[list[int] | None] = [None] * k
        for r in range(result.ntuples):
            part, first = unpack(get(r, 0))[0], unpack(get(r, 1))[0]
            stored[part - 1] = list(range(first, first + len(parts[part - 1])))
        return stored

    # --- following the log: only what has settled (docs/ordering.md) --------------------

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def select_notifications(self, start: int | None, limit: int, stop: int | None = None,
                             topics: Sequence[str] = (), *,
                             inclusive_of_start: bool = True) -> Sequence[Notification]:
        """The library's query, bounded by what has settled: below it, no lower id
        commits after a higher one was read."""
        after = -1 if start is None else start - 1 if inclusive_of_start else start
        rows = self.rows("follow", lambda: self.follow_statement, {
            "after": after, "below": MAX_ID if stop is None else stop + 1,
            "topics": list(topics) or None, "limit": limit})
        # The columns as stored (a NULL too), for the mapper to read or refuse.
        return [Notification(id=i, originator_id=room, originator_version=version,
                             topic=topic, state=state)
                for i, room, version, topic, state in rows]

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def max_notification_id(self) -> int | None:
        """The last id that has settled: a follower starting after it skips nothing."""
        return cast("int | None", self.rows("max", lambda: self.settled_max_statement,
                                            {})[0][0])

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def count_after(self, after: int) -> int:
        """How many settled events come after `after` (ids are not counts)."""
        return int(self.rows("count", lambda: SQL(
            "SELECT count(*) FROM {schema}.{table} WHERE notification_id > %(after)s "
            "AND notification_id < (SELECT {schema}.{settled}())").format(
                schema=Identifier(self.datastore.schema),
                table=Identifier(self.events_table_name),
                settled=Identifier(f"{self.name_base}_settled")),
            {"after": after})[0][0])

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def committed_max(self) -> int | None:
        """The last id committed, settled or not (a catch-up waits until it settles)."""
        return cast("int | None", self.rows("committed", lambda: SQL(
            "SELECT MAX(notification_id) FROM {schema}.{table}").format(
                schema=Identifier(self.datastore.schema),
                table=Identifier(self.events_table_name)), {})[0][0])

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def held_back(self, after: int | None) -> bool:
        """Whether an event after `after` has committed but not settled yet (a follower
        reads it once the transactions older than it end)."""
        return bool(self.rows("held", lambda: self.held_back_statement,
                              {"after": after or 0})[0][0])

    def unread(self, after: int | None) -> bool:
        """Whether an event after `after` has committed, settled or not. Not settled, a
        follower reads it once the transactions older than it end; settled, it may have
        settled just after the follower's last read found nothing: either way the
        follower reads again."""
        return bool(self.rows("unread", lambda: self.unread_statement,
                              {"after": after or 0})[0][0])

    def subscribe(self, gt: int | None = None,
                  topics: Sequence[str] = ()) -> Subscription[Any]:
        return RoomsSubscription(recorder=self, gt=gt, topics=topics)

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def select_room(self, room_id: UUID) -> list[StoredEvent]:
        """The room's latest snapshot, if any, then every event after it: one round trip."""
        result = pooled(self.datastore, lambda conn: libpq_run(
            conn, self.room_name, self.room_statement, [UUID_OID], [uuid_bytes(room_id)]))
        # A topic or state stored NULL stays None, for the mapper to refuse.
        get, unpack = result.get_value, BIGINT.unpack
        events = []
        for i in range(result.ntuples):
            topic = get(i, 1)
            events.append(StoredEvent(
                originator_id=room_id, originator_version=unpack(cast(bytes, get(i, 0)))[0],
                topic=cast(str, None if topic is None else topic.decode()),
                state=cast(bytes, get(i, 2))))
        return events

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
                            state=state)
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


class RoomSnapshotsRecorder(PostgresAggregateRecorder):
    """The rooms' snapshots table, read as the events table is (`RoomsRecorder`): the
    library's read failed on a state stored NULL (`bytes(None)`) before the mapper could
    refuse the row, and one room's row made its every load fail with a TypeError."""

    def __init__(self, datastore: PostgresDatastore, *,
                 events_table_name: str = "stored_events") -> None:
        super().__init__(datastore, events_table_name=events_table_name)
        self.queries: dict[object, bytes] = {}

    select_events = RoomsRecorder.select_events
    events_query = RoomsRecorder.events_query
    select = RoomsRecorder.select
    rows = RoomsRecorder.rows


class RoomsSubscription(PostgresSubscription):
    """The library's LISTEN/NOTIFY subscription, reading again every POLL seconds while
    an event has committed that it has not read: one not settled yet settles when an
    older transaction ends, which need not notify, and one may settle just after a read
    found nothing below the bound (a notification may have been lost, too)."""

    POLL = 0.1

    def _listen(self) -> None:
        try:
            with self._recorder.datastore.get_connection() as conn:
                conn.execute(SQL("LISTEN {0}").format(Identifier(self._recorder.channel_name)))
                while not self._has_been_stopped and not self._thread_error:
                    woken = False
                    for _ in conn.notifies(timeout=self.POLL, stop_after=1):
                        woken = True
                    recorder = cast("RoomsRecorder", self._recorder)
                    if woken or recorder.unread(self._last_notification_id):
                        self._has_been_notified.set()
        except BaseException as e:
            if self._thread_error is None:
                self._thread_error = e
            self.stop()


class GroupCommit:
    """Appends that arrive together in one process share one transaction and one commit.

    The first append to arrive runs at once, alone (a lone command waits for
    nobody). Appends that arrive while it runs queue; when it is done, the
    first of them leads: it runs every queued append in one statement
    (`RoomsRecorder.append_parts`), then hands over to the first that came in
    meanwhile. Each append keeps its own compare-and-set: one that loses it
    raises IntegrityError in its own thread, as alone, and the others stand.
    """

    def __init__(self, run: Callable[[Sequence[Sequence[StoredEvent]]],
                                     list[list[int] | None]]) -> None:
        self.run = run
        self.lock = threading.Lock()
        self.queue: list[Waiting] = []
        self.busy = False

    def append(self, stored_events: Sequence[StoredEvent]) -> list[int]:
        me = Waiting(stored_events)
        with self.lock:
            self.queue.append(me)
            if not self.busy:
                self.busy = me.leads = True
        if not me.leads:
            me.woken.wait()
        if me.leads:
            self.lead()
        if me.error is not None:
            raise me.error
        if me.ids is None:
            raise IntegrityError(f"room {stored_events[0].originator_id}: another append "
                                 f"took version {stored_events[0].originator_version}")
        return me.ids

    def lead(self) -> None:
        with self.lock:
            batch, self.queue = self.queue, []
        try:
            stored = self.run([w.events for w in batch])
            for w, ids in zip(batch, stored, strict=True):
                w.ids = ids
        except BaseException as e:  # every append of the group fails as it would alone
            for w in batch:
                w.error = e
        finally:
            with self.lock:
                if self.queue:
                    self.queue[0].leads = True
                    self.queue[0].woken.set()
                else:
                    self.busy = False
            for w in batch:
                w.woken.set()


class Waiting:
    """One append waiting in a `GroupCommit`: its events, then its ids or its error."""

    def __init__(self, events: Sequence[StoredEvent]) -> None:
        self.events = events
        self.leads = False
        self.woken = threading.Event()
        self.ids: list[int] | None = None
        self.error: BaseException | None = None


class Notifier:
    """NOTIFY the recorder's channel after appends commit: at most one NOTIFY every
    INTERVAL seconds from a process, sent by a thread of its own.

    A NOTIFY inside the append would hold PostgreSQL's notification queue lock from
    the commit's start to its end (its WAL flush included), serializing every append
    of the server: pgbench on this machine, 8 clients, insert 7,900/s, insert+NOTIFY
    1,800-4,200/s. Sent after the commit, one NOTIFY covers every append that
    committed before it started. One per append cost a lone process a transaction of
    its own per command (a third of the client's CPU and a sixth of the server's,
    docs/benchmarks.md "A command at the cost of two inserts"): the appends of an
    interval share one. A lone command's NOTIFY goes at once; a follower learns of a
    busy process's appends at most INTERVAL later, and followers poll besides
    (`RoomsSubscription.POLL`).
    """

    INTERVAL = 0.01

    def __init__(self, recorder: RoomsRecorder) -> None:
        self.recorder = recorder
        self.asked = False  # an append committed that no NOTIFY has covered yet
        self.woken = threading.Event()
        self.stopped = threading.Event()
        self.start = threading.Lock()
        self.thread: threading.Thread | None = None
        # A NOTIFY takes a transaction id, so its commit would wait for a WAL flush of
        # its own; nothing of it needs to survive a crash (followers read the log).
        self.statement = SQL("BEGIN; SET LOCAL synchronous_commit = off; NOTIFY {0}; "
                             "COMMIT").format(Identifier(recorder.channel_name))

    def appended(self) -> None:
        if not self.asked:
            self.asked = True
            self.woken.set()
        if self.thread is None:
            with self.start:
                if self.thread is None and not self.stopped.is_set():
                    self.thread = threading.Thread(target=self.run, name="notifier",
                                                   daemon=True)
                    self.thread.start()

    def run(self) -> None:
        """The only sender while the process runs: no lock is held across a round trip
        (at exit, a daemon thread stopped in one would hold it for good)."""
        while True:
            self.woken.wait()
            self.woken.clear()
            sent = self.send()
            if self.stopped.is_set():
                return
            # Appends meanwhile share the next NOTIFY; the store away, followers poll.
            self.stopped.wait(self.INTERVAL if sent else 0.2)

    def send(self) -> bool:
        """NOTIFY now if an append asked for it; False if it could not be sent."""
        if not self.asked:
            return True
        self.asked = False  # an append that commits after this asks again
        try:
            with self.recorder.datastore.get_connection() as conn:
                conn.execute(self.statement)
        except Exception:
            self.asked = True
            return False
        return True

    def close(self) -> None:
        """The last appends' NOTIFY (a one-shot command's), then the thread ends; a
        second close (the library's `__del__`, at the interpreter's exit, where a
        daemon thread stops wherever it stands) returns at once."""
        if self.stopped.is_set():
            return
        self.stopped.set()
        thread = self.thread
        if thread is None:
            self.send()
            return
        self.woken.set()
        thread.join(timeout=CLOSE_WAIT)


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
    connect_timeout set (unset, libpq waits 130 s for each host of a multi-host URL) and a
    statement timeout (an append is one statement, its own transaction, and a
    transaction that runs long holds every follower back: docs/ordering.md); the pool
    checks each connection it hands out (`writable`)."""

    aggregate_recorder_class = RoomSnapshotsRecorder

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.recorders: list[RoomsRecorder] = []
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
            # The settings' statement timeout, as storage.environment passes it (0: none).
            seconds = int(self.env.get("DUNE_LEDGER_PG_STATEMENT_TIMEOUT") or 0)
            if seconds > 0:
                kwargs["options"] = " ".join(
                    filter(None, [kwargs.get("options"), f"-c statement_timeout={seconds}s"]))
        if not self.datastore.pre_ping:  # the library's pre-ping is a check of its own
            self.datastore.pool._check = writable
        # The pool reconnects in the background, waiting twice as long after each failure
        # (up to minutes after an outage of seconds); giving up soon, it tries again at
        # once when a request waits for a connection, so a new primary is used within
        # seconds of its promotion.
        self.datastore.pool.reconnect_timeout = RECONNECT_TIMEOUT

    def application_recorder(self) -> Any:
        recorder = super().application_recorder()
        if isinstance(recorder, RoomsRecorder):
            self.recorders.append(recorder)
            # Off unless asked for: on this project's machine (2 cores, CPU-bound) it
            # measured 0.80 and 0.83 of one transaction a command at 32 clients
            # (scripts/bench_group_commit.py, docs/benchmarks.md).
            if self.env.get("DUNE_LEDGER_PG_GROUP_COMMIT") != "yes":  # storage.environment's
                recorder.group = None
        return recorder

    def close(self) -> None:
        # The last appends' NOTIFY, before the pool goes (a one-shot command's).
        for recorder in self.recorders:
            recorder.notifier.close()
        super().close()
