"""Fair dealing against the operator (RULES 9, issue 33): each grinding lever the
operator had, tried as it would try it, now fails; forged transcripts fail `verify`
with the check named; malformed ones are reports, never tracebacks."""

from __future__ import annotations

import json
import random
import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from dune_ledger.domain.game import OPERATOR, counted_words, derived_shuffle, mix
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


@pytest.fixture
def app(tmp_path: Path) -> Any:
    with keyed_rooms(tmp_path) as rooms:
        yield rooms


def refused(app: Any, room: str, seat: str, command: dict[str, Any], code: str) -> None:
    """Refused with `code`, and nothing appended."""
    before = app.load(room).version
    result = app.execute(room, seat, command)
    assert not result["ok"] and result["error"]["code"] == code, result
    assert app.load(room).version == before


def server_key(app: Any) -> Any:
    return public_key(public_key_info(app.key_file)["public_key"])


def keyed_room(app: Any) -> tuple[str, SeatKey]:
    """A committed room whose emperor registered a key, then dealt."""
    room = str(app.create_room(committed_layout())["room"])
    key = SeatKey()
    ok(app, room, "emperor", {"type": "seat_key", "public_key": key.public})
    dealt(app, room, keys={"emperor": key})
    return room, key


def played(app: Any) -> tuple[str, bytes]:
    """A keyed room played through a Box search and draws, then ended: its transcript."""
    room, key = keyed_room(app)
    ok(app, room, "emperor", key.sign(room, "emperor", {"type": "draw"}))
    ok(app, room, "richese", {"type": "begin_search", "card": BOX})
    search = app.seat_view(room, "richese")["nullentropy"]["search"]
    ok(app, room, "richese", {"type": "select_card", "search": search["event"],
                              "card": search["cards"][0]["id"]})
    ok(app, room, "harkonnen", {"type": "draw"})
    assert app.end_room(room)["ok"]
    return room, b"".join(transcript(app, room))


# --- the levers -----------------------------------------------------------------------


def test_a_seed_after_the_deal_is_refused(app):
    room, key = keyed_room(app)
    for seat, command in [("richese", {"type": "seed_commit", "hash": "0" * 64}),
                          ("richese", {"type": "seed_reveal", "value": "late"}),
                          ("harkonnen", {"type": "seed", "value": "v1 seed"})]:
        refused(app, room, seat, command, "not_eligible")
    refused(app, room, "operator", {"type": "deal"}, "not_eligible")
    assert not {"seed_commit", "seed_reveal", "seed"} & {
        a["type"] for a in app.seat_view(room, "richese")["actions"]}


def test_a_command_in_a_keyed_seats_name_needs_its_signature(app):
    room, key = keyed_room(app)
    refused(app, room, "emperor", {"type": "draw"}, "signature_required")
    refused(app, room, "emperor", {"type": "draw", "sig": "AAAA"}, "signature_required")
    other = SeatKey().sign(room, "emperor", {"type": "draw"})
    refused(app, room, "emperor", other, "bad_signature")
    tampered = {**key.sign(room, "emperor", {"type": "discard", "card": "baliset"}),
                "card": "lasgun"}
    refused(app, room, "emperor", tampered, "bad_signature")
    # Signed for another room or seat: not this one's.
    refused(app, room, "emperor", key.sign("another-room", "emperor", {"type": "draw"}),
            "bad_signature")
    # A second key is refused: only a token reissue replaces one.
    refused(app, room, "emperor", key.sign(room, "emperor", {
        "type": "seat_key", "public_key": SeatKey().public}), "not_eligible")
    ok(app, room, "emperor", key.sign(room, "emperor", {"type": "draw"}))


