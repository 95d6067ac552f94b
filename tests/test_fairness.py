"""Fair dealing (RULES 9): committed rooms derive every outcome from a committed secret
and the seats' seeds; the end publishes the secret; a transcript verifies."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from dune_ledger.domain import fairness
from dune_ledger.domain.randomness import (
    ALGORITHM_V2,
    Derived,
    commitment,
    derived_shuffle,
    mix,
    uniform,
    words,
)
from dune_ledger.infrastructure.keys import init_key_file, public_key_info
from dune_ledger.infrastructure.storage import open_rooms
from dune_ledger.infrastructure.transfer import export_lines
from dune_ledger.infrastructure.verify import public_key, verify
from tests.fairness.seeded_facts import played
from tests.support import (
    SeatKey,
    committed_layout,
    dealt,
    example,
    keyed_rooms,
    layout,
    lines_of,
    ok,
    resigned,
    seed_commitment,
)

ROOT = Path(__file__).resolve().parent.parent
BOX = "nullentropy-box"
HEX64 = re.compile(r"[0-9a-f]{64}")


@pytest.fixture
def app(tmp_path: Path) -> Any:
    with keyed_rooms(tmp_path) as rooms:
        yield rooms


def play(app: Any) -> str:
    """A committed room: the ceremony (one seat commits nothing, the operator deals),
    the deck shuffled at the deal, a Box search, draws past a reshuffle of the discard
    pile."""
    room = str(app.create_room(committed_layout())["room"])
    dealt(app, room, {"richese": "dunes of arrakis", "emperor": "Padishah 10191"})
    ok(app, room, "emperor", {"type": "draw"})
    ok(app, room, "richese", {"type": "begin_search", "card": BOX})
    search = app.seat_view(room, "richese")["nullentropy"]["search"]
    ok(app, room, "richese", {"type": "select_card", "search": search["event"],
                              "card": search["cards"][0]["id"]})
    for _ in range(60):
        drawn = ok(app, room, "harkonnen", {"type": "draw"})
        hand = app.seat_view(room, "harkonnen")["me"]["hand"]
        ok(app, room, "harkonnen", {"type": "discard", "card": hand[-1]["id"]})
        if any(e["type"] == "DiscardReshuffled" for e in drawn["events"]):
            break
    else:
        raise AssertionError("the discard pile was never reshuffled")
    return room


def transcript(app: Any, room: str) -> bytes:
    from dune_ledger.infrastructure.verify import transcript as lines

    return b"".join(lines(app, room))


def key_of(app: Any) -> Any:
    return public_key(public_key_info(app.key_file)["public_key"])


# --- the derivation -------------------------------------------------------------------


def test_uniform_rejects_the_words_above_the_last_whole_multiple():
    n = 3
    limit = (2**32 // n) * n
    assert uniform(iter([limit, limit + 1, 7]), n) == 7 % n  # two rejected, then 7
    assert uniform(iter([limit - 1]), n) == (limit - 1) % n


def test_words_are_the_hmac_blocks_read_big_endian():
    import hashlib
    import hmac

    secret = bytes(range(32))
    stream = words(secret, "room", 5, 2, "ab", )
    first = [next(stream) for _ in range(9)]
    block0 = hmac.new(secret, b"room:5:2:ab:0", hashlib.sha256).digest()
    block1 = hmac.new(secret, b"room:5:2:ab:1", hashlib.sha256).digest()
    assert first[:8] == [int.from_bytes(block0[i:i + 4], "big") for i in range(0, 32, 4)]
    assert first[8] == int.from_bytes(block1[:4], "big")


def test_the_mix_is_sha256_of_the_canonical_seeds():
    import hashlib

    seeds = {"richese": "a b", "emperor": None}
    assert mix(seeds) == hashlib.sha256(b'{"emperor":"","richese":"a b"}').hexdigest()
    assert commitment(b"\x00" * 32) == hashlib.sha256(
        b"dune-ledger:commit:" + b"\x00" * 32).hexdigest()


def naive_shuffle(stream: Any, ids: list[str]) -> list[str]:
    """A classic mistake (swap each place with any place): biased."""
    out = list(ids)
    for i in range(len(out)):
        j = uniform(stream, len(out))
        out[i], out[j] = out[j], out[i]
    return out


def position_chi_square(shuffle: Any, trials: int = 4000) -> float:
    """The largest chi-square, over the cards, of where each card lands among four."""
    ids = ["a", "b", "c", "d"]
    secret = bytes(range(32))
    counts = {cid: [0] * len(ids) for cid in ids}
    for version in range(trials):
        for place, cid in enumerate(shuffle(words(secret, "room", version, 0, "m"), ids)):
            counts[cid][place] += 1
    expected = trials / len(ids)
    return max(sum((n - expected) ** 2 / expected for n in row) for row in counts.values())


def test_the_derived_shuffle_puts_each_card_in_each_place_uniformly():
    """Fixed budget: 4,000 derived shuffles of four cards, each card's four places a
    chi-square of 3 degrees of freedom; threshold 16.27 (p = 0.001). The same
    statistic finds the naive swap-anywhere shuffle's bias, so the test can fail."""
    assert position_chi_square(derived_shuffle) < 16.27
    assert position_chi_square(naive_shuffle) > 16.27


