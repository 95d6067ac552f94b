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
            [sys.executable, "-m", "dune_ledger", "--db", self.db, *args],
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


def test_the_operator_sends_its_own_commands_and_no_seat_sends_them(cli: Cli):
    created = cli("room", "create", "-", stdin=orjson.dumps(layout()).decode())
    room = orjson.loads(created.stdout)["room"]
    as_seat = cli("room", "command", room, "--as", "emperor", '{"type": "end_room"}')
    assert as_seat.returncode == 1 and "--operator" in as_seat.stderr
    seat_kind = cli("room", "command", room, "--operator", '{"type": "draw"}')
    assert seat_kind.returncode == 1
    assert orjson.loads(seat_kind.stdout)["error"]["code"] == "not_eligible"
    both = cli("room", "command", room, "--operator", "--as", "emperor", '{"type": "draw"}')
    assert both.returncode == 2 and "not allowed with" in both.stderr
    assert cli.rooms()[0]["version"] == 1
    ended = cli.json("room", "command", room, "--operator", '{"type": "end_room"}')
    assert ended["events"][0]["type"] == "RoomEnded"
    assert "end_room" in cli("room", "command", "--help").stdout


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
    from dune_ledger.infrastructure.storage import open_rooms
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


# --- usage, help and settings (issue 21, issue 18's tracebacks) ------------------------


def no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout, done.stderr


def test_no_command_prints_the_usage_and_version_prints_the_version(cli: Cli):
    bare = subprocess.run([sys.executable, "-m", "dune_ledger"], capture_output=True,
                          text=True, timeout=60, cwd=cli.tmp)
    assert bare.returncode == 2 and bare.stderr.startswith("usage: dune-ledger")
    assert "audit" in bare.stderr and "export" in bare.stderr
    room = cli("room")
    assert room.returncode == 2 and "usage: dune-ledger room" in room.stderr
    version = cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("dune-ledger 0.")


def test_each_command_explains_its_arguments_with_an_example(cli: Cli):
    audit = cli("audit", "--help").stdout
    assert "ROOM" in audit and "--all" in audit and "examples:" in audit
    assert "dune-ledger audit --all" in audit
    serve = cli("serve", "--help").stdout
    assert "(default: 127.0.0.1)" in serve and "(default: 8000)" in serve
    command = cli("room", "command", "--help").stdout
    for kind in ("begin_search", "select_card", "respond", "guild_stop", "ambassador_decide"):
        assert kind in command
    for args in (("room", "create"), ("room", "view"), ("export",), ("import",),
                 ("worker",), ("demo",), ("catalog",), ("projections", "rebuild")):
        assert "examples:" in cli(*args, "--help").stdout, args


def test_db_goes_before_or_after_the_subcommand(cli: Cli):
    other = f"sqlite:///{cli.tmp / 'other.db'}"
    room = cli.json("room", "create", cli.write("l.json", orjson.dumps(layout()).decode()),
                    "--db", other)["room"]
    after = subprocess.run([sys.executable, "-m", "dune_ledger", "audit", "--all",
                            "--db", other], capture_output=True, text=True, timeout=60,
                           cwd=cli.tmp)
    assert after.returncode == 0, after.stderr
    assert [r["room"] for r in orjson.loads(after.stdout)] == [room]
    assert cli.rooms() == []  # the global --db names another store


def test_memory_storage_warns_that_nothing_is_kept(cli: Cli):
    done = subprocess.run([sys.executable, "-m", "dune_ledger", "--db", "memory://",
                           "room", "create", "-"], input=orjson.dumps(layout()).decode(),
                          capture_output=True, text=True, timeout=60, cwd=cli.tmp)
    assert done.returncode == 0 and "keeps nothing" in done.stderr


def test_audit_all_prints_a_summary_and_can_print_only_failures(cli: Cli):
    import sqlite3

    rooms = [cli.json("room", "create", cli.write("l.json", orjson.dumps(layout()).decode())
                      )["room"] for _ in range(2)]
    for room in rooms:
        cli.json("room", "command", room, "--as", "emperor", '{"type": "draw"}')
    clean = cli("audit", "--all")
    assert clean.returncode == 0
    assert "audited 2 rooms, 4 events: 0 rooms with problems" in clean.stderr
    with sqlite3.connect(cli.tmp / "cli.db") as db:
        db.execute("DELETE FROM stored_events WHERE originator_version = 2 AND "
                   "originator_id = ?", (rooms[1].replace("-", ""),))
    found = cli("audit", "--all", "--failures-only")
    assert found.returncode == 1
    assert [r["room"] for r in orjson.loads(found.stdout)] == [rooms[1]]
    assert "audited 2 rooms, 3 events: 1 rooms with problems" in found.stderr


