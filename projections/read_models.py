"""The read models of one event log: catch up, read, rebuild, compare.

`ReadModels` follows the application's notification log from the lowest
position of its projectors, decodes each notification with the
application's mapper, and hands the batch to every projector (each skips
what it already applied). Reads (`seat_view`, `public_view`, `public_log`)
only read stored rows; the caller catches up first when it wants to see its
own writes. `rebuild` drops every row and projects the whole log again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any
from uuid import UUID

import orjson
from eventsourcing.utils import strtobool

from dune_ledger.application.stream import Recorded, UnauthenticRow, Undecodable
from dune_ledger.domain.game import Rejection, RoomCreated, RoomState, apply, initial_state
from dune_ledger.projections.projectors import (
    Item,
    Projector,
    PublicLog,
    SeatViews,
    public_entry_text,
    render,
)
from dune_ledger.projections.store import PUBLIC, MemoryStore, SealedRowError, Store

BATCH = 500
# Seconds a catch-up waits for events that committed but have not settled (PostgreSQL).
SETTLING = 2.0
log = logging.getLogger("dune_ledger.read_models")
# Room states each projector keeps in memory (least recently used first out); an
# evicted room is read back from its projection's room table, so the bound costs a
# query, never a replay.
DEFAULT_CACHE = 256
Progress = Callable[[int, int], None]  # (applied so far, notifications to apply)
# Views behind the log are looked at this many times, this many seconds apart, before
# they stand as a finding (another process may be storing a batch: `_stored`).
SETTLE_LOOKS = 3
SETTLE_PAUSE = 0.05
Later = Callable[[int, int], list[Recorded]]  # a room's events after one version, up to another


class ReadModels:
    def __init__(self, recorder: Any, mapper: Any, store: Store, *, batch: int = BATCH,
                 cache_size: int = DEFAULT_CACHE) -> None:
        self.recorder = recorder
        self.mapper = mapper
        self.store = store
        self.batch = batch
        self.projectors: list[Projector] = [PublicLog(store, cache_size),
                                            SeatViews(store, cache_size)]
        self.lock = threading.RLock()

    # --- following the log -------------------------------------------------------------

    def position(self) -> int:
        """The notification id every projector has applied."""
        return self.store.least_position([p.name for p in self.projectors])

    def head(self) -> int:
        return int(self.recorder.max_notification_id() or 0)

    def behind(self, after: int | None = None) -> int:
        """How many events of the log come after `after` (the models' position): on
        PostgreSQL ids are not counts (docs/ordering.md), so they are counted."""
        after = self.position() if after is None else after
        count = getattr(self.recorder, "count_after", None)
        return int(count(after)) if count is not None else max(0, self.head() - after)

    def catch_up_within(self, seconds: float) -> bool:
        """Catch up for at most about `seconds` (a batch more); True when nothing is left.

        A player's read calls this: a rebuild, a long catch-up by another thread, or a
        log far ahead must not hold the read for seconds (the reader then folds its
        own room: `RoomsApp._caught_up`)."""
        if not self.lock.acquire(timeout=seconds):
            return False
        try:
            deadline = time.monotonic() + seconds
            start = self.position()
            settled = not self.settles()  # nothing held back since the last read
            while True:
                notes = self.recorder.select_notifications(
                    start=start, limit=self.batch, inclusive_of_start=False)
                if notes:
                    self.process(self.decode(notes))
                    start = notes[-1].id
                    settled = not self.settles()
                    if len(notes) == self.batch:
                        if time.monotonic() >= deadline:
                            return False
                        continue
                if settled:
                    return True
                # Fresh unless an event has committed but not settled; one that settled
                # since the read is read again.
                if self.held_back(start):
                    return False
                settled = True
        finally:
            self.lock.release()

    def catch_up(self, progress: Progress | None = None, stop: int | None = None) -> int:
        """Apply every notification not yet applied (up to `stop`); returns how many."""
        with self.lock:
            start = self.position()
            # How many there are only matters to a progress bar: a query less per read.
            total = 0 if progress is None else \
                self.behind(start) if stop is None else max(0, stop - start)
            done = 0
            settling = time.monotonic() + SETTLING
            settled = not self.settles()
            target: int | None = None  # the last id committed when events were held back
            while True:
                notes = self.recorder.select_notifications(
                    start=start, limit=self.batch, stop=stop, inclusive_of_start=False
                )
                if not notes:
                    # What committed before the catch-up, once older transactions end
                    # (a moment; longer only while one runs long: the next catch-up goes
                    # on). One that settled since the read is read again; what commits
                    # meanwhile is the next catch-up's.
                    if settled:
                        break
                    if target is None:
                        target = self.recorder.committed_max() or 0
                    if start < target and time.monotonic() < settling and \
                            self.held_back(start, stop):
                        time.sleep(0.002)
                        continue
                    settled = True
                    continue
                settled = not self.settles()
                items = self.decode(notes)
                self.process(items)
                done += len(notes)
                start = notes[-1].id
                if progress is not None:
                    progress(done, max(total, done))
            return done

    def settles(self) -> bool:
        """Whether the log holds back events that committed until older transactions
        end (PostgreSQL: infrastructure/postgres.py; elsewhere an event is readable once
        committed)."""
        return hasattr(self.recorder, "held_back")

    def held_back(self, after: int, stop: int | None = None) -> bool:
        """Whether an event after `after` (up to `stop`) has committed but a follower
        may not read it yet (PostgreSQL: infrastructure/postgres.py; elsewhere never)."""
        held_back = getattr(self.recorder, "held_back", None)
        return held_back is not None and (stop is None or after < stop) and \
            bool(held_back(after))

    def decode(self, notes: Any) -> list[Item]:
        items: list[Item] = []
        for n in notes:
            rec = self.mapper.to_domain_event(n)
            if isinstance(rec, Recorded | Undecodable):  # a row it cannot read fences its room
                items.append((rec, n.id))
        return items

    def process(self, items: list[Item]) -> None:
        """Give a batch to every projector; each applies only what it has not applied."""
        for projector in self.projectors:
            projector.process(items)

    def process_event(self, rec: Recorded | Undecodable, notification_id: int) -> None:
        """One event from a subscription (PostgreSQL LISTEN/NOTIFY)."""
        with self.lock:
            self.process([(rec, notification_id)])

    def rebuild(self, progress: Progress | None = None) -> int:
        """Drop every read model and project the whole log again."""
        with self.lock:
            for projector in self.projectors:
                with self.store.transaction(projector.name) as tx:
                    tx.clear(projector.name)
                projector.states.clear()
            return self.catch_up(progress)

    def wait(self, room: str, version: int, timeout: float, poll: float = 0.1) -> bool:
        """Catch up until the room's read model reaches `version`; False on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            self.catch_up()
            row = self.store.view(room, PUBLIC)
            if row is not None and row[0] >= version:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll)

    # --- reads --------------------------------------------------------------------------

    def seat_view(self, room: str, seat: str) -> dict[str, Any] | None:
        try:
            row = self.store.view(room, seat)
            return None if row is None else orjson.loads(row[1])
        except (ValueError, orjson.JSONDecodeError) as e:  # one room's rows, not the others'
            raise unreadable_rows(room, e) from None

    def public_view(self, room: str) -> dict[str, Any] | None:
        return self.seat_view(room, PUBLIC)

    def room_views(self, room: str) -> tuple[int | None, dict[str, str]]:
        """Every stored view of the room (seat -> JSON) and their version, read at once."""
        return self.store.room_views(room)

    def public_log(self, room: str, after: int = 0) -> list[dict[str, Any]]:
        try:
            return [orjson.loads(entry) for entry in self.store.log(room, after)]
        except orjson.JSONDecodeError as e:
            raise unreadable_rows(room, e) from None

    def fresh_rows(self, room_id: UUID, records: list[Recorded]
                   ) -> tuple[list[str], dict[str, str]]:
        """The room's log entries and views folded from `records` alone, as a rebuild
        would store them: for a read that may not wait for the whole log."""
        return fresh_rows(room_id, records)

    def token_room(self, digest: str) -> str | None:
        """The room a token hash was issued in, as far as the models have applied (a
        hint: the caller checks the token against that room)."""
        return self.store.token_room(digest)

    def autopilot_rooms(self, *, due: bool = False) -> list[str]:
        """The rooms where some seat's autopilot is on (`due`: and is asked for something),
        as far as the models have applied."""
        return self.store.autopilot_rooms(due=due)

    def version(self, room: str) -> int | None:
        row = self.store.view(room, PUBLIC)
        return None if row is None else row[0]

    def snapshot(self, room: str) -> dict[str, Any]:
        """Everything stored for one room, parsed, for comparisons."""
        return {
            "log": self.public_log(room),
            "views": {seat: orjson.loads(v) for seat, v in self.store.room_views(room)[1].items()},
        }

    # --- audit --------------------------------------------------------------------------

    def room_fold(self, room_id: UUID) -> RoomRows:
        return RoomRows(room_id)

    def part_fold(self, room_id: UUID, after: int, upto: int | None) -> PartRows:
        """The rows of the events after `after`, up to `upto`; the caller has caught
        the read models up."""
        return PartRows(self, room_id, after, upto)

    def check_room(self, room_id: UUID, records: list[Recorded], fold: object = None,
                   later: Later | None = None) -> dict[str, Any]:
        """Do the stored read models of a room equal a fresh rebuild in memory?

        The stored log is compared with a rebuild of the room's own events up to the
        version the log has reached, the views with one up to theirs. A room written
        while it was audited has read models past the last of `records`:
        `later(after, upto)` reads the events between, and the rebuild goes on with
        them, so a write landing meanwhile is no mismatch, and its rows are compared
        too. `fold`, made by `room_fold` and stepped along the caller's own replay of
        `records`, spares a second fold where it reaches. Rows compare as parsed JSON,
        as a reader sees them.
        """
        room = str(room_id)
        audited = reached = records[-1].originator_version if records else 0
        try:
            (log_at, stored_log), (views_at, stored_views), stuck, forged = self._stored(room)
            fresh: dict[int, tuple[list[str], dict[str, str]]] = {}
            for version in sorted({log_at, views_at}):
                if version > reached and later is not None:
                    newer = later(reached, version)
                    if isinstance(fold, RoomRows):
                        fold.extend(newer)
                    records = [*records, *newer]
                    reached = records[-1].originator_version if records else 0
                rebuilt = [r for r in records if r.originator_version <= version]
                rows = (fold.rows(records) if isinstance(fold, RoomRows)
                        and len(rebuilt) == len(records) else None)
                fresh[version] = ((list(rows[0]), rows[1]) if rows is not None
                                  else fresh_rows(room_id, rebuilt))
            fresh_log, fresh_views = fresh[log_at][0], fresh[views_at][1]
        except Exception as e:  # a stream the projectors cannot fold is a failed check
            return {"ok": False, "details": [f"the read models cannot be rebuilt: {e}"]}
        # A row edited in the database (RULES 8): reported, never served (a reader folds
        # the room from its verified stream instead); the rest is still compared.
        details = [f"{e}: it is not served; `dune-ledger projections rebuild` replaces it"
                   for e in forged]
        if max(log_at, views_at) > reached:
            details.append(f"the read models are at version {max(log_at, views_at)}, "
                           f"the stream at {reached}")
        elif min(log_at, views_at) < audited:
            details.append(f"the read models are at version {min(log_at, views_at)}, "
                           f"the stream at {audited}")
        if stuck:
            details.append(f"the views are at version {views_at}, the public log at {log_at}")
        if len(stored_log) != len(fresh_log) or not all(
            map(same_json, stored_log, fresh_log)
        ):
            details.append(f"the public log differs ({len(stored_log)} entries stored, "
                           f"{len(fresh_log)} rebuilt)")
        for seat in differing_views(stored_views, fresh_views):
            name = "the public view" if seat == PUBLIC else f"{seat}'s view"
            details.append(f"{name} differs from a fresh rebuild")
        return {"ok": not details, "details": details}

    def _stored(self, room: str) -> tuple[tuple[int, list[str]], tuple[int, dict[str, str]],
                                          bool, list[UnauthenticRow]]:
        """The room's stored log and views (each with the version it reached), caught up
        first, whether the views stayed behind the log, and the rows that failed
        authentication (left out of the log and the views).

        A projector stores a batch's log entries, then its views, in two transactions:
        another process may be between them. Views behind the log are looked at again,
        after a pause, and stand as a finding only if they did not move at any look.
        """
        behind_at: int | None = None
        for look in range(SETTLE_LOOKS):
            if look:
                time.sleep(SETTLE_PAUSE)
            self.catch_up()
            forged: list[UnauthenticRow] = []
            log_at, entries = self.store.log_at(room, forged=forged)  # then the views
            log = (log_at, [entry for _, entry in entries])
            version, views = self.store.room_views(room, forged=forged)
            views_at = version or 0
            if forged or views_at >= log_at or (behind_at is not None
                                                and views_at != behind_at):
                return log, (views_at, views), False, forged
            behind_at = views_at
        return log, (views_at, views), True, forged


