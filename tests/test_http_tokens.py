"""Tokens at the HTTP edge (issue 24, INTERFACE "HTTP"): wrong tokens are counted on
every route that takes one, /metrics included; a client's wrong tokens never lock a
correct seat token out; guessing the operator token stays limited; a seat token on an
operator route is 403."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from application.rooms import RoomsApp
from infrastructure.http import WRONG_LIMIT, create_app
from infrastructure.storage import open_rooms
from tests.test_http import ADMIN, assert_error, auth, create

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


def test_a_missing_token_is_401_and_not_counted(api: FastAPI) -> None:
    with at(api, SITE) as site:
        for _ in range(WRONG_LIMIT + 5):
            assert_error(site.get("/metrics"), 401, "unauthorized")
        assert site.get("/metrics", headers=auth(ADMIN)).status_code == 200
