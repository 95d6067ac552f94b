"""Moving rooms: export, import, and the round trip SQLite -> PostgreSQL -> SQLite."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import orjson
import pytest

from dune_ledger.application.audit import audit_room
from dune_ledger.application.rooms import RoomsApp, token_hash
from dune_ledger.application.stream import APPEND, Recorded, chain_hash, signed
from dune_ledger.domain.custody import CardDrawn
from dune_ledger.infrastructure.demo import play_demo
from dune_ledger.infrastructure.keys import Keys, init_key_file, public_key_info
from dune_ledger.infrastructure.storage import open_rooms
from dune_ledger.infrastructure.transfer import (
    ImportRefused,
    export_rooms,
    import_rooms,
    parse_export,
)
from tests.support import layout, long_room, opened, room_key, tables, tamper


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
    # A room of the demo with a seat at 10 spice, and where its lines end.
    first_line = next(i for i, raw in enumerate(lines)
                      if orjson.loads(raw)["type"] == "RoomCreated" and i > 0
                      and '"spice":10' in orjson.loads(raw)["payload"])
    room_of = [orjson.loads(raw)["room"] for raw in lines]
    last_of_second_room = max(i for i, r in enumerate(room_of) if r == room_of[first_line])
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
    from dune_ledger.infrastructure.keys import init_key_file

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


# --- trust at the import (issue 24 item 1) ------------------------------------------


def forged(text: bytes, edit: Callable[[dict[str, Any]], None], *,
           keep_signatures: bool = False) -> bytes:
    """What a forger without the key makes of an export: each payload edited by `edit`,
    every hash and prev recomputed, the signatures deleted (or kept as they were)."""
    out, prev = [], ""
    for raw in text.splitlines():
        line = orjson.loads(raw)
        if line["version"] == 1:
            prev = "0" * 64
        body = orjson.loads(line["payload"])
        edit(body)
        body["prev"] = prev
        payload = orjson.dumps(body).decode()
        digest = chain_hash(line["room"], line["version"], line["type"], payload.encode())
        out.append(orjson.dumps({**line, "payload": payload, "prev": prev, "hash": digest,
                                 "sig": line["sig"] if keep_signatures else None}))
        prev = digest
    return b"\n".join(out) + b"\n"


def richer_emperor(body: dict[str, Any]) -> None:
    """The issue's forgery: 50 more spice to the Emperor at creation, 50 less in the Bank."""
    if "state" in body["fact"]:
        state = body["fact"]["state"]
        next(s for s in state["seats"] if s["faction"] == "emperor")["spice"] += 50
        state["bank"] -= 50


def planted_tokens(body: dict[str, Any]) -> None:
    richer_emperor(body)
    if "token_hashes" in body["meta"]:
        body["meta"]["token_hashes"] = {seat: token_hash(f"forger-{seat}")
                                        for seat in body["meta"]["token_hashes"]}


def one_room(app: RoomsApp) -> tuple[str, bytes]:
    room = app.create_room(layout())["room"]
    for seat in ("emperor", "harkonnen", "emperor"):
        assert app.execute(room, seat, {"type": "draw"})["ok"]
    return room, exported(app, [room])


def nothing_stored(app: RoomsApp, room: str) -> bool:
    return app.stored_records(UUID(room)) == []


@pytest.mark.parametrize("edit", [richer_emperor, planted_tokens])
def test_a_forged_export_is_refused_with_nothing_stored(url: str, tmp_path: Path, edit,
                                                        capsys: pytest.CaptureFixture[str]):
    from dune_ledger.infrastructure.cli import main

    # A room this server signed, in another of its stores (the same key file).
    with open_rooms(f"sqlite:///{tmp_path / 'source.db'}") as source:
        room, text = one_room(source)
    path = tmp_path / "forged.jsonl"
    for forgery, words in ((forged(text, edit), "not signed"),
                           (forged(text, edit, keep_signatures=True), "does not verify")):
        assert forgery != text
        with opened(url) as target:
            with pytest.raises(ImportRefused, match=words):
                import_rooms(target, parse_export(forgery))
            assert nothing_stored(target, room)
        path.write_bytes(forgery)
        assert main(["--db", url, "import", str(path)]) == 1
        assert "import refused, nothing stored" in capsys.readouterr().err
        with opened(url) as target:
            assert nothing_stored(target, room)
    # The genuine export goes in.
    path.write_bytes(text)
    assert main(["--db", url, "import", str(path)]) == 0
    with opened(url) as target:
        assert audit_room(target, room)["ok"]


