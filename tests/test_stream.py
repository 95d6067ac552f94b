"""`GET /rooms/{room}/stream`: the seat's view pushed on every change, resumable, on a real
uvicorn server (SQLite polls, PostgreSQL wakes on NOTIFY)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import orjson
import pytest

from dune_ledger.infrastructure.observability import AccessLogRedaction, redact_url
from tests.support import ADMIN, Server, auth, events, layout

BOX = "nullentropy-box"


@pytest.fixture(params=["sqlite", "postgresql"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'stream.db'}"
    else:
        url = request.getfixturevalue("pg_url")
    with Server(url) as running:
        yield running


def create(base: str) -> dict[str, Any]:
    r = httpx.post(f"{base}/rooms", json=layout(), headers=auth(ADMIN), timeout=30)
    assert r.status_code == 201, r.text
    return r.json()


def test_the_stream_sends_the_view_then_every_change_and_resumes(server: Server) -> None:
    room = create(server.base)
    rid, richese = room["room"], room["seats"]["richese"]
    url = f"{server.base}/rooms/{rid}/stream"
    with httpx.Client(timeout=20) as client, \
            client.stream("GET", url, headers=auth(richese)) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.iter_lines()
        first = events(lines, 1)[0]
        assert first["event"] == "view" and first["id"] == "1"
        view = orjson.loads(first["data"])
        assert view["seat"] == "richese" and view["version"] == 1
        metrics = httpx.get(f"{server.base}/metrics", headers=auth(ADMIN), timeout=20).text
        gauge = next(line for line in metrics.splitlines()
                     if line.startswith("dune_ledger_open_streams "))
        assert float(gauge.split()[1]) >= 1  # this stream, open now
        r = httpx.post(f"{server.base}/rooms/{rid}/commands", headers=auth(richese),
                       json={"type": "begin_search", "card": BOX})
        assert r.json()["ok"], r.text
        pushed = events(lines, 1)[0]
        version = r.json()["version"]
        assert pushed["id"] == str(version)
        search = orjson.loads(pushed["data"])["nullentropy"]["search"]
        assert search is not None and search["cards"]  # the owner's candidates, pushed
    # Resuming at the version seen: nothing is sent again until the next change.
    emperor = room["seats"]["emperor"]
    with httpx.Client(timeout=20) as client, \
            client.stream("GET", f"{url}?token={emperor}",
                          headers={"Last-Event-ID": str(version)}) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        r = httpx.post(f"{server.base}/rooms/{rid}/commands", headers=auth(richese),
                       json={"type": "select_card", "search": search["event"],
                             "card": search["cards"][0]["id"]})
        assert r.json()["ok"], r.text
        resumed = events(lines, 1)[0]
        assert int(resumed["id"]) == r.json()["version"] > version
        seen = orjson.loads(resumed["data"])
        assert seen["seat"] == "emperor" and seen["nullentropy"] is None


def test_the_stream_needs_a_seat_token_of_the_room(server: Server) -> None:
    room = create(server.base)
    other = create(server.base)
    url = f"{server.base}/rooms/{room['room']}/stream"
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers=auth(other["seats"]["richese"])).status_code == 401
    assert httpx.get(f"{url}?token=nope").status_code == 401
    assert httpx.get(f"{server.base}/rooms/not-a-room/stream",
                     headers=auth("x")).status_code == 404


def test_the_access_log_never_shows_a_query_token() -> None:
    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1,
                               '%s - "%s %s HTTP/%s" %d',
                               ("127.0.0.1:5", "GET", "/rooms/r/stream?token=s3cret&x=1",
                                "1.1", 200), None)
    assert AccessLogRedaction().filter(record)
    assert "s3cret" not in record.getMessage()
    assert "token=[redacted]&x=1" in record.getMessage()


@pytest.mark.parametrize("name", ["token", "%74oken", "%74%6F%6B%65%6E", "TOKEN", "Token",
                                  "%2574oken", "tok%65n", "seat_token"])
def test_a_token_parameter_is_redacted_however_its_name_is_encoded(name: str) -> None:
    for target in (f"/rooms/r/stream?{name}=s3cret", f"/rooms/r/stream?x=1&{name}=s3cret&y=2",
                   f"/rooms/r/stream?x=1;{name}=s3cret"):
        redacted = redact_url(target)
        assert "s3cret" not in redacted and "[redacted]" in redacted
    assert redact_url(f"/s?x=1&{name}=s3cret&y=2").endswith("&y=2")


def test_a_storage_url_shows_no_password() -> None:
    for url in ("postgresql://dune:s3cret@db.example:5432/dune",
                "postgresql://dune@db.example/dune?sslmode=require&password=s3cret",
                "postgresql:///dune?host=/run/pg&PASSWORD=s3cret"):
        redacted = redact_url(url)
        assert "s3cret" not in redacted and "[redacted]" in redacted and "dune" in redacted


def test_the_served_access_log_hides_an_encoded_token_name(tmp_path: Path) -> None:
    """On a real server: `?%74oken=` is taken as the stream's token, and the access log
    line of that request shows neither the token nor a part of it."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    keep = Keep()
    with Server(f"sqlite:///{tmp_path / 'log.db'}", log_level="info") as running:
        logging.getLogger("uvicorn.access").addHandler(keep)
        try:
            room = create(running.base)
            rid, token = room["room"], room["seats"]["emperor"]
            for name in ("%74oken", "%54OKEN", "token"):
                url = f"{running.base}/rooms/{rid}/stream?x=1&{name}={quote(token)}"
                with httpx.Client(timeout=20) as client, \
                        client.stream("GET", url) as response:
                    accepted = name.lower() != "%54oken"  # the parameter's name is `token`
                    assert response.status_code == (200 if accepted else 401)
                    if accepted:
                        assert events(response.iter_lines(), 1)[0]["id"] == "1"
            for _ in range(100):
                if sum("/stream" in line for line in lines) >= 3:
                    break
                time.sleep(0.02)
        finally:
            logging.getLogger("uvicorn.access").removeHandler(keep)
    streamed = [line for line in lines if "/stream" in line]
    assert len(streamed) == 3, lines
    assert all(token not in line and token[:8] not in line and "[redacted]" in line
               for line in streamed), streamed


