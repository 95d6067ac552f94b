"""Hidden information on every outbound path (RULES 3.4), checked by tests/leaks.py.

Views, the public log, command results, error messages, time travel and CLI
output are scanned at every version for every reader.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dune_ledger.domain.catalog import is_box
from dune_ledger.infrastructure.storage import open_rooms
from tests import leaks
from tests.support import example

BOX = "nullentropy-box"
BOX_LAYOUT = example("box")
SEATS = [s["faction"] for s in BOX_LAYOUT["seats"]]


@pytest.fixture
def app():
    with open_rooms("memory://") as app:
        yield app


Result = tuple[dict[str, Any], list[str]]


def run(app: Any, room: str, seat: str, command: dict[str, Any]) -> Result:
    """Run a command; scan its result (events or error) for what `seat` and the public may know."""
    before = leaks.true_state(app, room)
    result = app.execute(room, seat, command)
    problems = leaks.error_problems(before, seat, command, result)
    if result["ok"]:
        after = leaks.true_state(app, room)
        problems += leaks.public_problems(after, result["events"], f"result of {command}")
    return result, problems


def test_the_demo_room_leaks_nothing(app):
    room = app.create_room(BOX_LAYOUT)["room"]
    problems: list[str] = []
    _, p = run(app, room, "richese", {"type": "begin_search", "card": BOX, "command_id": "b"})
    problems += p
    box = app.seat_view(room, "richese")["nullentropy"]
    assert len(box["search"]["cards"]) == 4
    # Every other seat tries what it can during the search; every refusal is scanned.
    for seat in ("emperor", "harkonnen", "atreides"):
        for command in (
            {"type": "draw"},
            {"type": "select_card", "search": box["search"]["event"], "card": "maula-pistol"},
            {"type": "begin_search", "card": BOX},
            {"type": "discard", "card": "crysknife"},
        ):
            result, p = run(app, room, seat, command)
            assert not result["ok"]
            problems += p
    # The owner's own rejected selections name only what it sent.
    for card in ("karama-1", BOX, "lasgun"):
        result, p = run(app, room, "richese",
                        {"type": "select_card", "search": box["search"]["event"], "card": card})
        assert not result["ok"]
        problems += p
    _, p = run(app, room, "richese", {"type": "select_card", "search": box["search"]["event"],
                                      "card": "maula-pistol"})
    problems += p
    _, p = run(app, room, "richese", {"type": "begin_search", "card": BOX, "command_id": "b"})
    problems += p  # the repeated command id returns the first result
    problems += leaks.scan_room(app, room)
    assert problems == []


def test_the_scanner_catches_a_leak(app):
    """The scanner is not vacuous: another seat's card in a view is found."""
    room = app.create_room(BOX_LAYOUT)["room"]
    app.execute(room, "richese", {"type": "begin_search", "card": BOX})
    state = leaks.true_state(app, room)
    view = app.seat_view(room, "emperor")
    assert leaks.seat_view_problems(state, "emperor", view, "now") == []
    owner = app.seat_view(room, "richese")
    candidates = owner["nullentropy"]["search"]
    assert leaks.seat_view_problems(state, "richese", owner, "now") == []
    leaky = copy.deepcopy(view)
    leaky["nullentropy"] = owner["nullentropy"]
    assert leaks.seat_view_problems(state, "emperor", leaky, "now")
    assert leaks.seat_view_problems(state, "richese", {"s": candidates}, "after",
                                    candidates=False)
    assert leaks.seat_view_problems(state, "emperor", {"seats": [{"spice": 10}]}, "now")
    assert leaks.public_problems(state, {"text": "richese holds crysknife"}, "log")


# --- randomized command sequences ----------------------------------------------------

KINDS = ["draw", "discard", "begin", "begin", "select", "select_wrong", "autopilot",
         "discard_other"]


def command_for(state: Any, seat: str, kind: str, pick: int) -> dict[str, Any]:
    hand = state.seat(seat).hand
    others = [c for s in state.seats if s.faction != seat for c in s.hand]
    if kind == "draw":
        return {"type": "draw"}
    if kind == "discard":
        return {"type": "discard", "card": hand[pick % len(hand)] if hand else "lasgun"}
    if kind == "discard_other":
        return {"type": "discard", "card": others[pick % len(others)] if others else "lasgun"}
    if kind == "begin":
        boxes = [c for c in hand if is_box(c)]
        return {"type": "begin_search", "card": boxes[0] if boxes else BOX}
    if kind in ("select", "select_wrong"):
        search = state.search
        event = search.event if search is not None else "e1"
        pool = list(search.discard) if search is not None else list(state.deck)
        if kind == "select_wrong":
            pool = list(state.deck) + others or pool
        return {"type": "select_card", "search": event,
                "card": pool[pick % len(pool)] if pool else "lasgun"}
    enabled = pick % 2 == 0
    return {"type": "set_autopilot", "enabled": enabled,
            "profile": ["easy", "medium", "hard", "brutal"][pick % 4] if enabled else None}


steps = st.lists(
    st.tuples(st.sampled_from(SEATS), st.sampled_from(KINDS), st.integers(0, 40)),
    min_size=1, max_size=25,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=steps, seed=st.integers(0, 1000))
def test_random_command_sequences_leak_nothing(steps, seed):
    layout = {**BOX_LAYOUT, "seed": seed}
    with open_rooms("memory://") as app:
        room = app.create_room(layout)["room"]
        problems: list[str] = []
        for seat, kind, pick in steps:
            state = leaks.true_state(app, room)
            # The owner of an open search mostly selects, so searches do close.
            if state.search is not None and state.search.owner == seat and kind != "autopilot":
                kind = "select" if pick % 3 else "select_wrong"
            _, p = run(app, room, seat, command_for(state, seat, kind, pick))
            problems += p
        types = {r.type for r in app.records(leaks.UUID(room))}
        event("a search closed" if "SearchClosed" in types else "no search closed")
        problems += leaks.scan_room(app, room)
        assert problems == []