def test_an_export_from_another_key_needs_trust_key_and_keeps_verifying(
        url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    from dune_ledger.infrastructure.cli import main

    other = tmp_path / "other-site.key"
    with open_rooms(f"sqlite:///{tmp_path / 'other.db'}", key_file=str(other)) as source:
        room, text = one_room(source)
        before = seen(source, room)
    their_key = public_key_info(other)["public_key"]
    third_key = init_key_file(tmp_path / "third.key")["public_key"]
    path = tmp_path / "theirs.jsonl"
    path.write_bytes(text)
    with opened(url) as target:
        with pytest.raises(ImportRefused, match="another key"):
            import_rooms(target, parse_export(text))
        with pytest.raises(ImportRefused, match="--trust-key"):
            import_rooms(target, parse_export(text), third_key)
        assert nothing_stored(target, room)
    assert main(["--db", url, "import", str(path)]) == 1
    assert main(["--db", url, "import", str(path), "--trust-key", "not-a-key"]) == 2
    capsys.readouterr()
    assert main(["--db", url, "import", str(path), "--trust-key", their_key]) == 0
    assert orjson.loads(capsys.readouterr().out)["rooms"] == {room: before["events"]}
    version = before["events"]
    with opened(url) as target:  # a fresh process: nothing kept
        assert seen(target, room) == before
        assert target.view_at(room, 2, "emperor")["version"] == 2  # a past view verifies
        done = target.execute(room, "harkonnen", {"type": "draw"})
        assert done["ok"] and done["version"] == version + 1
        last = target.records(UUID(room))[-1]  # signed by this server, not the other
        assert target.signer.verify(last.signed_message(), str(last.signature))
    with opened(url) as target:
        assert audit_room(target, room)["ok"]
        assert target.view_at(room, 2, "emperor")["version"] == 2
        # The trust is for the imported appends only: an append signed with the trusted
        # key later (its holder writing into this store) is damage.
        head = target.records(UUID(room))[-1]
        card = target.load(room).state.deck[0]
        forgery = Recorded(head.originator_id, version + 2, CardDrawn(seat="emperor", card=card),
                           head.hash(), "emperor", "x", version + 2, head.at)
        forgery.signature = Keys(other).sign(forgery.signed_message())
        target.recorder.insert_events(  # type: ignore[attr-defined]
            [target.mapper.to_stored_event(forgery)])  # type: ignore[arg-type]
    with opened(url) as target:
        refused = target.execute(room, "emperor", {"type": "draw"})
        assert refused["error"]["code"] == "room_damaged"
        assert "does not verify" in refused["error"]["message"]
        assert not audit_room(target, room)["ok"]


def test_a_trusted_key_cannot_be_named_in_the_database(url: str, tmp_path: Path):
    """The trust lives in a snapshot the server signed: a writer who puts a key of its
    own there breaks the snapshot's signature."""
    other = tmp_path / "other-site.key"
    with open_rooms(f"sqlite:///{tmp_path / 'other.db'}", key_file=str(other)) as source:
        room, text = one_room(source)
    with opened(url) as target:
        import_rooms(target, parse_export(text), public_key_info(other)["public_key"])
        assert target.trusted(UUID(room)) is not None
        assert audit_room(target, room)["ok"]
        _, snapshots = tables(target)
        stored = target.snapshots.get(UUID(room), desc=True, limit=1)  # type: ignore[union-attr]
        snapshot = next(iter(stored))
        thief = init_key_file(tmp_path / "thief.key")["public_key"]
        state = {**snapshot.state, "trusted": {"key": thief, "upto": 10**6}}
        body = orjson.dumps({"state": state, "at": snapshot.at})
        tamper(url, f"UPDATE {snapshots} SET state = ? WHERE originator_id = ?",
               target.mapper.seal(  # type: ignore[attr-defined]
                   signed(body, snapshot.signature)), room_key(url, room))
    with opened(url) as target:
        assert target.trusted(UUID(room)) is None  # the snapshot no longer verifies
        refused = target.execute(room, "emperor", {"type": "draw"})
        assert refused["error"]["code"] == "room_damaged"
        assert "snapshot" in refused["error"]["message"]
        assert not audit_room(target, room)["ok"]
