"""Whose token is it: a room's seat and spectator tokens, known by their hashes.

A token is shown once and never stored: the room keeps its sha256 hash
(`RoomCreated`'s meta, `SeatTokenReissued`). A process remembers each room's hashes
for TOKEN_TTL seconds, so that most requests read nothing from the store; a token
reissued by another process stops working here within that time (at once on the
process that reissued it: `RoomsApp.reissue_token` forgets the room's hashes).
Every comparison of a hash is constant time: no answer's timing tells how much of
a guessed token was right.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from typing import NamedTuple

from cachetools import LRUCache

from dune_ledger.application.queries import PUBLIC_VIEW
from dune_ledger.application.store import RoomStore, room_uuid

TOKEN_CACHE = 4096  # rooms whose seat-token hashes are kept in memory
# Seconds a room's token hashes are trusted from memory; INTERFACE allows 1 s. A
# stream never relies on it: it checks the room as stored (`stored_seat`).
TOKEN_TTL = 0.5


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def same_secret(a: str, b: str) -> bool:
    return secrets.compare_digest(a.encode(), b.encode())


class Known(NamedTuple):
    """A room's token hashes as read from the store at `version`, at monotonic `at`."""

    at: float
    seats: dict[str, str]
    spectator: str | None
    version: int


class Seats:
    """Seat and spectator token hashes per room (by canonical id), trusted TOKEN_TTL
    seconds, the TOKEN_CACHE rooms used most recently kept. Not a cache that drops
    what is older than TOKEN_TTL: while the store is down, the hashes as last read
    serve however old (`stored_only`). Raises `Rejection` for a room that is not
    there or does not verify."""

    def __init__(self, rooms: RoomStore) -> None:
        self.rooms = rooms
        self.hashes: LRUCache[str, Known] = LRUCache(maxsize=TOKEN_CACHE)
        # Looked up from the threadpool and the stream's follower; a read of the cache
        # moves the room to the front, so reads take the lock too.
        self.lock = threading.Lock()

    def of(self, room_id: str, *, stored: bool = False) -> Known:
        """The room's token hashes: from memory if younger than TOKEN_TTL, or (`stored`,
        or else) from the room as stored now."""
        room_id = str(room_uuid(room_id))  # one entry per room, however it is spelled
        with self.lock:
            known = self.hashes.get(room_id)
        if stored or known is None or time.monotonic() - known.at > TOKEN_TTL:
            room = self.rooms.peek(room_id)
            known = Known(time.monotonic(), dict(room.token_hashes), room.spectator_hash,
                          room.version)
            with self.lock:
                self.hashes[room_id] = known
        return known

    def forget(self, room_id: str) -> None:
        room_id = str(room_uuid(room_id))
        with self.lock:
            self.hashes.pop(room_id, None)

    def seat(self, room_id: str, token: str, *, stored_only: bool = False) -> str | None:
        """The token's seat; `stored_only`: from the hashes as last read, however old (the
        store is down: no token can be re-issued meanwhile), None when none were read."""
        if stored_only:
            room_id = str(room_uuid(room_id))
            with self.lock:
                known = self.hashes.get(room_id)
            return None if known is None else seat_of_hash(known.seats, token_hash(token))
        return seat_of_hash(self.of(room_id).seats, token_hash(token))

    def stored_seat(self, room_id: str, token: str) -> tuple[str | None, int]:
        """The token's seat in the room as stored now (no older memory), and the
        version it was checked at."""
        known = self.of(room_id, stored=True)
        return seat_of_hash(known.seats, token_hash(token)), known.version

    def spectator(self, room_id: str, token: str) -> bool:
        stored = self.of(room_id).spectator
        return stored is not None and same_secret(stored, token_hash(token))

    def seat_of(self, room_id: str, token: str) -> str | None:
        """Whose token it is: its seat's faction, PUBLIC_VIEW for the room's spectator
        token, None for any other."""
        known, digest = self.of(room_id), token_hash(token)
        seat = seat_of_hash(known.seats, digest)
        if seat is None and known.spectator is not None and same_secret(known.spectator, digest):
            return PUBLIC_VIEW
        return seat


def seat_of_hash(seats: dict[str, str], digest: str) -> str | None:
    found = None
    for faction, stored in seats.items():
        if same_secret(stored, digest):  # every seat compared: constant time
            found = faction
    return found
