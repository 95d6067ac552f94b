"""The audit: replay a room's stream from its first event and check it.

Replay uses only the stored events: no randomness, no clock, and no snapshot
is trusted (an audit in parts starts a part at one only once the replay
before it has reached exactly that state). Every check is true, false, or
null (not checked) with details; a room passes when none is false.
"""

from __future__ import annotations

import gc
import hashlib
import json
import multiprocessing
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, cast
from uuid import UUID

import orjson

from dune_ledger.application.queries import RoomFold, RoomQueries
from dune_ledger.application.store import gc_paused, room_uuid
from dune_ledger.application.stream import (
    GENESIS,
    Chain,
    Recorded,
    RoomSnapshot,
    Signer,
    Trusted,
    Undecodable,
)
from dune_ledger.domain.game import (
    EFFECT_ZONES,
    DiscardReshuffled,
    PileShuffled,
    Rejection,
    RoomCreated,
    RoomState,
    apply,
    initial_state,
)

MAX_DETAILS = 20
PART_MIN = 2_500  # events: a shorter part of an audit in parts does not pay for its process
PART_SLACK = 10.0  # seconds a part may take beyond three times the first part's time
CHECKS = ("cards_conserved", "spice_conserved", "shuffles_are_permutations",
          "hands_within_limits", "chain_intact")
SHUFFLES = (PileShuffled, DiscardReshuffled)


def state_hash(state: RoomState) -> str:
    data = state.model_dump(mode="json")
    try:
        canonical = orjson.dumps(data, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # an integer beyond 64 bits (a forged or overflowing amount)
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"),
                               ensure_ascii=False).encode()
    return hashlib.sha256(canonical).hexdigest()


class Check:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def fail(self, problem: str) -> None:
        if len(self.problems) < MAX_DETAILS:
            self.problems.append(problem)
        elif len(self.problems) == MAX_DETAILS:
            self.problems.append("... more problems not listed")

    def report(self) -> dict[str, Any]:
        return {"ok": not self.problems, "details": self.problems}


@dataclass
class Start:
    """Where the replay of a part of a stream starts: the state after event `version`
    (which the replay of the events before must reach: `audit_room` checks), the
    chain hash of that event, and the room's first event (its catalog and spice). The
    replay changes `state` in place."""

    created: RoomCreated
    state: RoomState
    version: int
    head: str


