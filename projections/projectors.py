"""The two projectors: the public log, and every seat's view of every room.

Both take a batch of `(Recorded, notification id)` in log order and apply
it in one store transaction together with their new tracking position.
Whatever is at or below the position already stored is skipped: an event
delivered twice, or by two followers, is applied once. Both shape what they
store only through `domain.views` (the one place hidden information is
shaped) and pass it through `projections.guard` before storing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson
from cachetools import LRUCache

from dune_ledger.application.stream import Recorded, SeatTokenReissued, Undecodable
from dune_ledger.domain.game import (
    RoomCreated,
    RoomState,
    apply,
    initial_state,
    kept_state,
    public_entry,
    public_view,
    seat_view,
)
from dune_ledger.projections import guard
from dune_ledger.projections.autopilot_rows import Autopilot, autopilot_row
from dune_ledger.projections.store import PUBLIC, Entry, Store, Writes

# The stored event (or a row that cannot be read) and its notification id.
Item = tuple[Recorded | Undecodable, int]


class ProjectionError(RuntimeError):
    """The log does not fit what the projection stored: a rebuild is needed."""


def dumps(data: Any) -> str:
    return orjson.dumps(data, option=orjson.OPT_SORT_KEYS).decode()


class Projector:
    """Applies batches in one transaction with its position; folds each room's state."""

    name = ""

    def __init__(self, store: Store, cache_size: int = 256) -> None:
        self.store = store
        self.states = RoomStates(cache_size)
        self.written = -1  # the position of this projector's last commit

    def process(self, items: Sequence[Item]) -> int:
        """Apply the not yet applied part of `items`; returns how many were applied."""
        if not items:
            return 0
        try:
            with self.store.transaction(self.name) as tx:
                position = tx.position(self.name)
                todo = [it for it in items if it[1] > position]
                if not todo:
                    return 0
                if position != self.written:
                    self.forget()  # someone else wrote since: what we remember may be stale
                touched: dict[str, RoomState] = {}

                def load(room: str) -> RoomState | None:
                    row = tx.room_state(self.name, room)
                    return None if row is None else RoomState.model_validate_json(row[1])

                # A room whose events cannot be read, applied or rendered is fenced off
                # (quarantined), not the log: the other rooms keep moving (RULES 8).
                broken: dict[str, Recorded | Undecodable] = {}
                last: dict[str, Recorded] = {}
                for rec, _ in todo:
                    if rec.originator_id is None:  # it names no room: no rows depend on it
                        continue
                    room = str(rec.originator_id)
                    try:
                        if type(rec) is not Recorded:
                            raise ProjectionError(f"room {room}: version "
                                                  f"{rec.originator_version} cannot be read")
                        state = self.states.advance(rec, load)
                        if state is None:  # applied before
                            continue
                        self.applied(tx, rec, state)
                    except Exception:
                        broken[room] = rec
                        touched.pop(room, None)
                        self.states.cache.pop(room, None)
                        continue
                    touched[room] = state
                    last[room] = rec
                for room in self.finish(tx, touched):
                    broken[room] = last[room]
                    touched.pop(room)
                    self.states.cache.pop(room, None)
                for rec in broken.values():
                    self.quarantined(tx, rec)
                # Each room's state is stored once per batch, as of its last event.
                tx.put_rooms(self.name, [(room, st.version, kept_state(st))
                                         for room, st in touched.items()])
                tx.set_position(self.name, todo[-1][1])
        except BaseException:
            # The cached states may be ahead of what was committed.
            self.states.clear()
            self.forget()
            raise
        self.written = todo[-1][1]
        return len(todo)

    def forget(self) -> None:
        """Drop what this projector remembers of the rows it wrote."""
        self.written = -1

    def applied(self, tx: Writes, rec: Recorded, state: RoomState) -> None:
        """One event was folded into `state`."""

    def finish(self, tx: Writes, touched: dict[str, RoomState]) -> set[str]:
        """The batch is folded: write what it produced; the rooms whose rows could not
        be made (written for none of them)."""
        return set()

    def quarantined(self, tx: Writes, rec: Recorded | Undecodable) -> None:
        """`rec` does not fold onto its room's state: the room's stream is damaged."""


