"""Moving rooms: export, import, and the round trip SQLite -> PostgreSQL -> SQLite."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from application.audit import audit_room
from application.rooms import RoomsApp
from application.stream import APPEND, chain_hash
from infrastructure.demo import play_demo
from infrastructure.keys import public_key_info
from infrastructure.storage import open_rooms
from infrastructure.transfer import ImportRefused, export_rooms, import_rooms, parse_export
from tests.support import long_room


def exported(app: RoomsApp, rooms: list[str] | None = None) -> bytes:
    out = io.BytesIO()
    export_rooms(app, rooms, out)
    return out.getvalue()


def seen(app: RoomsApp, room: str) -> dict[str, Any]:
    """Everything a reader is shown of a room, and what its audit replays to."""
    public = app.public_view(room)
    seats = [s["faction"] for s in public["seats"]]
    report = audit_room(app, room)
    assert report["ok"], {k: v for k, v in report["checks"].items() if not v["ok"]}
    return {"state_hash": report["state_hash"], "events": report["events"],
            "public": public, "log": app.public_log(room),
            "views": {seat: app.seat_view(room, seat) for seat in seats}}


def test_rooms_go_from_sqlite_to_postgresql_and_back_unchanged(tmp_path: Path, pg_url: str):
    with open_rooms(f"sqlite:///{tmp_path / 'first.db'}") as first:
        play_demo(first)
        rooms = [str(r) for r in first.room_ids()]
        rooms.append(long_room(first, draws=60))  # past a snapshot interval
        before = {room: seen(first, room) for room in rooms}
        text = exported(first)
    lines = [orjson.loads(line) for line in text.splitlines()]
    assert len(lines) == sum(b["events"] for b in before.values())
    assert {line["type"] for line in lines} >= {"RoomCreated", "FeePaid", "SearchOpened",
                                               "PileShuffled", "ReceiptStaged"}

    with open_rooms(pg_url) as pg:
        stored = import_rooms(pg, parse_export(text))
        assert stored == {room: before[room]["events"] for room in rooms}
        assert {room: seen(pg, room) for room in rooms} == before
        again = exported(pg, rooms)
    assert again == text  # the same ids, versions, types, payloads and hashes

    with open_rooms(f"sqlite:///{tmp_path / 'back.db'}") as back:
        import_rooms(back, parse_export(again))
        assert {room: seen(back, room) for room in rooms} == before
        # Commands go on from where the room was: the imported room is a room.
        room = rooms[-1]
        done = back.execute(room, "emperor", {"type": "draw"})
        assert done["ok"] and done["version"] == before[room]["events"] + 1
        assert audit_room(back, room)["ok"]


@pytest.fixture
def source(tmp_path: Path) -> tuple[RoomsApp, bytes]:
    app = open_rooms(f"sqlite:///{tmp_path / 'source.db'}")
    play_demo(app)
    return app, exported(app)


def refused(tmp_path: Path, text: bytes, needle: str) -> None:
    with open_rooms(f"sqlite:///{tmp_path / 'target.db'}") as target:
        with pytest.raises(ImportRefused, match=needle):
            import_rooms(target, parse_export(text))
        assert list(target.room_ids()) == []  # nothing stored, not even the good rooms


def edit(text: bytes, index: int, **changes: Any) -> bytes:
    lines = text.splitlines()
    line = orjson.loads(lines[index])
    line.update(changes)
    lines[index] = orjson.dumps(line)
    return b"\n".join(lines) + b"\n"


def test_an_import_that_does_not_verify_stores_nothing(tmp_path: Path, source):
    app, text = source
    lines = text.splitlines()
    last_of_second_room = len(lines) - 1
    second = orjson.loads(lines[-1])
    first_line = next(i for i, raw in enumerate(lines)
                      if orjson.loads(raw)["room"] == second["room"])
    created = orjson.loads(lines[first_line])
    assert '"spice":10' in created["payload"]
    # A payload edited (a seat's spice), its hash left as it was.
    tampered = edit(text, first_line,
                    payload=created["payload"].replace('"spice":10', '"spice":60', 1))
    refused(tmp_path, tampered, "hash is not the hash")
    # The same edit with its hash recomputed: the next event's `prev` gives it away.
    body = created["payload"].replace('"spice":10', '"spice":60', 1)
    rehashed = edit(text, first_line, payload=body, hash=chain_hash(
        created["room"], 1, "RoomCreated", body.encode()))
    refused(tmp_path, rehashed, "does not verify")
    # A dropped event: versions out of order.
    dropped = b"\n".join(lines[:last_of_second_room - 1] + lines[last_of_second_room:]) + b"\n"
    refused(tmp_path, dropped, "where")
    refused(tmp_path, edit(text, 0, type="NoSuchEvent"), "hash is not the hash|not a stored")
    refused(tmp_path, text + b"{not json\n", "line")
    refused(tmp_path, text.replace(b'"version"', b'"versionx"', 1), "exactly")
    app.close()


def test_an_import_naming_an_existing_room_stores_nothing(tmp_path: Path, source):
    app, text = source
    with open_rooms(f"sqlite:///{tmp_path / 'target.db'}") as target:
        first = parse_export(text)[:1]
        import_rooms(target, first)
        before = [str(r) for r in target.room_ids()]
        with pytest.raises(ImportRefused, match="already exists"):
            import_rooms(target, parse_export(text))
        assert [str(r) for r in target.room_ids()] == before
    app.close()


def test_an_empty_or_foreign_file_is_refused():
    with pytest.raises(ImportRefused, match="no events"):
        parse_export(b"\n\n")
    with pytest.raises(ImportRefused, match="UTF-8"):
        parse_export(b"\xff\xfe{}\n")
    with pytest.raises(ImportRefused, match="exactly"):
        parse_export(b'{"room": "x"}\n')


def test_an_import_into_an_encrypted_store_is_stored_encrypted(tmp_path: Path):
    """The same key file, now with a cipher key: the rows are sealed by the mapper, the
    signatures still verify, and the database file names no hidden card."""
    from infrastructure.keys import init_key_file

    plain_key, sealed_key = tmp_path / "plain.key", tmp_path / "sealed.key"
    init_key_file(plain_key)
    with open_rooms(f"sqlite:///{tmp_path / 'plain.db'}", key_file=str(plain_key)) as app:
        play_demo(app)
        before = {str(r): seen(app, str(r)) for r in app.room_ids()}
        text = exported(app)
    with open_rooms(f"sqlite:///{tmp_path / 'other.db'}",
                    key_file=str(tmp_path / "other.key")) as other, \
            pytest.raises(ImportRefused, match="another key"):
        import_rooms(other, parse_export(text))
    # The sealed store signs with the same signing key and adds a cipher key.
    init_key_file(sealed_key, cipher=True)
    keys = orjson.loads(sealed_key.read_bytes())
    keys.update({k: v for k, v in orjson.loads(plain_key.read_bytes()).items()
                 if "cipher" not in k})
    sealed_key.write_bytes(orjson.dumps(keys))
    db = tmp_path / "sealed.db"
    with open_rooms(f"sqlite:///{db}", key_file=str(sealed_key)) as app:
        import_rooms(app, parse_export(text))
        assert {room: seen(app, room) for room in before} == before
        assert exported(app) == text
    def held(name: str) -> bytes:
        return b"".join(p.read_bytes() for p in tmp_path.glob(f"{name}.db*"))

    assert b"crysknife" in held("plain") and b"karama-1" in held("plain")
    assert b"crysknife" not in held("sealed") and b"karama-1" not in held("sealed")


def export_checker() -> str:
    """The checking program of docs/security.md, as the page prints it."""
    page = (Path(__file__).parent.parent / "docs" / "security.md").read_text()
    section = page.split("## Checking an export yourself", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_export_checker_in_the_docs_checks_an_export(tmp_path: Path, source):
    app, text = source
    program = tmp_path / "check_export.py"
    program.write_text(export_checker())
    key = public_key_info(app.signer.path)["public_key"]  # type: ignore[attr-defined]

    def check(data: bytes, key: str = key) -> subprocess.CompletedProcess[str]:
        path = tmp_path / "rooms.jsonl"
        path.write_bytes(data)
        return subprocess.run([sys.executable, str(program), str(path), key],
                              capture_output=True, text=True, timeout=60)

    done = check(text)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"ok: {len(text.splitlines())} events"
    lines = [orjson.loads(raw) for raw in text.splitlines()]
    assert all(set(line) == {"room", "version", "type", "payload", "prev", "hash", "sig"}
               for line in lines)
    assert all(chain_hash(line["room"], line["version"], line["type"],
                          line["payload"].encode()) == line["hash"] for line in lines)
    # A payload edited with its hash recomputed: its signature (or the next prev) fails.
    forged = orjson.loads(text.splitlines()[0])
    body = forged["payload"].replace('"spice":10', '"spice":60', 1)
    assert body != forged["payload"]
    rehashed = edit(text, 0, payload=body,
                    hash=chain_hash(forged["room"], 1, "RoomCreated", body.encode()))
    assert check(rehashed).returncode != 0
    # Signatures deleted: an append without one is refused.
    stripped = b"\n".join(orjson.dumps({**line, "sig": None}) for line in lines) + b"\n"
    refused_run = check(stripped)
    assert refused_run.returncode != 0 and "signature" in refused_run.stderr
    # A signature by another key.
    other = subprocess.run([sys.executable, "-c", "import base64; from cryptography.hazmat."
                            "primitives.asymmetric.ed25519 import Ed25519PrivateKey as K;"
                            "from cryptography.hazmat.primitives import serialization as s;"
                            "print(base64.b64encode(K.generate().public_key().public_bytes("
                            "s.Encoding.Raw, s.PublicFormat.Raw)).decode())"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert "InvalidSignature" in check(text, other).stderr
    app.close()


def test_an_export_line_carries_the_hashed_payload_and_its_signature(source):
    app, text = source
    lines = [orjson.loads(raw) for raw in text.splitlines()]
    for line in lines:
        assert '"sig"' not in line["payload"]
        if line["sig"] is not None:
            assert app.signer.verify(APPEND + line["hash"].encode(), line["sig"])
    assert lines[0]["prev"] == "0" * 64 and lines[1]["prev"] == lines[0]["hash"]
    app.close()
