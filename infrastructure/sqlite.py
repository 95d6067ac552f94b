"""The SQLite recorder of the rooms' events: the library's, plus a lean stream read.

The library reads events as StoredEvents, with a UUID made from text and a
`sqlite3.Row` per row; an audit reads a whole stream (or a long part of it),
where those were a third of the cost of reading. `select_stream` gives the plain rows that the
mapper's `stream` turns into events, as the PostgreSQL recorder does.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.sqlite import SQLiteApplicationRecorder

from dune_ledger.application.stream import as_room_id


class RoomsSQLiteRecorder(SQLiteApplicationRecorder):
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