class PublicLog(Projector):
    """One entry per public event, numbered per room, in stream order."""

    name = "public_log"

    def __init__(self, store: Store, cache_size: int = 256) -> None:
        super().__init__(store, cache_size)
        self.seqs: dict[str, int] = {}
        self.rows: list[Entry] = []

    def applied(self, tx: Writes, rec: Recorded, state: RoomState) -> None:
        room = str(rec.originator_id)
        if room not in self.seqs:
            self.seqs[room] = tx.last_seq(room)
        text = public_entry_text(self.seqs[room] + 1, rec, state)
        if text is None:
            return
        self.seqs[room] += 1
        self.rows.append((room, self.seqs[room], rec.originator_version, text))

    def finish(self, tx: Writes, touched: dict[str, RoomState]) -> set[str]:
        rows, self.rows, self.seqs = self.rows, [], {}
        tx.add_entries(rows)
        return set()

    def process(self, items: Sequence[Item]) -> int:
        try:
            return super().process(items)
        finally:
            self.rows, self.seqs = [], {}


class SeatViews(Projector):
    """Every seat's view and the public view of each room, as of its last event."""

    name = "seat_views"

    def __init__(self, store: Store, cache_size: int = 256) -> None:
        super().__init__(store, cache_size)
        # The autopilot index rows this projector wrote, for the rooms seen most
        # recently: an unchanged row (most events) is not written again.
        self.index: LRUCache[str, Autopilot] = LRUCache(maxsize=cache_size)

    def forget(self) -> None:
        super().forget()
        self.index.clear()

    def applied(self, tx: Writes, rec: Recorded, state: RoomState) -> None:
        room = str(rec.originator_id)
        if isinstance(rec.fact, RoomCreated):
            issued = [*rec.meta.get("token_hashes", {}).values(), rec.meta.get("spectator_hash")]
        elif isinstance(rec.fact, SeatTokenReissued):
            issued = [rec.fact.token_hash]
        else:
            return
        tx.put_token_rooms([(str(digest), room) for digest in issued if digest])

    def finish(self, tx: Writes, touched: dict[str, RoomState]) -> set[str]:
        views: list[tuple[str, str, int, str]] = []
        rows: list[Autopilot] = []
        failed: set[str] = set()
        for room, state in touched.items():
            try:  # a state the views cannot be made of (an amount beyond 64 bits, say)
                rendered = render(state)
                row = autopilot_row(room, state)
            except Exception:
                failed.add(room)
                continue
            views += [(room, seat, state.version, text) for seat, text in rendered.items()]
            rows.append(row)
        tx.put_views(views)
        # The autopilot's index: the rooms it must look at (store.autopilot_rooms).
        tx.put_autopilot([row for row in rows if self.index.get(row[0]) != row])
        for row in rows:
            self.index[row[0]] = row
        return failed

    def quarantined(self, tx: Writes, rec: Recorded | Undecodable) -> None:
        room = str(rec.originator_id)
        marker = {"room": room, "version": rec.originator_version, "damaged": True,
                  "withheld": f"the stream of this room does not replay at version "
                              f"{rec.originator_version}: an operator should audit it"}
        tx.put_views([(room, PUBLIC, rec.originator_version, dumps(marker))])
        # Its autopilot seats stop: the worker does not load a damaged room each tick.
        tx.put_autopilot([(room, "{}", False)])
        self.index.pop(room, None)


class RoomStates:
    """Room states folded from events, kept for the rooms seen most recently."""

    def __init__(self, cache_size: int) -> None:
        self.cache: LRUCache[str, RoomState] = LRUCache(maxsize=cache_size)

    @property
    def size(self) -> int:
        return int(self.cache.maxsize)

    def clear(self) -> None:
        self.cache.clear()

    def advance(self, rec: Recorded, load: Callable[[str], RoomState | None]
                ) -> RoomState | None:
        """The room's state after `rec`; `load(room)` gives the stored state if not cached.
        None when the room's state is past `rec` already: the event was applied before
        (a tracking position moved back re-reads the log, and applies nothing twice)."""
        room = str(rec.originator_id)
        cached = self.cache.get(room)
        want = rec.originator_version - 1
        try:
            found = cached if cached is not None and cached.version == want else load(room)
        except Exception as e:  # a stored room state that cannot be read
            raise ProjectionError(f"room {room}: its stored state cannot be read") from e
        if found is not None and found.version > want:
            return None
        if isinstance(rec.fact, RoomCreated):
            state = initial_state(rec.fact)
        else:
            if found is None or found.version != want:
                have = None if found is None else found.version
                raise ProjectionError(
                    f"room {room}: event version {rec.originator_version} follows version {have}"
                )
            state = found
            try:
                apply(state, rec.fact)
            except Exception as e:  # the stored fact does not fit: the state is now unusable
                self.cache.pop(room, None)
                raise ProjectionError(f"room {room}: version {rec.originator_version} "
                                      f"({rec.type}) cannot be applied: {e}") from e
        self.cache[room] = state
        return state


