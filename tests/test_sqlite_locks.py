"""Opening a SQLite store again in a process that has it open must not drop that
process's locks: POSIX drops every lock a process holds on a file when it closes
any descriptor of it, and another process could then checkpoint and delete the WAL
under the first one's connections (tests/test_leaks.py's CLI test found a database
"disk image malformed" that way)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dune_ledger.infrastructure import storage


def test_an_existing_database_file_is_not_opened_to_set_its_mode(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    db = tmp_path / "rooms.db"
    storage.private_files(str(db))  # a new file: created 0600
    assert db.exists() and db.stat().st_mode & 0o777 == 0o600
    db.chmod(0o644)
    opened: list[str] = []
    real_open = os.open

    def spy(path: object, *args: object, **kwargs: object) -> int:
        fd = real_open(path, *args, **kwargs)  # type: ignore[arg-type]
        opened.append(str(path))  # a descriptor was opened (and will be closed)
        return fd

    monkeypatch.setattr(os, "open", spy)
    storage.private_files(str(db))
    assert str(db) not in opened
    assert db.stat().st_mode & 0o777 == 0o600  # still made private, by chmod