def audit_records(room_id: str, records: list[Recorded] | list[Recorded | Undecodable],
                  fold: RoomFold | None = None, start: Start | None = None,
                  signer: Signer | None = None,
                  trusted: Trusted | Callable[[], Trusted | None] | None = None
                  ) -> tuple[dict[str, Any], RoomState | None]:
    """Replay and check `records` (from the first event, or the events after `start`,
    whose first begins an append); `fold` (the read models' own) sees the state after
    each event the replay applied, in order, and nothing after one it could not.
    `signer`: the server's key, for the chain's signatures (None: the hashes only,
    for streams built by hand); `trusted`: the key the room's import named. The
    chain is walked as every load walks it (application/stream.Chain): every hash,
    every append's signature present, the last one verified."""
    checks = {name: Check() for name in CHECKS}
    chain, conserved = checks["chain_intact"], checks["cards_conserved"]
    state: RoomState | None = None
    cards: Counter[str] = Counter()
    catalog_ids: frozenset[str] = frozenset()
    catalog_size = 0
    spice = 0
    prev_hash = GENESIS
    # Hand sizes, seat by seat: after the last event, and before the current append.
    hands: list[int] = []
    hands_before: list[int] = []
    limits: list[int] = []  # seat by seat: the seats and their factions are set at creation
    last = len(records) - 1
    offset = 0  # events before `records`
    if start is not None:
        state, offset, prev_hash = start.state, start.version, start.head
        cards, hands, limits = _baseline(state)
        catalog_ids, catalog_size = frozenset(cards), len(cards)
        spice = initial_state(start.created).total_spice()

    walk = Chain(signer, head=prev_hash, version=offset, trusted=trusted,
                 fail=lambda v, problem: chain.fail(f"version {v}: {problem}"))
    for i, rec in enumerate(records, start=offset):
        if type(rec) is not Recorded:  # a row that cannot be read: nothing after it replays
            assert isinstance(rec, Undecodable)
            chain.fail(f"version {rec.originator_version} ({rec.topic}): {rec.problem}")
            break
        v = rec.originator_version
        walk.step(rec)
        fact = rec.fact
        ends_append = i - offset == last or \
            getattr(records[i - offset + 1], "append", None) != rec.append

        try:
            if state is None:
                if not isinstance(fact, RoomCreated):
                    chain.fail("the stream does not start with RoomCreated")
                    break
                state = initial_state(fact)
                cards, hands, limits = _baseline(state)
                catalog_ids, catalog_size = frozenset(cards), len(cards)
                spice = state.total_spice()
            else:
                if rec.append == v:
                    hands_before = hands
                if isinstance(fact, SHUFFLES) and Counter(
                    fact.order
                ) != Counter(state.discard):
                    checks["shuffles_are_permutations"].fail(
                        f"version {v}: {fact.type} is not a permutation of the pile"
                    )
                apply(state, fact)
        except Exception as e:  # a stored event that does not fit the state it follows
            chain.fail(f"version {v} ({fact.type}) cannot be applied: {e}")
            break
        if fold is not None:
            fold.step(rec, state)

        # Every zone after every event: a forged event may move any card. The catalog
        # ids are unique, so "each exactly once" is: as many cards as ids, the same set.
        held = [*state.deck, *state.discard, *state.cache, *state.removed]
        for more in EFFECT_ZONES:  # the zones an effect's own part keeps
            for zone in more(state).values():
                held += zone
        total = state.bank  # RoomState.total_spice, in the same pass as the hands
        hands = []
        for seat in state.seats:
            hand = seat.hand
            held += hand
            hands.append(len(hand))
            total += seat.spice
        if len(held) != catalog_size or catalog_ids != set(held):
            held_count = Counter(held)
            extra = sorted((held_count - cards).keys())
            missing = sorted((cards - held_count).keys())
            conserved.fail(f"version {v}: duplicated or foreign {extra}, missing {missing}")
        if total != spice:
            checks["spice_conserved"].fail(
                f"version {v}: seats and bank hold {total}, not {spice}"
            )
        # When an append ends, a hand that grew in it may not end above its limit.
        if v > 1 and hands != hands_before and ends_append \
                and any(map(int.__gt__, hands, limits)):
            for seat, held_now, before in zip(state.seats, hands, hands_before, strict=False):
                if held_now > before and held_now > seat.limit:
                    checks["hands_within_limits"].fail(
                        f"version {v}: {seat.faction} holds {held_now} "
                        f"(limit {seat.limit}, was {before})"
                    )
    else:  # walked to the end: the signature there authenticates the walk
        walk.end()

    report: dict[str, Any] = {
        "room": room_id,
        "events": len(records),
        "version": records[-1].originator_version if records else 0,
        "state_hash": state_hash(state) if state is not None else None,
        "checks": {name: check.report() for name, check in checks.items()},
    }
    return report, state


def _baseline(state: RoomState) -> tuple[Counter[str], list[int], list[int]]:
    """What the replay checks against, from the state it starts at: the room's catalog
    (each card once), and seat by seat the hand sizes and limits."""
    cards = Counter(state.cards())
    return cards, [len(seat.hand) for seat in state.seats], [seat.limit for seat in state.seats]


def audit_room(app: RoomQueries, room_id: str, processes: int = 1,
               part_min: int = PART_MIN) -> dict[str, Any]:
    """Replay and check one room; with `processes` > 1, a long room is audited in
    parts (at least `part_min` events each), one process per part (`audit_in_parts`).
    A room that cannot be audited at all is reported as such, never raised (RULES 8);
    an unknown room is a Rejection."""
    with gc_paused():
        try:
            if processes > 1:
                report = audit_in_parts(app, room_uuid(room_id), processes, part_min)
                if report is not None:
                    return report
            return _audit_room(app, room_id)
        except Rejection as r:
            if r.code == "unknown_room":
                raise
            return unauditable(room_id, r.message)
        except Exception as e:  # the audit's own failure on a stream: reported, not raised
            return unauditable(room_id, f"the audit stopped: {type(e).__name__}: {e}")


