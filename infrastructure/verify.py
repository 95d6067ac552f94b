"""`dune-ledger room transcript` and `dune-ledger verify`: fair dealing checked by anyone
(RULES 9).

A transcript is an ended room's whole stream in the export's line format
(infrastructure/transfer.export_lines), private facts included. `verify` reads
one with nothing but the server's public key and the domain's own replay, and
reports, check by check:

- `chain_intact`: each line's hash is sha256 of its room, version, type and
  payload, and carries its predecessor's (`prev`, in the line and the payload);
- `signatures`: the last event of every append is signed, under the key, over
  `b"dune-ledger:append:" + hash`, and no other event carries a signature;
- `commitment`: the room ended, and the secret its end published hashes to the
  commitment published at its creation;
- `seeds`: every outcome's `mix` is the mix of the seeds in force at it;
- `shuffles`: every outcome of the room is derived: its `rng` names the version
  of the append holding it and the next call of that append, its `input` is the
  list the state held, and shuffling (or sampling) that input by the derivation
  under the published secret gives exactly what the event recorded;
- `draws`: every card drawn was the top of the deck;
- `replay`: every event applies, nothing follows the end, and the state the
  replay reaches is the one the end recorded (`state_hash`).

`first_failure` names the first failure in that order of stages (the lines
themselves, then the commitment, then the replay), at the earliest version
within its stage. The derivation is not run under a secret that does not match
the commitment: `shuffles` is then false, unchecked.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from dune_ledger.application.rooms import RoomsApp
from dune_ledger.application.stream import APPEND, GENESIS, STORED_TYPES, chain_hash
from dune_ledger.domain.game import (
    AmbassadorCohortDrawn,
    CardDrawn,
    DeckShuffled,
    DiscardReshuffled,
    Event,
    PileShuffled,
    Rejection,
    RoomCreated,
    RoomEnded,
    RoomState,
    apply,
    commitment,
    derived_shuffle,
    initial_state,
    mix,
    outcome,
    state_digest,
    words,
)
from dune_ledger.infrastructure import strict_json
from dune_ledger.infrastructure.transfer import FIELDS, export_lines  # the one export format

CHECKS = ("chain_intact", "signatures", "commitment", "seeds", "shuffles", "draws", "replay")
STAGE = {"chain_intact": 0, "signatures": 0, "commitment": 1, "seeds": 2, "shuffles": 2,
         "draws": 2, "replay": 2}


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
    def __init__(self, room: str, events: int) -> None:
        self.room, self.events = room, events
        self.checks = dict.fromkeys(CHECKS, True)
        self.failures: list[tuple[int, int, str, str]] = []

    def fail(self, version: int, check: str, detail: str) -> None:
        self.checks[check] = False
        self.failures.append((STAGE[check], version, check, detail))

    def as_json(self) -> dict[str, Any]:
        first = min(self.failures, default=None, key=lambda f: (f[0], f[1]))
        return {"ok": not self.failures, "room": self.room, "events": self.events,
                "checks": self.checks,
                "first_failure": None if first is None else {
                    "version": first[1], "check": first[2], "detail": first[3]}}


def verify(data: bytes, key: Ed25519PublicKey) -> dict[str, Any]:
    lines = parse(data)
    room = str(lines[0]["room"])
    report = Report(room, len(lines))
    payloads = _check_lines(lines, key, report)
    if payloads is None:
        return report.as_json()
    events = _decode(lines, payloads, report)
    if events is None:
        return report.as_json()
    secret = _check_commitment(events, report)
    _replay(events, secret, report)
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
        digest = chain_hash(report.room, version, line["type"], text.encode())
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
        payloads.append(payload)
    for i, line in enumerate(lines):
        version = i + 1
        last = i + 1 == len(lines) or payloads[i + 1].get("append") != payloads[i].get("append")
        sig = line["sig"]
        if not last:
            if sig is not None:
                report.fail(version, "signatures", "a signature inside an append")
            continue
        if not isinstance(sig, str) or not _signed(key, line["hash"], sig):
            report.fail(version, "signatures", "its append's signature is missing or does "
                        "not verify under the key")
    return payloads


def _signed(key: Ed25519PublicKey, digest: Any, sig: str) -> bool:
    try:
        key.verify(base64.b64decode(sig, validate=True), APPEND + str(digest).encode())
        return True
    except (InvalidSignature, binascii.Error, ValueError):
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
    room = report.room
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