def test_a_sample_is_the_prefix_of_the_shuffle_and_calls_are_counted():
    secret = bytes(32)
    port = Derived(secret, "room", 9, "m")
    shuffled = port.shuffle(list("abcdef"))
    sampled = port.sample(list("abcdef"), 2)
    assert port.calls == 2
    assert shuffled == derived_shuffle(words(secret, "room", 9, 0, "m"), list("abcdef"))
    assert sampled == derived_shuffle(words(secret, "room", 9, 1, "m"), list("abcdef"))[:2]
    drawn = port.last_draw()
    assert drawn is not None and drawn.call == 1 and drawn.input == list("abcdef")


# --- a committed room -----------------------------------------------------------------


def test_a_committed_room_starts_in_its_commit_stage_and_shuffles_its_deck_at_the_deal(app):
    created = app.create_room(committed_layout())
    room = created["room"]
    view = app.public_view(room)
    f = view["fairness"]
    assert f["mode"] == "committed" and f["algorithm"] == ALGORITHM_V2
    assert HEX64.fullmatch(f["commitment"]) and f["secret"] is None
    assert f["stage"] == "commit" and f["mix"] is None and f["withheld"] == []
    assert f["seeds"] == f["commitments"] == f["keys"] == {
        "richese": None, "emperor": None, "harkonnen": None}
    assert view["ended"] is False
    state = app.load(room).state
    assert state.deck == [c for c in state.cards() if c in state.deck]  # catalog order
    refused = app.execute(room, "emperor", {"type": "draw"})
    assert refused["error"]["code"] == "not_dealt" and app.load(room).version == 1
    assert {a["type"] for a in app.seat_view(room, "emperor")["actions"]} == {
        "seat_key", "seed_commit", "set_autopilot"}
    deal = dealt(app, room)
    assert [e["type"] for e in deal["events"]] == ["SeedRevealed", "Dealt", "DeckShuffled"]
    state = app.load(room).state
    mixed = mix(state.fairness.seeds)
    assert deal["events"][1]["mix"] == mixed == state.fairness.mix
    assert deal["events"][2]["rng"] == {"n": 0, "mix": mixed}
    assert "input" not in orjson.dumps(deal).decode()  # the shuffled input is private
    drawn = ok(app, room, "emperor", {"type": "draw"})
    assert [e["type"] for e in drawn["events"]] == ["CardDrawn"]  # shuffled once
    assert app.public_view(room)["fairness"]["stage"] == "dealt"


def test_a_seeded_or_layout_room_shows_its_mode_and_refuses_seeds(app):
    seeded = app.create_room(layout())["room"]
    f = app.public_view(seeded)["fairness"]
    none = {"richese": None, "emperor": None, "harkonnen": None}
    assert f == {"mode": "seeded", "algorithm": None, "commitment": None, "stage": None,
                 "commitments": none, "seeds": none, "withheld": [], "mix": None,
                 "keys": none, "secret": None}
    for command in ({"type": "seed", "value": "x"}, {"type": "seed_commit", "hash": "0" * 64},
                    {"type": "seat_key", "public_key": "A" * 43 + "="}):
        refused = app.execute(seeded, "emperor", command)
        assert refused["error"]["code"] == "not_eligible"
    assert not {"seed", "seed_commit", "seat_key"} & {
        a["type"] for a in app.seat_view(seeded, "emperor")["actions"]}


@pytest.mark.parametrize("value", ["", "x" * 65, "tab\there", "é", 7])
def test_a_seed_is_1_to_64_printable_ascii(app, value):
    room = app.create_room(committed_layout())["room"]
    refused = app.execute(room, "emperor", {"type": "seed", "value": value})
    assert refused["error"]["code"] == "invalid_command"


