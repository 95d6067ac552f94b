"""`dune-ledger room transcript` and `dune-ledger verify`: fair dealing checked by anyone
(RULES 9).

A transcript is an ended room's whole stream in the export's line format
(infrastructure/transfer.export_lines), private facts included. `verify` reads
one with nothing but the server's public key and the domain's own replay, and
reports, check by check:

- `chain_intact`: each line's hash is sha256 of its room, version, type and
  payload, and carries its predecessor's (`prev`, in the line and the payload);
- `signatures`: the last event of every append carries a signature and no other
  event does, and every one verifies under the key over `b"dune-ledger:append:" + hash`;
- `commitment`: the room ended, and the secret its end published hashes to the
  commitment published at its creation; each `append` is its first event's version
  (part of `chain_intact`).

A v2 transcript (`hmac-sha256-fy-v2`, RULES 9.7) is re-executed: every append's
recorded command (its payload's `meta`: the command as received and `by`) is run
through the rules on the state before it, with the derived randomness and the
rules' recorded moment, and must append exactly the recorded events, byte for byte
(`commands`); an append with no command is only the operator's token reissue. Its
other checks: `ceremony` (created in the commit stage, the deck in the catalog's
order and no cohort; every reveal hashes to its commitment; the deal's seeds, mix
and withheld are the reveals'; one deal, before any outcome), `seat_signatures`
(every command of a keyed seat signed by its key with a new `command_id`, or the
autopilot's after a signed turn-on), `shuffles` (the counter runs 0, 1, 2, ... and
each outcome is the derivation of the list the state held), `draws`, `replay`.
An append the rules re-make exactly is not walked again event by event (its state
is the rules'); one that differs is, so that the check it breaks is named. The
report counts, per seat, the commands it signed, the autopilot's and the unsigned,
and the keys a token reissue cleared; and says its part in the deal (`seed`:
revealed, withheld, or none when it had committed nothing; null before a deal).

A v1 transcript keeps the v1 checks: `seeds` (every outcome's `mix` is the mix of
the seeds in force), `shuffles` (its `rng` names the version of its append and the
next call of it, and the derivation gives what it recorded), `draws`, `replay`.

`first_failure` names the first failure in the order of stages (the lines, then
the commitment, then the rest), at the earliest version within its stage; any
input that is not a transcript of the expected shapes is a report with the check
`malformed`, never an exception.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from dune_ledger.application.rooms import RoomsApp, parsed
from dune_ledger.application.signatures import (
    BY,
    autopilot_may_not,
    key_of,
    signed_text,
    valid,
)
from dune_ledger.application.stream import (
    APPEND,
    GENESIS,
    STORED_TYPES,
    SeatTokenReissued,
    chain_hash,
)
from dune_ledger.domain.game import (
    ALGORITHM,
    ALGORITHM_V2,
    OPERATOR,
    SYSTEM,
    AmbassadorCohortDrawn,
    CardDrawn,
    Counted,
    Dealt,
    DeckShuffled,
    DiscardReshuffled,
    Event,
    PileShuffled,
    Rejection,
    RoomCreated,
    RoomEnded,
    RoomState,
    SeedRevealed,
    WindowDeadline,
    apply,
    commitment,
    counted_words,
    decide,
    derived_shuffle,
    initial_state,
    mix,
    outcome,
    seed_hash,
    state_digest,
    words,
)
from dune_ledger.infrastructure import strict_json
from dune_ledger.infrastructure.transfer import FIELDS, export_lines  # the one export format

CHECKS = ("chain_intact", "signatures", "commitment", "seeds", "shuffles", "draws", "replay")
CHECKS_V2 = ("chain_intact", "signatures", "commitment", "ceremony", "seat_signatures",
             "shuffles", "draws", "commands", "replay")
STAGE = {"malformed": 0, "chain_intact": 0, "signatures": 0, "commitment": 1, "seeds": 2,
         "ceremony": 2, "seat_signatures": 2, "shuffles": 2, "draws": 2, "commands": 2,
         "replay": 2}


class TranscriptError(ValueError):
    """The file is not a transcript at all (not JSON lines of the export's shape)."""


def transcript(app: RoomsApp, room_id: str) -> Iterable[bytes]:
    """An ended room's transcript: its export lines. `room_not_ended` before the end."""
    room = app.peek(room_id)
    if room.state.ended is None:
        raise Rejection("room_not_ended", "the room has not ended: its transcript is "
                        "served once the operator ends it (`dune-ledger room end ROOM`)")
    return export_lines(app, room.id)


def public_key(text: str) -> Ed25519PublicKey:
    """A key as `keys show` prints it: the standard base64 of the raw 32 bytes."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
        return Ed25519PublicKey.from_public_bytes(raw)
    except (binascii.Error, ValueError):
        raise TranscriptError("the public key is not the base64 of a raw 32-byte "
                              "Ed25519 key (as `dune-ledger keys show` prints it)") from None


def parse(data: bytes) -> list[dict[str, Any]]:
    lines = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            line = strict_json.loads(raw)
        except ValueError as e:
            raise TranscriptError(f"line {number} is not JSON: {e}") from None
        if not isinstance(line, dict) or set(line) != set(FIELDS):
            raise TranscriptError(f"line {number} is not an export line "
                                  f"({', '.join(FIELDS)})")
        lines.append(line)
    if not lines:
        raise TranscriptError("the transcript holds no event")
    return lines


class Report:
    def __init__(self, room: str | None, events: int, algorithm: str | None) -> None:
        self.room, self.events, self.algorithm = room, events, algorithm
        self.checks = dict.fromkeys(CHECKS_V2 if algorithm == ALGORITHM_V2 else CHECKS, True)
        self.failures: list[tuple[int, int, str, str]] = []
        self.seats: dict[str, dict[str, Any]] = {}

    def fail(self, version: int, check: str, detail: str) -> None:
        self.checks[check] = False
        self.failures.append((STAGE[check], version, check, detail))

    def as_json(self) -> dict[str, Any]:
        first = min(self.failures, default=None, key=lambda f: (f[0], f[1]))
        return {"ok": not self.failures, "room": self.room, "algorithm": self.algorithm,
                "events": self.events, "checks": self.checks, "seats": self.seats,
                "first_failure": None if first is None else {
                    "version": first[1], "check": first[2], "detail": first[3]}}


def verify(data: bytes, key: Ed25519PublicKey) -> dict[str, Any]:
    """The report on a transcript; malformed input of any shape is a report with
    `ok: false` (check `malformed`), never an exception."""
    try:
        lines = parse(data)
        room = str(lines[0]["room"])
        created = strict_json.loads(str(lines[0]["payload"]).encode())["fact"]["state"]
        algorithm = (created.get("fairness") or {}).get("algorithm", ALGORITHM)
    except Exception as e:
        return malformed(None, 0, 1, f"not a transcript: {e}")
    report = Report(room, len(lines), algorithm)
    try:
        payloads = _check_lines(lines, key, report)
        if payloads is None:
            return report.as_json()
        events = _decode(lines, payloads, report)
        if events is None:
            return report.as_json()
        secret = _check_commitment(events, report)
        if algorithm == ALGORITHM_V2:
            reexecute(lines, payloads, events, secret, report)
        else:
            _replay(events, secret, report)
    except Exception as e:
        # Whatever shape a forger gave a field: a failure named, not a traceback.
        report.fail(0, "malformed", f"{type(e).__name__}: {e}"[:200])
    return report.as_json()


def malformed(room: str | None, events: int, version: int, detail: str) -> dict[str, Any]:
    report = Report(room, events, None)
    report.fail(version, "malformed", detail[:200])
    return report.as_json()


def _check_lines(lines: list[dict[str, Any]], key: Ed25519PublicKey, report: Report
                 ) -> list[dict[str, Any]] | None:
    """Hashes, predecessors and signatures, line by line; the decoded payloads."""
    payloads: list[dict[str, Any]] = []
    head = GENESIS
    for i, line in enumerate(lines):
        version = i + 1
        if line["room"] != report.room or line["version"] != version or not isinstance(
                line["payload"], str) or not isinstance(line["type"], str):
            report.fail(version, "chain_intact", "not the next event of this room")
            return None
        text = line["payload"]
        digest = chain_hash(str(report.room), version, line["type"], text.encode())
        try:
            payload = strict_json.loads(text.encode())
        except ValueError:
            report.fail(version, "chain_intact", "its payload is not JSON")
            return None
        if not isinstance(payload, dict):
            report.fail(version, "chain_intact", "its payload is not a JSON object")
            return None
        if digest != line["hash"]:
            report.fail(version, "chain_intact", "its hash is not the hash of its payload")
        if line["prev"] != head or payload.get("prev") != head:
            report.fail(version, "chain_intact", "it does not carry its predecessor's hash")
        head = str(line["hash"])
        # An append's events all name the version of its first (RULES 9.7).
        starts = not payloads or payload.get("append") != payloads[-1].get("append")
        if payload.get("append") != (version if starts else payloads[-1].get("append")):
            report.fail(version, "chain_intact", "its `append` is not the version of the "
                        "first event of its append")
        payloads.append(payload)
    # Every append's signature is checked (RULES 9.7), not only the last: the last one
    # authenticates the events before it through the hashes, but a transcript whose
    # earlier signatures are garbage is not the one the server signed. PyNaCl checks one
    # in about 61 µs here against 108 µs for `cryptography`: with one an append, it pays.
    nacl_key = VerifyKey(key.public_bytes_raw())
    for i, line in enumerate(lines):
        version = i + 1
        last = i + 1 == len(lines) or payloads[i + 1].get("append") != payloads[i].get("append")
        sig = line["sig"]
        if not last:
            if sig is not None:
                report.fail(version, "signatures", "a signature inside an append")
        elif not isinstance(sig, str):
            report.fail(version, "signatures", "its append is not signed")
        elif not _signed(nacl_key, line["hash"], sig):
            report.fail(version, "signatures", "its append's signature does not verify "
                        "under the key")
    return payloads


def _signed(key: VerifyKey, digest: Any, sig: str) -> bool:
    try:
        key.verify(
            APPEND + str(digest).encode(), base64.b64decode(sig, validate=True))
        return True
    except (BadSignatureError, binascii.Error, ValueError):
        return False


def _decode(lines: list[dict[str, Any]], payloads: list[dict[str, Any]], report: Report
            ) -> list[tuple[int, int, Event]] | None:
    """(version, append, event) of every line, upcast as the store reads it."""
    out = []
    for i, (line, payload) in enumerate(zip(lines, payloads, strict=True)):
        version = i + 1
        cls = STORED_TYPES.get(line["type"])
        try:
            assert cls is not None, "an unknown event type"
            fact, v = payload["fact"], payload["v"]
            if v != cls.schema_version:
                fact = cls.upcast(fact, v)
            event = cls.model_validate(fact)
            append = int(payload["append"])
        except Exception as e:
            report.fail(version, "replay", f"the event cannot be read: {e}"[:200])
            return None
        out.append((version, append, event))
    if not isinstance(out[0][2], RoomCreated):
        report.fail(1, "replay", "a room's stream starts with RoomCreated")
        return None
    return out


def _check_commitment(events: list[tuple[int, int, Event]], report: Report) -> bytes | None:
    """The published secret, when it matches the commitment."""
    created = events[0][2]
    assert isinstance(created, RoomCreated)
    published = (created.state.get("fairness") or {}).get("commitment")
    version, _, last = events[-1]
    if published is None:
        report.fail(1, "commitment", "the room is not committed (seeded or layout): "
                    "nothing commits its shuffles")
        return None
    if not isinstance(last, RoomEnded):
        report.fail(version, "commitment", "the transcript does not end with RoomEnded")
        return None
    secret = last.secret or ""
    try:
        key = bytes.fromhex(secret)
    except ValueError:
        key = b""
    if len(secret) != 64 or secret != secret.lower() or len(key) != 32:
        report.fail(version, "commitment", "the published secret is not 64 lowercase hex")
        return None
    if commitment(key) != published:
        report.fail(version, "commitment", "the published secret does not hash to the "
                    "commitment made at creation")
        return None
    return key


def _replay(events: list[tuple[int, int, Event]], secret: bytes | None, report: Report
            ) -> None:
    room = str(report.room)
    state: RoomState | None = None
    calls: dict[int, int] = {}  # append -> the next call expected in it
    ended = False
    for version, append, event in events:
        if ended:
            report.fail(version, "replay", "an event after the end")
            return
        before = state
        if isinstance(event, RoomEnded):
            assert state is not None
            ended = True
            if state_digest(state) != event.state_hash:
                report.fail(version, "replay", "the replay does not reach the state the "
                            "room ended in")
        if isinstance(event, CardDrawn) and state is not None and (
                not state.deck or state.deck[0] != event.card):
            report.fail(version, "draws", "the card drawn was not the top of the deck")
            return
        _check_outcome(room, version, append, event, before, secret, calls, report)
        try:
            if state is None:
                assert isinstance(event, RoomCreated)
                state = initial_state(event)
            else:
                apply(state, event)
        except Exception as e:
            report.fail(version, "replay", f"the event does not apply: {type(e).__name__}")
            return
    if not ended:
        report.fail(events[-1][0], "replay", "the room has not ended")


def _check_outcome(room: str, version: int, append: int, event: Event,
                   before: RoomState | None, secret: bytes | None, calls: dict[int, int],
                   report: Report) -> None:
    rng = getattr(event, "rng", None)
    if rng is None:
        if isinstance(event, OUTCOME_EVENTS) and before is not None and \
                before.fairness is not None:
            report.fail(version, "shuffles", f"{event.type} carries no derivation")
        return
    seeds: dict[str, str | None] = dict.fromkeys(_seats(event)) if before is None else (
        dict(before.fairness.seeds) if before.fairness is not None else {})
    if rng.get("mix") != mix(seeds):
        report.fail(version, "seeds", "its mix is not the mix of the seeds in force")
    if rng.get("version") != append or rng.get("call") != calls.get(append, 0):
        report.fail(version, "shuffles", "its rng names another version or call than "
                    "the next call of its append")
    calls[append] = calls.get(append, 0) + 1
    expected = outcome(event, before)
    assert expected is not None
    held, recorded, sample = expected
    if list(rng.get("input", [])) != held:
        report.fail(version, "shuffles", "its input is not the list the state held")
        return
    if secret is None:
        report.fail(version, "shuffles", "not checked: no secret matches the commitment")
        return
    derived = derived_shuffle(words(secret, room, int(rng["version"]), int(rng["call"]),
                                    str(rng["mix"])), held)
    if (derived[:len(recorded)] if sample else derived) != recorded:
        report.fail(version, "shuffles", "the recorded outcome is not the derived one")


def _seats(event: Event) -> list[str]:
    assert isinstance(event, RoomCreated)
    return [s["faction"] for s in event.state["seats"]]


OUTCOME_EVENTS = (DeckShuffled, DiscardReshuffled, PileShuffled, AmbassadorCohortDrawn)


# --- v2: re-execution (RULES 9.7) ------------------------------------------------------


def reexecute(lines: list[dict[str, Any]], payloads: list[dict[str, Any]],
              events: list[tuple[int, int, Event]], secret: bytes | None,
              report: Report) -> None:
    """Every append of a v2 transcript, re-executed from the command it recorded on the
    state before it with the derived randomness; then its recorded events applied one
    by one, each checked (the ceremony, the counter, the derivation, the draws)."""
    created = events[0][2]
    assert isinstance(created, RoomCreated)
    state = initial_state(created)
    _check_created(created, state, report)
    report.seats = {s.faction: {"key": None, "signed": 0, "autopilot": 0, "unsigned": 0,
                                "keys_cleared": 0, "seed": None} for s in state.seats}
    walk = Walk(report, secret)
    i = 1
    while i < len(events):
        append = events[i][1]
        j = i
        while j < len(events) and events[j][1] == append:
            j += 1
        if walk.ended:
            report.fail(events[i][0], "replay", "an event after the end")
            return
        # Re-executed on the state before the append; reported after the checks of its
        # events, so that a forged outcome is named by the check it fails.
        differs, after = _command(payloads[i:j], events[i:j], state, walk)
        if differs is None and after is not None:
            # The rules made these very events: the state they lead to is theirs, and
            # what the step-by-step checks would find holds by the rules.
            for _, _, event in events[i:j]:
                walk.counted(event)
            state = after
        else:
            for version, _, event in events[i:j]:
                if not walk.step(version, event, state):
                    return
            if differs is not None:
                report.fail(*differs)
        i = j
    if not walk.ended:
        report.fail(events[-1][0], "replay", "the room has not ended")
    f = state.fairness
    for seat, row in report.seats.items():
        row["key"] = None if f is None or not f.keys else f.keys.get(seat)
    # What RULES 9.8 has every report show: a reveal withheld, a seat left out of the
    # deal, a key cleared by a token reissue.
    for _, _, event in events:
        if isinstance(event, SeatTokenReissued) and event.key_cleared and \
                event.seat in report.seats:
            report.seats[event.seat]["keys_cleared"] += 1
        if isinstance(event, Dealt):
            for seat, row in report.seats.items():
                row["seed"] = "withheld" if seat in event.withheld else \
                    "revealed" if event.seeds.get(seat) else "none"
    if walk.deals > 1:  # none: a room ended before its deal, with no outcome
        report.fail(events[-1][0], "ceremony", f"the room was dealt {walk.deals} times")


def _check_created(created: RoomCreated, state: RoomState, report: Report) -> None:
    f = state.fairness
    seats = [s.faction for s in state.seats]
    deck = set(state.deck)
    if (f is None or f.stage != "commit" or f.calls != 0 or f.mix is not None
            or f.commitments != dict.fromkeys(seats) or f.keys != dict.fromkeys(seats)
            or any(f.seeds.values()) or f.withheld or created.rng is not None):
        report.fail(1, "ceremony", "the room was not created in its commit stage")
    if [c for c in state.cards() if c in deck] != state.deck:
        report.fail(1, "ceremony", "the committed room's deck was not in the catalog's "
                    "order")
    amb = state.ambassadors
    if amb is not None and (amb.cohort or f is None or not f.cohort_at_deal):
        report.fail(1, "ceremony", "Ecaz's cohort was named before the deal")


BY_ACTOR = {"operator": OPERATOR, "system": SYSTEM}


Failure = tuple[int, str, str]


def _command(payloads: list[dict[str, Any]], group: list[tuple[int, int, Event]],
             state: RoomState, walk: Walk) -> tuple[Failure | None, RoomState | None]:
    """The append's recorded command: its sender and signature, and its re-execution:
    the failure if it appends other events than those recorded, else the state after
    (None: not re-executed)."""
    report = walk.report
    version = group[0][0]
    meta = payloads[0].get("meta")
    meta = meta if isinstance(meta, dict) else {}
    by, raw = meta.get("by"), meta.get("command")
    if raw is None:
        fact = group[0][2]
        if not (len(group) == 1 and isinstance(fact, SeatTokenReissued) and by == "operator"
                and fact.key_cleared == (key_of(state, fact.seat) is not None)):
            report.fail(version, "commands", "an append with no recorded command that is "
                        "not the operator's token reissue")
        return None, None
    seat = payloads[0].get("seat")
    actor = BY_ACTOR.get(str(by), seat)
    if by not in BY or not isinstance(actor, str) or (
            by in ("operator", "system") and seat != actor):
        report.fail(version, "commands", "its sender is not a seat, the autopilot, the "
                    "operator or the system")
        return None, None
    if by in ("seat", "autopilot"):
        walk.signed(version, actor, raw, str(by), state)
    try:
        # The worker's only command is a window's deadline (RULES 4.4).
        command = WindowDeadline.model_validate(raw) if by == "system" else parsed(actor, raw)
        now = meta.get("now")
        f = state.fairness
        if walk.secret is None or f is None:
            raise Rejection("unverifiable", "no secret matches the commitment")
        port = Counted(walk.secret, state.room, f.calls or 0, f.mix)
        tx = decide(state, actor, command, port,
                    now=None if now is None else datetime.fromisoformat(now))
    except Rejection as r:
        return (version, "commands", f"the rules refuse the recorded command: {r.code}"), None
    made = [(type(e).__name__, orjson.dumps(e.model_dump(mode="json"))) for e in tx.events]
    kept = [(event.type, orjson.dumps(p["fact"])) for p, (_, _, event) in
            zip(payloads, group, strict=True)]
    for at, (m, k) in enumerate(zip(made, kept, strict=False)):
        if m != k:
            return (version + at, "commands", "re-executed, its command appends other "
                    "events than those recorded"), None
    if len(made) != len(kept):
        return (version + min(len(made), len(kept)), "commands",
                f"re-executed, its command appends {len(made)} events, not the "
                f"{len(kept)} recorded"), None
    return None, tx.state


class Walk:
    """The recorded events, one by one: the counter, the ceremony, the draws."""

    def __init__(self, report: Report, secret: bytes | None) -> None:
        self.report, self.secret = report, secret
        self.calls = 0
        self.deals = 0
        self.ended = False
        self.used: set[str] = set()  # "seat:command_id" of the keyed seats' commands

    def signed(self, version: int, seat: str, raw: Any, by: str, state: RoomState) -> None:
        row = self.report.seats.get(seat)
        if row is None or not state.has_seat(seat):
            self.report.fail(version, "seat_signatures", "a command in the name of no seat")
            return
        key = key_of(state, seat)
        if by == "autopilot":
            row["autopilot"] += 1
            if key is not None and state.seat(seat).autopilot is None:
                self.report.fail(version, "seat_signatures", "the autopilot acted for a "
                                 "keyed seat that had not turned it on")
            elif key is not None and autopilot_may_not(raw):
                self.report.fail(version, "seat_signatures", f"the autopilot sent a "
                                 f"command for {seat} that only the seat's key signs")
            return
        if key is None:
            row["unsigned"] += 1
            return
        cid = raw.get("command_id") if isinstance(raw, dict) else None
        if not isinstance(raw, dict) or not isinstance(cid, str) or not valid(
                key, raw.get("sig"), signed_text(state.room, seat, raw)):
            self.report.fail(version, "seat_signatures", f"a command in {seat}'s name is "
                             "not signed by its key")
            return
        if f"{seat}:{cid}" in self.used:
            self.report.fail(version, "seat_signatures", f"{seat} used a command_id twice")
        self.used.add(f"{seat}:{cid}")
        row["signed"] += 1

    def counted(self, event: Event) -> None:
        """An event the re-executed command made itself: only what the walk counts."""
        if isinstance(event, Dealt):
            self.deals += 1
        if getattr(event, "rng", None) is not None:
            self.calls += 1
        if isinstance(event, RoomEnded):
            self.ended = True

    def step(self, version: int, event: Event, state: RoomState) -> bool:
        report = self.report
        f = state.fairness
        assert f is not None
        if isinstance(event, SeedRevealed) and (f.commitments or {}).get(event.seat) != \
                seed_hash(state.room, event.seat, event.value):
            report.fail(version, "ceremony", "a reveal does not hash to its commitment")
        if isinstance(event, Dealt):
            self.deals += 1
            revealed = dict(f.seeds)
            committed_seats = [s for s, h in (f.commitments or {}).items() if h]
            if event.seeds != revealed or event.mix != mix(revealed) or sorted(
                    event.withheld) != sorted(s for s in committed_seats if not revealed.get(s)):
                report.fail(version, "ceremony", "the deal's seeds, mix or withheld are not "
                            "those of the reveals")
        if isinstance(event, CardDrawn) and (not state.deck or state.deck[0] != event.card):
            report.fail(version, "draws", "the card drawn was not the top of the deck")
        self._outcome(version, event, state)
        if isinstance(event, RoomEnded):
            self.ended = True
            if state_digest(state) != event.state_hash:
                report.fail(version, "replay", "the replay does not reach the state the "
                            "room ended in")
        try:
            apply(state, event)
        except Exception as e:
            report.fail(version, "replay", f"the event does not apply: {type(e).__name__}")
            return False
        return True

    def _outcome(self, version: int, event: Event, state: RoomState) -> None:
        report = self.report
        rng = getattr(event, "rng", None)
        if rng is None:
            if isinstance(event, OUTCOME_EVENTS):
                report.fail(version, "shuffles", f"{event.type} carries no derivation")
            return
        f = state.fairness
        assert f is not None
        if self.deals != 1 or f.stage != "dealt":
            report.fail(version, "ceremony", "an outcome before the deal")
        if rng.get("n") != self.calls:
            report.fail(version, "shuffles", f"the counter reads {rng.get('n')} where "
                        f"{self.calls} comes next")
        self.calls += 1
        if rng.get("mix") != f.mix:
            report.fail(version, "shuffles", "its mix is not the mix fixed at the deal")
        expected = outcome(event, state)
        assert expected is not None
        held, recorded, sample = expected
        if list(rng.get("input", [])) != held:
            report.fail(version, "shuffles", "its input is not the list the state held")
            return
        if self.secret is None:
            report.fail(version, "shuffles", "not checked: no secret matches the commitment")
            return
        derived = derived_shuffle(counted_words(self.secret, state.room, int(rng["n"]),
                                                str(rng["mix"])), held)
        if (derived[:len(recorded)] if sample else derived) != recorded:
            report.fail(version, "shuffles", "the recorded outcome is not the derived one")

