"""Tokens at the HTTP edge (issue 24, INTERFACE "HTTP"): wrong tokens are counted on
every route that takes one, /metrics included; a client's wrong tokens never lock a
correct seat token out; guessing the operator token stays limited; a seat token on an
operator route is 403; open streams are bounded per token and per client address."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from dune_ledger.application.rooms import RoomsApp
from dune_ledger.infrastructure.http import create_app
from dune_ledger.infrastructure.http_auth import WRONG_LIMIT
from dune_ledger.infrastructure.http_stream import STREAMS_PER_TOKEN
from dune_ledger.infrastructure.storage import open_rooms
from tests.support import ADMIN, Server, assert_error, auth, create, events, layout

SITE = ("192.0.2.7", 40000)  # a game site's backend: every seat's calls come from it
OTHER = ("192.0.2.8", 40000)


@pytest.fixture
def rooms(tmp_path: Path) -> Iterator[RoomsApp]:
    app = open_rooms(f"sqlite:///{tmp_path / 'tokens.db'}")
    yield app
    app.close()


@pytest.fixture
def api(rooms: RoomsApp) -> FastAPI:
    return create_app(rooms, admin_token=ADMIN)


def at(api: FastAPI, address: tuple[str, int]) -> TestClient:
    return TestClient(api, client=address)


def test_one_players_wrong_tokens_never_lock_the_other_seats_out(api: FastAPI) -> None:
    with at(api, SITE) as site, at(api, OTHER) as other:
        room = create(site)
        rid, seats = room["room"], room["seats"]
        for _ in range(WRONG_LIMIT * 2):
            site.get(f"/rooms/{rid}/view", headers=auth("a-guess"))
        assert_error(site.get(f"/rooms/{rid}/log", headers=auth("a-guess")), 429,
                     "too_many_attempts")
        # Every correct token behind the same address keeps working, on every route.
        for seat, token in seats.items():
            view = site.get(f"/rooms/{rid}/view", headers=auth(token))
            assert view.status_code == 200 and view.json()["seat"] == seat
        assert site.post(f"/rooms/{rid}/commands", headers=auth(seats["emperor"]),
                         json={"type": "draw"}).json()["ok"]
        assert site.get(f"/rooms/{rid}/public", headers=auth(room["spectator"])) \
            .status_code == 200
        assert site.get(f"/rooms/{rid}/stream", headers=auth("a-guess")).status_code == 429
        # The operator behind that address too: seat-route guesses are another scope.
        assert site.get("/rooms", headers=auth(ADMIN)).status_code == 200
        assert site.get("/metrics", headers=auth(ADMIN)).status_code == 200
        # Another room's wrong tokens, and another address, are counted apart.
        second = create(site)["room"]
        assert_error(site.get(f"/rooms/{second}/view", headers=auth("a-guess")), 401)
        assert_error(other.get(f"/rooms/{rid}/view", headers=auth("a-guess")), 401)


@pytest.mark.parametrize("route", ["/metrics", "/rooms"])
def test_guessing_the_operator_token_is_limited_on_every_operator_route(
        api: FastAPI, route: str) -> None:
    with at(api, SITE) as site, at(api, OTHER) as other:
        room = create(other)
        for i in range(WRONG_LIMIT - 1):
            assert_error(site.get(route, headers=auth(f"guess-{i}")), 401, "unauthorized")
        blocked = site.get(route, headers=auth("guess-last"))
        assert_error(blocked, 429, "too_many_attempts")
        assert int(blocked.headers["retry-after"]) > 0
        # Over the limit the token is not even compared: the right guess gets 429 too,
        # so an answer never tells a guesser it was right.
        for path in ("/metrics", "/rooms", f"/rooms/{room['room']}/audit"):
            assert_error(site.get(path, headers=auth(ADMIN)), 429, "too_many_attempts")
        assert_error(site.post("/rooms", headers=auth(ADMIN), json={}), 429)
        # The seats behind that address are not locked out by it.
        token = room["seats"]["richese"]
        assert site.get(f"/rooms/{room['room']}/view", headers=auth(token)).status_code == 200
        assert other.get("/metrics", headers=auth(ADMIN)).status_code == 200


def test_guessing_the_operator_token_on_a_transcript_or_an_unknown_room_is_limited(
        api: FastAPI) -> None:
    """The transcript takes a token of the room or the operator's: any other is a guess at
    the operator token, counted as on the operator routes; so is a guess on a room the
    server does not know."""
    with at(api, SITE) as site:
        room = create(site)["room"]
        unknown = "00000000-0000-4000-8000-000000000000"
        for i in range(WRONG_LIMIT - 1):
            path = f"/rooms/{room}/transcript" if i % 2 else f"/rooms/{unknown}/audit"
            assert_error(site.get(path, headers=auth(f"guess-{i}")), 401, "unauthorized")
        assert_error(site.get(f"/rooms/{room}/transcript", headers=auth("guess-last")), 429,
                     "too_many_attempts")
        assert_error(site.get(f"/rooms/{room}/transcript", headers=auth(ADMIN)), 429,
                     "too_many_attempts")


def test_a_missing_token_is_401_and_not_counted(api: FastAPI) -> None:
    with at(api, SITE) as site:
        for _ in range(WRONG_LIMIT + 5):
            assert_error(site.get("/metrics"), 401, "unauthorized")
        assert site.get("/metrics", headers=auth(ADMIN)).status_code == 200


# --- open streams (issue 24 item 12) -------------------------------------------------


READING: list[Iterator[str]] = []  # a dropped line iterator would close its stream


def open_stream(stack: ExitStack, client: httpx.Client, url: str, token: str) -> httpx.Response:
    response = stack.enter_context(client.stream("GET", url, headers=auth(token)))
    if response.status_code == 200:
        lines = response.iter_lines()
        stack.callback(READING.remove, lines)
        READING.append(lines)
        assert events(lines, 1)[0]["event"] == "view"
    else:
        response.read()
    return response


def test_a_token_holds_at_most_8_open_streams(tmp_path: Path) -> None:
    with Server(f"sqlite:///{tmp_path / 'streams.db'}") as server, \
            httpx.Client(timeout=20) as client:
        room = httpx.post(f"{server.base}/rooms", json=layout(), headers=auth(ADMIN)).json()
        url = f"{server.base}/rooms/{room['room']}/stream"
        token = room["seats"]["emperor"]
        with ExitStack() as stack:
            for _ in range(STREAMS_PER_TOKEN):
                assert open_stream(stack, client, url, token).status_code == 200
            ninth = open_stream(stack, client, url, token)
            assert_error(ninth, 429, "too_many_streams")
            assert ninth.headers["retry-after"]
            # Another seat's token is not held back by it.
            assert open_stream(stack, client, url, room["seats"]["richese"]).status_code == 200
        # Closed streams give their places back.
        for _ in range(50):
            with ExitStack() as stack:
                if open_stream(stack, client, url, token).status_code == 200:
                    break
            time.sleep(0.05)
        else:
            raise AssertionError("a closed stream's place was never given back")


def test_the_operator_bounds_open_streams_per_client_address(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUNE_LEDGER_STREAMS_PER_CLIENT", "2")
    with Server(f"sqlite:///{tmp_path / 'clients.db'}") as server, \
            httpx.Client(timeout=20) as client:
        room = httpx.post(f"{server.base}/rooms", json=layout(), headers=auth(ADMIN)).json()
        url = f"{server.base}/rooms/{room['room']}/stream"
        seats = room["seats"]
        with ExitStack() as stack:
            assert open_stream(stack, client, url, seats["richese"]).status_code == 200
            assert open_stream(stack, client, url, seats["emperor"]).status_code == 200
            assert_error(open_stream(stack, client, url, seats["harkonnen"]), 429,
                         "too_many_streams")
            # Reads and commands are not streams: they go on.
            assert httpx.get(f"{server.base}/rooms/{room['room']}/view",
                             headers=auth(seats["harkonnen"])).status_code == 200


@pytest.mark.parametrize("raw", ["0", "-1", "many", "2.5"])
def test_a_bad_streams_per_client_setting_stops_serve_at_start(raw: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dune_ledger", "--db", "memory://", "serve",
         "--port", "8799"], env={**os.environ, "DUNE_LEDGER_STREAMS_PER_CLIENT": raw},
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "DUNE_LEDGER_STREAMS_PER_CLIENT must be a whole number" in done.stderr
    assert "Traceback" not in done.stderr


# --- a seat token on an operator route (issue 24 item 13) -----------------------------


def test_a_seat_or_spectator_token_on_an_operator_route_is_403(
        api: FastAPI, rooms: RoomsApp) -> None:
    with at(api, SITE) as site:
        room = create(site)
        rid = room["room"]
        assert rooms.read_models is not None
        rooms.read_models.catch_up()
        valid = [*room["seats"].values(), room["spectator"]]
        for _ in range(2):  # never counted as wrong: no 429 however often
            for token in valid:
                for response in (site.get("/rooms", headers=auth(token)),
                                 site.post("/rooms", headers=auth(token), json=layout()),
                                 site.get("/metrics", headers=auth(token)),
                                 site.get(f"/rooms/{rid}/audit", headers=auth(token))):
                    assert_error(response, 403, "forbidden")
        assert len(rooms.room_summaries()) == 1  # no room was made by a seat token
        assert_error(site.get("/rooms", headers=auth("not-a-token")), 401, "unauthorized")
        # A reissued token is no seat token any more: 401, as a wrong one.
        old = room["seats"]["emperor"]
        assert site.post(f"/rooms/{rid}/seats/emperor/token",
                         headers=auth(ADMIN)).status_code == 201
        assert_error(site.get("/metrics", headers=auth(old)), 401, "unauthorized")


def test_without_an_operator_token_the_operator_routes_are_open_to_no_token_only(
        rooms: RoomsApp) -> None:
    """docs/http.md: with DUNE_LEDGER_ADMIN_TOKEN unset (loopback only), a request with
    no token passes the operator routes; a seat token on them is still 403."""
    with TestClient(create_app(rooms, admin_token=""), client=SITE) as open_site:
        created = open_site.post("/rooms", json=layout())
        assert created.status_code == 201
        room = created.json()
        rooms.read_models.catch_up()  # type: ignore[union-attr]
        assert open_site.get("/rooms").status_code == 200
        assert open_site.get("/metrics").status_code == 200
        seat = room["seats"]["richese"]
        for response in (open_site.get("/rooms", headers=auth(seat)),
                         open_site.get("/metrics", headers=auth(seat)),
                         open_site.get(f"/rooms/{room['room']}/audit", headers=auth(seat))):
            assert_error(response, 403, "forbidden")
