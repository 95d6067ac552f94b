"""Backups as docs/operations.md takes them: SQLite's online backup and PostgreSQL's
pg_dump/pg_restore, each followed by `dune-ledger audit --all` on the copy."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from dune_ledger.infrastructure.demo import play_demo
from dune_ledger.infrastructure.storage import open_rooms
from tests.support import database, long_room


def audit_all(url: str, cwd: Path) -> list[dict[str, object]]:
    done = subprocess.run([sys.executable, "-m", "dune_ledger", "--db", url, "audit",
                           "--all"], capture_output=True, text=True, timeout=300, cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert "0 rooms with problems" in done.stderr
    return [{"room": r["room"], "state_hash": r["state_hash"], "events": r["events"]}
            for r in orjson.loads(done.stdout)]


def test_sqlite_online_backup_while_the_store_is_open_audits_clean(tmp_path: Path):
    live = tmp_path / "rooms.db"
    copy = tmp_path / "backup.db"
    with open_rooms(f"sqlite:///{live}") as app:
        demo_rooms = len(play_demo(app).rooms)
        room = long_room(app, draws=60)
        # The backup API copies a consistent snapshot while the app holds the file open
        # (what `sqlite3 rooms.db ".backup backup.db"` does).
        with sqlite3.connect(live) as source, sqlite3.connect(copy) as target:
            source.backup(target)
        assert app.execute(room, "emperor", {"type": "draw"})["ok"]  # after the backup
    backed_up = audit_all(f"sqlite:///{copy}", tmp_path)
    now = audit_all(f"sqlite:///{live}", tmp_path)
    assert len(backed_up) == len(now) == demo_rooms + 1
    # The copy is the store as it was: every room but the one written since, unchanged.
    assert backed_up[:-1] == now[:-1]
    assert backed_up[-1]["events"] == now[-1]["events"] - 1  # type: ignore[operator]


@pytest.mark.skipif(shutil.which("pg_dump") is None or shutil.which("pg_restore") is None,
                    reason="pg_dump and pg_restore are not installed")
def test_pg_dump_and_pg_restore_round_trip_audits_clean(tmp_path: Path):
    dump = tmp_path / "rooms.dump"
    with database("dl_backup_src") as source, database("dl_backup_dst") as target:
        with open_rooms(source) as app:
            demo_rooms = len(play_demo(app).rooms)
            long_room(app, draws=60)
        before = audit_all(source, tmp_path)
        subprocess.run(["pg_dump", "--format=custom", f"--file={dump}", source], check=True,
                       timeout=120)
        subprocess.run(["pg_restore", "--no-owner", f"--dbname={target}", str(dump)],
                       check=True, timeout=120)
        after = audit_all(target, tmp_path)
        assert after == before and len(after) == demo_rooms + 1
        # The restored store takes commands: its sequences and functions came along.
        with open_rooms(target) as app:
            room = str(after[-1]["room"])
            assert app.execute(room, "emperor", {"type": "draw"})["ok"]
            assert app.public_log(room)[-1]["type"] == "CardDrawn"