def test_the_demo_prints_a_summary_and_keeps_its_rooms_apart(tmp_path: Path):
    run = [sys.executable, "-m", "dune_ledger", "demo"]
    done = subprocess.run(run, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) < 15 and "audit clean" in done.stdout
    assert (tmp_path / "dune-ledger-demo.db").exists()
    assert not (tmp_path / "dune-ledger.db").exists()
    full = subprocess.run([*run, "--json"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    data = orjson.loads(full.stdout)
    assert data["ok"] and len(data["rooms"]) == 3 and len(data["scenes"]) > 10


def test_export_then_import_through_the_cli(cli: Cli):
    room = cli.json("room", "create", cli.write("l.json", orjson.dumps(layout()).decode()))["room"]
    cli.json("room", "command", room, "--as", "emperor", '{"type": "draw"}')
    out = cli.tmp / "rooms.jsonl"
    assert cli("export", "--all", "--output", str(out)).returncode == 0
    other = f"sqlite:///{cli.tmp / 'other.db'}"
    done = cli("import", str(out), "--db", other)
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["rooms"] == {room: 2}
    again = cli("import", str(out), "--db", other)
    assert again.returncode == 1 and "already exists" in again.stderr
    bad = cli("import", cli.write("bad.jsonl", "{nope"))
    assert bad.returncode == 2 and "line 1" in bad.stderr
    no_traceback(bad)


@pytest.mark.parametrize(("name", "value", "needle"), [
    ("DUNE_LEDGER_SNAPSHOT_INTERVAL", "often", "DUNE_LEDGER_SNAPSHOT_INTERVAL"),
    ("DUNE_LEDGER_SNAPSHOT_INTERVAL", "0", "at least 1"),
    ("DUNE_LEDGER_ROOM_CACHE", "-3", "DUNE_LEDGER_ROOM_CACHE"),
    ("DUNE_LEDGER_SQLITE_LOCK_TIMEOUT", "1.5x", "DUNE_LEDGER_SQLITE_LOCK_TIMEOUT"),
    ("DUNE_LEDGER_PROJECTION_CACHE", "lots", "DUNE_LEDGER_PROJECTION_CACHE"),
    ("APPLICATION_RECORDER_TOPIC", "no.such.module:Recorder", "APPLICATION_RECORDER_TOPIC"),
    ("APPLICATION_RECORDER_TOPIC", "dune_ledger.infrastructure.cli:Exit",
     "APPLICATION_RECORDER_TOPIC"),
    ("DUNE_LEDGER_LOG_FORMAT", "xml", "DUNE_LEDGER_LOG_FORMAT"),
    ("DUNE_LEDGER_LOG_LEVEL", "loud", "DUNE_LEDGER_LOG_LEVEL"),
    # PostgreSQL's, refused at start whatever the store (here SQLite)
    ("DUNE_LEDGER_PG_STATEMENT_TIMEOUT", "long", "DUNE_LEDGER_PG_STATEMENT_TIMEOUT"),
    ("DUNE_LEDGER_PG_GROUP_COMMIT", "sometimes", "must be yes or no"),
    ("DUNE_LEDGER_AUTOPILOT_PACE", "-1", "at least 0"),
    ("DUNE_LEDGER_DEBUG", "please", "DUNE_LEDGER_DEBUG"),
])
def test_a_bad_setting_is_a_usage_error(cli: Cli, monkeypatch, name, value, needle):
    monkeypatch.setenv(name, value)
    done = cli("room", "log", "no-room")
    no_traceback(done)
    assert done.returncode == 2 and needle in done.stderr and "unset it" in done.stderr


def test_every_bad_setting_is_named_at_once(cli: Cli, monkeypatch):
    from dune_ledger.infrastructure.settings import Settings, variable

    bad = {int: "lots", float: "soon", bool: "maybe"}
    named = [variable(name) for name, field in Settings.model_fields.items()
             if field.annotation in bad]
    for name, field in Settings.model_fields.items():
        if field.annotation in bad:
            monkeypatch.setenv(variable(name), bad[field.annotation])
    done = cli("catalog")
    no_traceback(done)
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert sorted(part.split(" must be ")[0] for part in line.split("; ")) == sorted(named)


def test_a_layout_that_is_not_utf8_is_a_usage_error(cli: Cli):
    path = cli.tmp / "latin1.json"
    path.write_bytes('{"seats": [{"faction": "émperor"}]}'.encode("latin-1"))
    done = cli("room", "create", str(path))
    no_traceback(done)
    assert done.returncode == 2 and "UTF-8" in done.stderr


def test_a_store_that_cannot_be_used_is_a_usage_error(cli: Cli, tmp_path: Path):
    import os

    layout_file = cli.write("l.json", orjson.dumps(layout()).decode())
    directory = tmp_path / "a-directory"
    directory.mkdir()
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"this is not a database" * 200)
    locked = tmp_path / "locked"
    locked.mkdir()
    os.chmod(locked, 0o500)
    for db in (f"sqlite:///{directory}", f"sqlite:///{corrupt}",
               f"sqlite:///{locked / 'rooms.db'}", f"sqlite:///{tmp_path / 'no' / 'dir.db'}"):
        done = cli("room", "create", layout_file, "--db", db)
        no_traceback(done)
        if os.geteuid() == 0 and "locked" in db:
            continue  # root writes where the mode says no
        assert done.returncode == 2, (db, done.stderr)
        assert done.stderr.count("\n") == 1, done.stderr  # one line: what is wrong, what to do
        assert "cannot" in done.stderr or "give a file" in done.stderr, done.stderr


def test_a_timeout_that_is_not_a_number_of_seconds_is_refused(cli: Cli):
    room = cli.json("room", "create", cli.write("l.json", orjson.dumps(layout()).decode()))["room"]
    for value in ("nan", "inf", "-1", "soon"):
        done = cli("room", "view", room, "--public", "--wait-version", "9", "--timeout", value)
        no_traceback(done)
        assert done.returncode == 2 and "seconds" in done.stderr
    waited = cli("room", "view", room, "--public", "--wait-version", "9", "--timeout", "0.2")
    assert waited.returncode == 1 and "timeout" in waited.stderr


def test_a_postgresql_url_passes_its_query_to_libpq(cli: Cli):
    from tests.support import database

    with database("dl_libpq") as pg_url:
        libpq_query_reaches_libpq(cli, pg_url)


def libpq_query_reaches_libpq(cli: Cli, pg_url: str) -> None:
    done = cli("audit", "--all", "--db", pg_url + "?sslmode=require")
    no_traceback(done)
    # The server of the suite has no TLS: libpq was asked for it, and says so.
    assert done.returncode == 2 and "SSL" in done.stderr, done.stderr
    plain = cli("audit", "--all", "--db", pg_url + "?sslmode=disable&application_name=dl")
    assert plain.returncode == 0, plain.stderr
    unknown = cli("audit", "--all", "--db", pg_url + "?colour=red")
    assert unknown.returncode == 2 and "libpq" in unknown.stderr


def test_serve_refuses_an_address_it_cannot_listen_on(cli: Cli):
    import socket

    bad = cli("serve", "--host", "256.1.1.1")
    no_traceback(bad)
    assert bad.returncode == 2 and "256.1.1.1" in bad.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        busy = cli("serve", "--port", port)
    no_traceback(busy)
    assert busy.returncode == 2 and "cannot listen" in busy.stderr
    assert cli("serve", "--port", "70000").returncode == 2


def test_an_export_read_only_in_part_ends_quietly(cli: Cli):
    for _ in range(3):
        assert cli("demo", "--db", cli.db).returncode == 0
    proc = subprocess.Popen([sys.executable, "-m", "dune_ledger", "--db", cli.db,
                             "export", "--all"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=cli.tmp)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(100)
    proc.stdout.close()  # `| head -c 100`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and "Traceback" not in err and "store" not in err, err


def test_the_operator_opens_a_bidding_round_and_seats_bid_from_the_cli(cli: Cli):
    raw = {**layout(), "phase": 4}
    room = cli.json("room", "create", cli.write("bidding.json", orjson.dumps(raw).decode()))["room"]
    broken = cli("room", "command", room, "--operator",
                 '{"type": "open_bidding", "order": ["emperor", "emperor", "richese"]}')
    assert broken.returncode == 1
    assert orjson.loads(broken.stdout)["error"]["code"] == "invalid_command"
    opened = cli.json("room", "command", room, "--operator",
                      '{"type": "open_bidding", "order": ["emperor", "harkonnen", "richese"]}')
    assert [e["type"] for e in opened["events"]] == ["BiddingOpened"]  # Richese answers first
    cli.json("room", "command", room, "--as", "richese",
             '{"type": "richese_sale", "when": "none"}')
    late = cli("room", "command", room, "--as", "harkonnen", '{"type": "bid", "amount": 1}')
    assert late.returncode == 1 and orjson.loads(late.stdout)["error"]["code"] == "not_your_turn"
    cli.json("room", "command", room, "--as", "emperor", '{"type": "bid", "amount": 2}')
    view = cli.json("room", "view", room, "--public")
    assert view["bidding"]["up"]["high"] == {"seat": "emperor", "amount": 2, "karama": False}
    assert "card" not in view["bidding"]["up"]
