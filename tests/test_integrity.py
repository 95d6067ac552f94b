"""The signed chain against a writer who has the database but not the key (issue 18).

Each attack is made as such a writer would: rows edited in the store itself, every
chain hash recomputed so that the plain hash chain holds, the projections rebuilt.
Only the signatures, made with the key file the writer does not have, tell.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import orjson
import pytest

from dune_ledger.application.audit import audit_all, audit_room
from dune_ledger.application.rooms import RoomsApp, token_hash
from dune_ledger.application.stream import APPEND, Recorded, chain_hash
from dune_ledger.domain.errors import Rejection
from dune_ledger.infrastructure.keys import Keys, public_key_info
from dune_ledger.infrastructure.settings import Settings
from tests.support import authenticate, layout, opened, room_key, tables, tamper


def played(app: RoomsApp) -> tuple[str, dict[str, str]]:
    """A room with a few commands of two seats; its seat tokens."""
    created = app.create_room(layout())
    room = created["room"]
    for seat in ("emperor", "harkonnen", "emperor"):
        assert app.execute(room, seat, {"type": "draw"})["ok"]
    assert app.execute(room, "harkonnen", {"type": "discard", "card": "chaumas"})["ok"]
    return room, created["seats"]


def rewrite(app: RoomsApp, url: str, room: str,
            edit: Callable[[Recorded], None], *, keep_signatures: bool = True) -> None:
    """What a writer without the key does: edit events, recompute every chain hash from
    the first event on, write the rows back (the old signatures kept, or dropped),
    delete the snapshots (they hold the old state) and rebuild the projections."""
    uid = UUID(room)
    records = app.records(uid)
    events, snapshots = tables(app)
    prev = records[0].prev_hash
    for rec in records:
        edit(rec)
        rec.prev_hash = prev
        rec.stored = None  # the body is made again from the edited fields
        if not keep_signatures:
            rec.signature = None
        tamper(url, f"UPDATE {events} SET state = ? WHERE originator_id = ? "
                    "AND originator_version = ?",
               app.mapper.seal(rec.stored_form()),  # type: ignore[attr-defined]
               room_key(url, room), rec.originator_version)
        prev = rec.hash()
    tamper(url, f"DELETE FROM {snapshots} WHERE originator_id = ?", room_key(url, room))
    app.read_models.rebuild()  # type: ignore[union-attr]


def hashes_hold(report: dict[str, Any]) -> bool:
    """The plain hash chain holds: only signatures are named by chain_intact."""
    details = report["checks"]["chain_intact"]["details"]
    return bool(details) and all("signature" in d or "not signed" in d for d in details)


def refused_as_damaged(app: RoomsApp, room: str) -> str:
    result = app.execute(room, "emperor", {"type": "draw"})
    assert not result["ok"] and result["error"]["code"] == "room_damaged", result
    return str(result["error"]["message"])


def test_every_append_is_signed_and_an_honest_room_verifies(url: str) -> None:
    with opened(url) as app:
        room, _ = played(app)
        records = app.records(UUID(room))
        ends = [r for i, r in enumerate(records)
                if i + 1 == len(records) or records[i + 1].append != r.append]
        assert all(r.signature is not None for r in ends)
        keys = Keys()
        assert all(keys.verify(APPEND + r.hash().encode(), str(r.signature)) for r in ends)
        report = audit_room(app, room)
        assert report["ok"], report
        # The hash covers the payload without its signature: the stored JSON minus "sig".
        body = orjson.loads(records[-1].stored_form())
        assert body.pop("sig") == records[-1].signature
        assert orjson.dumps(body) == records[-1].body()


def test_fifty_more_spice_recomputed_without_the_key_is_found(url: str) -> None:
    with opened(url) as app:
        room, _ = played(app)
        other, _ = played(app)

        def richer(rec: Recorded) -> None:
            if rec.originator_version == 1:
                seats = rec.fact.state["seats"]  # type: ignore[attr-defined]
                next(s for s in seats if s["faction"] == "emperor")["spice"] += 50

        rewrite(app, url, room, richer)
    with opened(url) as app:  # a restarted server: nothing kept in memory
        assert app.load(other).version == 5
        assert "signature" in refused_as_damaged(app, room)
        report = audit_room(app, room)
        assert not report["ok"] and report["checks"]["chain_intact"]["ok"] is False
        assert hashes_hold(report)  # the recomputed hashes all hold
        # Every replay check passes: only the key tells (and the load that refuses it).
        assert [name for name, c in report["checks"].items() if c["ok"] is False] == \
            ["chain_intact", "live_state_matches"], report
        assert "unloadable" in report["checks"]["live_state_matches"]["details"][0]
        assert [r["ok"] for r in audit_all(app) if r["room"] in (room, other)] == \
            [False, True]


def test_signatures_stripped_are_found(url: str) -> None:
    with opened(url) as app:
        room, _ = played(app)
        rewrite(app, url, room, lambda rec: None, keep_signatures=False)
    with opened(url) as app:
        assert "not signed" in refused_as_damaged(app, room)
        details = audit_room(app, room)["checks"]["chain_intact"]["details"]
        assert any("not signed" in d for d in details)


def test_an_append_made_without_the_key_is_found(url: str, tmp_path: Path) -> None:
    with opened(url) as app:
        room, _ = played(app)
        version = app.load(room).version
    # The writer appends an event of its own, hash-chained, signed with a key of its own.
    thief = str(tmp_path / "thief.key")
    with opened(url) as app:
        rec = app.records(UUID(room))[-1]
        deck = app.load(room).state.deck
        from dune_ledger.domain.custody import CardDrawn

        forged = Recorded(rec.originator_id, version + 1, CardDrawn(seat="emperor", card=deck[0]),
                          rec.hash(), "emperor", "x", version + 1, rec.at)
        forged.signature = Keys(thief).sign(forged.signed_message())
        app.recorder.insert_events(  # type: ignore[attr-defined]
            [app.mapper.to_stored_event(forged)])  # type: ignore[arg-type]
    with opened(url) as app:
        assert "does not verify" in refused_as_damaged(app, room)
        details = audit_room(app, room)["checks"]["chain_intact"]["details"]
        assert details == [f"version {version + 1}: the signature of its append does not "
                           "verify with the server's key"]


def test_a_seat_token_hash_replaced_is_found(url: str) -> None:
    with opened(url) as app:
        room, tokens = played(app)
        assert authenticate(app, room, tokens["emperor"]) == "emperor"

        def taken_over(rec: Recorded) -> None:
            if rec.originator_version == 1:
                rec.meta["token_hashes"]["emperor"] = token_hash("the thief's token")

        rewrite(app, url, room, taken_over)
    with opened(url) as app:
        with pytest.raises(Rejection) as refused:
            authenticate(app, room, "the thief's token")
        assert refused.value.code == "room_damaged"
        assert hashes_hold(audit_room(app, room))


def test_a_forged_snapshot_is_found(url: str) -> None:
    with opened(url, settings=Settings(snapshot_interval=2)) as app:
        room, _ = played(app)
        _, snapshots = tables(app)
        assert app.snapshots is not None
        (latest,) = app.snapshots.get(UUID(room), desc=True, limit=1)
    state = latest.state  # type: ignore[attr-defined]
    next(s for s in state["state"]["seats"] if s["faction"] == "emperor")["spice"] += 50
    body = orjson.dumps({"state": state, "at": latest.at})  # type: ignore[attr-defined]
    signed = body[:-1] + b',"sig":"' + latest.signature.encode() + b'"}'  # type: ignore
    tamper(url, f"UPDATE {snapshots} SET state = ? WHERE originator_id = ? AND "
                "originator_version = ?", signed, room_key(url, room),
           latest.originator_version)
    with opened(url) as app:
        assert "snapshot's signature" in refused_as_damaged(app, room)


def test_another_key_file_verifies_no_room_and_a_retired_key_does(url: str,
                                                                   tmp_path: Path) -> None:
    with opened(url) as app:
        room, _ = played(app)
    other = tmp_path / "other.key"
    Keys(other).create()
    with opened(url, key_file=str(other)) as app:  # type: ignore[arg-type]
        assert "does not verify" in refused_as_damaged(app, room)
    # The server's key retired into the new one: its rooms verify, new appends use the new.
    data = orjson.loads(other.read_bytes())
    data["retired_public_keys"] = [public_key_info()["public_key"]]
    other.write_bytes(orjson.dumps(data))
    with opened(url, key_file=str(other)) as app:  # type: ignore[arg-type]
        assert app.execute(room, "emperor", {"type": "discard", "card": "karama-1"})["ok"]
        assert audit_room(app, room)["ok"]


def test_the_key_file_is_made_once_0600_by_the_first_write_and_never_by_a_read(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "server.key"
    db = f"sqlite:///{tmp_path / 'rooms.db'}"
    with opened(db, key_file=str(path)) as app:  # type: ignore[arg-type]
        assert app.read_models is not None and app.read_models.catch_up() == 0
        assert not path.exists()  # nothing written yet
        room, _ = played(app)
        played(app)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert capfd.readouterr().err.count("created the key file") == 1
    for name in ("rooms.db", "rooms.db-wal", "rooms.db-shm"):
        if (tmp_path / name).exists():
            assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o600, name
    assert (tmp_path / "rooms.db").exists()
    key = orjson.loads(path.read_bytes())
    assert "cipher_key" not in key  # a signing key only
    # Never inside the database.
    db_bytes = b"".join(p.read_bytes() for p in tmp_path.glob("rooms.db*"))
    assert key["signing_key"].encode() not in db_bytes
    with opened(db, key_file=str(path)) as app:  # type: ignore[arg-type]
        assert audit_room(app, room)["ok"]


def test_keys_init_and_show_on_the_command_line(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from dune_ledger.infrastructure.cli import main

    path = tmp_path / "k.key"
    assert main(["keys", "show", "--file", str(path)]) == 2  # none yet: an error, no file
    assert not path.exists()
    capsys.readouterr()
    assert main(["keys", "init", "--cipher", "--file", str(path)]) == 0
    made = orjson.loads(capsys.readouterr().out)
    assert made["cipher"] and made["encryption_at_rest"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert main(["keys", "show", "--file", str(path)]) == 0
    shown = orjson.loads(capsys.readouterr().out)
    assert shown["public_key"] == made["public_key"]
    assert "cipher_key" not in shown and "signing_key" not in shown
    assert main(["keys", "init", "--file", str(path)]) == 2  # never replaced
    assert orjson.loads(path.read_bytes())["public_key"] == made["public_key"]


def test_a_signature_covers_the_chain_hash_of_the_last_event_only() -> None:
    """The message is APPEND + the hex chain hash: what an export's reader verifies."""
    keys = Keys(os.environ["DUNE_LEDGER_KEY_FILE"])
    digest = chain_hash("room", 1, "RoomCreated", b"{}")
    signature = keys.sign(APPEND + digest.encode())
    assert keys.verify(APPEND + digest.encode(), signature)
    assert not keys.verify(APPEND + chain_hash("room", 2, "RoomCreated", b"{}").encode(),
                           signature)