def unreadable_rows(room: str, e: Exception) -> Rejection:
    why = str(e) if isinstance(e, SealedRowError) else "a stored row is not JSON"
    return Rejection("room_damaged", f"the read models of room {room} cannot be read ({why}): "
                     "an operator should run `dune-ledger projections rebuild`")


def differing_views(stored: dict[str, str], fresh: dict[str, str]) -> list[str]:
    return [seat for seat in sorted(set(stored) | set(fresh))
            if not same_json(stored.get(seat), fresh.get(seat))]


def same_json(stored: str | None, fresh: str | None) -> bool:
    """Equal as parsed JSON (None: no row); equal texts need no parsing. A stored
    row that is not JSON at all differs from any rebuilt one."""
    if stored == fresh:
        return True
    try:
        return _parsed(stored) == _parsed(fresh)
    except orjson.JSONDecodeError:
        return False


def _parsed(text: str | None) -> Any:
    return None if text is None else orjson.loads(text)


def projected(records: list[Recorded]) -> ReadModels:
    """The projectors' own rebuild of `records` into an empty memory store."""
    models = ReadModels(None, None, MemoryStore())
    models.process([(rec, rec.originator_version) for rec in records])
    return models


def fresh_snapshot(room_id: UUID, records: list[Recorded]) -> dict[str, Any]:
    """Project one room's records into an empty memory store."""
    return projected(records).snapshot(str(room_id))


