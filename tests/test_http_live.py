"""The live-table routes: ETag, log after, public view, room list, token reissue, typed
OpenAPI, strict bodies, CORS, 429, readiness, keys, metrics, and `serve`'s refusals."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from fastapi.testclient import TestClient

from dune_ledger.application.rooms import RoomsApp
from dune_ledger.infrastructure import http_errors, settings
from dune_ledger.infrastructure.http import create_app
from dune_ledger.infrastructure.http_auth import WRONG_LIMIT
from tests.support import ADMIN, assert_error, auth, authenticate, create

BOX = "nullentropy-box"


@pytest.fixture
def client(rooms: RoomsApp) -> Iterator[TestClient]:
    with TestClient(create_app(rooms, admin_token=ADMIN)) as c:
        yield c


@pytest.fixture
def rooms(tmp_path: Path) -> Iterator[RoomsApp]:
    from dune_ledger.infrastructure.storage import open_rooms

    app = open_rooms(f"sqlite:///{tmp_path / 'live.db'}")
    yield app
    app.close()


def test_the_view_carries_its_version_as_etag_and_answers_304(client: TestClient) -> None:
    room = create(client)
    url, token = f"/rooms/{room['room']}/view", room["seats"]["emperor"]
    first = client.get(url, headers=auth(token))
    assert first.status_code == 200 and first.headers["etag"] == '"1"'
    assert "actions" in first.json()
    same = client.get(url, headers={**auth(token), "If-None-Match": '"1"'})
    assert same.status_code == 304 and same.headers["etag"] == '"1"' and not same.content
    client.post(f"/rooms/{room['room']}/commands", headers=auth(token), json={"type": "draw"})
    moved = client.get(url, headers={**auth(token), "If-None-Match": '"1"'})
    assert moved.status_code == 200 and moved.headers["etag"] != '"1"'


def test_the_log_after_a_seq_gives_only_the_later_entries(client: TestClient) -> None:
    room = create(client)
    token = room["seats"]["emperor"]
    for _ in range(3):
        client.post(f"/rooms/{room['room']}/commands", headers=auth(token), json={"type": "draw"})
    whole = client.get(f"/rooms/{room['room']}/log", headers=auth(token)).json()
    later = client.get(f"/rooms/{room['room']}/log?after=2", headers=auth(token)).json()
    assert len(whole) >= 4 and later == whole[2:]
    assert client.get(f"/rooms/{room['room']}/log?after={whole[-1]['seq']}",
                      headers=auth(token)).json() == []
    assert_error(client.get(f"/rooms/{room['room']}/log?after=-1", headers=auth(token)),
                 400, "invalid_command")


def test_the_spectator_token_reads_the_public_view_and_nothing_else(client: TestClient) -> None:
    room = create(client)
    rid, spectator = room["room"], room["spectator"]
    public = client.get(f"/rooms/{rid}/public", headers=auth(spectator))
    assert public.status_code == 200
    view = public.json()
    assert "me" not in view and "actions" not in view and view["version"] == 1
    seat_public = client.get(f"/rooms/{rid}/public", headers=auth(room["seats"]["richese"]))
    assert seat_public.json() == view
    assert_error(client.get(f"/rooms/{rid}/view", headers=auth(spectator)), 401)
    assert_error(client.post(f"/rooms/{rid}/commands", headers=auth(spectator),
                             json={"type": "draw"}), 401)
    # The spectator page (/watch) reads the public log too, the same as a seat's.
    log = client.get(f"/rooms/{rid}/log", headers=auth(spectator))
    assert log.status_code == 200
    assert log.json() == client.get(f"/rooms/{rid}/log",
                                    headers=auth(room["seats"]["richese"])).json()
    other = create(client)
    assert_error(client.get(f"/rooms/{other['room']}/public", headers=auth(spectator)), 401)


def test_the_operator_lists_the_rooms(client: TestClient) -> None:
    room = create(client)
    token = room["seats"]["emperor"]
    client.post(f"/rooms/{room['room']}/commands", headers=auth(token), json={"type": "draw"})
    listed = client.get("/rooms", headers=auth(ADMIN))
    assert listed.status_code == 200
    (entry,) = [r for r in listed.json() if r["room"] == room["room"]]
    assert entry["seats"] == ["richese", "emperor", "harkonnen"] and entry["version"] >= 2
    assert entry["created"] and entry["last_command"]["seat"] == "emperor"
    assert entry["last_command"]["text"] == "Emperor drew a card"
    # A new seat token is no command: the last command stays what it was.
    reissued = client.post(f"/rooms/{room['room']}/seats/richese/token", headers=auth(ADMIN))
    assert reissued.status_code == 201
    (after,) = [r for r in client.get("/rooms", headers=auth(ADMIN)).json()
                if r["room"] == room["room"]]
    assert after["version"] == entry["version"] + 1
    assert after["last_command"] == entry["last_command"]
    assert_error(client.get("/rooms"), 401)
    assert_error(client.get("/rooms", headers=auth(token)), 401)


def test_a_reissued_token_replaces_the_old_and_no_event_holds_it(client: TestClient,
                                                                 rooms: RoomsApp) -> None:
    room = create(client)
    rid, old = room["room"], room["seats"]["emperor"]
    assert_error(client.post(f"/rooms/{rid}/seats/emperor/token", headers=auth(old)), 403)
    r = client.post(f"/rooms/{rid}/seats/emperor/token", headers=auth(ADMIN))
    assert r.status_code == 201, r.text
    new = r.json()["token"]
    assert new != old and r.json()["seat"] == "emperor"
    assert_error(client.get(f"/rooms/{rid}/view", headers=auth(old)), 401)
    assert client.get(f"/rooms/{rid}/view", headers=auth(new)).json()["seat"] == "emperor"
    # Spelled another way, the room is the same room: the old token is refused there too.
    assert_error(client.get(f"/rooms/{rid.upper()}/view", headers=auth(old)), 401)
    records = rooms.records(rooms.load(rid).id)
    assert records[-1].type == "SeatTokenReissued"
    assert new.encode() not in b"".join(rec.body() for rec in records)
    log = client.get(f"/rooms/{rid}/log", headers=auth(new)).json()
    assert log[-1]["type"] == "SeatTokenReissued" and "token_hash" not in log[-1]
    assert_error(client.post(f"/rooms/{rid}/seats/fremen/token", headers=auth(ADMIN)), 404)
    # A reload (a restart) knows the new token only.
    rooms.kept.take(rid)
    assert authenticate(rooms, rid, new) == "emperor" and authenticate(rooms, rid, old) is None


def test_openapi_is_typed_with_error_codes_security_and_examples(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    assert {"/rooms/{room}/public", "/rooms/{room}/stream", "/readyz", "/keys",
            "/rooms/{room}/seats/{faction}/token"} <= set(paths)
    schemas = spec["components"]["schemas"]
    codes = schemas["ErrorCode"]["enum"]
    assert {"invalid_command", "locked", "unauthorized", "too_many_attempts"} <= set(codes)
    for path, methods in paths.items():
        for method, op in methods.items():
            ok = op["responses"].get("200") or op["responses"].get("201")
            media = "text/event-stream" if path.endswith("/stream") else \
                "application/x-ndjson" if path.endswith("/transcript") else "application/json"
            assert ok and ok["content"][media].get("schema") != {}, (path, method)
            if path not in ("/healthz", "/readyz", "/keys"):
                assert op.get("security"), (path, method)
                assert op["responses"]["401"]["content"]["application/json"]["schema"]
    assert paths["/rooms/{room}/view"]["get"]["security"] == [{"seatToken": []}]
    assert set(spec["components"]["securitySchemes"]) >= {"seatToken", "operatorToken"}
    for path in ("/rooms", "/rooms/{room}/commands"):
        content = paths[path]["post"]["requestBody"]["content"]["application/json"]
        assert content["examples"] and content["schema"] != {"type": "object"}
    layout_ref = paths["/rooms"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert "seats" in layout_ref.get("properties", {})


def test_malformed_bodies_are_400_even_with_a_repeated_key(client: TestClient) -> None:
    room = create(client)
    url, token = f"/rooms/{room['room']}/commands", room["seats"]["emperor"]
    headers = {**auth(token), "Content-Type": "application/json"}
    for raw in (b'{"type": "draw", "type": "draw"}', b"{nope", b'{"type": "draw", "x": 1}',
                b'{"type": "discard"}', b"\xff\xfe"):
        assert_error(client.post(url, content=raw, headers=headers), 400, "invalid_command")
    assert_error(client.post("/rooms", content=b'{"seats": [], "seats": []}',
                             headers={**auth(ADMIN), "Content-Type": "application/json"}), 400)


def test_cors_only_from_the_configured_origins(rooms: RoomsApp,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    preflight = {"Origin": "https://table.example", "Access-Control-Request-Method": "GET",
                 "Access-Control-Request-Headers": "authorization"}
    with TestClient(create_app(rooms, admin_token=ADMIN)) as off:
        r = off.options("/rooms/x/view", headers=preflight)
        assert "access-control-allow-origin" not in r.headers
    monkeypatch.setenv("DUNE_LEDGER_CORS_ORIGINS", "https://table.example")
    settings.current.cache_clear()  # read anew, as a process started now would
    with TestClient(create_app(rooms, admin_token=ADMIN)) as on:
        r = on.options("/rooms/x/view", headers=preflight)
        assert r.status_code == 200
        assert r.headers["access-control-allow-origin"] == "https://table.example"
        other = on.options("/rooms/x/view", headers={**preflight, "Origin": "https://evil"})
        assert other.headers.get("access-control-allow-origin") != "https://evil"


def test_repeated_wrong_tokens_get_429(client: TestClient) -> None:
    room = create(client)
    url = f"/rooms/{room['room']}/view"
    for _ in range(WRONG_LIMIT - 1):
        assert_error(client.get(url, headers=auth("wrong")), 401)
    blocked = client.get(url, headers=auth("wrong"))
    assert_error(blocked, 429, "too_many_attempts")
    assert int(blocked.headers["retry-after"]) > 0
    # A correct token from the same client is never refused for the wrong ones.
    assert client.get(url, headers=auth(room["seats"]["emperor"])).status_code == 200


def test_readiness_keys_and_metrics(client: TestClient, rooms: RoomsApp,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    assert client.get("/readyz").json() == {"ok": True}

    def stuck() -> int:
        time.sleep(3)
        return 0

    monkeypatch.setattr(rooms.recorder, "max_notification_id", stuck)
    assert_error(client.get("/readyz"), 503, "unavailable")  # answered before the store
    keys = client.get("/keys")  # the key the app signs with, as `keys show` prints it
    from dune_ledger.infrastructure.keys import b64, raw_public

    assert keys.status_code == 200
    assert keys.json()["public_key"] == b64(raw_public(rooms.signer.public[0]))  # type: ignore[attr-defined]
    assert_error(client.get("/metrics"), 401)
    metrics = client.get("/metrics", headers=auth(ADMIN))
    assert metrics.status_code == 200 and b"python_info" in metrics.content


def test_a_read_does_not_wait_for_a_long_catch_up(rooms: RoomsApp, client: TestClient) -> None:
    room = create(client)
    token = room["seats"]["emperor"]
    models = rooms.read_models
    assert models is not None
    # Another thread holds the read models (a rebuild, a long log): the read folds its own
    # room instead, and still sees its own write.
    client.post(f"/rooms/{room['room']}/commands", headers=auth(token), json={"type": "draw"})
    held, release = threading.Event(), threading.Event()
    waited_out: list[bool] = []

    def hold() -> None:
        with models.lock:
            held.set()
            # Released only once the read has answered: a read that waited for the
            # lock would have answered only after this wait ran out.
            waited_out.append(not release.wait(10))

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(5)
    try:
        view = client.get(f"/rooms/{room['room']}/view", headers=auth(token)).json()
    finally:
        release.set()
        holder.join()
    assert waited_out == [False]
    assert view["version"] == rooms.load(room["room"]).version
    assert len(view["me"]["hand"]) == 2  # the Karama of the layout and the card drawn


@pytest.mark.parametrize("host", ["256.1.1.1", "0.0.0.0", "no-such-host.invalid"])
def test_serve_refuses_a_bad_or_open_host_with_exit_2(host: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DUNE_LEDGER_ADMIN_TOKEN", raising=False)
    run = subprocess.run([sys.executable, "-m", "dune_ledger", "--db",
                          f"sqlite:///{tmp_path / 'x.db'}", "serve", "--host", host],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr


def test_serve_with_the_store_down_says_so_in_one_line_and_exits_2() -> None:
    run = subprocess.run([sys.executable, "-m", "dune_ledger", "--db",
                          "postgresql://postgres@127.0.0.1:1/nothing", "serve"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "PostgreSQL" in lines[0] and "Traceback" not in run.stderr


def test_http_failures_name_an_error_code_of_the_enum() -> None:
    from dune_ledger.infrastructure.http_models import ErrorCode

    assert set(http_errors.STATUS) <= {c.value for c in ErrorCode}
    assert orjson.loads(http_errors.failure("locked", "x").body)["error"]["code"] == "locked"