def public_entry_text(seq: int, rec: Recorded, state: RoomState) -> str | None:
    """The stored JSON of `rec`'s public log entry number `seq` (None: `rec` is not
    public), checked by the guard against `state`, the room just after `rec`."""
    fact = rec.fact
    shape = entry_shape(fact)
    if shape is None:
        return None
    if shape is UNSHAPED:
        entry = public_entry(seq, rec.originator_version, fact, rec.append)
        if entry is None:
            return None
        text, named = dumps(entry), None
    else:
        to_append, to_seq, to_version, tail, named = shape
        text = f"{to_append}{rec.append}{to_seq}{seq}{to_version}{rec.originator_version}{tail}"
    if guard.public_leaks(state, text, fact, named):
        entry = public_entry(seq, rec.originator_version, fact, rec.append)
        assert entry is not None  # it made `text`
        text = dumps(guard.withheld_entry(entry))
    return text


# An entry's text is a function of its event's type and field values, except for its
# numbers (NUMBERS): it is rendered once per shape, and the cards it names (numbers
# name none) scanned once. A replay renders an entry for every event; most repeat
# ("Emperor drew a card"). Bounded (a shape holds about 800 bytes, and search ids make
# new shapes all the time), and cleared whole when full.
NUMBERS = ("append", "seq", "version")  # an entry's numbers, in the order keys sort
# The text up to each number (its key included) and after the last; the cards it names.
EntryShape = tuple[str, str, str, str, frozenset[str]]
UNSHAPED: EntryShape = ("", "", "", "", frozenset())  # render this event's entry every time
ENTRY_SHAPES: dict[tuple[Any, ...], EntryShape | None] = {}
ENTRY_SHAPES_LIMIT = 4_096


def entry_shape(fact: Any) -> EntryShape | None:
    """`fact`'s entry around its numbers, None if it makes no entry, or UNSHAPED: an
    event with a list or dict field, or whose fields name one of the NUMBERS."""
    values = tuple(fact.__dict__.values())
    kind = type(fact)
    try:
        # The value types too: 1, 1.0 and True are equal keys but not equal JSON. And
        # the methods that make the entry, should a test replace one.
        key = (kind, kind.public, kind.text, values, tuple(map(type, values)))
        return ENTRY_SHAPES[key]
    except TypeError:  # an unhashable field value
        return UNSHAPED
    except KeyError:
        pass
    fields = fact.public()
    if fields is None:
        shape: EntryShape | None = None
    elif any(name in fields for name in NUMBERS):
        shape = UNSHAPED
    else:
        text = dumps(public_entry(0, 0, fact, 0))
        # Sorted keys put the numbers in NUMBERS' order; each found once (a quote inside
        # a string is escaped) is the key itself, and the text splits around it exactly.
        marks = [f'"{name}":' for name in NUMBERS]
        places = [text.find(mark + "0") for mark in marks]
        if any(text.count(mark + "0") != 1 for mark in marks) or places != sorted(places):
            shape = UNSHAPED
        else:
            to_append, rest = text.split(marks[0] + "0")
            to_seq, rest = rest.split(marks[1] + "0")
            to_version, tail = rest.split(marks[2] + "0")
            shape = (to_append + marks[0], to_seq + marks[1], to_version + marks[2], tail,
                     frozenset(guard.card_ids(text)))
    if len(ENTRY_SHAPES) >= ENTRY_SHAPES_LIMIT:
        ENTRY_SHAPES.clear()
    ENTRY_SHAPES[key] = shape
    return shape


def render(state: RoomState) -> dict[str, str]:
    """The stored JSON of the public view and every seat's view, each checked by the guard."""
    public = dumps(public_view(state))
    if guard.public_leaks(state, public):
        public = dumps(guard.withheld_view(state, None))
    out = {PUBLIC: public}
    public_ids = guard.card_ids(public)
    for seat in state.seats:
        view = dumps(seat_view(state, seat.faction))
        if guard.seat_leaks(state, seat.faction, view, public_ids):
            view = dumps(guard.withheld_view(state, seat.faction))
        out[seat.faction] = view
    return out