def fresh_rows(room_id: UUID, records: list[Recorded]) -> tuple[list[str], dict[str, str]]:
    """The public log entries and the views (seat -> JSON) that the projectors store
    for one room's records, as `fresh_snapshot` would have them, unparsed."""
    rows = _fold_rows(room_id, records)
    if rows is not None:
        return rows
    store = projected(records).store
    return store.log(str(room_id)), store.room_views(str(room_id))[1]


def _fold_rows(room_id: UUID, records: list[Recorded]) -> tuple[list[str], dict[str, str]] | None:
    """`fresh_rows` in one fold with the projectors' own row makers, for a stream
    that folds cleanly from RoomCreated; None for any other, which the projectors
    themselves rebuild (they quarantine a damaged stream, and that is what is stored).

    The projectors fold the room twice (one state each), write every row to a
    store and render the views once per batch; a rebuild is a single batch, so
    the views are those of the last state.
    """
    if not records or not isinstance(records[0].fact, RoomCreated):
        return None
    state = initial_state(records[0].fact)
    rows = RoomRows(room_id)
    for rec in records:
        if rows.seen:
            try:
                apply(state, rec.fact)
            except Exception:  # the projectors quarantine the room here
                return None
        rows.step(rec, state)
        if not rows.clean:
            return None
    return rows.rows(records)