def test_a_rejected_command_draws_nothing_and_moves_no_counter(app, monkeypatch):
    """The room's counter of random calls does not move for a refused command."""
    room = app.create_room(committed_layout())["room"]
    dealt(app, room)
    ports: list[Any] = []
    made = fairness.port

    def counting(state: Any, version: int) -> Any:
        port = made(state, version)
        ports.append(port)
        return port

    monkeypatch.setattr("dune_ledger.application.rooms.port", counting)
    for seat, command in [("harkonnen", {"type": "begin_search", "card": BOX}),
                          ("richese", {"type": "discard", "card": "stunner"}),
                          ("richese", {"type": "select_card", "search": "e2", "card": "x"}),
                          ("emperor", {"type": "seed_reveal", "value": "late"})]:
        assert not app.execute(room, seat, command)["ok"]
    assert ports and all(p.calls == 1 for p in ports)  # the deal's shuffle was call 0
    assert app.load(room).state.fairness.calls == 1
    ok(app, room, "richese", {"type": "begin_search", "card": BOX})
    search = app.seat_view(room, "richese")["nullentropy"]["search"]
    chosen = ok(app, room, "richese", {"type": "select_card", "search": search["event"],
                                       "card": search["cards"][0]["id"]})
    shuffled = [e for e in chosen["events"] if e["type"] == "PileShuffled"]
    assert shuffled[0]["rng"]["n"] == 1 and app.load(room).state.fairness.calls == 2


def test_the_end_publishes_the_secret_refuses_later_commands_and_is_idempotent(app):
    room = play(app)
    commit = app.public_view(room)["fairness"]["commitment"]
    ended = app.end_room(room, "end-1")
    assert ended["ok"] and [e["type"] for e in ended["events"]] == ["RoomEnded"]
    secret = ended["events"][0]["secret"]
    assert HEX64.fullmatch(secret) and commitment(bytes.fromhex(secret)) == commit
    assert app.end_room(room, "end-1") == ended  # the same command id: the first result
    assert app.end_room(room)["error"]["code"] == "room_ended"
    view = app.seat_view(room, "emperor")
    assert view["ended"] == ended["version"] and view["fairness"]["secret"] == secret
    assert view["actions"] == []
    for seat, command in [("emperor", {"type": "draw"}),
                          ("emperor", {"type": "seed", "value": "late"}),
                          ("harkonnen", {"type": "set_autopilot", "enabled": False})]:
        assert app.execute(room, seat, command)["error"]["code"] == "room_ended"
    assert app.load(room).version == ended["version"]


def test_the_end_is_not_a_seat_command(app):
    room = app.create_room(committed_layout())["room"]
    refused = app.execute(room, "emperor", {"type": "end_room"})
    assert refused["error"]["code"] == "not_eligible"
    assert "operator" in refused["error"]["message"]
    assert app.public_view(room)["ended"] is False


def test_a_transcript_is_refused_before_the_end(app):
    from dune_ledger.domain.errors import Rejection

    room = app.create_room(committed_layout())["room"]
    with pytest.raises(Rejection) as info:
        transcript(app, room)
    assert info.value.code == "room_not_ended"


# --- verify ---------------------------------------------------------------------------


@pytest.fixture
def ended(app):
    room = play(app)
    assert app.end_room(room)["ok"]
    return app, room, transcript(app, room)


def test_a_real_transcript_verifies(ended):
    app, room, data = ended
    report = verify(data, key_of(app))
    unsigned = {"key": None, "signed": 0, "autopilot": 0, "keys_cleared": 0}
    seeds = {"richese": "revealed", "emperor": "revealed", "harkonnen": "none"}
    assert report == {"ok": True, "room": room, "algorithm": ALGORITHM_V2,
                      "events": len(data.splitlines()),
                      "checks": dict.fromkeys(report["checks"], True), "first_failure": None,
                      "seats": {s: {**unsigned, "unsigned": row["unsigned"],
                                    "seed": seeds[s]} for s, row in report["seats"].items()}}
    assert set(report["checks"]) == {"chain_intact", "signatures", "commitment", "ceremony",
                                     "seat_signatures", "shuffles", "draws", "commands",
                                     "replay"}
    types = [orjson.loads(line)["type"] for line in data.splitlines()]
    assert {"DeckShuffled", "PileShuffled", "DiscardReshuffled", "SeedCommitted",
            "RevealBegan", "SeedRevealed", "Dealt", "RoomEnded"} <= set(types)


def edited(data: bytes, kind: str, change: Any, nth: int = 0) -> list[dict[str, Any]]:
    lines = lines_of(data)
    hits = [i for i, line in enumerate(lines) if line["type"] == kind]
    i = hits[nth]
    payload = orjson.loads(lines[i]["payload"])
    change(payload["fact"])
    lines[i]["payload"] = orjson.dumps(payload).decode()
    return lines


def swap_first_two(fact: dict[str, Any]) -> None:
    fact["order"][0], fact["order"][1] = fact["order"][1], fact["order"][0]


def failure(report: dict[str, Any]) -> tuple[str, int]:
    assert report["ok"] is False
    return report["first_failure"]["check"], report["first_failure"]["version"]


def version_of(data: bytes, kind: str, nth: int = 0) -> int:
    return int([line for line in lines_of(data) if line["type"] == kind][nth]["version"])


def test_a_reordered_shuffle_fails_the_derivation(ended):
    app, _, data = ended
    for kind in ("DeckShuffled", "PileShuffled", "DiscardReshuffled"):
        forged = resigned(edited(data, kind, swap_first_two), app.key_file)
        report = verify(forged, key_of(app))
        assert failure(report) == ("shuffles", version_of(data, kind)), kind
        assert report["checks"]["chain_intact"] and report["checks"]["signatures"]


