"""Fair dealing on the pages (RULES 9), in Debian's Chromium: a committed room's seat page
sets its seed by itself on first open and lets the player set one; the host page ends
the room; every page then shows the end and the published secret; the transcript the
seat page downloads verifies with `dune-ledger verify`; a press answered 503 is sent
again with its command_id and applied once. Each new state is checked at 280, 900 and
1400 px (no sideways scroll, Tab order as drawn, axe-core with no violation) and
photographed to tests/artifacts/.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.page_support import Seat, Server, Watcher, at_each_width
from tests.support import committed_layout

HEX32 = re.compile(r"[0-9a-f]{32}")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with Server(tmp_path / "rooms.db",
                env={"DUNE_LEDGER_KEY_FILE": str(tmp_path / "server.key")}) as s:
        yield s


def public(server: Server, room: str, token: str) -> dict[str, Any]:
    view: dict[str, Any] = server.get(f"/rooms/{room}/public", token)
    return view


def new_page(browser: Any) -> tuple[Any, Any]:
    """A browser context of its own and a page in it, not yet opened anywhere."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    return context, page


def lose_the_first_answer(page: Any, route: str) -> list[dict[str, Any]]:
    """Every command the page posts to `route` reaches the server and lands, but the
    first one's answer is lost: the page is answered 503. Returns the bodies sent."""
    sent: list[dict[str, Any]] = []

    def answer(request: Any) -> None:
        sent.append(json.loads(request.request.post_data))
        answered = request.fetch()
        if len(sent) == 1:
            request.fulfill(status=503, json={"ok": False, "version": 0, "error": {
                "code": "unavailable", "message": "the store does not answer"}})
        else:
            request.fulfill(response=answered)

    page.route(route, answer)
    return sent


