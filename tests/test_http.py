"""The HTTP API: every route, every error status, tokens, bodies, and a fuzz run.

Most tests use FastAPI's TestClient over a SQLite file; the last one starts
`dune-ledger serve` for real on PostgreSQL.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dune_ledger.application.audit import audit_room
from dune_ledger.application.rooms import RoomsApp
from dune_ledger.infrastructure.http import MAX_BODY, create_app
from dune_ledger.infrastructure.storage import open_rooms
from tests.support import ADMIN, HANG, answering, assert_error, auth, create, free_port, layout

SEATS = ["richese", "emperor", "harkonnen"]
# Cards only their holder may see: every hand card of the layout but the Box, whose
# use is public, and the pile below its top card, which only a search's owner sees.
PRIVATE = {"richese": {"crysknife"}, "emperor": {"karama-1"},
           "harkonnen": {"shield-2", "chaumas"}}
BELOW_TOP = {"shield-1", "maula-pistol"}


@pytest.fixture
def rooms(tmp_path: Path) -> Iterator[RoomsApp]:
    app = open_rooms(f"sqlite:///{tmp_path / 'http.db'}")
    yield app
    app.close()


@pytest.fixture
def client(rooms: RoomsApp) -> Iterator[TestClient]:
    with TestClient(create_app(rooms, admin_token=ADMIN), raise_server_exceptions=True) as c:
        yield c


def version(rooms: RoomsApp, room: str) -> int:
    return rooms.load(room).version


# --- the routes ---------------------------------------------------------------------


def test_healthz_and_openapi(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"ok": True}
    spec = client.get("/openapi.json").json()
    assert {"/rooms", "/rooms/{room}/commands", "/rooms/{room}/view", "/rooms/{room}/log",
            "/rooms/{room}/audit", "/healthz"} <= set(spec["paths"])
    body = spec["paths"]["/rooms/{room}/commands"]["post"]["requestBody"]
    named = body["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    refs = {v["$ref"].rsplit("/", 1)[-1] for v in spec["components"]["schemas"][named]["oneOf"]}
    assert {"BeginSearch", "SelectCard", "Draw"} <= refs <= set(spec["components"]["schemas"])


def test_a_search_end_to_end_over_http(client: TestClient, rooms: RoomsApp) -> None:
    created = create(client)
    room, tokens = created["room"], created["seats"]
    assert set(tokens) == set(SEATS) and created["version"] == 1

    begun = client.post(f"/rooms/{room}/commands", headers=auth(tokens["richese"]),
                        json={"type": "begin_search", "card": "nullentropy-box"})
    assert begun.status_code == 200 and begun.json()["ok"]
    view = client.get(f"/rooms/{room}/view", headers=auth(tokens["richese"])).json()
    search = view["nullentropy"]["search"]
    chosen = search["cards"][0]["id"]
    selected = client.post(f"/rooms/{room}/commands", headers=auth(tokens["richese"]),
                           json={"type": "select_card", "search": search["event"],
                                 "card": chosen})
    assert selected.status_code == 200
    assert [e["type"] for e in selected.json()["events"]][:3] == [
        "CardRetrieved", "PileShuffled", "BoxDiscarded"]

    logged = client.get(f"/rooms/{room}/log", headers=auth(tokens["emperor"])).json()
    assert [e["type"] for e in logged][:3] == ["RoomCreated", "FeePaid", "SearchOpened"]
    from prometheus_client import REGISTRY

    def audits() -> float:
        return REGISTRY.get_sample_value("dune_ledger_audits_total", {"result": "ok"}) or 0.0

    before = audits()
    audited = client.get(f"/rooms/{room}/audit", headers=auth(ADMIN))
    assert audited.status_code == 200 and audited.json()["ok"]
    assert audited.json()["version"] == version(rooms, room)
    assert audits() == before + 1  # the metrics count the audits the API runs


def test_seat_tokens_are_stored_only_as_hashes(client: TestClient, rooms: RoomsApp) -> None:
    created = create(client)
    stored = b"".join(bytes(e.state) for e in rooms.recorder.select_events(
        rooms.load(created["room"]).id))
    for token in created["seats"].values():
        assert token.encode() not in stored


def test_a_repeated_command_id_returns_the_first_result(client: TestClient,
                                                        rooms: RoomsApp) -> None:
    created = create(client)
    room, token = created["room"], created["seats"]["emperor"]
    cmd = {"type": "draw", "command_id": "once"}
    first = client.post(f"/rooms/{room}/commands", headers=auth(token), json=cmd)
    again = client.post(f"/rooms/{room}/commands", headers=auth(token), json=cmd)
    assert first.status_code == again.status_code == 200
    assert first.json() == again.json()
    assert version(rooms, room) == 2


# --- every error status ---------------------------------------------------------------


def test_room_creation_needs_the_operator_token_when_one_is_set(client: TestClient) -> None:
    assert_error(client.post("/rooms", json=layout()), 401, "unauthorized")
    assert_error(client.post("/rooms", json=layout(), headers=auth("guess")), 401)
    assert client.post("/rooms", json=layout(), headers=auth(ADMIN)).status_code == 201


def test_without_an_operator_token_rooms_are_open_but_audit_is_not_for_seats(
        rooms: RoomsApp) -> None:
    with TestClient(create_app(rooms, admin_token="")) as c:
        created = c.post("/rooms", json=layout())
        assert created.status_code == 201
        room, tokens = created.json()["room"], created.json()["seats"]
        assert c.get(f"/rooms/{room}/audit").status_code == 200
        assert_error(c.get(f"/rooms/{room}/audit", headers=auth(tokens["richese"])), 403)


def test_the_operator_sends_its_own_commands_on_the_commands_route(
        client: TestClient, rooms: RoomsApp) -> None:
    """INTERFACE "Commands": the operator's commands go to the same route with the
    operator token; a seat token cannot send them, nor the operator token a seat's (403),
    and a refused one changes nothing."""
    created = create(client)
    room, tokens = created["room"], created["seats"]
    route = f"/rooms/{room}/commands"
    before = version(rooms, room)
    assert_error(client.post(route, json={"type": "end_room"}, headers=auth(tokens["emperor"])),
                 403, "forbidden")
    assert_error(client.post(route, json={"type": "draw"}, headers=auth(ADMIN)), 403,
                 "forbidden")
    assert_error(client.post(route, json={"type": "end_room"}), 401)
    assert_error(client.post(route, json={"type": "end_room"}, headers=auth("guess")), 401)
    assert_error(client.post(route, json={"type": "end_room", "x": 1}, headers=auth(ADMIN)),
                 400, "invalid_command")
    assert version(rooms, room) == before
    ended = client.post(route, json={"type": "end_room", "command_id": "end-1"},
                        headers=auth(ADMIN))
    assert ended.status_code == 200 and ended.json()["events"][0]["type"] == "RoomEnded"
    again = client.post(route, json={"type": "end_room", "command_id": "end-1"},
                        headers=auth(ADMIN))
    assert again.json() == ended.json()
    assert_error(client.post(route, json={"type": "draw"}, headers=auth(tokens["emperor"])),
                 422, "room_ended")


def test_without_an_operator_token_its_commands_need_none(rooms: RoomsApp) -> None:
    with TestClient(create_app(rooms, admin_token="")) as c:
        created = create(c)
        room, tokens = created["room"], created["seats"]
        route = f"/rooms/{room}/commands"
        assert_error(c.post(route, json={"type": "end_room"}, headers=auth(tokens["emperor"])),
                     403, "forbidden")
        assert_error(c.post(route, json={"type": "draw"}), 401, "unauthorized")
        assert c.post(route, json={"type": "end_room"}).json()["ok"] is True


@pytest.mark.parametrize("body,what", [
    (b"{not json", "not JSON"),
    (b"", "missing"),
    (b"[1, 2]", "a JSON array"),
    (b'"draw"', "a JSON string"),
    (b'{"type": "begin_search"}', "a missing field"),
    (b'{"type": "draw", "seat": "emperor"}', "an unknown field"),
    (b'{"type": "draw", "as": "emperor"}', "an unknown field"),
    (b'{"type": "teleport"}', "an unknown type"),
    (b'{"type": "begin_search", "card": 7}', "a wrong type"),
    (b'{"type": "draw", "expected_version": -1}', "a negative version"),
    (b'{"type": "draw", "command_id": ""}', "an empty command id"),
])
def test_malformed_command_bodies_are_400_and_change_nothing(
        client: TestClient, rooms: RoomsApp, body: bytes, what: str) -> None:
    created = create(client)
    room = created["room"]
    before = rooms.load(room).state.model_dump()
    r = client.post(f"/rooms/{room}/commands", headers={
        **auth(created["seats"]["richese"]), "Content-Type": "application/json"}, content=body)
    assert_error(r, 400, "invalid_command")
    assert rooms.load(room).state.model_dump() == before and version(rooms, room) == 1


def test_unknown_fields_are_named_in_the_message(client: TestClient) -> None:
    created = create(client)
    r = client.post(f"/rooms/{created['room']}/commands",
                    headers=auth(created["seats"]["emperor"]),
                    json={"type": "draw", "seat": "richese"})
    assert "seat" in assert_error(r, 400, "invalid_command")["error"]["message"]


def test_oversized_bodies_are_400_and_change_nothing(client: TestClient,
                                                     rooms: RoomsApp) -> None:
    created = create(client)
    room, token = created["room"], created["seats"]["richese"]
    huge = b'{"type": "draw", "command_id": "' + b"x" * MAX_BODY + b'"}'
    r = client.post(f"/rooms/{room}/commands", headers=auth(token), content=huge)
    assert "at most" in assert_error(r, 400, "body_too_large")["error"]["message"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit still holds
        yield b'{"type": "draw", "command_id": "'
        for _ in range(MAX_BODY // 1024 + 2):
            yield b"y" * 1024
        yield b'"}'

    assert_error(client.post(f"/rooms/{room}/commands", headers=auth(token), content=chunks()),
                 400, "body_too_large")
    assert_error(client.post("/rooms", headers=auth(ADMIN), content=huge), 400, "body_too_large")
    assert version(rooms, room) == 1
    assert len(list(rooms.room_ids())) == 1


@pytest.mark.parametrize("body", [b"{", b"[]", b'{"seats": []}', b'{"seats": [], "color": 1}',
                                  b'{"seats": [{"faction": "richese", "hand": ["no-such"]}]}'])
def test_bad_layouts_are_400_and_create_nothing(client: TestClient, rooms: RoomsApp,
                                                body: bytes) -> None:
    r = client.post("/rooms", headers=auth(ADMIN), content=body)
    assert r.status_code == 400, r.text
    assert_error(r, 400)
    assert list(rooms.room_ids()) == []


def test_missing_or_wrong_tokens_are_401(client: TestClient) -> None:
    created = create(client)
    other = create(client)
    room = created["room"]
    bad_headers: list[dict[str, str]] = [
        {}, auth("not-a-token"), {"Authorization": f"Basic {created['seats']['richese']}"},
        {"Authorization": "Bearer "}, auth(other["seats"]["richese"]),
    ]  # the operator token on the commands route: 403 for a seat's command (above)
    for headers in bad_headers:
        assert_error(client.post(f"/rooms/{room}/commands", headers=headers,
                                 json={"type": "draw"}), 401, "unauthorized")
        assert_error(client.get(f"/rooms/{room}/view", headers=headers), 401)
        assert_error(client.get(f"/rooms/{room}/log", headers=headers), 401)
    r = client.get(f"/rooms/{room}/view")
    assert r.headers["www-authenticate"] == "Bearer"
    assert_error(client.get(f"/rooms/{room}/audit"), 401)
    assert_error(client.get(f"/rooms/{room}/audit", headers=auth("nope")), 401)


def test_a_seat_token_on_the_audit_route_is_403(client: TestClient) -> None:
    created = create(client)
    for token in created["seats"].values():
        assert_error(client.get(f"/rooms/{created['room']}/audit", headers=auth(token)),
                     403, "forbidden")


@pytest.mark.parametrize("room", ["00000000-0000-0000-0000-000000000000", "not-a-room"])
def test_unknown_rooms_are_404(client: TestClient, room: str) -> None:
    assert_error(client.post(f"/rooms/{room}/commands", headers=auth("t"),
                             json={"type": "draw"}), 404, "unknown_room")
    assert_error(client.get(f"/rooms/{room}/view", headers=auth("t")), 404, "unknown_room")
    assert_error(client.get(f"/rooms/{room}/log", headers=auth("t")), 404, "unknown_room")
    assert_error(client.get(f"/rooms/{room}/audit", headers=auth(ADMIN)), 404, "unknown_room")


def test_unknown_routes_and_methods_keep_the_error_shape(client: TestClient) -> None:
    assert_error(client.get("/nowhere"), 404, "not_found")
    assert_error(client.delete("/rooms"), 405, "method_not_allowed")


def test_conflicts_and_stale_events_are_409(client: TestClient, rooms: RoomsApp) -> None:
    created = create(client)
    room, token = created["room"], created["seats"]["richese"]
    url = f"/rooms/{room}/commands"
    assert_error(client.post(url, headers=auth(token), json={
        "type": "draw", "expected_version": 5}), 409, "conflict")
    assert_error(client.post(url, headers=auth(token), json={
        "type": "select_card", "search": "e9", "card": "shield-1"}), 409, "stale_event")
    assert version(rooms, room) == 1


def test_rule_rejections_are_422_and_change_nothing(client: TestClient, rooms: RoomsApp) -> None:
    created = create(client)
    room, tokens = created["room"], created["seats"]
    url = f"/rooms/{room}/commands"
    assert_error(client.post(url, headers=auth(tokens["emperor"]), json={
        "type": "begin_search", "card": "nullentropy-box"}), 422, "not_in_hand")
    assert client.post(url, headers=auth(tokens["richese"]), json={
        "type": "begin_search", "card": "nullentropy-box"}).status_code == 200
    at = version(rooms, room)
    body = assert_error(client.post(url, headers=auth(tokens["emperor"]), json={"type": "draw"}),
                        422, "locked")
    assert body["version"] == at == version(rooms, room)


# --- no seat reads or acts as another ----------------------------------------------------


def test_no_token_reads_or_acts_as_another_seat(client: TestClient, rooms: RoomsApp) -> None:
    created = create(client)
    room, tokens = created["room"], created["seats"]
    owner = tokens["richese"]
    assert client.post(f"/rooms/{room}/commands", headers=auth(owner), json={
        "type": "begin_search", "card": "nullentropy-box"}).status_code == 200

    for seat in SEATS:
        others_private = set().union(*(PRIVATE[s] for s in SEATS if s != seat))
        if seat != "richese":
            others_private |= BELOW_TOP  # the open search's candidates are the owner's alone
        view = client.get(f"/rooms/{room}/view", headers=auth(tokens[seat]))
        log = client.get(f"/rooms/{room}/log", headers=auth(tokens[seat]))
        refused = client.post(f"/rooms/{room}/commands", headers=auth(tokens[seat]),
                              json={"type": "discard", "card": "karama-1"})
        for response in (view, log, refused):
            leaked = {card for card in others_private if card in response.text}
            assert not leaked, (seat, response.request.url.path, leaked)
        body = view.json()
        assert body["seat"] == seat and body["me"]["faction"] == seat
        assert all(set(s) <= {"faction", "hand_count", "ally", "autopilot"}
                   for s in body["seats"])
        assert {s["faction"] for s in body["seats"]} == set(SEATS) - {seat}

    # Each token acts as its own seat only: its set_autopilot lands on its seat.
    for seat in SEATS:
        r = client.post(f"/rooms/{room}/commands", headers=auth(tokens[seat]),
                        json={"type": "set_autopilot", "enabled": True, "profile": "easy"})
        assert r.status_code == 200, r.text
        assert [e.get("seat") for e in r.json()["events"]] == [seat]
        state = rooms.load(room).state
        assert {s.faction for s in state.seats if s.autopilot} == set(
            SEATS[: SEATS.index(seat) + 1])


# --- fuzz: nothing the client sends makes a 500 ------------------------------------------


def json_values() -> st.SearchStrategy[Any]:
    names = st.sampled_from(["nullentropy-box", "shield-1", "e3", "richese", "pass",
                             "karama-1"])
    scalars = (st.none() | st.booleans() | st.integers(-10, 10**12)
               | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20)
               | names)
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6)


@pytest.fixture
def fuzz_room(tmp_path: Path) -> Iterator[tuple[TestClient, RoomsApp, dict[str, Any]]]:
    app = open_rooms("memory://")
    with TestClient(create_app(app, admin_token=ADMIN), raise_server_exceptions=False) as c:
        created = c.post("/rooms", json=layout(), headers=auth(ADMIN)).json()
        yield c, app, created
    app.close()


def command_variants(client: TestClient) -> list[dict[str, Any]]:
    spec = client.get("/openapi.json").json()
    body = spec["paths"]["/rooms/{room}/commands"]["post"]["requestBody"]
    schemas = spec["components"]["schemas"]
    named = body["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    return [schemas[v["$ref"].rsplit("/", 1)[-1]] for v in schemas[named]["oneOf"]]


def test_fuzzed_commands_from_the_openapi_schema_never_get_a_500(
        fuzz_room: tuple[TestClient, RoomsApp, dict[str, Any]]) -> None:
    client, app, created = fuzz_room
    variants = command_variants(client)
    room, tokens = created["room"], created["seats"]

    def field_value(prop: dict[str, Any]) -> st.SearchStrategy[Any]:
        options = [json_values()]
        if "const" in prop:
            options.append(st.just(prop["const"]))
        for choice in prop.get("anyOf", []) + [prop]:
            if "enum" in choice:
                options.append(st.sampled_from(choice["enum"]))
        return st.one_of(*options)

    @st.composite
    def commands(draw: st.DrawFn) -> Any:
        variant = draw(st.sampled_from(variants))
        props = variant["properties"]
        names = draw(st.lists(st.sampled_from(sorted(props)), unique=True))
        body = {n: draw(field_value(props[n])) for n in names}
        body["type"] = draw(st.one_of(st.just(props["type"]["const"]), json_values()))
        if draw(st.booleans()):
            body[draw(st.text(max_size=6))] = draw(json_values())
        return body if draw(st.integers(0, 9)) else draw(json_values())

    @settings(max_examples=200, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture,
                                     HealthCheck.too_slow])
    @given(seat=st.sampled_from(SEATS), body=commands())
    def run(seat: str, body: Any) -> None:
        r = client.post(f"/rooms/{room}/commands", headers=auth(tokens[seat]), json=body)
        # The operator's commands are in the schema too: a seat token sending one is 403.
        operators = isinstance(body, dict) and body.get("type") in ("deal", "open_bidding",
                                                                     "end_room")
        assert r.status_code in (200, 400, 409, 422, *((403,) if operators else ())), (
            body, r.text)
        result = r.json()
        assert result["ok"] is (r.status_code == 200)

    run()
    assert audit_room(app, room)["ok"]


def test_fuzzed_raw_requests_never_get_a_500(
        fuzz_room: tuple[TestClient, RoomsApp, dict[str, Any]]) -> None:
    client, _, created = fuzz_room
    room, token = created["room"], created["seats"]["richese"]

    @settings(max_examples=200, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(path=st.sampled_from([f"/rooms/{room}/commands", "/rooms", f"/rooms/{room}/view",
                                 f"/rooms/{room}/log", f"/rooms/{room}/audit",
                                 "/rooms/%00/view", f"/rooms/{room}x/commands"]),
           method=st.sampled_from(["GET", "POST", "PUT"]),
           body=st.binary(max_size=200),
           header=st.sampled_from([None, f"Bearer {token}", f"Bearer {ADMIN}", "Bearer",
                                   "bearer  x", "Basic abc"]))
    def run(path: str, method: str, body: bytes, header: str | None) -> None:
        headers = {"Authorization": header} if header is not None else {}
        r = client.request(method, path, content=body, headers=headers)
        assert r.status_code < 500, (method, path, body, r.text)
        if r.status_code >= 400:
            assert r.json()["ok"] is False

    run()


# --- the real server ----------------------------------------------------------------------


def test_dune_ledger_serve_on_postgres(pg_url: str, tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "DUNE_LEDGER_ADMIN_TOKEN": ADMIN}
    with (tmp_path / "serve.log").open("wb") as log:  # read by no one: a pipe could fill
        server = subprocess.Popen(
            [sys.executable, "-m", "dune_ledger", "--db", pg_url, "serve",
             "--host", "127.0.0.1", "--port", str(port)],
            env=env, stdout=subprocess.DEVNULL, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        answering(base, server)
        # On a loaded machine a request may take longer than httpx's 5 s default.
        with httpx.Client(base_url=base, timeout=HANG) as client:
            created = client.post("/rooms", json=layout(), headers=auth(ADMIN))
            assert created.status_code == 201
            room, tokens = created.json()["room"], created.json()["seats"]
            r = client.post(f"/rooms/{room}/commands", headers=auth(tokens["richese"]),
                            json={"type": "begin_search", "card": "nullentropy-box"})
            assert r.status_code == 200 and r.json()["version"] == 3
            assert client.get(f"/rooms/{room}/audit", headers=auth(ADMIN)).json()["ok"]
    finally:
        server.terminate()
        server.wait(timeout=HANG)
    assert b"Traceback" not in (tmp_path / "serve.log").read_bytes()
    app = open_rooms(pg_url)  # what the server wrote is in PostgreSQL
    try:
        assert app.load(room).state.search is not None
    finally:
        app.close()


def test_a_storage_that_cannot_write_is_503_not_500(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    monkeypatch.setenv("DUNE_LEDGER_SQLITE_LOCK_TIMEOUT", "1")
    path = tmp_path / "locked.db"
    app = open_rooms(f"sqlite:///{path}")
    try:
        with TestClient(create_app(app, admin_token=ADMIN)) as client:
            created = create(client)
            room, token = created["room"], created["seats"]["emperor"]
            client.get(f"/rooms/{room}/view", headers=auth(token))
            other = sqlite3.connect(path, isolation_level=None)
            other.execute("BEGIN EXCLUSIVE")  # another process holds the write lock
            try:
                r = client.post(f"/rooms/{room}/commands", headers=auth(token),
                                json={"type": "draw", "command_id": "d1"})
            finally:
                other.execute("ROLLBACK")
                other.close()
            assert_error(r, 503, "unavailable")
            assert r.headers["retry-after"] == "1"
            assert version(app, room) == 1
            again = client.post(f"/rooms/{room}/commands", headers=auth(token),
                                json={"type": "draw", "command_id": "d1"})
            assert again.status_code == 200 and version(app, room) == 2
    finally:
        app.close()


@pytest.mark.parametrize("argv", [["serve", "--port", "0"], ["serve", "--workers", "0"],
                                  ["--db", "bogus://x", "serve"],
                                  ["--db", "memory://", "serve", "--workers", "2"]])
def test_serve_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from dune_ledger.infrastructure.cli import main

    assert main(argv) == 2
    assert capsys.readouterr().err.strip()


def test_a_bidding_round_over_http(client: TestClient, rooms: RoomsApp) -> None:
    """RULES 10 through the commands route: the operator opens, seats bid and pass,
    a refusal is a 422 that changes nothing; the views show the round."""
    created = create(client, {**layout(), "phase": 4, "seats": [
        {"faction": "atreides", "spice": 5, "hand": []},
        {"faction": "emperor", "spice": 5, "hand": ["karama-1"]}]})
    room, tokens = created["room"], created["seats"]
    route = f"/rooms/{room}/commands"
    assert_error(client.post(route, json={"type": "open_bidding", "order": ["emperor"]},
                             headers=auth(ADMIN)), 400, "invalid_command")
    assert_error(client.post(route, json={"type": "open_bidding",
                                          "order": ["emperor", "atreides"]},
                             headers=auth(tokens["emperor"])), 403, "forbidden")
    opened = client.post(route, json={"type": "open_bidding", "order": ["emperor", "atreides"]},
                         headers=auth(ADMIN))
    assert opened.status_code == 200, opened.text
    before = version(rooms, room)
    assert_error(client.post(route, json={"type": "bid", "amount": 6},
                             headers=auth(tokens["emperor"])), 422, "insufficient_spice")
    assert_error(client.post(route, json={"type": "bid", "amount": 1},
                             headers=auth(tokens["atreides"])), 422, "not_your_turn")
    assert version(rooms, room) == before
    view = client.get(f"/rooms/{room}/view", headers=auth(tokens["emperor"])).json()
    bid = next(a for a in view["actions"] if a["type"] == "bid" and "karama" not in a)
    assert bid["free"]["amount"] == {"kind": "amount", "min": 1, "max": 5}
    assert client.post(route, json={"type": "bid", "amount": 2},
                       headers=auth(tokens["emperor"])).status_code == 200
    seen = client.get(f"/rooms/{room}/view", headers=auth(tokens["atreides"])).json()
    assert seen["bidding"]["up"]["card"]["id"] == rooms.load(room).state.bidding.round.auction[0]
    sold = client.post(route, json={"type": "pass_bid"}, headers=auth(tokens["atreides"]))
    assert [e["type"] for e in sold.json()["events"]][:2] == ["BidPassed", "CardSold"]