def test_a_room_without_signatures_stays_damaged_and_nothing_signs_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """RULES 8: an unsigned chain is damage, whatever its age. A room stripped of its
    signatures (as a room stored before signing would look) is refused, and neither a
    command nor the key commands turn it into a signed room."""
    from dune_ledger.infrastructure.cli import main

    url = f"sqlite:///{tmp_path / 'rooms.db'}"
    key = str(tmp_path / "server.key")
    with opened(url, key_file=key) as app:
        old, _ = played(app)
        rewrite(app, url, old, lambda rec: None, keep_signatures=False)
    with opened(url, key_file=key) as app:
        message = refused_as_damaged(app, old)
        assert "not signed" in message and "adopt" not in message
    assert main(["--db", url, "keys", "adopt", "--file", key]) == 2  # no such command
    capsys.readouterr()
    with opened(url, key_file=key) as app:
        done = app.execute(old, "harkonnen", {"type": "draw"})
        assert done["error"]["code"] == "room_damaged"
        assert "not signed" in refused_as_damaged(app, old)
        assert not audit_room(app, old)["ok"]
        assert all(r.signature is None for r in app.stored_records(UUID(old))
                   if isinstance(r, Recorded))


def test_a_process_that_kept_the_room_finds_an_append_made_without_the_key(url: str) -> None:
    """A command decided on a room kept in memory meets the forged append at its save,
    reads the room again and refuses it; so does catching a kept room up."""
    from dune_ledger.domain.custody import CardDrawn

    with opened(url) as app:
        room, _ = played(app)
        assert app.kept.rooms  # kept after its last command
        head = app.records(UUID(room))[-1]
        card = app.load(room).state.deck[0]
        app.kept.keep(app.load(room))
        before = app.load(room)  # as a process holds it, before the forged append
        forged = Recorded(head.originator_id, head.originator_version + 1,
                          CardDrawn(seat="emperor", card=card), head.hash(), "emperor", "x",
                          head.originator_version + 1, head.at)  # no signature
        app.recorder.insert_events(  # type: ignore[attr-defined]
            [app.mapper.to_stored_event(forged)])  # type: ignore[arg-type]
        assert "not signed" in refused_as_damaged(app, room)
        app.kept.keep(before)
        with pytest.raises(Rejection) as refused:
            app.current(room)
        assert refused.value.code == "room_damaged" and "not signed" in refused.value.message