def test_a_swapped_draw_fails_the_draw_check(ended):
    app, _, data = ended
    cards = [orjson.loads(line["payload"])["fact"]["card"]
             for line in lines_of(data) if line["type"] == "CardDrawn"]

    def other(fact: dict[str, Any]) -> None:
        fact["card"] = cards[1]

    forged = resigned(edited(data, "CardDrawn", other), app.key_file)
    assert failure(verify(forged, key_of(app))) == ("draws", version_of(data, "CardDrawn"))


def test_a_secret_that_does_not_match_the_commitment_fails_it(ended):
    app, _, data = ended

    def other(fact: dict[str, Any]) -> None:
        fact["secret"] = "0" * 64

    forged = resigned(edited(data, "RoomEnded", other), app.key_file)
    report = verify(forged, key_of(app))
    assert failure(report) == ("commitment", version_of(data, "RoomEnded"))
    assert report["checks"]["shuffles"] is False  # nothing derived under that secret


def test_a_changed_seed_fails_the_ceremony_check(ended):
    app, _, data = ended

    def other(fact: dict[str, Any]) -> None:
        fact["value"] = "a seed nobody set"

    forged = resigned(edited(data, "SeedRevealed", other), app.key_file)
    report = verify(forged, key_of(app))
    assert failure(report) == ("ceremony", version_of(data, "SeedRevealed"))


def test_an_edit_without_the_key_fails_the_chain_and_a_foreign_key_the_signatures(
        ended, tmp_path):
    app, _, data = ended
    lines = edited(data, "DeckShuffled", swap_first_two)
    forged = b"".join(orjson.dumps(line) + b"\n" for line in lines)
    assert failure(verify(forged, key_of(app)))[0] == "chain_intact"
    other = tmp_path / "other.key"
    init_key_file(other)
    assert failure(verify(data, public_key(public_key_info(other)["public_key"]))) == (
        "signatures", 1)



def test_every_appends_signature_is_checked_not_only_the_last(ended):
    """The last append's signature authenticates the events before it through the
    hashes, but RULES 9.7 asks that every append be signed: an earlier signature
    replaced by another valid-looking one fails, the last one left intact."""
    app, _, data = ended
    lines = [orjson.loads(line) for line in data.splitlines()]
    signed_at = [i for i, line in enumerate(lines) if line["sig"] is not None]
    assert len(signed_at) > 2
    earlier, last = signed_at[1], signed_at[-1]
    lines[earlier]["sig"] = lines[last]["sig"]
    forged = b"".join(orjson.dumps(line) + b"\n" for line in lines)
    assert failure(verify(forged, key_of(app))) == ("signatures", earlier + 1)

def test_a_seeded_room_has_nothing_to_verify(app):
    room = app.create_room(layout())["room"]
    assert app.end_room(room)["ok"]
    report = verify(transcript(app, room), key_of(app))
    assert failure(report) == ("commitment", 1)


# --- seeded rooms are as they were ------------------------------------------------------


def test_seeded_rooms_append_exactly_the_facts_they_did_before_fair_dealing():
    """Every scripted play of scripts/make_golden.py (all seeded) appends the same facts,
    byte for byte, as the code before fair dealing did (tests/fairness/seeded-before.json,
    written by tests/fairness/seeded_facts.py at a493917, the rules of issue 24 without
    fair dealing)."""
    before = json.loads((ROOT / "tests" / "fairness" / "seeded-before.json").read_text())
    # The plays added since (a Bidding round) had no code before to compare with.
    then = {name for name, _ in before}
    assert [p for p in json.loads(json.dumps(played())) if p[0] in then] == before


# --- docs/fairness.md: the derivation as a short program --------------------------------