def test_a_keyed_seat_over_http_and_the_cli(app, tmp_path):
    from fastapi.testclient import TestClient

    from dune_ledger.infrastructure.http import create_app

    with TestClient(create_app(app, admin_token="op")) as client:
        created = client.post("/rooms", json=committed_layout(),
                              headers={"Authorization": "Bearer op"}).json()
        room, token = created["room"], created["seats"]["emperor"]
        seat = {"Authorization": f"Bearer {token}"}
        key = SeatKey()
        assert client.post(f"/rooms/{room}/commands", headers=seat, json={
            "type": "seat_key", "public_key": key.public}).json()["ok"]
        answer = client.post(f"/rooms/{room}/commands", headers=seat,
                             json={"type": "seed_commit", "hash": "0" * 64})
        assert answer.status_code == 422
        assert answer.json()["error"]["code"] == "signature_required"
        signed = key.sign(room, "emperor", {"type": "seed_commit", "hash": "0" * 64})
        assert client.post(f"/rooms/{room}/commands", headers=seat, json=signed).json()["ok"]
    # The CLI: --as cannot act for a keyed seat without --seat-key.
    exe = str(ROOT / ".venv" / "bin" / "dune-ledger")
    db = f"sqlite:///{tmp_path}/rooms.db"
    env = {"DUNE_LEDGER_KEY_FILE": str(app.key_file), "PATH": "/usr/bin:/bin"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([exe, "--db", db, *args], capture_output=True, text=True,
                              env=env, timeout=120)

    made = cli("seat-key", "new", str(tmp_path / "harkonnen.key"))
    assert made.returncode == 0, made.stderr
    registered = json.loads(made.stdout)["command"]
    assert (tmp_path / "harkonnen.key").stat().st_mode & 0o777 == 0o600
    assert cli("seat-key", "new", str(tmp_path / "harkonnen.key")).returncode == 2
    assert cli("room", "command", room, "--as", "harkonnen",
               json.dumps(registered)).returncode == 0
    commit = json.dumps({"type": "seed_commit",
                         "hash": seed_commitment(room, "harkonnen", "h")})
    unsigned = cli("room", "command", room, "--as", "harkonnen", commit)
    assert unsigned.returncode == 1 and "signature_required" in unsigned.stdout
    signed_cli = cli("room", "command", room, "--as", "harkonnen", "--seat-key",
                     str(tmp_path / "harkonnen.key"), commit)
    assert signed_cli.returncode == 0, signed_cli.stdout + signed_cli.stderr
    wrong = cli("room", "command", room, "--as", "harkonnen", "--seat-key",
                str(tmp_path / "nowhere.key"), commit)
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr


def test_a_token_reissue_before_the_deal_leaves_the_deal_unchanged(app):
    """The counter keys the derivation, not the version: reissues (each an append) move
    no outcome. The deal's shuffle is re-derived from the secret, call 0 and the mix."""
    room = str(app.create_room(committed_layout())["room"])
    key = SeatKey()
    ok(app, room, "emperor", {"type": "seat_key", "public_key": key.public})
    for _ in range(3):
        app.reissue_token(room, "richese")
    cleared = app.reissue_token(room, "emperor")
    assert app.public_view(room)["fairness"]["keys"]["emperor"] is None  # publicly cleared
    entry = app.public_log(room)[-1]
    assert cleared["version"] == 6 and entry["key_cleared"] is True
    assert "seat key is cleared" in entry["text"]
    state = app.load(room).state
    deck = list(state.deck)
    deal = dealt(app, room)
    shuffled = next(e for e in deal["events"] if e["type"] == "DeckShuffled")
    secret = bytes.fromhex(app.load(room).state.fairness.secret)
    seeds = {s: f"seed of {s}" for s in ("richese", "emperor", "harkonnen")}
    expected = derived_shuffle(counted_words(secret, room, 0, mix(seeds)), deck)
    assert app.load(room).state.deck == expected
    assert shuffled["rng"] == {"n": 0, "mix": mix(seeds)}


def test_the_autopilot_acts_for_a_keyed_seat_only_after_a_signed_turn_on(app):
    room = str(app.create_room(committed_layout())["room"])
    key = SeatKey()
    ok(app, room, "richese", {"type": "seat_key", "public_key": key.public})
    dealt(app, room, keys={"richese": key})
    on = {"type": "set_autopilot", "enabled": True, "profile": "easy"}
    ok(app, room, "richese", key.sign(room, "richese", {"type": "begin_search", "card": BOX}))
    search = app.seat_view(room, "richese")["nullentropy"]["search"]
    select = {"type": "select_card", "search": search["event"],
              "card": search["cards"][0]["id"]}
    before = app.load(room).version
    assert app.execute(room, "richese", select, autopilot=True)["error"][
        "code"] == "signature_required"
    assert app.load(room).version == before
    ok(app, room, "richese", key.sign(room, "richese", on))
    # Only its bound selection and passes (RULES 3.7): a draw would be the operator's.
    assert app.execute(room, "richese", {"type": "draw"}, autopilot=True)["error"][
        "code"] == "signature_required"
    before = app.load(room).version
    acted = app.execute(room, "richese", select, autopilot=True)
    assert acted["ok"], acted
    first = app.stored_records(app.load(room).id, gt=before, lte=acted["version"])[0]
    assert first.meta["by"] == "autopilot" and first.meta["command"] == select
    assert app.end_room(room)["ok"]
    report = verify(b"".join(transcript(app, room)), server_key(app))
    assert report["ok"], report
    assert report["seats"]["richese"]["autopilot"] == 1
    assert report["seats"]["richese"]["key"] == key.public


def test_a_keyed_seats_autopilot_plays_a_bidding_round(app):
    """Every seat keyed and its autopilot turned on, signed: the autopilot's choices
    carry the round (RULES 10) to its end, and the transcript verifies."""
    import random

    from dune_ledger.application.autopilot import choose

    raw = example("bidding")
    del raw["seed"]
    room = str(app.create_room(raw)["room"])
    seats = [s.faction for s in app.load(room).state.seats]
    keys = {s: SeatKey() for s in seats}
    for s in seats:
        ok(app, room, s, {"type": "seat_key", "public_key": keys[s].public})
    dealt(app, room, keys=keys)
    for s in seats:
        ok(app, room, s, keys[s].sign(room, s, {"type": "set_autopilot", "enabled": True,
                                                   "profile": "easy"}))
    ok(app, room, OPERATOR, {"type": "open_bidding", "order": seats})
    rng, acted, moves = random.Random(1), 0, [("", {})]
    while moves and acted < 400:
        moves = [(s, c) for s in seats
                 if (c := choose("easy", app.seat_view(room, s), rng)) is not None]
        if not moves:
            break
        seat, command = moves[0]
        result = app.execute(room, seat, command, autopilot=True)
        assert result["ok"], (seat, command, result)
        acted += 1
    assert 0 < acted < 400  # the round ran out of choices: nobody is asked any more
    assert app.end_room(room)["ok"]
    assert verify(b"".join(transcript(app, room)), server_key(app))["ok"]


def test_every_append_records_its_command_and_who_sent_it(app):
    room, data = played(app)
    for line in lines_of(data):
        payload = orjson.loads(line["payload"])
        if payload["append"] != line["version"]:
            continue
        meta = payload["meta"]
        assert meta["by"] in ("seat", "autopilot", "operator", "system"), line
        if line["type"] not in ("RoomCreated", "SeatTokenReissued"):
            assert meta["command"]["type"], line


# --- forged transcripts (RULES 9.7) ---------------------------------------------------


def edit(data: bytes, at: int, change: Any) -> list[dict[str, Any]]:
    """The lines with the payload of line `at` (0-based) changed in place."""
    lines = lines_of(data)
    payload = orjson.loads(lines[at]["payload"])
    change(payload)
    lines[at]["payload"] = orjson.dumps(payload).decode()
    return lines


def index_of(data: bytes, kind: str) -> int:
    return next(i for i, line in enumerate(lines_of(data)) if line["type"] == kind)


def first_failure(app: Any, lines: list[dict[str, Any]]) -> tuple[str, int]:
    report = verify(resigned(lines, app.key_file), server_key(app))
    assert report["ok"] is False, report
    assert report["checks"]["chain_intact"] or report["first_failure"]["check"] == \
        "chain_intact"
    return report["first_failure"]["check"], report["first_failure"]["version"]


def test_a_real_keyed_transcript_verifies_with_its_seats(app):
    room, data = played(app)
    report = verify(data, server_key(app))
    assert report["ok"], report
    emperor = report["seats"]["emperor"]
    assert emperor["signed"] >= 3 and emperor["unsigned"] == 1  # the key's own registration
    assert report["seats"]["richese"]["key"] is None


def test_forgery_a_a_command_in_a_keyed_seats_name_without_its_signature(app):
    _, data = played(app)
    at = next(i for i, line in enumerate(lines_of(data))
              if "\"sig\":" in line["payload"] and "emperor" in line["payload"]
              and line["type"] == "CardDrawn")

    def unsigned(payload: dict[str, Any]) -> None:
        del payload["meta"]["command"]["sig"]

    assert first_failure(app, edit(data, at, unsigned)) == ("seat_signatures", at + 1)


def test_forgery_b_an_append_that_names_another_version(app):
    _, data = played(app)
    at = index_of(data, "CardDrawn")

    def moved(payload: dict[str, Any]) -> None:
        payload["append"] += 1

    assert first_failure(app, edit(data, at, moved))[0] == "chain_intact"


def test_forgery_c_an_extra_shuffle_inside_an_append(app):
    _, data = played(app)
    lines = lines_of(data)
    at = index_of(data, "DeckShuffled")
    extra = dict(lines[at])
    payload = orjson.loads(extra["payload"])
    payload["fact"]["order"] = list(reversed(payload["fact"]["order"]))
    payload["fact"]["rng"]["n"] = 1
    extra["payload"] = orjson.dumps(payload).decode()
    lines.insert(at + 1, extra)
    for i, line in enumerate(lines):
        line["version"] = i + 1
        body = orjson.loads(line["payload"])
        if body["append"] > at + 1:
            body["append"] += 1
            line["payload"] = orjson.dumps(body).decode()
    check, version = first_failure(app, lines)
    assert (check, version) == ("shuffles", at + 2)


def test_forgery_d_a_committed_room_created_with_a_chosen_deck(app):
    _, data = played(app)

    def chosen(payload: dict[str, Any]) -> None:
        deck = payload["fact"]["state"]["deck"]
        deck[0], deck[-1] = deck[-1], deck[0]

    assert first_failure(app, edit(data, 0, chosen)) == ("ceremony", 1)


def test_forgery_e_an_outcome_off_the_counter(app):
    _, data = played(app)
    at = index_of(data, "PileShuffled")

    def skipped(payload: dict[str, Any]) -> None:
        payload["fact"]["rng"]["n"] += 1

    assert first_failure(app, edit(data, at, skipped)) == ("shuffles", at + 1)


def test_forgery_a_reveal_that_is_not_its_commitment_and_a_withheld_seat_hidden(app):
    _, data = played(app)
    at = index_of(data, "SeedRevealed")

    def other(payload: dict[str, Any]) -> None:
        payload["fact"]["value"] = "chosen later"

    assert first_failure(app, edit(data, at, other))[0] == "ceremony"
    dealt_at = index_of(data, "Dealt")

    def hidden(payload: dict[str, Any]) -> None:
        payload["fact"]["withheld"] = ["harkonnen"]

    assert first_failure(app, edit(data, dealt_at, hidden)) == ("ceremony", dealt_at + 1)


# --- malformed input: a report, never a traceback --------------------------------------


def mutations(data: bytes, rng: random.Random) -> Any:
    """Mutated transcripts: JSON values swapped for other shapes, lines dropped or
    repeated, bytes flipped."""
    shapes: list[Any] = [None, 0, -1, 2**53, "", "x", [], {}, [1], {"a": None}, True, 1.5]
    lines = lines_of(data)
    while True:
        kind = rng.randrange(4)
        copy = [dict(line) for line in lines]
        if kind == 0:  # a payload field given another shape, re-signed below
            i = rng.randrange(len(copy))
            payload = orjson.loads(copy[i]["payload"])
            target = payload
            path = [k for k in ("fact", "meta") if isinstance(payload.get(k), dict)]
            if path and rng.random() < 0.8:
                target = payload[rng.choice(path)]
                inner = [k for k, v in target.items() if isinstance(v, dict)]
                if inner and rng.random() < 0.5:
                    target = target[rng.choice(inner)]
            if target:
                target[rng.choice(list(target))] = rng.choice(shapes)
            copy[i]["payload"] = orjson.dumps(payload).decode()
            yield "resign", copy
        elif kind == 1:
            i = rng.randrange(len(copy))
            copy[i][rng.choice(list(copy[i]))] = rng.choice(shapes)
            yield "raw", copy
        elif kind == 2:
            i = rng.randrange(len(copy))
            if rng.random() < 0.5:
                del copy[i]
            else:
                copy.insert(i, copy[i])
            yield "raw", copy
        else:
            raw = bytearray(b"".join(orjson.dumps(line) + b"\n" for line in copy))
            for _ in range(rng.randrange(1, 4)):
                raw[rng.randrange(len(raw))] = rng.randrange(256)
            yield "bytes", bytes(raw)


def test_a_bounded_fuzz_of_mutated_transcripts_gives_reports_never_tracebacks(app):
    _, data = played(app)
    key = server_key(app)
    rng = random.Random(33)
    started = time.perf_counter()
    runs = deep = 0
    for how, mutated in mutations(data, rng):
        if how == "resign":
            if deep >= 150:
                continue
            deep += 1
            body = resigned(mutated, app.key_file)  # past the chain: into re-execution
        elif how == "raw":
            body = b"".join(orjson.dumps(line) + b"\n" for line in mutated)
        else:
            body = mutated
        report = verify(body, key)
        assert isinstance(report["ok"], bool) and set(report) == {
            "ok", "room", "algorithm", "events", "checks", "seats", "first_failure"}
        if not report["ok"]:
            assert report["first_failure"]["check"] in set(report["checks"]) | {"malformed"}
        runs += 1
        if runs >= 3000:
            break
    assert deep == 150 and time.perf_counter() - started < 240


@pytest.mark.parametrize(("first", "change"), [
    (False, lambda p: p["fact"].__setitem__("rng", {"n": None})),
    (False, lambda p: p["fact"]["rng"].pop("input")),
    (False, lambda p: p["fact"]["rng"].__setitem__("input", 7)),
    (False, lambda p: p["fact"].__setitem__("rng", "a string")),
    (True, lambda p: p.__setitem__("meta", "a string")),
    (True, lambda p: p["meta"].__setitem__("command", 5)),
])
def test_an_outcome_or_command_of_the_wrong_shape_is_a_failure_named(app, first, change):
    """Issue 33, item 5: each of these ended in "unexpected error" before."""
    _, data = played(app)
    at = index_of(data, "PileShuffled")
    if first:  # the append's first line, which holds its command
        at = orjson.loads(lines_of(data)[at]["payload"])["append"] - 1
    report = verify(resigned(edit(data, at, change), app.key_file), server_key(app))
    assert report["ok"] is False and report["first_failure"]["check"]


# --- newcomers' rooms are committed -----------------------------------------------------


def test_the_host_pages_examples_and_the_table_make_committed_rooms(app):
    from fastapi.testclient import TestClient

    from dune_ledger.infrastructure.demo import BOX_LAYOUT, committed
    from dune_ledger.infrastructure.http import create_app

    with TestClient(create_app(app, admin_token="")) as client:
        for name in ("box", "ambassador", "full-hand"):
            layout = client.get(f"/host/examples/{name}").json()
            room = client.post("/rooms", json=layout).json()["room"]
            fairness = app.public_view(room)["fairness"]
            assert fairness["mode"] == "committed" and fairness["stage"] == "commit", name
    table = app.create_room(committed(BOX_LAYOUT))["room"]  # what `dune-ledger table` makes
    assert app.public_view(table)["fairness"]["algorithm"] == "hmac-sha256-fy-v2"
    assert "seed" in BOX_LAYOUT  # `demo` keeps its seed: repeatable output


def test_a_window_closed_at_its_deadline_is_re_executed_as_the_systems(app):
    from datetime import UTC, datetime, timedelta

    from tests.support import example

    raw = example("ambassador")
    del raw["seed"], raw["ambassadors"]["cohort"]
    room = app.create_room(raw)["room"]
    dealt(app, room)
    entered = ok(app, room, "atreides", {"type": "enter_territory", "territory": "arrakeen",
                                         "via": "shipment"})
    offered = next(e for e in entered["events"] if e["type"] == "AmbassadorOffered")
    ok(app, room, "ecaz", {"type": "ambassador_decide", "event": offered["event"],
                           "trigger": True, "beneficiary": "harkonnen"})
    closed = app.close_expired(room, datetime.now(UTC) + timedelta(hours=1))
    assert closed is not None and closed["ok"], closed
    assert app.end_room(room)["ok"]
    data = b"".join(transcript(app, room))
    bys = [orjson.loads(line["payload"])["meta"].get("by") for line in lines_of(data)]
    assert "system" in bys
    report = verify(data, server_key(app))
    assert report["ok"], report


def test_a_key_turns_off_an_autopilot_turned_on_unsigned(app):
    room = str(app.create_room(committed_layout())["room"])
    ok(app, room, "emperor", {"type": "set_autopilot", "enabled": True, "profile": "easy"})
    key = SeatKey()
    registered = ok(app, room, "emperor", {"type": "seat_key", "public_key": key.public})
    assert [e["type"] for e in registered["events"]] == ["SeatKeyRegistered", "AutopilotSet"]
    assert app.seat_view(room, "emperor")["me"]["autopilot"] is None