class RoomRows:
    """`_fold_rows` along a replay that someone else runs: `step` gets each record
    and the replay's state just after it, `rows` gives the rows (None: rebuild them
    as `fresh_rows` does). It keeps only the log texts and the last state.

    A replay may stop early (an event that cannot be applied, or no RoomCreated
    first) and leave its state half changed: the rows are given only when every
    record was stepped, in order, with nothing amiss.
    """

    def __init__(self, room_id: UUID, after: int = 0, first_seq: int = 1) -> None:
        self.room_id = room_id
        self.log: list[str] = []
        # A part of the stream (see `PartRows`) starts after version `after`, its
        # first entry numbered `first_seq`.
        self.after = after
        self.first_seq = first_seq
        self.seen = after
        self.clean = True  # versions 1, 2, ... of this room, RoomCreated first
        self.error: Exception | None = None  # a row maker failed, as `_fold_rows` would
        self.last: Recorded | None = None
        self.state: RoomState | None = None

    def step(self, rec: Recorded, state: RoomState) -> None:
        if not self.clean or self.error is not None:
            return
        self.seen += 1
        room = rec.originator_id  # the same object for a whole stream read at once
        if rec.originator_version != self.seen or (
            room is not self.room_id and room != self.room_id
        ) or (self.seen == 1 and not isinstance(rec.fact, RoomCreated)):
            self.clean = False
            return
        try:
            text = public_entry_text(self.first_seq + len(self.log), rec, state)
        except Exception as e:  # not the replay's failure: raised again by `rows`
            self.error = e
            return
        if text is not None:
            self.log.append(text)
        self.last, self.state = rec, state

    def rows(self, records: list[Recorded]) -> tuple[list[str], dict[str, str]] | None:
        """The rows of `records`, if they are what was stepped, to the last."""
        if not self.clean:
            return None
        if self.error is not None:
            raise self.error
        if not self.covers(records):
            return None
        assert self.state is not None
        return self.log, render(self.state)

    def extend(self, records: list[Recorded]) -> None:
        """Step on past the end of the replay with `records`, the room's next events,
        on a copy of the replay's state (a room written while it was audited)."""
        if self.state is None or not self.clean or self.error is not None:
            return
        state = self.state.model_copy(deep=True)
        for rec in records:
            try:
                apply(state, rec.fact)
            except Exception:  # the rebuild of the projectors' own says what is wrong
                self.clean = False
                return
            self.step(rec, state)

    def covers(self, records: list[Recorded]) -> bool:
        """Were `records` stepped, to the last, and nothing else?"""
        return self.state is not None and self.seen - self.after == len(records) and \
            records[-1] is self.last