def doc_program() -> str:
    text = (ROOT / "docs" / "fairness.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1, "docs/fairness.md holds one Python program"
    return blocks[0]


def test_the_program_in_the_docs_rederives_every_shuffle_of_a_real_transcript(ended,
                                                                            tmp_path):
    import subprocess
    import sys

    app, _, data = ended
    program = tmp_path / "derive.py"
    program.write_text(doc_program())
    assert not re.search(r"^\s*(from|import)\s+(?!(hashlib|hmac|json|sys)\b)", doc_program(),
                         re.M), "the standard library only"
    path = tmp_path / "room.transcript"
    path.write_bytes(data)
    run = subprocess.run([sys.executable, "-I", str(program), str(path)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    outcomes = sum(1 for line in lines_of(data)
                   if '"rng"' in line["payload"] and '"rng":null' not in line["payload"])
    assert run.stdout.strip().endswith(f"{outcomes} outcomes derived again")
    forged = resigned(edited(data, "DeckShuffled", swap_first_two), app.key_file)
    path.write_bytes(forged)
    run = subprocess.run([sys.executable, "-I", str(program), str(path)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "DeckShuffled" in run.stdout


def test_base64_key_parsing_refuses_garbage():
    from dune_ledger.infrastructure.verify import TranscriptError

    with pytest.raises(TranscriptError):
        public_key("not a key")
    with pytest.raises(TranscriptError):
        public_key(base64.b64encode(b"short").decode())


# --- the secret stays private until the end; the HTTP routes ----------------------------


def secret_of(app: Any, room: str) -> str:
    return str(app.load(room).state.fairness.secret)


def test_no_outbound_path_carries_the_secret_before_the_end(tmp_path, capfd):
    """Views, logs, results, errors, time travel, read-model rows, HTTP answers and the
    process's own output, at every version of a played committed room (tests/leaks.py
    checks the secret too); a cipher key keeps it out of the database file."""
    from fastapi.testclient import TestClient

    from dune_ledger.infrastructure.http import create_app
    from tests import leaks

    key = tmp_path / "sealed.key"
    init_key_file(key, cipher=True)
    db = tmp_path / "rooms.db"
    with open_rooms(f"sqlite:///{db}", key_file=str(key)) as app, \
            TestClient(create_app(app, admin_token="operator-token")) as client:
        room = play(app)
        secret = secret_of(app, room)
        problems = leaks.scan_room(app, room)
        for seat in ("richese", "emperor", "harkonnen"):
            for command in ({"type": "seed", "value": seat}, {"type": "draw"},
                            {"type": "seed_reveal", "value": seat},
                            {"type": "seed", "value": "x" * 65}):
                before = leaks.true_state(app, room)
                result = app.execute(room, seat, command)
                problems += leaks.error_problems(before, seat, {}, result)
        created = client.post("/rooms", json=committed_layout(),
                              headers={"Authorization": "Bearer operator-token"}).json()
        other, tokens = created["room"], created["seats"]
        theirs = secret_of(app, other)
        seat = {"Authorization": f"Bearer {tokens['emperor']}"}
        answers = [client.post(f"/rooms/{other}/commands", json={"type": "draw"}, headers=seat),
                   client.get(f"/rooms/{other}/view", headers=seat),
                   client.get(f"/rooms/{other}/public", headers=seat),
                   client.get(f"/rooms/{other}/log", headers=seat),
                   client.get(f"/rooms/{other}/transcript", headers=seat),
                   client.post(f"/rooms/{other}/end", headers=seat),
                   client.get(f"/rooms/{other}/audit",
                              headers={"Authorization": "Bearer operator-token"})]
        assert answers[4].status_code == 409
        assert answers[4].json()["error"]["code"] == "room_not_ended"
        assert answers[5].status_code == 403  # a seat token cannot end the room
        for answer in answers:
            assert theirs not in answer.text and secret not in answer.text
        app.read_models.catch_up()
    rows = db.read_bytes()
    assert secret.encode() not in rows and theirs.encode() not in rows
    assert bytes.fromhex(secret) not in rows
    printed = capfd.readouterr()
    assert secret not in printed.out + printed.err and theirs not in printed.out + printed.err
    assert problems == []


def test_the_guard_withholds_a_view_that_would_carry_the_secret(monkeypatch):
    from dune_ledger.projections import guard, projectors
    from dune_ledger.projections.projectors import render
    from tests.support import state_of

    state = state_of(committed_layout(), secret=bytes(range(32)))
    real = projectors.public_view
    monkeypatch.setattr(projectors, "public_view",
                        lambda s: {**real(s), "oops": s.fairness.secret})
    rows = render(state)
    assert "withheld" in rows["*public*"] and state.fairness.secret not in rows["*public*"]
    assert guard.secret_leaks(state, f"x{state.fairness.secret}") == {guard.SECRET}
    state.ended = state.version
    assert guard.secret_leaks(state, state.fairness.secret) == set()


def test_http_ends_a_room_once_and_serves_its_transcript_to_its_tokens(tmp_path):
    from fastapi.testclient import TestClient

    from dune_ledger.infrastructure.http import create_app

    key = tmp_path / "server.key"
    init_key_file(key)
    operator = {"Authorization": "Bearer operator-token"}
    with open_rooms(f"sqlite:///{tmp_path / 'http.db'}", key_file=str(key)) as app, \
            TestClient(create_app(app, admin_token="operator-token")) as client:
        created = client.post("/rooms", json=committed_layout(), headers=operator).json()
        room = created["room"]
        seat = {"Authorization": f"Bearer {created['seats']['emperor']}"}
        spectator = {"Authorization": f"Bearer {created['spectator']}"}
        assert client.post(f"/rooms/{room}/commands", json={"type": "deal"},
                           headers=seat).status_code == 403
        assert client.post(f"/rooms/{room}/commands", json={"type": "deal"},
                           headers=operator).json()["ok"]
        assert client.post(f"/rooms/{room}/commands", json={"type": "draw"},
                           headers=seat).json()["ok"]
        assert client.post(f"/rooms/{room}/end", headers=seat).status_code == 403
        assert client.post(f"/rooms/{room}/end").status_code == 401
        first = client.post(f"/rooms/{room}/end", json={"command_id": "end"}, headers=operator)
        assert first.status_code == 200 and first.json()["events"][0]["type"] == "RoomEnded"
        again = client.post(f"/rooms/{room}/end", json={"command_id": "end"}, headers=operator)
        assert again.json() == first.json()
        bad = client.post(f"/rooms/{room}/end", json={"command_id": 5}, headers=operator)
        assert bad.status_code == 400
        refused = client.post(f"/rooms/{room}/commands", json={"type": "draw"}, headers=seat)
        assert refused.json()["error"]["code"] == "room_ended"
        texts = []
        for who in (seat, spectator, operator):
            answer = client.get(f"/rooms/{room}/transcript", headers=who)
            assert answer.status_code == 200
            assert answer.headers["content-type"].startswith("application/x-ndjson")
            texts.append(answer.content)
        assert texts[0] == texts[1] == texts[2]
        assert client.get(f"/rooms/{room}/transcript").status_code == 401
        assert verify(texts[0], key_of_file(key))["ok"]


def test_without_an_operator_token_the_transcript_needs_no_token_but_a_wrong_one_counts(
        tmp_path):
    """On loopback without DUNE_LEDGER_ADMIN_TOKEN the operator routes are open: the host
    page downloads an ended room's transcript sending no token. A token that is wrong is
    refused and counted, as on every token route."""
    from fastapi.testclient import TestClient

    from dune_ledger.infrastructure.http import create_app
    from dune_ledger.infrastructure.http_auth import WRONG_LIMIT

    key = tmp_path / "server.key"
    init_key_file(key)
    with open_rooms(f"sqlite:///{tmp_path / 'open.db'}", key_file=str(key)) as app, \
            TestClient(create_app(app, admin_token="")) as client:
        room = client.post("/rooms", json=committed_layout()).json()["room"]
        early = client.get(f"/rooms/{room}/transcript")
        assert early.status_code == 409 and early.json()["error"]["code"] == "room_not_ended"
        assert client.post(f"/rooms/{room}/end").status_code == 200
        answer = client.get(f"/rooms/{room}/transcript")
        assert answer.status_code == 200 and verify(answer.content, key_of_file(key))["ok"]
        wrong = {"Authorization": "Bearer not-a-token"}
        codes = [client.get(f"/rooms/{room}/transcript", headers=wrong).status_code
                 for _ in range(WRONG_LIMIT + 1)]
        assert codes[0] == 401 and codes[-1] == 429


def key_of_file(key: Path) -> Any:
    return public_key(public_key_info(key)["public_key"])


def test_the_cli_ends_a_room_prints_its_transcript_and_verifies_it(tmp_path):
    import subprocess

    env_key = tmp_path / "cli.key"
    init_key_file(env_key)
    exe = str(ROOT / ".venv" / "bin" / "dune-ledger")
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    env = {"DUNE_LEDGER_KEY_FILE": str(env_key), "PATH": "/usr/bin:/bin"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([exe, "--db", db, *args], capture_output=True, text=True,
                              env=env, timeout=120)

    layout_file = tmp_path / "layout.json"
    layout_file.write_text(json.dumps(committed_layout()))
    room = json.loads(cli("room", "create", str(layout_file)).stdout)["room"]
    refused = cli("room", "command", room, "--as", "emperor", '{"type": "draw"}')
    assert refused.returncode == 1 and "not_dealt" in refused.stdout
    assert cli("room", "command", room, "--operator", '{"type": "deal"}').returncode == 0
    assert cli("room", "command", room, "--as", "emperor", '{"type": "draw"}').returncode == 0
    early = cli("room", "transcript", room)
    assert early.returncode == 1 and "room_not_ended" in early.stdout
    ended = cli("room", "end", room, "--command-id", "e")
    assert ended.returncode == 0 and json.loads(ended.stdout)["events"][0]["type"] == "RoomEnded"
    assert cli("room", "end", room, "--command-id", "e").stdout == ended.stdout
    late = cli("room", "command", room, "--as", "emperor", '{"type": "draw"}')
    assert late.returncode == 1 and "room_ended" in late.stdout
    path = tmp_path / "room.transcript"
    printed = cli("room", "transcript", room)
    assert printed.returncode == 0
    path.write_text(printed.stdout)
    checked = cli("verify", str(path))
    report = json.loads(checked.stdout)
    assert checked.returncode == 0 and report["ok"] and report["room"] == room
    forged = resigned(edited(path.read_bytes(), "DeckShuffled", swap_first_two), env_key)
    path.write_bytes(forged)
    failed = cli("verify", str(path), "--key", public_key_info(env_key)["public_key"])
    assert failed.returncode == 1 and json.loads(failed.stdout)["first_failure"]["check"] == \
        "shuffles"
    assert "Traceback" not in failed.stderr
    path.write_text("not json\n")
    bad = cli("verify", str(path))
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert json.loads(bad.stdout)["first_failure"]["check"] == "malformed"
    assert cli("verify", str(path), "--key", "nope").returncode == 2


def test_an_ended_room_has_no_window_deadline_due(app):
    """The worker does not try to close a window of an ended room every tick."""
    from datetime import UTC, datetime, timedelta

    raw = example("ambassador")
    del raw["seed"], raw["ambassadors"]["cohort"]
    room = app.create_room(raw)["room"]
    dealt(app, room)
    entered = ok(app, room, "atreides", {"type": "enter_territory", "territory": "arrakeen",
                                         "via": "shipment"})
    offered = next(e for e in entered["events"] if e["type"] == "AmbassadorOffered")
    ok(app, room, "ecaz", {"type": "ambassador_decide", "event": offered["event"],
                           "trigger": True, "beneficiary": "harkonnen"})
    assert app.public_view(room)["response"]["deadline"] is not None
    assert app.end_room(room)["ok"]
    assert app.close_expired(room, datetime.now(UTC) + timedelta(hours=1)) is None
    data = transcript(app, room)
    report = verify(data, key_of(app))
    assert report["ok"], report
    # The Ambassador purchase drew from the deck shuffled at the deal.
    assert "DeckShuffled" in {line["type"] for line in lines_of(data)}


def test_the_host_pages_ambassador_example_leaves_the_cohort_to_the_deal(app):
    """The examples the host page and the table offer make committed rooms whose Ecaz
    cohort is drawn at the deal (RULES 9.2), not written by the example's author."""
    from dune_ledger.infrastructure.demo import committed

    room = app.create_room(committed(example("ambassador")))["room"]
    assert app.load(room).state.ambassadors.cohort == []
    deal = dealt(app, room)
    drawn = [e for e in deal["events"] if e["type"] == "AmbassadorCohortDrawn"]
    assert drawn and drawn[0]["rng"]["n"] == 1
    assert app.end_room(room)["ok"]
    assert verify(transcript(app, room), key_of(app))["ok"]


def test_ambassador_cohorts_are_derived_at_the_deal(app):
    """A committed room's cohort is drawn at the deal, after the deck (call 1), not at
    creation (RULES 9.4), and verifies like the shuffles. (A committed room's tokens
    are placed by its layout alone, outside the cohort: its cohort is never spent, so
    never drawn anew.)"""
    raw = example("ambassador")
    del raw["seed"]
    raw["ambassadors"] = {"placed": [{"token": "richese", "territory": "arrakeen"}]}
    created = app.create_room(raw)["room"]
    first = lines_of(b"".join(export_lines(app, created)))[0]
    fact = orjson.loads(first["payload"])["fact"]
    assert "rng" not in fact and fact["state"]["ambassadors"]["cohort"] == []
    deal = dealt(app, created)
    drawn = [e for e in deal["events"] if e["type"] == "AmbassadorCohortDrawn"]
    assert drawn[0]["count"] == 5 and drawn[0]["rng"]["n"] == 1
    assert len(app.load(created).state.ambassadors.cohort) == 5
    assert app.end_room(created)["ok"]
    data = transcript(app, created)
    assert verify(data, key_of(app))["ok"]

    def reorder(fact: dict[str, Any]) -> None:
        fact["cohort"][0], fact["cohort"][1] = fact["cohort"][1], fact["cohort"][0]

    forged = resigned(edited(data, "AmbassadorCohortDrawn", reorder), app.key_file)
    assert failure(verify(forged, key_of(app))) == (
        "shuffles", version_of(data, "AmbassadorCohortDrawn"))


def test_no_read_model_row_holds_the_secret_before_the_end(app, tmp_path):
    """Without a cipher key too: the read models keep the room's state without its
    secret (the stored events hold it, as they hold every hidden card), and the end
    writes it back, so the views show it from then on."""
    import sqlite3

    room = play(app)
    secret = secret_of(app, room)
    app.read_models.catch_up()
    db = sqlite3.connect(str(tmp_path / "rooms.db"))
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' "
                                       "AND name LIKE 'dl_%'")]
    assert {"dl_view_rooms", "dl_seat_views", "dl_public_log"} <= set(tables)
    for table in tables:
        for row in db.execute(f"SELECT * FROM {table}"):  # noqa: S608
            assert secret not in repr(row), table
    db.close()
    # Another process, whose read models fold on from the stored (secret-less) state.
    with open_rooms(f"sqlite:///{tmp_path / 'rooms.db'}", key_file=str(app.key_file)) as other:
        assert other.end_room(room)["ok"]
        other.read_models.catch_up()
        assert other.public_view(room)["fairness"]["secret"] == secret
        assert other.seat_view(room, "emperor")["fairness"]["secret"] == secret


def test_committed_rooms_differing_in_their_secret_show_the_same_public_record():
    """RULES 7: the deck order a secret derives is hidden; the public log, the public
    view and each seat's view of other seats are the same for two secrets (the
    commitment aside, which is the secret's public hash)."""
    from dune_ledger.domain import views
    from dune_ledger.domain.game import parse_command, parse_operator_command
    from dune_ledger.domain.rules import decide
    from tests.support import state_of

    script = [("emperor", {"type": "seed_commit"}), ("operator", {"type": "deal"}),
              ("emperor", {"type": "seed_reveal", "value": "a"}),
              ("emperor", {"type": "draw"}),
              ("harkonnen", {"type": "draw"}), ("richese", {"type": "begin_search",
                                                            "card": BOX}),
              ("richese", {"type": "select_card", "card": "baliset"}),
              ("emperor", {"type": "draw"})]
    seen, decks = [], []
    for secret in (bytes(32), bytes(range(32))):
        state = state_of(committed_layout(), secret=secret)
        log = []
        for actor, command in script:
            if command["type"] == "select_card":
                assert state.search is not None
                command = {**command, "search": state.search.event}
            if command["type"] == "seed_commit":
                command = {**command, "hash": seed_commitment(state.room, actor, "a")}
            parse = parse_operator_command if actor == "operator" else parse_command
            tx = decide(state, actor, parse(command),
                        fairness.port(state, state.version + 1))
            state = tx.state
            log += [(e.type, e.public()) for e in tx.events]
        public = views.public_view(state)
        public["fairness"].pop("commitment")
        seen.append((log, public))
        decks.append(state.deck)
    assert decks[0] != decks[1]  # the hidden facts differ
    assert seen[0] == seen[1]
    assert any(t == "DeckShuffled" for t, _ in seen[0][0])


def test_the_operator_may_end_a_room_during_a_search(app):
    room = app.create_room(committed_layout())["room"]
    dealt(app, room)
    ok(app, room, "richese", {"type": "begin_search", "card": BOX})
    assert app.end_room(room)["ok"]
    search = app.load(room).state.search
    assert search is not None  # left as it was: the transcript shows the open search
    refused = app.execute(room, "richese", {"type": "select_card", "search": search.event,
                                            "card": "baliset"})
    assert refused["error"]["code"] == "room_ended"
    assert verify(transcript(app, room), key_of(app))["ok"]


def test_a_question_awaiting_its_answer_lets_a_key_be_registered_and_the_room_end(
        app: Any) -> None:
    """Answer-first holds the game, not seat control: a seat may register its key at any
    time before the end, and the operator may end the room (RULES 9)."""
    raw = committed_layout()
    raw["seats"][1]["hand"] = ["karama-1", "truthtrance-1"]
    room = app.create_room(raw)["room"]
    dealt(app, room)
    ok(app, room, "emperor", {"type": "ask_truthtrance", "card": "truthtrance-1",
                              "target": "richese", "question": "Will you search?"})
    assert app.execute(room, "harkonnen", {"type": "draw"})["error"]["code"] == \
        "truthtrance_pending"
    ok(app, room, "harkonnen", {"type": "seat_key", "public_key": SeatKey().public})
    assert app.end_room(room, "end-1")["ok"]


# --- v1 rooms keep verifying as v1 ------------------------------------------------------


def v1_transcript() -> tuple[bytes, Any]:
    """The v1 committed room of the golden corpus v4, ended, and the key that signed it."""
    golden = ROOT / "tests" / "golden"
    lines = [line for line in (golden / "v4.jsonl").read_bytes().splitlines()
             if b"e92318bf-815b-44a7-9a4c-d248eb59a537" in line]
    key = json.loads((golden / "v4.key").read_text())["public_key"]
    return b"\n".join(lines) + b"\n", public_key(key)


def test_a_v1_transcript_verifies_under_the_v1_checks(tmp_path):
    data, key = v1_transcript()
    report = verify(data, key)
    assert report["ok"], report
    assert report["algorithm"] == "hmac-sha256-fy-v1" and report["seats"] == {}
    assert set(report["checks"]) == {"chain_intact", "signatures", "commitment", "seeds",
                                     "shuffles", "draws", "replay"}
    key_file = tmp_path / "v4.key"
    key_file.write_text((ROOT / "tests" / "golden" / "v4.key").read_text())
    forged = resigned(edited(data, "DeckShuffled", swap_first_two), key_file)
    assert failure(verify(forged, key)) == ("shuffles", version_of(data, "DeckShuffled"))