def test_a_past_view_between_snapshots_is_checked_against_its_appends_signature(
        url: str) -> None:
    """An edit between two snapshots, its hashes recomputed up to the next snapshot
    only, leaves every current load whole: `room at` a version inside it is refused."""
    with opened(url, settings=Settings(snapshot_interval=4)) as app:
        room = app.create_room(layout())["room"]
        for i in range(4):
            seat = ("emperor", "harkonnen")[i % 2]
            assert app.execute(room, seat, {"type": "draw"})["ok"]
            card = app.load(room).state.seat(seat).hand[-1]
            assert app.execute(room, seat, {"type": "discard", "card": card})["ok"]
        records = app.records(UUID(room))
        assert [r.originator_version for r in records] == list(range(1, 10))
        assert app.view_at(room, 6, "emperor")["version"] == 6
        events, _ = tables(app)
        prev = records[4].prev_hash  # event 5 follows the snapshot at 4
        for rec in records[4:7]:  # events 5 to 7; the snapshot at 8 holds the honest head
            if rec.originator_version == 5:
                rec.at = "2000-01-01T00:00:00+00:00"
            rec.prev_hash, rec.stored = prev, None
            tamper(url, f"UPDATE {events} SET state = ? WHERE originator_id = ? "
                        "AND originator_version = ?",
                   app.mapper.seal(rec.stored_form()),  # type: ignore[attr-defined]
                   room_key(url, room), rec.originator_version)
            prev = rec.hash()
    with opened(url, settings=Settings(snapshot_interval=4)) as app:
        assert app.load(room).version == 9  # the latest snapshot and what follows: honest
        for version in (5, 6, 7):
            with pytest.raises(Rejection) as refused:
                app.view_at(room, version, "emperor")
            assert refused.value.code == "room_damaged"
        assert app.view_at(room, 9, "emperor")["version"] == 9
        assert not audit_room(app, room)["ok"]