class PartRows(RoomRows):
    """The rows of one part of a room's stream, the events after version `after` up
    to `upto` (None: to the last), made along an audit of that part that may run in
    a process of its own (application/audit.py), and compared with the stored rows of
    the same events.

    Its entries are numbered as the stored entries of those events are; `verdict`
    says where that numbering starts, so the caller can check that the parts' stored
    entries follow each other (an entry stored with a wrong seq differs in its text).
    """

    def __init__(self, models: ReadModels, room_id: UUID, after: int, upto: int | None) -> None:
        # A row that fails authentication is left out, so the part differs (RULES 8).
        self.forged: list[UnauthenticRow] = []
        self.log_version, self.stored = models.store.log_at(str(room_id), after, upto,
                                                            forged=self.forged)
        super().__init__(room_id, after, self.stored[0][0] if self.stored else 1)
        self.models = models
        self.upto = upto

    def verdict(self, records: list[Recorded]) -> dict[str, Any] | None:
        """None when the part's rows could not be made as a rebuild would make them;
        else how many entries it made, the seq of the first, and whether they equal
        the stored ones; for the last part (`upto` None), also the stored views against
        views rendered from its last state, and the versions the views and the log
        reached."""
        if not self.clean or self.error is not None or not self.covers(records):
            return None
        assert self.state is not None
        stored = [entry for _, entry in self.stored]
        verdict: dict[str, Any] = {
            "entries": len(self.log), "first_seq": self.first_seq,
            "log_equal": len(stored) == len(self.log) and all(map(same_json, stored, self.log))
            and not self.forged,
        }
        if self.upto is None:
            room = str(self.room_id)
            version, views = self.models.store.room_views(room, forged=self.forged)
            verdict["version"] = version
            verdict["log_version"] = self.log_version
            verdict["views_equal"] = not differing_views(views, render(self.state)) \
                and not self.forged
        return verdict