# --- the CLI, one process per call ------------------------------------------------------


def cli(db: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dune_ledger", "--db", db, *args],
                          capture_output=True, text=True, timeout=60, cwd=cwd)


def test_cli_outputs_leak_nothing(tmp_path):
    db = f"sqlite:///{tmp_path / 'leaks.db'}"
    (tmp_path / "layout.json").write_text(orjson.dumps(BOX_LAYOUT).decode())
    room = orjson.loads(cli(db, tmp_path, "room", "create", "layout.json").stdout)["room"]
    problems: list[str] = []

    def scan_outputs() -> None:
        with open_rooms(db) as app:
            state = leaks.true_state(app, room)
            version = max(app.records(leaks.UUID(room))[-1].originator_version, 1)
        for seat in SEATS:
            done = cli(db, tmp_path, "room", "view", room, "--as", seat)
            assert done.returncode == 0, done.stderr
            problems.extend(leaks.seat_view_problems(state, seat, done.stdout + done.stderr,
                                                     f"cli view v{version}"))
            at = cli(db, tmp_path, "room", "at", room, str(version), "--as", seat)
            problems.extend(leaks.seat_view_problems(state, seat, at.stdout + at.stderr,
                                                     f"cli at v{version}"))
        public = cli(db, tmp_path, "room", "view", room, "--public")
        problems.extend(leaks.public_problems(state, public.stdout + public.stderr, "cli public"))

    scan_outputs()
    begun = cli(db, tmp_path, "room", "command", room, "--as", "richese",
                orjson.dumps({"type": "begin_search", "card": BOX}).decode())
    assert begun.returncode == 0, begun.stderr
    with open_rooms(db) as app:
        during = leaks.true_state(app, room)
    problems.extend(leaks.public_problems(during, begun.stdout, "cli begin result"))
    scan_outputs()
    search = during.search
    assert search is not None
    for seat, command in (
        ("emperor", {"type": "draw"}),
        ("emperor", {"type": "select_card", "search": search.event, "card": "baliset"}),
        ("richese", {"type": "select_card", "search": search.event, "card": "karama-1"}),
    ):
        refused = cli(db, tmp_path, "room", "command", room, "--as", seat,
                      orjson.dumps(command).decode())
        assert refused.returncode == 1
        result = orjson.loads(refused.stdout)
        result["stderr"] = refused.stderr
        problems.extend(leaks.error_problems(during, seat, command, result))
    chosen = cli(db, tmp_path, "room", "command", room, "--as", "richese",
                 orjson.dumps({"type": "select_card", "search": search.event,
                               "card": "maula-pistol"}).decode())
    assert chosen.returncode == 0, chosen.stderr
    with open_rooms(db) as app:
        after = leaks.true_state(app, room)
    problems.extend(leaks.public_problems(after, chosen.stdout, "cli select result"))
    scan_outputs()
    log = cli(db, tmp_path, "room", "log", room)
    # Each entry is checked at its own version by scan_room; the whole text at the end
    # must at least not name the retrieved card or the pile below its top.
    assert "maula-pistol" not in log.stdout
    for cid in after.discard[:-1]:
        assert cid not in log.stdout
    with open_rooms(db) as app:
        problems.extend(leaks.scan_room(app, room))
    assert problems == []


def test_http_outputs_leak_nothing(tmp_path):
    from fastapi.testclient import TestClient

    from dune_ledger.infrastructure.http import create_app

    with open_rooms(f"sqlite:///{tmp_path / 'http.db'}") as app, \
            TestClient(create_app(app)) as client:
        created = client.post("/rooms", json=BOX_LAYOUT).json()
        room, tokens = created["room"], created["seats"]
        problems: list[str] = []

        def as_seat(seat: str) -> dict[str, str]:
            return {"Authorization": f"Bearer {tokens[seat]}"}

        def scan_reads(where: str) -> None:
            state = leaks.true_state(app, room)
            for seat in SEATS:
                view = client.get(f"/rooms/{room}/view", headers=as_seat(seat))
                assert view.status_code == 200
                problems.extend(leaks.seat_view_problems(state, seat, view.json(), where))
                log = client.get(f"/rooms/{room}/log", headers=as_seat(seat))
                assert "maula-pistol" not in log.text
                problems.extend(leaks.public_problems(state, log.json()[-1:], where))

        def command(seat: str, body: dict[str, Any]) -> dict[str, Any]:
            before = leaks.true_state(app, room)
            answer = client.post(f"/rooms/{room}/commands", json=body, headers=as_seat(seat))
            result = answer.json()
            problems.extend(leaks.error_problems(before, seat, body, result))
            if result["ok"]:
                after = leaks.true_state(app, room)
                problems.extend(leaks.public_problems(after, result["events"], "http result"))
            return result

        scan_reads("http before")
        begun = command("richese", {"type": "begin_search", "card": BOX})
        search = begun["events"][-1]["search"]
        scan_reads("http during")
        for seat in ("emperor", "harkonnen"):
            assert not command(seat, {"type": "select_card", "search": search,
                                      "card": "maula-pistol"})["ok"]
            assert not command(seat, {"type": "draw"})["ok"]
        assert not command("richese", {"type": "select_card", "search": search,
                                       "card": "crysknife"})["ok"]
        assert command("richese", {"type": "select_card", "search": search,
                                   "card": "maula-pistol"})["ok"]
        scan_reads("http after")
        problems.extend(leaks.scan_room(app, room))
        assert problems == []
