"""The seat page's server side: the same page for everyone, its two files, `dune-ledger table`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx
from fastapi.testclient import TestClient

from dune_ledger.infrastructure.http import create_app
from dune_ledger.infrastructure.storage import open_rooms
from tests.support import HANG, answering, free_port, layout


def test_the_page_is_the_same_for_every_visitor_and_holds_no_seat_data() -> None:
    with open_rooms("memory://") as rooms, TestClient(create_app(rooms, admin_token="")) as client:
        created = rooms.create_room(layout())
        room = created["room"]
        plain = client.get(f"/play/{room}")
        with_token = client.get(f"/play/{room}",
                                headers={"Authorization": f"Bearer {created['seats']['richese']}"})
        assert plain.status_code == 200 and plain.headers["content-type"].startswith("text/html")
        assert plain.text == with_token.text  # the page carries no view: the browser asks for it
        for cid in ("nullentropy-box", "crysknife", "karama-1", "shield-1", "maula-pistol"):
            assert cid not in plain.text
        policy = plain.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "unsafe" not in policy
        assert plain.headers["referrer-policy"] == "no-referrer"
        assert plain.headers["cache-control"] == "no-store"
        # A room id is text on the page, never markup.
        odd = client.get("/play/%3Cscript%3Ealert(1)")
        assert odd.status_code == 200 and "<script>alert" not in odd.text


def test_the_spectator_and_host_pages_hold_no_room_data_and_the_same_policy() -> None:
    with open_rooms("memory://") as rooms, TestClient(create_app(rooms, admin_token="x")) as client:
        created = rooms.create_room(layout())
        room = created["room"]
        for path in (f"/watch/{room}", "/host"):
            served = client.get(path)
            assert served.status_code == 200, path
            policy = served.headers["content-security-policy"]
            assert "script-src 'self'" in policy and "unsafe" not in policy
            assert served.headers["cache-control"] == "no-store"
            assert created["spectator"] not in served.text
            for cid in ("nullentropy-box", "crysknife", "karama-1"):
                assert cid not in served.text
        # Only the shipped examples are offered, as they are in examples/.
        box = client.get("/host/examples/box")
        assert box.status_code == 200 and box.json()["seats"]
        assert client.get("/host/examples/..%2Fpyproject").status_code == 404
        assert client.get("/host/examples/nothing").json()["error"]["code"] == "not_found"


def test_static_files_are_the_two_shipped_and_nothing_else() -> None:
    with open_rooms("memory://") as rooms, TestClient(create_app(rooms, admin_token="")) as client:
        assert client.get("/static/page/host.js").status_code == 200
        assert "innerHTML" not in client.get("/static/page/common.js").text
        js = client.get("/static/page/page.js")
        css = client.get("/static/page/page.css")
        assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
        assert "innerHTML" not in js.text  # text is set as text, never parsed as markup
        icon = client.get("/static/page/icon.svg")  # the favicon every page names
        assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg")
        for name in ("page.py", "..%2Fpage.py", "%2E%2E%2Fhttp.py", "play.html"):
            assert client.get(f"/static/page/{name}").status_code == 404


def test_table_serves_the_demo_room_and_prints_each_seat_page(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dune_ledger", "--db", f"sqlite:///{tmp_path / 't.db'}",
         "table", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("The tokens are shown once"):
                break
        pages = dict(re.findall(r"^  (\S.*?)\s+(http://\S+)$", "".join(lines), re.M))
        # The faction names as printed, the spectators and the host.
        assert set(pages) == {"Richese", "Emperor", "Harkonnen", "Atreides", "Spectators", "Host"}
        url, _, token = pages["Richese"].partition("#token=")
        room = url.rsplit("/", 1)[1]
        answering(f"http://127.0.0.1:{port}", proc)
        page = httpx.get(url, timeout=HANG)
        assert page.status_code == 200 and token not in page.text
        view = httpx.get(f"http://127.0.0.1:{port}/rooms/{room}/view",
                         headers={"Authorization": f"Bearer {token}"}, timeout=HANG)
        assert view.status_code == 200 and view.json()["seat"] == "richese"
        watch, _, spectator = pages["Spectators"].partition("#token=")
        assert watch == f"http://127.0.0.1:{port}/watch/{room}"
        public = httpx.get(f"http://127.0.0.1:{port}/rooms/{room}/public",
                           headers={"Authorization": f"Bearer {spectator}"})
        assert public.status_code == 200 and "me" not in public.json()
        assert httpx.get(pages["Host"]).status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=HANG)


def test_table_refuses_a_public_address() -> None:
    done = subprocess.run([sys.executable, "-m", "dune_ledger", "--db", "memory://",
                           "table", "--host", "0.0.0.0"], capture_output=True, text=True)
    assert done.returncode == 2
    assert "loopback" in done.stderr and "Traceback" not in done.stderr