def open_read_models(app: Any, cache_size: int = DEFAULT_CACHE) -> ReadModels:
    """The read models next to an application's events, in the same database, each
    projector keeping at most `cache_size` room states in memory."""
    recorder = app.recorder
    module = app.env.get("PERSISTENCE_MODULE")
    create = strtobool(app.env.get("CREATE_TABLE") or "yes")  # the library's setting
    # The events' cipher (None: encryption at rest is off) also seals the private rows;
    # every stored row is authenticated with a key derived from the key file.
    cipher = getattr(app.mapper, "cipher", None)
    key = getattr(app.signer, "row_key", None)
    store: Store
    if module == "eventsourcing.sqlite":
        store = _sqlite_store(recorder, create, cipher, key)
    elif is_postgres(app):
        from dune_ledger.projections.store import PostgresStore

        store = PostgresStore(recorder.datastore, create, cipher, key)
    else:
        store = MemoryStore()
    models = ReadModels(recorder, app.mapper, store, cache_size=cache_size)
    if store.rebuilt_from is not None:
        rebuild_after_upgrade(models, store.rebuilt_from)
    return models


def rebuild_after_upgrade(models: ReadModels, found: int) -> None:
    """Tables of another schema version were dropped: project the whole log again,
    saying so, with progress (a tenth at a time)."""
    from dune_ledger.projections.store import READ_MODEL_VERSION

    total = models.behind(0)
    log.warning("read models: schema version %d found, %d expected: rebuilding them from "
                "the event log (%d events)", found, READ_MODEL_VERSION, total)
    started = time.perf_counter()
    step = max(1, total // 10)
    shown = [0]

    def progress(done: int, total: int) -> None:
        if done - shown[0] >= step or done == total:
            shown[0] = done
            log.info("read models: %d of %d events applied", done, total)

    applied = models.catch_up(progress)
    log.warning("read models: rebuilt, %d events in %.1f s", applied,
                time.perf_counter() - started)


def is_postgres(app: Any) -> bool:
    from eventsourcing.postgres import PostgresFactory

    return isinstance(app.factory, PostgresFactory)


def _sqlite_store(recorder: Any, create: bool, cipher: Any = None,
                  row_key: Any = None) -> Store:
    from dune_ledger.projections.store import SQLiteStore

    pool = recorder.datastore.pool
    if pool.is_sqlite_memory_mode:
        raise ValueError("in-memory SQLite cannot share its events with read models; "
                         "use memory:// or a file")
    return SQLiteStore(pool.db_name, timeout=float(pool.lock_timeout or 10), create=create,
                       cipher=cipher, row_key=row_key)
