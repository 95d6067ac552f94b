"""The typed clients (issue 37): clients/typescript's types are current, a strict
TypeScript program written against the package with no cast plays a room on a live
`dune-ledger serve` across a restart, its signing helper signs as RULES 9.3 says, and
the Python client openapi-python-client generates from the same schema works.

The Node packages come from clients/typescript/package-lock.json (`npm ci`, which
scripts/services runs when node_modules is missing).
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from scripts import client_types
from tests.support import ADMIN, auth, free_port

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "clients" / "typescript"
PROGRAM = PACKAGE / "test" / "program.ts"
BUILT = PACKAGE / ".test-build"


@pytest.fixture(scope="module")
def node_modules() -> Path:
    if not (PACKAGE / "node_modules" / ".bin" / "tsc").exists():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=PACKAGE, check=True,
                       capture_output=True, timeout=300)
    return PACKAGE / "node_modules"


def test_the_typescript_types_are_generated_from_todays_schema(node_modules: Path) -> None:
    assert client_types.main(["--check"]) == 0


class Serve:
    """`dune-ledger serve` in its own process, on one SQLite file and key file; `restart`
    stops it and starts another on the same port and store."""

    def __init__(self, tmp: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "DUNE_LEDGER_KEY_FILE": str(tmp / "server.key")}
        self.env.pop("DUNE_LEDGER_ADMIN_TOKEN", None)
        self.db = f"sqlite:///{tmp / 'rooms.db'}"
        self.process = self.start()

    def start(self) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            [sys.executable, "-m", "dune_ledger", "--db", self.db, "serve", "--port",
             str(self.port)], env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base}/readyz", timeout=1).status_code == 200:
                    return process
            except httpx.TransportError:
                time.sleep(0.1)
        process.kill()
        raise RuntimeError("serve did not start")

    def restart(self) -> None:
        self.stop()
        self.process = self.start()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=20)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    server = Serve(tmp_path)
    yield server
    server.stop()


def test_the_program_uses_no_cast_no_any_and_no_ts_comment() -> None:
    code = re.sub(r"//[^\n]*", "", PROGRAM.read_text())
    assert not re.search(r"\bas\s+[A-Za-z{(\[]|\bany\b|@ts-|<[A-Z]\w*>\s*\w", code)


def test_a_strict_program_plays_a_room_across_a_restart(node_modules: Path,
                                                        serve: Serve) -> None:
    subprocess.run([str(node_modules / ".bin" / "tsc"), "-p", "test/tsconfig.json",
                    "--outDir", str(BUILT)], cwd=PACKAGE, check=True, timeout=120)
    node = subprocess.Popen(
        ["node", str(BUILT / "test" / "program.js"), serve.base,
         str(ROOT / "examples" / "box.json")],
        cwd=PACKAGE, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert node.stdin is not None and node.stdout is not None
    try:
        assert _line(node.stdout) == "RESTART"
        serve.restart()  # the stream drops; the command waits for the new process
        node.stdin.write(b"restarted\n")
        node.stdin.flush()
        found: dict[str, Any] = json.loads(_line(node.stdout))
        assert node.wait(timeout=60) == 0
    finally:
        node.kill()
    # The search: its candidates, one taken, the view that followed, and the refusal.
    assert found["search"] == "e3" and found["opened"] == 3 and found["candidates"]
    assert found["taken"]["ok"] and found["taken"]["events"][:3] == [
        "CardRetrieved", "PileShuffled", "BoxDiscarded"]
    # Resumed with Last-Event-ID 3 on the new process: the next view is the one after
    # the command, nothing missed and nothing repeated.
    assert found["resumed"] == found["taken"]["version"] > found["opened"]
    assert set(found["hand"]) & set(found["candidates"])
    assert found["refusal"] == "stale_event"
    # The operator's end, sent as a typed command: its RoomEnded narrowed by `type`
    # (a layout room publishes no secret).
    assert found["ended"] == [None]
    # Its signature is the one RULES 9.3 defines, checked here with the server's library.
    signed = found["signed"]
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(signed["public_key"]))
    for command in signed["commands"]:
        unsigned = {k: v for k, v in command.items() if k != "sig"}
        message = json.dumps({"room": found["room"], "seat": "richese", "command": unsigned},
                             sort_keys=True, separators=(",", ":")).encode()
        key.verify(base64.b64decode(command["sig"]), message)  # raises when it does not
    assert "🐛" in signed["commands"][1]["question"]


def _line(out: IO[bytes]) -> str:
    return out.readline().decode().strip()


def test_the_generated_python_client_plays_a_search(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """openapi-python-client makes a client of the same schema; it creates a room, opens
    a search and reads the typed view back, over the app in this process."""
    from fastapi.testclient import TestClient

    from dune_ledger.infrastructure.http import create_app
    from dune_ledger.infrastructure.storage import open_rooms

    source = tmp_path / "openapi.json"
    source.write_text(json.dumps(client_types.openapi()))
    made = subprocess.run(
        [str(Path(sys.executable).parent / "openapi-python-client"), "generate", "--path",
         str(source), "--meta", "none", "--output-path", str(tmp_path / "dl_client")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert made.returncode == 0, made.stdout + made.stderr
    # Every schema and route is generated, but the transcript's JSON lines (a content
    # type the generator does not parse: read as bytes).
    said = made.stdout + made.stderr
    assert re.findall(r"WARNING parsing (\S+ \S+)", said) == ["GET /rooms/{room}/transcript"], said
    assert "Unable to process schema" not in said, said

    monkeypatch.syspath_prepend(tmp_path)  # the generated package, for this test only
    from dl_client import AuthenticatedClient  # type: ignore[import-not-found]
    from dl_client.api.default import (  # type: ignore[import-not-found]
        get_view_rooms_room_view_get as get_view,
    )
    from dl_client.api.default import (
        post_command_rooms_room_commands_post as post_command,
    )
    from dl_client.api.default import post_room_rooms_post as post_room
    from dl_client.models import (  # type: ignore[import-not-found]
        ActionSelectCard,
        BeginSearch,
        CommandResult,
        Layout,
        SeatView,
    )
    with open_rooms("memory://") as rooms:
        app = create_app(rooms, admin_token=ADMIN)

        def seat(token: str) -> Any:
            client = AuthenticatedClient(base_url="http://testserver", token=token)
            return client.set_httpx_client(TestClient(app, headers=auth(token)))

        layout = Layout.from_dict(json.loads((ROOT / "examples" / "box.json").read_text()))
        created = post_room.sync(client=seat(ADMIN), body=layout)
        richese = seat(created.seats["richese"])
        begun = post_command.sync(created.room, client=richese,
                                  body=BeginSearch(type_="begin_search", card="nullentropy-box"))
        assert isinstance(begun, CommandResult) and begun.ok
        view = get_view.sync(created.room, client=richese)
        assert isinstance(view, SeatView)
        cards = [c.id for c in view.nullentropy.search.cards]
        picks = [a for a in view.actions if isinstance(a, ActionSelectCard)]
        assert cards and [a.card for a in picks] == cards
        assert {a.search for a in picks} == {view.nullentropy.search.event}
