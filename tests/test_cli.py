"""The CLI as a user runs it: every call is a new process on one SQLite file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.support import layout

BOX = "nullentropy-box"


class Cli:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.db = f"sqlite:///{tmp / 'cli.db'}"

    def __call__(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "infrastructure.cli", "--db", self.db, *args],
            capture_output=True, text=True, input=stdin, timeout=60, cwd=self.tmp,
        )

    def json(self, *args: str) -> object:
        done = self(*args)
        assert done.returncode == 0, done.stderr
        return orjson.loads(done.stdout)

    def write(self, name: str, text: str) -> str:
        path = self.tmp / name
        path.write_text(text)
        return str(path)

    def rooms(self) -> list[object]:
        done = self("audit", "--all")
        assert done.returncode == 0, done.stderr
        return orjson.loads(done.stdout)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def test_a_search_begun_in_one_process_is_selected_in_another(cli: Cli):
    created = cli.json("room", "create", cli.write("layout.json", orjson.dumps(layout()).decode()))
    room = created["room"]
    assert set(created["seats"]) == {"richese", "emperor", "harkonnen"}

    begun = cli.json("room", "command", room, "--as", "richese",
                     '{"type": "begin_search", "card": "nullentropy-box"}')
    search = begun["events"][1]["search"]
    view = cli.json("room", "view", room, "--as", "richese")
    cards = [c["id"] for c in view["nullentropy"]["search"]["cards"]]
    assert sorted(cards) == ["baliset", "maula-pistol", "shield-1"]
    emperor = cli("room", "view", room, "--as", "emperor").stdout
    assert "maula-pistol" not in emperor and "crysknife" not in emperor

    locked = cli("room", "command", room, "--as", "emperor", '{"type": "draw"}')
    assert locked.returncode == 1
    assert orjson.loads(locked.stdout)["error"]["code"] == "locked"
    assert locked.stderr.count("\n") == 1

    done = cli.json("room", "command", room, "--as", "richese",
                    orjson.dumps({"type": "select_card", "search": search,
                                  "card": "maula-pistol"}).decode())
    assert done["ok"] and done["version"] == 7
    log = cli.json("room", "log", room)
    assert [e["type"] for e in log][-4:] == ["CardRetrieved", "PileShuffled", "BoxDiscarded",
                                              "SearchClosed"]
    assert "maula-pistol" not in orjson.dumps(log).decode()
    public = cli("room", "view", room, "--public").stdout
    assert "maula-pistol" not in public

    during = cli.json("room", "at", room, "3", "--as", "richese")
    assert during["nullentropy"]["search"]["cards"] is None  # the search has closed
    report = cli.json("audit", room)
    assert report["ok"] and report["version"] == 7


@pytest.mark.parametrize(("name", "text", "needle"), [
    ("not json", "{seats: [", "not valid JSON"),
    ("truncated", orjson.dumps(layout()).decode()[:80], "not valid JSON"),
    ("unknown field", orjson.dumps({**layout(), "colour": "red"}).decode(), "colour"),
    ("unknown card", orjson.dumps(layout(discard=["ace-of-spades"])).decode(), "ace-of-spades"),
    ("card twice", orjson.dumps(layout(discard=["crysknife"])).decode(), "crysknife"),
    ("unknown seat", orjson.dumps({"seats": [{"faction": "sardaukar"}]}).decode(), "faction"),
    ("ally not seated", orjson.dumps({"seats": [{"faction": "fremen", "ally": "guild"}]}
                                     ).decode(), "guild"),
    ("no seats", "{}", "seats"),
])
def test_bad_layouts_exit_2_with_one_line_and_store_nothing(cli: Cli, name, text, needle):
    done = cli("room", "create", cli.write("bad.json", text))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and needle in done.stderr
    assert cli.rooms() == []


def test_bad_commands(cli: Cli):
    created = cli("room", "create", "-", stdin=orjson.dumps(layout()).decode())
    room = orjson.loads(created.stdout)["room"]
    not_json = cli("room", "command", room, "--as", "richese", "{type: draw")
    assert not_json.returncode == 2 and "not valid JSON" in not_json.stderr
    wrong = cli("room", "command", room, "--as", "richese", '{"type": "draw", "card": 1}')
    assert wrong.returncode == 1
    assert orjson.loads(wrong.stdout)["error"]["code"] == "invalid_command"
    bad_flag = cli("room", "command", room, "--as", "sardaukar", '{"type": "draw"}')
    assert bad_flag.returncode == 2
    unknown_room = cli("room", "view", "no-such-room", "--as", "richese")
    assert unknown_room.returncode == 1
    assert orjson.loads(unknown_room.stdout)["error"]["code"] == "unknown_room"
    assert cli("room", "view", room).returncode == 2
    report = cli.rooms()
    assert len(report) == 1 and report[0]["version"] == 1


def test_audit_exits_1_on_a_broken_chain(cli: Cli):
    import sqlite3

    room = cli.json("room", "create", cli.write("l.json", orjson.dumps(layout()).decode()))["room"]
    for _ in range(2):
        cli.json("room", "command", room, "--as", "emperor", '{"type": "draw"}')
    assert cli("audit", room).returncode == 0
    with sqlite3.connect(cli.tmp / "cli.db") as db:
        db.execute("DELETE FROM stored_events WHERE originator_version = 2")
    done = cli("audit", room)
    assert done.returncode == 1
    assert orjson.loads(done.stdout)["checks"]["chain_intact"]["ok"] is False
    assert "problems" in done.stderr


def test_audit_in_parts_prints_what_one_process_prints(cli: Cli):
    """A room long enough for two parts (2,500 events each): the same report."""
    from infrastructure.storage import open_rooms
    from tests.support import long_room

    with open_rooms(cli.db) as app:
        room = long_room(app, draws=2_550)
    one = cli("audit", room, "--processes", "1")
    parts = cli("audit", room, "--processes", "2")
    assert one.returncode == parts.returncode == 0, parts.stderr
    assert parts.stdout == one.stdout and orjson.loads(one.stdout)["events"] > 5_000
    refused = cli("audit", room, "--processes", "0")
    assert refused.returncode == 2 and "at least 1" in refused.stderr


def test_demo_runs_clean(cli: Cli):
    done = cli("demo")
    assert done.returncode == 0, done.stderr
    assert "audit clean" in done.stdout


def test_the_worker_plays_an_autopilot_seat(cli: Cli, monkeypatch):
    monkeypatch.setenv("DUNE_LEDGER_AUTOPILOT_PACE", "0")
    room = cli.json("room", "create", cli.write("l.json", orjson.dumps(layout()).decode()))["room"]
    cli.json("room", "command", room, "--as", "richese",
             '{"type": "begin_search", "card": "nullentropy-box"}')
    cli.json("room", "command", room, "--as", "richese",
             '{"type": "set_autopilot", "enabled": true, "profile": "hard"}')
    done = cli("worker", "--once")
    assert done.returncode == 0, done.stderr
    view = cli.json("room", "view", room, "--as", "richese")
    assert view["decision"] is None and view["nullentropy"] is None
    assert len(view["me"]["hand"]) == 2  # crysknife and the card it chose
    assert cli.json("audit", room)["ok"]
