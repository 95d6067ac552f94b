"""The SQLite recorder of the rooms' events: the library's, plus lean reads and appends.

The library reads events as StoredEvents, with a UUID made from text and a
`sqlite3.Row` per row; an audit reads a whole stream (or a long part of it),
where those were a third of the cost of reading. `select_stream` gives the plain rows that the
mapper's `stream` turns into events, as the PostgreSQL recorder does. A room's load
reads its latest snapshot and the events after it in one transaction (`select_room`,
as on PostgreSQL; the library's repository takes two), and an append is one INSERT of
all its events (the library sends one a row).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import (
    DatabaseError,
    DataError,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    PersistenceError,
    ProgrammingError,
    StoredEvent,
)
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor, SQLiteDatastore

from dune_ledger.application.stream import as_room_id

# An append of more events (an import's batch) goes row by row, as the library sends it:
# one statement's variables are bounded (SQLITE_MAX_VARIABLE_NUMBER).
ONE_STATEMENT_UP_TO = 64
# The library's names for sqlite3's errors, in the order its transaction tries them.
LIBRARY_ERRORS: tuple[tuple[type[sqlite3.Error], type[PersistenceError]], ...] = (
    (sqlite3.InterfaceError, InterfaceError), (sqlite3.DataError, DataError),
    (sqlite3.OperationalError, OperationalError), (sqlite3.IntegrityError, IntegrityError),
    (sqlite3.InternalError, InternalError), (sqlite3.ProgrammingError, ProgrammingError),
    (sqlite3.NotSupportedError, NotSupportedError), (sqlite3.DatabaseError, DatabaseError),
    (sqlite3.Error, PersistenceError))


class RoomsSQLiteRecorder(SQLiteApplicationRecorder):
    def __init__(self, datastore: SQLiteDatastore,
                 events_table_name: str = "stored_events") -> None:
        super().__init__(datastore, events_table_name=events_table_name)
        # The library names the snapshots table after the events table ("x_events",
        # "x_snapshots").
        snapshots = self.events_table_name.removesuffix("_events") + "_snapshots"
        self.room_statement = (
            f"WITH s AS (SELECT originator_version, topic, state FROM {snapshots} "
            "WHERE originator_id = ?1 ORDER BY originator_version DESC LIMIT 1) "
            "SELECT * FROM s UNION ALL "
            f"SELECT originator_version, topic, state FROM {self.events_table_name} "
            "WHERE originator_id = ?1 "
            "AND originator_version > COALESCE((SELECT originator_version FROM s), 0) "
            "ORDER BY originator_version")
        self.insert_statements = {n: f"INSERT INTO {self.events_table_name} VALUES "
                                  + ",".join(["(?,?,?,?)"] * n)
                                  for n in range(1, ONE_STATEMENT_UP_TO + 1)}

    def select_room(self, room_id: UUID) -> list[StoredEvent]:
        """The room's latest snapshot, if any, then every event after it: one read."""
        rows, _ = self.one_statement(False, self.room_statement, (room_id.hex,))
        return [StoredEvent(originator_id=room_id, originator_version=version, topic=topic,
                            state=state) for version, topic, state in rows]

    def insert_events(self, stored_events: Sequence[StoredEvent],
                      **kwargs: Any) -> Sequence[int] | None:
        """An append of a command's few events: one INSERT, its own transaction."""
        n = len(stored_events)
        statement = self.insert_statements.get(n)
        if statement is None or kwargs.get("tracking") is not None:
            return super().insert_events(stored_events, **kwargs)
        _, last = self.one_statement(True, statement, self.parameters(stored_events))
        return list(range(last - n + 1, last + 1))

    def one_statement(self, write: bool, statement: str, params: Sequence[Any]
                      ) -> tuple[list[Any], int]:
        """Run one statement on a connection of the pool, as its own transaction: the
        connections are in autocommit mode, and one statement reads one snapshot or
        writes all its rows or none. The library's transaction would add a BEGIN and a
        COMMIT or ROLLBACK to it, each a call into SQLite. Its errors as the library
        names them (the compare-and-set of an append is an IntegrityError). Its rows, as
        plain tuples, and the last row id it inserted."""
        with self.datastore.get_connection(commit=write) as conn:
            cursor = conn.cursor().sqlite_cursor
            cursor.row_factory = None
            try:
                cursor.execute(statement, params)
                rows = cursor.fetchall()
            except sqlite3.Error as e:
                ours = next(ours for theirs, ours in LIBRARY_ERRORS if isinstance(e, theirs))
                raise ours(e) from e
            finally:
                cursor.close()
        return rows, cursor.lastrowid or 0

    @staticmethod
    def parameters(stored_events: Sequence[StoredEvent]) -> list[Any]:
        params: list[Any] = []
        for e in stored_events:
            room = e.originator_id
            params += (room.hex if isinstance(room, UUID) else room, e.originator_version,
                       e.topic, e.state)
        return params

    def _insert_events(self, c: SQLiteCursor, stored_events: Sequence[StoredEvent],
                       **kwargs: Any) -> Sequence[int] | None:
        """The append's events in one INSERT; their rowids (the notification ids) follow
        each other, the transaction holding the database's write lock."""
        n = len(stored_events)
        statement = self.insert_statements.get(n)
        if statement is None:
            return super()._insert_events(c, stored_events, **kwargs)
        c.execute(statement, self.parameters(stored_events))
        last = c.lastrowid
        assert last is not None
        return list(range(last - n + 1, last + 1))

    def convert_originator_id(self, originator_id: Any) -> Any:
        """A stored room id as a UUID; a value that is not one (SQLite keeps any type in
        any column) is left as it is, for the mapper to refuse: the library's own
        conversion raised, and one such row stopped every follower of the log."""
        room = as_room_id(originator_id)
        return originator_id if room is None else room

    def select_stream(self, room_id: UUID, gt: int | None = None,
                      lte: int | None = None) -> list[tuple[int, str, bytes]]:
        """A room's events (after `gt`, up to `lte`) as (version, topic, stored bytes),
        in version order."""
        statement = (f"SELECT originator_version, topic, state FROM {self.events_table_name} "
                     "WHERE originator_id=?")
        params: list[Any] = [room_id.hex]
        if gt is not None:
            statement += " AND originator_version>?"
            params.append(gt)
        if lte is not None:
            statement += " AND originator_version<=?"
            params.append(lte)
        with self.datastore.transaction(commit=False) as c:
            cursor = c.sqlite_cursor
            cursor.row_factory = None  # plain tuples, not a sqlite3.Row per row
            cursor.execute(statement + " ORDER BY originator_version ASC", params)
            return cursor.fetchall()

    def select_room_ids(self) -> list[UUID]:
        """Every room with any stored event, in the order of its first: an audit of all
        rooms also finds one whose RoomCreated was deleted or renamed."""
        with self.datastore.transaction(commit=False) as c:
            cursor = c.sqlite_cursor
            cursor.row_factory = None
            cursor.execute(f"SELECT originator_id FROM {self.events_table_name} "
                           "GROUP BY originator_id ORDER BY MIN(rowid)")
            # A stored id that is not a room's names no room to audit.
            return [room for room in map(as_room_id, (r for r, in cursor.fetchall()))
                    if room is not None]