def test_seeds_the_end_and_a_transcript_that_verifies(browser: Any, server: Server,
                                                      tmp_path: Path) -> None:
    created = server.create(committed_layout(deck=None))
    room, tokens, spectator = created["room"], created["seats"], created["spectator"]

    # First open: the page sets a seed from the browser by itself, and everyone sees it.
    richese = Seat(browser, server, room, "richese", tokens["richese"])
    richese.page.wait_for_function(
        "() => document.querySelector('[data-seed=richese] code') !== null")
    seeds = public(server, room, spectator)["fairness"]["seeds"]
    assert HEX32.fullmatch(seeds["richese"]), seeds
    assert richese.page.locator("[data-seed=richese] code").inner_text() == seeds["richese"]
    commitment = public(server, room, spectator)["fairness"]["commitment"]
    assert richese.page.locator("#commitment-whole").input_value() == commitment
    assert "leaks the deck" in richese.page.locator("#fair-limits").inner_text()

    # A player sets their own seed from the page; it replaces the browser's.
    emperor = Seat(browser, server, room, "emperor", tokens["emperor"])
    emperor.page.wait_for_function(
        "() => document.querySelector('[data-seed=emperor] code') !== null")
    emperor.page.get_by_label("My own seed").fill("Shai-Hulud 42!")
    emperor.page.get_by_role("button", name="Set my seed").click()
    emperor.page.wait_for_function(
        "() => document.querySelector('[data-seed=emperor] code').textContent === 'Shai-Hulud 42!'")
    assert public(server, room, spectator)["fairness"]["seeds"]["emperor"] == "Shai-Hulud 42!"
    emperor.settled()
    at_each_width(emperor.page, "fair", "seeds")

    # The spectator sees the same, with no seed control.
    watcher = Watcher(browser, server, room, spectator)
    watcher.page.wait_for_function(
        "() => document.querySelector('[data-seed=emperor] code') !== null")
    assert watcher.page.locator("#seed-form").count() == 0
    richese.settled()

    # The host ends the room: asked once, then the transcript is offered.
    context, host = new_page(browser)
    host.goto(f"{server.base}/host")
    host.get_by_role("button", name="End room…").click()
    at_each_width(host, "fair", "host-confirm")
    host.get_by_role("button", name="Yes, end it").click()
    host.get_by_role("button", name="Download the transcript").wait_for()
    ended = public(server, room, spectator)
    assert ended["ended"] and ended["fairness"]["secret"]
    assert host.get_by_role("button", name="End room…").count() == 0
    at_each_width(host, "fair", "host-ended")

    # Every page shows the end and the secret.
    for page in (richese.page, emperor.page, watcher.page):
        page.locator("#ended").wait_for()
        assert page.locator("#secret-whole").input_value() == ended["fairness"]["secret"]
        assert page.locator("#seed-form").count() == 0
    key = httpx.get(f"{server.base}/keys").json()["public_key"]
    richese.page.wait_for_function(
        "k => document.getElementById('verify-command').textContent.includes(k)", arg=key)
    richese.settled()
    at_each_width(richese.page, "fair", "ended")
    at_each_width(watcher.page, "fair", "watch-ended")

    # The seat page's transcript is a file that `dune-ledger verify` accepts.
    with richese.page.expect_download() as caught:
        richese.page.get_by_role("button", name="Download the transcript").click()
    download = caught.value
    assert download.suggested_filename == f"transcript-{room}.jsonl"
    file = tmp_path / download.suggested_filename
    download.save_as(file)
    shown = richese.page.locator("#verify-command").inner_text()
    assert shown == f"dune-ledger verify {file.name} --key {key}"
    checked = subprocess.run([sys.executable, "-m", "dune_ledger", "verify", str(file),
                              "--key", key], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    report = json.loads(checked.stdout)
    assert report["ok"] and report["room"] == room, report

    # The spectator's transcript is the same file.
    with watcher.page.expect_download() as caught:
        watcher.page.get_by_role("button", name="Download the transcript").click()
    assert Path(caught.value.path()).read_bytes() == file.read_bytes()
    for seat in (richese, emperor):
        assert not seat.errors, seat.errors
        seat.close()
    watcher.close()
    context.close()


def test_a_press_answered_503_is_sent_again_with_its_command_id(browser: Any,
                                                               server: Server) -> None:
    created = server.create(committed_layout(deck=None))
    room, tokens, spectator = created["room"], created["seats"], created["spectator"]
    before = public(server, room, spectator)["version"]
    context, page = new_page(browser)
    sent = lose_the_first_answer(page, f"**/rooms/{room}/commands")
    page.goto(f"{server.base}/play/{room}#token={tokens['harkonnen']}")
    page.wait_for_function("() => document.querySelector('[data-seed=harkonnen] code') !== null")
    for _ in range(100):  # the stream may show the landed seed before the page sends it again
        if len(sent) == 2:
            break
        page.wait_for_timeout(100)
    page.wait_for_timeout(500)  # and nothing more is sent
    assert [c["type"] for c in sent] == ["seed", "seed"]
    assert sent[0]["command_id"] == sent[1]["command_id"]
    # Stored once: one event, not two.
    assert public(server, room, spectator)["version"] == before + 1
    assert page.locator("#error").is_hidden()

    # A new press is a new command.
    page.get_by_label("My own seed").fill("spice must flow")
    page.get_by_role("button", name="Set my seed").click()
    page.wait_for_function(
        "() => document.querySelector('[data-seed=harkonnen] code').textContent"
        " === 'spice must flow'")
    assert len(sent) == 3 and sent[2]["command_id"] != sent[0]["command_id"]
    assert public(server, room, spectator)["version"] == before + 2
    context.close()


def test_an_end_answered_503_is_sent_again_and_ends_once(browser: Any, server: Server) -> None:
    created = server.create(committed_layout(deck=None))
    room, spectator = created["room"], created["spectator"]
    before = public(server, room, spectator)["version"]
    context, host = new_page(browser)
    sent = lose_the_first_answer(host, f"**/rooms/{room}/end")
    host.goto(f"{server.base}/host")
    host.get_by_role("button", name="End room…").click()
    host.get_by_role("button", name="Yes, end it").click()
    host.get_by_role("button", name="Download the transcript").wait_for()
    assert len(sent) == 2 and sent[0]["command_id"] == sent[1]["command_id"], sent
    ended = public(server, room, spectator)
    assert ended["version"] == before + 1 and ended["ended"] == before + 1
    assert host.locator("#error").is_hidden()
    context.close()