def test_a_stream_of_a_replaced_token_ends(server: Server) -> None:
    room = create(server.base)
    rid, old = room["room"], room["seats"]["emperor"]
    with httpx.Client(timeout=20) as client, \
            client.stream("GET", f"{server.base}/rooms/{rid}/stream",
                          headers=auth(old)) as response:
        lines = response.iter_lines()
        assert events(lines, 1)[0]["id"] == "1"
        r = httpx.post(f"{server.base}/rooms/{rid}/seats/emperor/token", headers=auth(ADMIN))
        assert r.status_code == 201
        rest = list(lines)  # the server ends the stream: no view of the new version
        assert not any(line.startswith("id:") for line in rest)
    new = r.json()["token"]
    with httpx.Client(timeout=20) as client, \
            client.stream("GET", f"{server.base}/rooms/{rid}/stream",
                          headers=auth(new)) as response:
        assert int(events(response.iter_lines(), 1)[0]["id"]) == r.json()["version"]


def test_each_keep_alive_rechecks_the_token_against_the_stored_room(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Should the follower miss a change (here: it misses every one), the keep-alive
    still finds a reissued token: the stream sends its pings, then ends."""
    from dune_ledger.infrastructure import http_stream
    from dune_ledger.infrastructure.watch import RoomWatch

    monkeypatch.setattr(http_stream, "KEEPALIVE", 0.3)
    monkeypatch.setattr(RoomWatch, "_scan", lambda self: [])
    with Server(f"sqlite:///{tmp_path / 'pings.db'}") as running:
        room = create(running.base)
        rid, old = room["room"], room["seats"]["emperor"]
        with httpx.Client(timeout=20) as client, \
                client.stream("GET", f"{running.base}/rooms/{rid}/stream",
                              headers=auth(old)) as response:
            lines = response.iter_lines()
            assert events(lines, 1)[0]["id"] == "1"
            pings = 0
            for line in lines:
                if line.startswith(": ping"):
                    pings += 1
                    if pings == 2:
                        break
            r = httpx.post(f"{running.base}/rooms/{rid}/seats/emperor/token",
                           headers=auth(ADMIN))
            assert r.status_code == 201
            rest = list(lines)  # ends at the next keep-alive (a read timeout fails)
        assert not any(line.startswith("id:") for line in rest)