def test_an_edit_in_the_middle_names_its_append_as_the_first_that_fails(url: str) -> None:
    """The audit verifies the signature that ends the stream; when it fails it finds the
    first append whose signature fails (each covers the ones before it), and names it."""
    with opened(url) as app:
        room, _ = played(app)
        for _ in range(4):
            assert app.execute(room, "emperor", {"type": "draw"})["ok"]
            card = app.load(room).state.seat("emperor").hand[-1]
            assert app.execute(room, "emperor", {"type": "discard", "card": card})["ok"]
        records = app.records(UUID(room))
        starts = [r.originator_version for r in records if r.append == r.originator_version]
        edited = starts[len(starts) // 2]  # an append in the middle
        end = starts[starts.index(edited) + 1] - 1  # the last event of that append
        rewrite(app, url, room, lambda rec: setattr(rec, "at", "2000-01-01T00:00:00+00:00")
                if rec.originator_version == edited else None)
    with opened(url) as app:
        details = audit_room(app, room)["checks"]["chain_intact"]["details"]
        assert details == [f"version {end}: the signature of its append does not verify "
                           "with the server's key"]


def test_a_middle_append_whose_signature_is_gone_is_found(url: str) -> None:
    """Every append must carry a signature, though only the last is verified: one
    deleted in the middle (the hashes untouched) is named by the audit."""
    with opened(url) as app:
        room, _ = played(app)
        records = app.records(UUID(room))
        middle = records[2]
        assert middle.signature is not None and records[3].append != middle.append
        middle.signature = None
        events, _ = tables(app)
        tamper(url, f"UPDATE {events} SET state = ? WHERE originator_id = ? "
                    "AND originator_version = ?",
               app.mapper.seal(middle.stored_form()),  # type: ignore[attr-defined]
               room_key(url, room), middle.originator_version)
    with opened(url) as app:
        report = audit_room(app, room)
        assert report["checks"]["chain_intact"]["details"] == [
            "version 3: its append is not signed"]
        # The stored stream is the same bytes otherwise: only the audit had to tell.
        assert not report["ok"]
