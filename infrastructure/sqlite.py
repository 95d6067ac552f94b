"""The SQLite recorder of the rooms' events: the library's, plus a lean whole-stream read.

The library reads events as StoredEvents, with a UUID made from text and a
`sqlite3.Row` per row; an audit reads a whole stream, where those were a
third of the cost of reading. `select_stream` gives the plain rows that the
mapper's `stream` turns into events, as the PostgreSQL recorder does.
"""

from __future__ import annotations

from uuid import UUID

from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore


class RoomsSQLiteRecorder(SQLiteApplicationRecorder):
    def __init__(self, datastore: SQLiteDatastore, *,
                 events_table_name: str = "stored_events") -> None:
        super().__init__(datastore, events_table_name)
        self.select_stream_statement = (
            f"SELECT originator_version, topic, state FROM {self.events_table_name} "
            "WHERE originator_id=? ORDER BY originator_version ASC"
        )

    def select_stream(self, room_id: UUID) -> list[tuple[int, str, bytes]]:
        """Every event of a room as (version, topic, stored bytes), in version order."""
        with self.datastore.transaction(commit=False) as c:
            cursor = c.sqlite_cursor
            cursor.row_factory = None  # plain tuples, not a sqlite3.Row per row
            cursor.execute(self.select_stream_statement, [room_id.hex])
            return cursor.fetchall()