def unauditable(room_id: str, problem: str) -> dict[str, Any]:
    checks: dict[str, Any] = {name: {"ok": None, "details": ["not checked"]} for name in CHECKS}
    checks["chain_intact"] = {"ok": False, "details": [problem]}
    return {"room": room_id, "events": None, "version": None, "state_hash": None,
            "checks": checks, "ok": False}


def _audit_room(app: RoomQueries, room_id: str) -> dict[str, Any]:
    uid = room_uuid(room_id)
    stored = app.stored_records(uid)
    if not stored:
        raise Rejection("unknown_room", f"no room '{room_id}'")
    models = app.read_models
    fold = models.room_fold(uid) if models is not None else None
    report, replayed = audit_records(str(uid), stored, fold, signer=app.signer,
                                     trusted=lambda: app.trusted(uid))
    if any(type(rec) is not Recorded for rec in stored):
        report["checks"]["live_state_matches"] = {
            "ok": None, "details": ["not checked: the stream cannot be read whole"]}
        report["checks"]["read_models_match"] = {
            "ok": None, "details": ["not checked: the stream cannot be read whole"]}
        report["ok"] = False
        return report
    records = cast("list[Recorded]", stored)
    # Commands may land while the audit runs: the room is checked at the version read.
    live = _live_state_hash(app, uid, records[-1].originator_version)
    matches = replayed is not None and state_hash(replayed) == live
    report["checks"]["live_state_matches"] = {
        "ok": matches,
        "details": [] if matches else [f"the loaded state (snapshots included) is {live}"],
    }
    # The stored projections against a fresh rebuild of this room in memory, made
    # along the replay above.
    report["checks"]["read_models_match"] = (
        models.check_room(uid, records, fold,
                          lambda after, upto: app.records(uid, gt=after, lte=upto))
        if models is not None
        else {"ok": None, "details": ["not checked: this app has no read models"]}
    )
    report["ok"] = all(c["ok"] is not False for c in report["checks"].values())
    return report


# --- the audit of a long room in parts, one process each ------------------------------
#
# The replay is sequential, but a room's snapshots say which state it reaches at their
# versions. Each part is replayed and checked from the snapshot where it starts, in a
# process of its own; the part before it must end in exactly that state (state hash)
# and chain hash, so the parts together replay the stream from its first event, as one
# process would. Only a room whose every check passes is reported from the parts: any
# finding, and anything the parts cannot settle (a snapshot the replay does not reach,
# a part that fails), is left to the audit in one process, whose report is the same
# for a clean room and says what is wrong otherwise.


@dataclass
class Part:
    """What the replay of one part tells the others (see `audit_in_parts`)."""

    last: int  # the version of its last event
    events: int
    start_hash: str | None  # the state hash it started from (None: from the first event)
    end_hash: str  # the state hash after its last event
    head: str  # the chain hash of its last event
    rows: dict[str, Any]  # its read-model verdict (`PartFold.verdict`)


def audit_in_parts(app: RoomQueries, uid: UUID, processes: int, part_min: int = PART_MIN
                   ) -> dict[str, Any] | None:
    """The audit of a clean room made in up to `processes` parts, one process each (the
    first in this one, the others in the app's `PartProcesses`); None when the room is
    short, has no snapshots to start parts from, cannot be opened by another process,
    or when the parts report or leave open anything at all: `audit_room` then audits
    it in one process.
    """
    models = app.read_models
    if models is None or app.reopen is None or app.snapshots is None or \
            "fork" not in multiprocessing.get_all_start_methods():  # not on Windows
        return None
    starts = _part_starts(app, uid, processes, part_min)
    if not starts:
        return None
    models.catch_up()  # the parts compare the stored read models as they stand now
    bounds = [s.originator_version for s in starts]
    helpers = app.part_processes
    if not isinstance(helpers, PartProcesses):
        helpers = app.part_processes = PartProcesses()
    workers = helpers.ready(len(starts), app.reopen)
    answered: set[PartProcess] = set()  # the processes whose part came back
    parts: list[Part | None] = []
    try:
        for worker, snapshot, upto in zip(workers, starts, [*bounds[1:], None], strict=True):
            worker.conn.send((uid, snapshot, upto))
        began = time.monotonic()
        parts.append(_audit_part(app, uid, None, bounds[0]))
        # The parts are about as long as this one: a process far slower than it is stuck.
        deadline = time.monotonic() + 3 * (time.monotonic() - began) + PART_SLACK
        for worker in workers:
            if parts[-1] is None:  # one part is open: the audit in one process answers
                break
            if not worker.conn.poll(max(0.0, deadline - time.monotonic())):
                break  # stuck
            parts.append(worker.conn.recv())
            answered.add(worker)
    except (EOFError, ConnectionError):  # a process that ended (no storage, say)
        pass
    finally:
        # A process still at work on its part, stuck, or gone, is stopped: the next
        # audit forks another. The others wait for the next part.
        for worker in workers:
            if worker not in answered:
                helpers.discard(worker)
    done = [part for part in parts if part is not None]
    if len(done) != len(starts) + 1:
        return None
    return _joined(uid, done, starts, _live_state_hash(app, uid, done[-1].last))


