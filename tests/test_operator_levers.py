"""The operator as the adversary (RULES 9, issue 33): it holds the store, the key file,
the server and the CLI. Each lever it has is tried end to end, and fails the way RULES
says: refused with its code and nothing appended, or `verify` false with the check
named. The choices left to it (RULES 9.8) are tried too, and each is shown.

Forged transcripts are made as the operator would make them: with the rules
themselves (`remade`), so that every event after the change is what the rules make
of it, chained and signed again with the server's own key."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from dune_ledger.application.rooms import parsed
from dune_ledger.application.stream import STORED_TYPES
from dune_ledger.domain.game import (
    OPERATOR,
    SYSTEM,
    Counted,
    LayoutError,
    RoomCreated,
    WindowDeadline,
    apply,
    counted_words,
    decide,
    derived_shuffle,
    initial_state,
    mix,
)
from dune_ledger.infrastructure.keys import public_key_info
from dune_ledger.infrastructure.verify import public_key, transcript, verify
from tests.support import (
    SeatKey,
    committed_layout,
    dealt,
    example,
    keyed_rooms,
    lines_of,
    ok,
    resigned,
    seed_commitment,
)

ROOT = Path(__file__).resolve().parent.parent
BOX = "nullentropy-box"
AUTOPILOT_ON = {"type": "set_autopilot", "enabled": True, "profile": "easy"}


@pytest.fixture
def app(tmp_path: Path) -> Any:
    with keyed_rooms(tmp_path) as rooms:
        yield rooms


def refused(app: Any, room: str, seat: str, command: Any, code: str, **how: Any) -> None:
    """Refused with `code`, nothing appended and no random call counted."""
    before = app.load(room)
    version, calls = before.version, before.state.fairness.calls
    result = app.execute(room, seat, command, **how)
    assert not result["ok"] and result["error"]["code"] == code, result
    after = app.load(room)
    assert (after.version, after.state.fairness.calls) == (version, calls)


def secret_of(app: Any, room: str) -> bytes:
    """What the operator reads from its own store."""
    return bytes.fromhex(app.load(room).state.fairness.secret)


def server_key(app: Any) -> Any:
    return public_key(public_key_info(app.key_file)["public_key"])


def played(app: Any) -> tuple[str, SeatKey, bytes]:
    """A committed room whose richese holds a key: dealt, richese draws and searches the
    Box (signed), emperor and harkonnen draw unsigned, a token reissue, the end."""
    room = str(app.create_room(committed_layout())["room"])
    key = SeatKey()
    ok(app, room, "richese", {"type": "seat_key", "public_key": key.public})
    dealt(app, room, keys={"richese": key})
    ok(app, room, "richese", key.sign(room, "richese", {"type": "draw"}))
    ok(app, room, "richese", key.sign(room, "richese", {"type": "begin_search",
                                                        "card": BOX}))
    search = app.seat_view(room, "richese")["nullentropy"]["search"]
    ok(app, room, "richese", key.sign(room, "richese", {
        "type": "select_card", "search": search["event"], "card": search["cards"][0]["id"]}))
    ok(app, room, "emperor", {"type": "draw"})
    app.reissue_token(room, "harkonnen")
    ok(app, room, "harkonnen", {"type": "draw"})
    assert app.end_room(room)["ok"]
    return room, key, b"".join(transcript(app, room))


def appends(data: bytes) -> list[tuple[int, str, dict[str, Any]]]:
    """(version, first event's type, meta) of every append."""
    out = []
    for line in lines_of(data):
        payload = orjson.loads(line["payload"])
        if payload["append"] == line["version"]:
            out.append((line["version"], line["type"], payload.get("meta") or {}))
    return out


def append_of(data: bytes, kind: str, seat: str | None = None, nth: int = 0) -> int:
    """The version of the `nth` append whose recorded command is `kind` (by `seat`)."""
    found = [v for v, _, meta in appends(data)
             if (meta.get("command") or {}).get("type") == kind
             and (seat is None or seat_of(data, v) == seat)]
    return found[nth]


def seat_of(data: bytes, version: int) -> str | None:
    return orjson.loads(lines_of(data)[version - 1]["payload"]).get("seat")


def remade(data: bytes, changes: dict[int, Any], key_file: Any) -> bytes:
    """The transcript made again by the rules, as the operator can make it with the
    store, the server's key and the secret: the append at each version in `changes`
    records that command instead (a dict, or `(command, by, seat)`), or is dropped
    (None); every append after it is its recorded command re-executed on the new state
    with the derived randomness; then chained and signed again."""
    lines = lines_of(data)
    payloads = [orjson.loads(line["payload"]) for line in lines]
    secret = bytes.fromhex(payloads[-1]["fact"]["secret"])
    state = initial_state(RoomCreated.model_validate(payloads[0]["fact"]))
    made: list[tuple[str, dict[str, Any]]] = [(lines[0]["type"], payloads[0])]
    starts = [i for i, p in enumerate(payloads) if p["append"] == i + 1] + [len(lines)]
    for a, b in zip(starts[1:], starts[2:] + [len(lines)], strict=False):
        if a == len(lines):
            break
        first, version = payloads[a], a + 1
        meta, seat = dict(first.get("meta") or {}), first.get("seat")
        if version in changes:
            change = changes[version]
            if change is None:
                continue
            command, by, seat = change if isinstance(change, tuple) else (
                change, meta["by"], seat)
            meta.update(command=command, by=by)
        raw, by = meta.get("command"), meta.get("by")
        if raw is None:  # a token reissue: no command to make it again from
            events = [STORED_TYPES[lines[i]["type"]].model_validate(payloads[i]["fact"])
                      for i in range(a, b)]
            for event in events:
                apply(state, event)
        else:
            actor = {"operator": OPERATOR, "system": SYSTEM}.get(by, seat)
            command = WindowDeadline.model_validate(raw) if by == "system" else \
                parsed(actor, raw)
            f = state.fairness
            tx = decide(state, actor, command, Counted(secret, state.room, f.calls, f.mix),
                        now=datetime.fromisoformat(meta["now"]))
            events, state = list(tx.events), tx.state
        at = len(made) + 1
        for k, event in enumerate(events):
            made.append((type(event).__name__, {
                **first, "fact": event.model_dump(mode="json"),
                "v": type(event).schema_version, "append": at, "seat": seat,
                "cmd": raw.get("command_id") if isinstance(raw, dict) else None,
                "meta": meta if k == 0 else {}}))
    out = [{"room": lines[0]["room"], "version": i + 1, "type": kind,
            "payload": orjson.dumps(payload).decode(), "prev": None, "hash": None,
            "sig": None} for i, (kind, payload) in enumerate(made)]
    return resigned(out, key_file)


def failure(app: Any, data: bytes) -> tuple[str, int]:
    report = verify(data, server_key(app))
    assert report["ok"] is False, report
    return report["first_failure"]["check"], report["first_failure"]["version"]


def edited(data: bytes, version: int, change: Any, app: Any) -> bytes:
    """The line at `version` with its payload changed in place, signed again."""
    lines = lines_of(data)
    payload = orjson.loads(lines[version - 1]["payload"])
    change(payload)
    lines[version - 1]["payload"] = orjson.dumps(payload).decode()
    return resigned(lines, app.key_file)


# --- 1. in a keyed seat's name without its key -----------------------------------------


def cli(app: Any, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = str(ROOT / ".venv" / "bin" / "dune-ledger")
    env = {"DUNE_LEDGER_KEY_FILE": str(app.key_file), "PATH": "/usr/bin:/bin"}
    return subprocess.run([exe, "--db", f"sqlite:///{tmp_path}/rooms.db", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def test_the_cli_cannot_act_for_a_keyed_seat_without_its_key(app, tmp_path):
    room = str(app.create_room(committed_layout())["room"])
    made = cli(app, tmp_path, "seat-key", "new", str(tmp_path / "emperor.key"))
    assert made.returncode == 0, made.stderr
    ok(app, room, "emperor", json.loads(made.stdout)["command"])
    other = cli(app, tmp_path, "seat-key", "new", str(tmp_path / "other.key"))
    assert other.returncode == 0
    version = app.load(room).version
    commit = json.dumps({"type": "seed_commit",
                         "hash": seed_commitment(room, "emperor", "the operator's")})
    bare = cli(app, tmp_path, "room", "command", room, "--as", "emperor", commit)
    assert bare.returncode == 1 and "signature_required" in bare.stdout
    wrong = cli(app, tmp_path, "room", "command", room, "--as", "emperor", "--seat-key",
                str(tmp_path / "other.key"), commit)
    assert wrong.returncode == 1 and "bad_signature" in wrong.stdout
    # The operator's own flag does not send a seat's command either.
    op = cli(app, tmp_path, "room", "command", room, "--operator", commit)
    assert op.returncode == 1 and "not_eligible" in op.stdout
    assert "Traceback" not in bare.stderr + wrong.stderr + op.stderr
    assert app.load(room).version == version
    assert app.public_view(room)["fairness"]["commitments"]["emperor"] is None


def test_a_reissued_token_reaches_a_keyed_seat_only_by_clearing_its_key_publicly(app):
    from fastapi.testclient import TestClient

    from dune_ledger.infrastructure.http import create_app

    room = str(app.create_room(committed_layout())["room"])
    key = SeatKey()
    ok(app, room, "emperor", {"type": "seat_key", "public_key": key.public})
    dealt(app, room, keys={"emperor": key})
    with TestClient(create_app(app, admin_token="op")) as client:
        token = client.post(f"/rooms/{room}/seats/emperor/token",
                            headers={"Authorization": "Bearer op"}).json()["token"]
        seat = {"Authorization": f"Bearer {token}"}
        version = app.load(room).version
        # The seeds are fixed at the deal: the new token cannot change one.
        for command in ({"type": "seed_commit", "hash": "0" * 64},
                        {"type": "seed_reveal", "value": "seed of emperor"}):
            answer = client.post(f"/rooms/{room}/commands", headers=seat, json=command)
            assert answer.json()["error"]["code"] == "not_eligible"
        assert app.load(room).version == version
        # It acts, unsigned, only because the key was cleared: publicly.
        assert client.post(f"/rooms/{room}/commands", headers=seat,
                           json={"type": "draw"}).json()["ok"]
    assert app.public_view(room)["fairness"]["keys"]["emperor"] is None
    assert any(e.get("key_cleared") for e in app.public_log(room))
    assert app.end_room(room)["ok"]
    report = verify(b"".join(transcript(app, room)), server_key(app))
    assert report["ok"], report
    assert report["seats"]["emperor"]["key"] is None
    assert report["seats"]["emperor"]["unsigned"] == 2  # its key's registration, the draw
    assert report["seats"]["emperor"]["keys_cleared"] == 1


def test_the_autopilot_sends_no_keyed_seats_seed_key_or_switch(app):
    """A keyed seat that turned its autopilot on: the operator, as that autopilot,
    once replaced the seat's commitment with its own and revealed it (verify said ok)."""
    room = str(app.create_room(committed_layout())["room"])
    key = SeatKey()
    ok(app, room, "emperor", {"type": "seat_key", "public_key": key.public})
    ok(app, room, "emperor", key.sign(room, "emperor", AUTOPILOT_ON))
    honest = seed_commitment(room, "emperor", "honest")
    ok(app, room, "emperor", key.sign(room, "emperor", {"type": "seed_commit",
                                                        "hash": honest}))
    for command in ({"type": "seed_commit",
                     "hash": seed_commitment(room, "emperor", "the operator's")},
                    {"type": "seat_key", "public_key": SeatKey().public},
                    {"type": "set_autopilot", "enabled": False}):
        refused(app, room, "emperor", command, "signature_required", autopilot=True)
    assert app.public_view(room)["fairness"]["commitments"]["emperor"] == honest
    for seat in ("richese", "harkonnen"):
        ok(app, room, seat, {"type": "seed_commit",
                             "hash": seed_commitment(room, seat, seat)})
    refused(app, room, "emperor", {"type": "seed_reveal", "value": "honest"},
            "signature_required", autopilot=True)
    # Forged in the transcript instead: the seat's own signed commit recorded as the
    # autopilot's.
    assert app.end_room(room)["ok"]
    data = b"".join(transcript(app, room))
    at = append_of(data, "seed_commit", "emperor")

    def as_autopilot(payload: dict[str, Any]) -> None:
        payload["meta"]["by"] = "autopilot"

    assert failure(app, edited(data, at, as_autopilot, app)) == ("seat_signatures", at)


def test_the_autopilot_of_a_keyed_seat_only_selects_and_passes(app):
    """RULES 3.7: the autopilot makes the seat's bound selection and passes windows.
    A draw, a discard or a Box search in its name would be the operator's choice (a
    search is a random call: a lever on the counter)."""
    room = str(app.create_room(committed_layout())["room"])
    key = SeatKey()
    ok(app, room, "richese", {"type": "seat_key", "public_key": key.public})
    dealt(app, room, keys={"richese": key})
    ok(app, room, "richese", key.sign(room, "richese", AUTOPILOT_ON))
    for command in ({"type": "draw"}, {"type": "discard", "card": "crysknife"},
                    {"type": "begin_search", "card": BOX}):
        refused(app, room, "richese", command, "signature_required", autopilot=True)
    ok(app, room, "richese", key.sign(room, "richese", {"type": "draw"}))
    assert app.end_room(room)["ok"]
    data = b"".join(transcript(app, room))
    at = append_of(data, "draw", "richese")

    def as_autopilot(payload: dict[str, Any]) -> None:
        payload["meta"]["by"] = "autopilot"
        del payload["meta"]["command"]["sig"]

    assert failure(app, edited(data, at, as_autopilot, app)) == ("seat_signatures", at)


def test_a_keyed_seats_signed_command_sent_again(app):
    """The operator holds every signed command a seat sent: sent again it is the first
    result, nothing appended; recorded again in a forged transcript, `verify` names it."""
    room = str(app.create_room(committed_layout())["room"])
    key = SeatKey()
    ok(app, room, "emperor", {"type": "seat_key", "public_key": key.public})
    dealt(app, room, keys={"emperor": key})
    draw = key.sign(room, "emperor", {"type": "draw"})
    first = ok(app, room, "emperor", draw)
    version = app.load(room).version
    again = ok(app, room, "emperor", draw)
    assert again["version"] == first["version"] and app.load(room).version == version
    assert app.end_room(room)["ok"]
    data = b"".join(transcript(app, room))
    at, end = append_of(data, "draw", "emperor"), append_of(data, "end_room")
    # The draw's append recorded again before the end; the rules make its events and
    # the end's again.
    lines = lines_of(data)
    copy = [dict(line) for line in lines[:end - 1]] + [dict(lines[at - 1])] + \
        [dict(line) for line in lines[end - 1:]]
    for i, line in enumerate(copy[end - 1:], start=end):
        payload = orjson.loads(line["payload"])
        payload["append"] = i
        line["version"], line["payload"] = i, orjson.dumps(payload).decode()
    forged = remade(resigned(copy, app.key_file), {}, app.key_file)
    assert [line["type"] for line in lines_of(forged)].count("CardDrawn") == 2
    report = verify(forged, server_key(app))
    assert report["checks"]["commands"] and report["checks"]["shuffles"], report
    assert failure(app, forged) == ("seat_signatures", end)


# --- 2. appends before a draw -----------------------------------------------------------


def test_appends_before_the_deal_move_neither_the_deck_nor_the_cohort(app):
    raw = example("ambassador")
    del raw["seed"], raw["ambassadors"]["cohort"]  # a cohort the layout leaves to the deal
    room = str(app.create_room(raw)["room"])
    state = app.load(room).state
    deck, amb = list(state.deck), state.ambassadors
    pool = sorted(set(amb.supply) | set(amb.used))
    assert not amb.cohort  # drawn at the deal: nothing to re-create the room for
    seats = [s.faction for s in state.seats]
    key = SeatKey()
    ok(app, room, seats[0], {"type": "seat_key", "public_key": key.public})
    for _ in range(3):  # every append the operator can make before the deal
        app.reissue_token(room, seats[1])
        ok(app, room, seats[1], AUTOPILOT_ON)
        ok(app, room, seats[1], {"type": "set_autopilot", "enabled": False})
        ok(app, room, seats[2], {"type": "seed_commit", "hash": "1" * 64})
        ok(app, room, seats[2], {"type": "seed_commit", "hash": "2" * 64})
    app.reissue_token(room, seats[0])  # the key cleared, publicly
    seeds = {s: f"seed of {s}" for s in seats}
    deal = dealt(app, room, seeds)
    secret = secret_of(app, room)
    assert [e["type"] for e in deal["events"]][-3:] == [
        "Dealt", "DeckShuffled", "AmbassadorCohortDrawn"]
    state = app.load(room).state
    assert state.deck == derived_shuffle(counted_words(secret, room, 0, mix(seeds)), deck)
    cohort = derived_shuffle(counted_words(secret, room, 1, mix(seeds)), pool)
    assert state.ambassadors.cohort == cohort[:len(state.ambassadors.cohort)]
    assert len(state.ambassadors.cohort) == 5


def test_appends_after_the_deal_move_no_outcome(app):
    """The next Box search's pile order, predicted from the secret before any of the
    operator's appends, is the order it gets after them."""
    room = str(app.create_room(committed_layout())["room"])
    dealt(app, room)
    state = app.load(room).state
    f = state.fairness
    card = state.discard[0]
    pile = [c for c in state.discard if c != card]
    predicted = derived_shuffle(counted_words(secret_of(app, room), room, f.calls, f.mix),
                                pile)
    top = state.deck[0]
    for _ in range(3):
        app.reissue_token(room, "emperor")
        ok(app, room, "harkonnen", AUTOPILOT_ON)
        ok(app, room, "harkonnen", {"type": "set_autopilot", "enabled": False})
    refused(app, room, "richese", {"type": "begin_search", "card": "crysknife"},
            "not_a_box")
    refused(app, room, OPERATOR, {"type": "deal"}, "not_eligible")
    assert app.load(room).state.deck[0] == top
    ok(app, room, "richese", {"type": "begin_search", "card": BOX})
    search = app.seat_view(room, "richese")["nullentropy"]["search"]
    selected = ok(app, room, "richese", {"type": "select_card", "search": search["event"],
                                         "card": card})
    shuffled = next(e for e in selected["events"] if e["type"] == "PileShuffled")
    assert shuffled["rng"]["n"] == f.calls
    discard = app.load(room).state.discard
    assert [c for c in discard if c != BOX] == predicted  # the Box on top of it
    assert ok(app, room, "emperor", {"type": "draw"})["ok"]
    assert app.seat_view(room, "emperor")["me"]["hand"][-1]["id"] == top


# --- 3. transcripts made again and signed with the server's key --------------------------


def test_the_forger_is_faithful(app):
    """Made again with nothing changed, the transcript verifies: what fails below fails
    for the change alone."""
    _, _, data = played(app)
    again = remade(data, {}, app.key_file)
    report = verify(again, server_key(app))
    assert report["ok"], report
    assert [line["payload"] for line in lines_of(again)] == \
        [line["payload"] for line in lines_of(resigned(lines_of(data), app.key_file))]


def test_a_keyed_seats_command_changed_and_the_rest_made_again(app):
    room, key, data = played(app)
    at = append_of(data, "select_card", "richese")
    command = next(meta["command"] for v, _, meta in appends(data) if v == at)
    # Another card of the pile, chosen by the operator; the pile's order, the draws and
    # the end made again by the rules from it.
    other = next(c for c in ("shield-1", "maula-pistol", "baliset") if c != command["card"])
    forged = remade(data, {at: {**command, "card": other}}, app.key_file)
    report = verify(forged, server_key(app))
    assert report["checks"]["shuffles"] and report["checks"]["commands"], report
    assert failure(app, forged) == ("seat_signatures", at)
    # The same change to the unkeyed emperor's draw passes: no key, no protection; the
    # report counts its commands as unsigned.
    emperor = append_of(data, "draw", "emperor")
    forged = remade(data, {emperor: {"type": "draw", "command_id": "the operator's"}},
                    app.key_file)
    report = verify(forged, server_key(app))
    assert report["ok"] and report["seats"]["emperor"]["unsigned"] >= 1, report


def test_a_keyed_seats_commitment_and_reveal_replaced_and_everything_made_again(app):
    room, key, data = played(app)
    commit, reveal = append_of(data, "seed_commit", "richese"), append_of(
        data, "seed_reveal", "richese")
    chosen = "the operator's"
    forged = remade(data, {
        commit: {"type": "seed_commit", "hash": seed_commitment(room, "richese", chosen)},
        reveal: {"type": "seed_reveal", "value": chosen}}, app.key_file)
    # Every outcome after it is derived again from the new mix, and holds: only the
    # seat's signature is missing.
    report = verify(forged, server_key(app))
    assert report["checks"]["shuffles"] and report["checks"]["commands"], report
    assert failure(app, forged) == ("seat_signatures", commit)


def test_a_committed_room_created_with_a_chosen_deck_and_the_rest_made_again(app):
    _, _, data = played(app)
    lines = lines_of(data)
    payload = orjson.loads(lines[0]["payload"])
    deck = payload["fact"]["state"]["deck"]
    deck.append(deck.pop(0))
    lines[0]["payload"] = orjson.dumps(payload).decode()
    forged = remade(resigned(lines, app.key_file), {}, app.key_file)
    report = verify(forged, server_key(app))
    assert report["checks"]["shuffles"] and report["checks"]["commands"], report
    assert failure(app, forged) == ("ceremony", 1)


def test_a_committed_room_created_with_a_chosen_cohort_and_the_rest_made_again(app):
    """Ecaz's cohort named in the committed `RoomCreated` (RULES 9.2: none before the
    deal) is the operator's choice: the layout refuses it, and a transcript made with it
    fails the ceremony."""
    raw = example("ambassador")
    del raw["seed"]
    with pytest.raises(LayoutError, match="deals Ecaz's cohort at the deal"):
        app.create_room(raw)
    del raw["ambassadors"]["cohort"]
    room = str(app.create_room(raw)["room"])
    dealt(app, room)
    assert app.end_room(room)["ok"]
    data = b"".join(transcript(app, room))
    assert verify(data, server_key(app))["ok"]
    lines = lines_of(data)
    payload = orjson.loads(lines[0]["payload"])
    state = payload["fact"]["state"]
    chosen = state["ambassadors"]["supply"][:5]
    state["ambassadors"]["cohort"] = chosen
    state["ambassadors"]["supply"] = state["ambassadors"]["supply"][5:]
    del state["fairness"]["cohort_at_deal"]
    lines[0]["payload"] = orjson.dumps(payload).decode()
    forged = remade(resigned(lines, app.key_file), {}, app.key_file)
    assert "AmbassadorCohortDrawn" not in [line["type"] for line in lines_of(forged)]
    report = verify(forged, server_key(app))
    assert report["checks"]["shuffles"] and report["checks"]["commands"], report
    assert failure(app, forged) == ("ceremony", 1)


def test_the_counter_skipped_with_the_outcome_derived_at_the_call_skipped_to(app):
    _, _, data = played(app)
    lines = lines_of(data)
    secret = bytes.fromhex(orjson.loads(lines[-1]["payload"])["fact"]["secret"])
    at = next(i for i, line in enumerate(lines) if line["type"] == "PileShuffled")
    payload = orjson.loads(lines[at]["payload"])
    rng = payload["fact"]["rng"]
    rng["n"] += 1
    payload["fact"]["order"] = derived_shuffle(
        counted_words(secret, lines[0]["room"], rng["n"], rng["mix"]), rng["input"])
    lines[at]["payload"] = orjson.dumps(payload).decode()
    assert failure(app, resigned(lines, app.key_file)) == ("shuffles", at + 1)


def test_who_sent_it_changed_to_the_autopilot_or_the_operator(app):
    _, _, data = played(app)
    at = append_of(data, "draw", "richese")

    def autopilot(payload: dict[str, Any]) -> None:
        payload["meta"]["by"] = "autopilot"
        del payload["meta"]["command"]["sig"]

    def operator(payload: dict[str, Any]) -> None:
        payload["meta"]["by"], payload["seat"] = "operator", "operator"

    assert failure(app, edited(data, at, autopilot, app)) == ("seat_signatures", at)
    assert failure(app, edited(data, at, operator, app)) == ("commands", at)
    # A deal recorded as a seat's.
    deal = append_of(data, "end_room")

    def seat(payload: dict[str, Any]) -> None:
        payload["meta"]["by"], payload["seat"] = "seat", "emperor"

    assert failure(app, edited(data, deal, seat, app))[0] == "commands"


def test_an_append_dropped_or_two_swapped_without_making_the_rest_again(app):
    _, _, data = played(app)
    lines = lines_of(data)
    at = append_of(data, "draw", "richese")  # a one-event append
    dropped = [dict(line) for line in lines if line["version"] != at]
    for i, line in enumerate(dropped):
        line["version"] = i + 1
        payload = orjson.loads(line["payload"])
        if payload["append"] > at:
            payload["append"] -= 1
        line["payload"] = orjson.dumps(payload).decode()
    assert failure(app, resigned(dropped, app.key_file))[0] in ("commands", "draws")
    swapped = [dict(line) for line in lines]
    swapped[at - 1], swapped[at] = swapped[at], swapped[at - 1]
    assert failure(app, resigned(swapped, app.key_file))[0] in ("chain_intact", "commands")


def test_a_window_closed_before_its_deadline_recorded_as_the_systems(app):
    from datetime import UTC, timedelta

    raw = example("ambassador")
    del raw["seed"], raw["ambassadors"]["cohort"]
    room = str(app.create_room(raw)["room"])
    dealt(app, room)
    entered = ok(app, room, "atreides", {"type": "enter_territory", "territory": "arrakeen",
                                         "via": "shipment"})
    offered = next(e for e in entered["events"] if e["type"] == "AmbassadorOffered")
    ok(app, room, "ecaz", {"type": "ambassador_decide", "event": offered["event"],
                           "trigger": True, "beneficiary": "harkonnen"})
    version = app.load(room).version
    assert app.close_expired(room, datetime.now(UTC)) is None  # not due: nothing appended
    assert app.load(room).version == version
    assert app.close_expired(room, datetime.now(UTC) + timedelta(hours=1))["ok"]
    assert app.end_room(room)["ok"]
    data = b"".join(transcript(app, room))
    at = next(v for v, _, meta in appends(data) if meta.get("by") == "system")

    def early(payload: dict[str, Any]) -> None:
        payload["meta"]["now"] = datetime.now(UTC).isoformat()

    assert failure(app, edited(data, at, early, app)) == ("commands", at)


# --- 4. the choices left, each shown ----------------------------------------------------


def test_re_creating_a_room_gives_nothing_to_choose_from(app):
    """Before the deal two rooms of one layout differ in their commitment alone: the deck
    in the catalog's order, no cohort drawn, no random call made."""
    raw = example("ambassador")
    del raw["seed"], raw["ambassadors"]["cohort"]
    states = [app.load(app.create_room(raw)["room"]).state for _ in range(2)]
    for state in states:
        assert state.fairness.calls == 0 and not state.ambassadors.cohort
    assert states[0].deck == states[1].deck
    assert states[0].fairness.commitment != states[1].fairness.commitment


def test_a_withheld_reveal_chooses_between_two_deals_and_is_shown(app):
    """A seat that sees the others' reveals (a colluder, or the operator for a seat
    without a key) may withhold its own: the deal is one of two, and says so."""
    room = str(app.create_room(committed_layout())["room"])
    deck = list(app.load(room).state.deck)
    seats = ("richese", "emperor", "harkonnen")
    for seat in seats:
        ok(app, room, seat, {"type": "seed_commit",
                             "hash": seed_commitment(room, seat, f"seed of {seat}")})
    for seat in seats[:2]:
        ok(app, room, seat, {"type": "seed_reveal", "value": f"seed of {seat}"})
    secret = secret_of(app, room)  # the operator's: it can work out both deals now
    revealed = {s: f"seed of {s}" for s in seats}
    kept = {**revealed, "harkonnen": None}
    both = [derived_shuffle(counted_words(secret, room, 0, mix(s)), deck)
            for s in (revealed, kept)]
    assert both[0] != both[1]
    ok(app, room, OPERATOR, {"type": "deal"})
    assert app.load(room).state.deck == both[1]
    fairness = app.public_view(room)["fairness"]
    assert fairness["withheld"] == ["harkonnen"] and fairness["mix"] == mix(kept)
    assert any("withheld reveals: harkonnen" in e["text"].lower()
               for e in app.public_log(room))
    refused(app, room, "harkonnen", {"type": "seed_reveal", "value": "seed of harkonnen"},
            "not_eligible")
    assert app.end_room(room)["ok"]
    report = verify(b"".join(transcript(app, room)), server_key(app))
    assert report["ok"], report
    assert {s: row["seed"] for s, row in report["seats"].items()} == {
        "richese": "revealed", "emperor": "revealed", "harkonnen": "withheld"}


def test_the_operators_deal_before_the_seats_commit_leaves_them_out_and_says_so(app):
    """The operator's `deal` moves a stalled ceremony on (RULES 9.4); sent before a seat
    has committed, it leaves that seat's seed out of the deal for good. With no seat
    committed the deal is the secret's alone, which the operator knows: it can create
    rooms until one suits. Both are public: the view's commitments and seeds, the
    report's `seed`."""
    early = str(app.create_room(committed_layout())["room"])
    deck = list(app.load(early).state.deck)
    secret = secret_of(app, early)
    nobody = dict.fromkeys(("richese", "emperor", "harkonnen"))
    predicted = derived_shuffle(counted_words(secret, early, 0, mix(nobody)), deck)
    ok(app, early, OPERATOR, {"type": "deal"})
    assert app.load(early).state.deck == predicted  # known at creation
    fairness = app.public_view(early)["fairness"]
    assert fairness["stage"] == "dealt" and not any(fairness["commitments"].values())
    assert not any(fairness["seeds"].values()) and fairness["withheld"] == []
    # One seat (a colluder) commits; the operator's deal closes the commit stage at once.
    room = str(app.create_room(committed_layout())["room"])
    ok(app, room, "richese", {"type": "seed_commit",
                              "hash": seed_commitment(room, "richese", "colluder")})
    ok(app, room, OPERATOR, {"type": "deal"})
    refused(app, room, "emperor", {"type": "seed_commit",
                                   "hash": seed_commitment(room, "emperor", "late")},
            "not_eligible")
    ok(app, room, "richese", {"type": "seed_reveal", "value": "colluder"})
    assert app.public_view(room)["fairness"]["stage"] == "dealt"
    for each in (early, room):
        assert app.end_room(each)["ok"]
    reports = [verify(b"".join(transcript(app, r)), server_key(app)) for r in (early, room)]
    assert all(r["ok"] for r in reports), reports
    assert {s: row["seed"] for s, row in reports[0]["seats"].items()} == dict.fromkeys(
        nobody, "none")
    assert {s: row["seed"] for s, row in reports[1]["seats"].items()} == {
        "richese": "revealed", "emperor": "none", "harkonnen": "none"}


# --- 5. malformed transcripts: a report with the check named, never a traceback -------


def shapes(data: bytes, key_file: Any) -> list[tuple[str, bytes]]:
    lines = lines_of(data)
    first = orjson.loads(lines[0]["payload"])

    def payload_of(at: int, change: Any) -> bytes:
        copy = [dict(line) for line in lines]
        payload = orjson.loads(copy[at]["payload"])
        change(payload)
        copy[at]["payload"] = orjson.dumps(payload).decode()
        return resigned(copy, key_file)

    def raw(change: Any) -> bytes:
        copy = [dict(line) for line in lines]
        change(copy)
        return b"".join(orjson.dumps(line) + b"\n" for line in copy)

    assert "fairness" in first["fact"]["state"]
    return [
        ("empty", b""),
        ("blank lines", b"\n \n\n"),
        ("not JSON", b"{"),
        ("a JSON array", b"[1, 2]\n"),
        ("NaN", data.replace(b'"version":1,', b'"version":NaN,', 1)),
        ("deep nesting", b"[" * 100_000 + b"]" * 100_000),
        ("not UTF-8", b"\xff\xfe" + data[:100]),
        ("a line without its fields", raw(lambda c: c[3].pop("hash"))),
        ("a version as a string", raw(lambda c: c[2].__setitem__("version", "3"))),
        ("a payload as a number", raw(lambda c: c[1].__setitem__("payload", 7))),
        ("fairness a string", payload_of(0, lambda p: p["fact"]["state"]
                                         .__setitem__("fairness", "committed"))),
        ("no state", payload_of(0, lambda p: p["fact"].pop("state"))),
        ("seats a string", payload_of(0, lambda p: p["fact"]["state"]
                                      .__setitem__("seats", "all"))),
        ("an unknown algorithm", payload_of(0, lambda p: p["fact"]["state"]["fairness"]
                                            .__setitem__("algorithm", "mine"))),
        ("append a string", payload_of(5, lambda p: p.__setitem__("append", "6"))),
        ("meta a list", payload_of(1, lambda p: p.__setitem__("meta", []))),
        ("by unknown", payload_of(1, lambda p: p["meta"].__setitem__("by", "god"))),
        ("a command a list", payload_of(1, lambda p: p["meta"].__setitem__("command", []))),
        ("the secret a number", payload_of(len(lines) - 1, lambda p: p["fact"].__setitem__(
            "secret", 5))),
        ("the end cut off", resigned(lines[:-1], key_file)),
        ("only the creation", resigned(lines[:1], key_file)),
        ("a huge integer", data.replace(b'"version":2,', b'"version":' + b"9" * 40 + b",", 1)),
    ]


def test_malformed_transcripts_of_every_shape_are_reports(app):
    _, _, data = played(app)
    key = server_key(app)
    for name, body in shapes(data, app.key_file):
        report = verify(body, key)
        assert report["ok"] is False, name
        assert report["first_failure"]["check"] in {*report["checks"], "malformed"}, name
        assert report["first_failure"]["detail"], name


def test_verify_on_the_command_line_exits_1_or_2_never_with_a_traceback(app, tmp_path):
    _, _, data = played(app)
    path = tmp_path / "transcript.jsonl"
    path.write_bytes(data)
    good = cli(app, tmp_path, "verify", str(path))
    assert good.returncode == 0 and json.loads(good.stdout)["ok"], good.stdout
    forged = tmp_path / "forged.jsonl"
    forged.write_bytes(b"[" * 100_000 + b"\n" + data)
    bad = cli(app, tmp_path, "verify", str(forged))
    assert bad.returncode == 1 and json.loads(bad.stdout)["ok"] is False
    assert json.loads(bad.stdout)["first_failure"]["check"] == "malformed"
    wrong_key = cli(app, tmp_path, "verify", str(path), "--key", "not a key")
    assert wrong_key.returncode == 2
    missing = cli(app, tmp_path, "verify", str(tmp_path / "nowhere.jsonl"))
    assert missing.returncode == 2
    assert "Traceback" not in bad.stderr + wrong_key.stderr + missing.stderr


def test_a_key_registered_first_by_the_operator_is_the_one_every_check_names(app):
    """A seat without a key has no protection (RULES 9.8), its first key included: the
    operator (the CLI's --as needs no token) may register one of its own before the
    seat does. The seat's own key is then refused, and the view and the report name
    the operator's key, which the seat's page compares with the one it holds."""
    room = str(app.create_room(committed_layout())["room"])
    operators, seats = SeatKey(), SeatKey()
    ok(app, room, "emperor", {"type": "seat_key", "public_key": operators.public})
    refused(app, room, "emperor", {"type": "seat_key", "public_key": seats.public},
            "signature_required")
    refused(app, room, "emperor", seats.sign(room, "emperor", {
        "type": "seat_key", "public_key": seats.public}), "bad_signature")
    assert app.public_view(room)["fairness"]["keys"]["emperor"] == operators.public
    assert app.end_room(room)["ok"]
    report = verify(b"".join(transcript(app, room)), server_key(app))
    assert report["ok"] and report["seats"]["emperor"]["key"] == operators.public


def test_a_v2_transcript_relabelled_as_v1_fails_the_v1_checks(app):
    """The v1 checks are weaker (RULES 9: v1 rooms keep them); a v2 room's transcript
    given v1's label to reach them fails them."""
    _, _, data = played(app)

    def v1(payload: dict[str, Any]) -> None:
        del payload["fact"]["state"]["fairness"]["algorithm"]

    report = verify(edited(data, 1, v1, app), server_key(app))
    assert report["algorithm"] != "hmac-sha256-fy-v2" and report["ok"] is False, report
    assert report["first_failure"]["check"] in {"seeds", "shuffles", "replay",
                                                "malformed"}, report