class PartProcess:
    """A process that audits parts of long rooms for an app: forked from the app's
    process (its code and catalog), it opens the storage once, touching none of the
    app's connections, then replays and checks each part it is sent (`_audit_part`)
    and answers with its `Part`, until the app's end of the pipe closes."""

    def __init__(self, reopen: Callable[[], RoomQueries]) -> None:
        context = multiprocessing.get_context("fork")
        self.conn, theirs = context.Pipe()
        self.process: BaseProcess = context.Process(target=_parts_in_child, daemon=True,
                                                    args=(theirs, self.conn, reopen))
        self.process.start()
        theirs.close()

    def stop(self, wait: float) -> None:
        """Close its pipe (it closes its storage and ends); kill it after `wait` seconds."""
        self.conn.close()
        self.process.join(timeout=wait)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=5)


class PartProcesses:
    """The processes an app keeps for audits in parts (`RoomStore.part_processes`).

    Forking a process and opening the storage again cost more than a sixth of the
    audit of a 10,000-event room in two parts on PostgreSQL: they are started by the
    app's first audit in parts and serve every one after it (`dune-ledger audit --all`),
    one part at a time each. They end when the app closes, or when the app's process
    ends (their pipe closes); one that fails or hangs is stopped, and another is forked
    when a part needs it. Each holds its own storage connection (one on PostgreSQL).
    """

    def __init__(self) -> None:
        self.running: list[PartProcess] = []

    def ready(self, count: int, reopen: Callable[[], RoomQueries]) -> list[PartProcess]:
        """`count` running processes, forking those missing."""
        for worker in [w for w in self.running if not w.process.is_alive()]:
            self.discard(worker)
        while len(self.running) < count:
            self.running.append(PartProcess(reopen))
        return self.running[:count]

    def discard(self, worker: PartProcess) -> None:
        self.running.remove(worker)
        worker.stop(wait=0)

    def close(self) -> None:
        for worker in self.running:
            worker.conn.close()  # each closes its storage and ends
        for worker in self.running:
            worker.stop(wait=5)
        self.running = []


def _part_starts(app: RoomQueries, uid: UUID, processes: int, part_min: int) -> list[RoomSnapshot]:
    """The snapshots where the parts after the first start: those nearest to an even
    split of the stream (up to its latest snapshot)."""
    assert app.snapshots is not None
    snapshots = app.snapshots

    def first(**where: Any) -> RoomSnapshot | None:
        found = [s for s in snapshots.get(uid, limit=1, **where) if isinstance(s, RoomSnapshot)]
        return found[0] if found else None

    last = first(desc=True)
    if last is None:
        return []
    length = last.originator_version
    count = min(processes, length // part_min)
    starts: list[RoomSnapshot] = []
    for i in range(1, count):
        target = length * i // count
        near = [s for s in (first(lte=target, desc=True), first(gt=target)) if s is not None]
        # The later of two as near: the part after it pays for starting a process.
        found = min(reversed(near), key=lambda s: abs(s.originator_version - target))
        if (starts[-1].originator_version if starts else part_min - 1) \
                < found.originator_version < length:
            starts.append(found)
    return starts


def _parts_in_child(conn: Connection, apps_end: Connection,
                    reopen: Callable[[], RoomQueries]) -> None:
    """A `PartProcess`: answer each part sent on `conn` until the app's end closes. A
    part that fails is answered None; storage that cannot be opened ends the process.

    A process forked later holds copies of the app's ends of the earlier ones' pipes:
    it ends first (its own pipe closes with the others), and so lets them end.
    """
    apps_end.close()  # this process's copy: else the pipe never closes for it
    gc.enable()  # forked while the audit paused the collector: paused per part below
    try:
        app = reopen()
    except Exception:  # the parent sees the pipe close and audits in one process
        return
    try:
        while True:
            try:
                uid, snapshot, upto = conn.recv()
            except EOFError:  # the app closed, or its process ended
                return
            with gc_paused():
                try:
                    part = _audit_part(app, uid, snapshot, upto)
                except Exception:  # the part is left open: the parent audits in one process
                    part = None
            conn.send(part)
    except OSError:  # the parent stopped listening
        return
    finally:
        app.close()


def _audit_part(app: RoomQueries, uid: UUID, snapshot: RoomSnapshot | None,
                upto: int | None) -> Part | None:
    """Replay and check the events after `snapshot` (None: from the first) up to `upto`
    (None: the last); None unless every check passes."""
    assert app.read_models is not None
    after = snapshot.originator_version if snapshot is not None else 0
    records = app.records(uid, gt=after or None, lte=upto)
    if not records:
        return None
    start = None
    if snapshot is not None:
        created = app.records(uid, lte=1)
        if not created or not isinstance(created[0].fact, RoomCreated) or \
                records[0].append != records[0].originator_version:
            return None  # no room, or the part would start inside an append
        start = Start(created[0].fact, RoomState.model_validate(snapshot.state["state"]),
                      after, snapshot.state["head"])
    start_hash = state_hash(start.state) if start is not None else None
    fold = app.read_models.part_fold(uid, after, upto)
    report, state = audit_records(str(uid), records, fold, start, app.signer,
                                  lambda: app.trusted(uid))
    rows = fold.verdict(records)
    if state is None or rows is None or not all(c["ok"] for c in report["checks"].values()):
        return None
    return Part(last=records[-1].originator_version, events=len(records),
                start_hash=start_hash, end_hash=str(report["state_hash"]),
                head=records[-1].hash(), rows=rows)


def _joined(uid: UUID, done: list[Part], starts: list[RoomSnapshot],
            live: str) -> dict[str, Any] | None:
    """The report of a room whose parts passed every check and join up exactly; else None."""
    seq = 1  # the number the next part's first entry must have
    for i, part in enumerate(done):
        rows = part.rows
        if not rows["log_equal"] or (rows["entries"] and rows["first_seq"] != seq):
            return None
        seq += rows["entries"]
        if i + 1 < len(done):
            start, following = starts[i], done[i + 1]
            if part.last != start.originator_version or part.end_hash != following.start_hash \
                    or part.head != start.state["head"]:
                return None
    final = done[-1]
    if final.rows["version"] != final.last or final.rows["log_version"] != final.last or \
            not final.rows["views_equal"] or final.end_hash != live:
        return None
    checks = {name: Check().report() for name in CHECKS}
    checks["live_state_matches"] = {"ok": True, "details": []}
    checks["read_models_match"] = {"ok": True, "details": []}
    return {"room": str(uid), "events": sum(part.events for part in done),
            "version": final.last, "state_hash": final.end_hash, "checks": checks, "ok": True}


def _live_state_hash(app: RoomQueries, uid: UUID, version: int) -> str:
    """The state the application loads (snapshots included), as of `version`: the room
    as commands load it, or, when it has been written since, as it was then."""
    try:
        room = app.load(uid)
        if room.version > version:
            room = app.load(uid, version=version)
        return state_hash(room.state)
    except Rejection as r:  # a stream that no longer loads is itself a finding
        return f"unloadable: {r.message}"
    except Exception as e:
        return f"unloadable: {type(e).__name__}"


def audit_all(app: RoomQueries, processes: int = 1) -> list[dict[str, Any]]:
    reports = []
    for rid in app.stored_room_ids():
        try:
            reports.append(audit_room(app, str(rid), processes))
        except Rejection as r:  # its first event is there, the rest is not
            reports.append(unauditable(str(rid), r.message))
    return reports
