"""The table players enjoy, in Debian's Chromium: every screen state at 280, 900 and
1400 px with nothing wider than the screen, Tab order in the visual order, axe-core
with no violation; a whole Box search from the keyboard alone, the focus landing on
the next thing to do; Pass as the default and a Karama that asks once; the countdown
never above the window's length; the stale "server does not answer" banner gone
after reconnecting; presence; the spectator page.

Screenshots of every state go to tests/artifacts/ (git-ignored), to be looked at.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from dune_ledger.domain.catalog import room_cards
from tests.page_support import (
    BOX_FULL_HAND,
    TRUTH_AND_GIFT,
    WIDTHS,
    Seat,
    Server,
    Watcher,
    check_state,
    command,
    mentions,
    orjson_text,
)
from tests.support import example

AMBASSADOR_LAYOUT = example("ambassador")


@pytest.fixture
def server(tmp_path: Any) -> Iterator[Server]:
    with Server(tmp_path / "rooms.db") as s:
        yield s


def focused(page: Any) -> str:
    return str(page.evaluate("() => (document.activeElement.textContent || '').trim()"))


@pytest.mark.parametrize("width", WIDTHS)
def test_a_box_search_from_the_keyboard_at_each_width(browser: Any, server: Server,
                                                      width: int) -> None:
    created = server.create(BOX_FULL_HAND)
    room, tokens = created["room"], created["seats"]
    # The token form is a screen state too.
    probe = browser.new_context(viewport={"width": width, "height": 900})
    form = probe.new_page()
    form.goto(f"{server.base}/play/{room}")
    form.wait_for_selector("#token-form:not([hidden])")
    check_state(form, width, "box", "0-token")
    probe.close()

    owner = Seat(browser, server, room, "richese", tokens["richese"], width=width)
    opponent = Seat(browser, server, room, "emperor", tokens["emperor"], width=width)
    try:
        page = owner.page
        check_state(owner.page, width, "box", "1-before")
        check_state(opponent.page, width, "box", "1-before-opponent")
        # The Box is the first thing the keyboard meets after leaving the seat.
        page.evaluate("() => document.activeElement.blur()")
        page.keyboard.press("Tab")
        assert focused(page) == "Leave this seat"
        page.keyboard.press("Tab")
        assert focused(page) == "Pay 2 spice and search the discard"
        # What the Box does is said before paying: the fee, and that it is spent.
        says = page.inner_text("#box-says")
        assert "2 spice" in says and "cannot be called off" in says
        page.keyboard.press("Enter")
        page.wait_for_selector("#candidates li")
        owner.settled()
        # The focus lands on the first card to take.
        page.wait_for_function(
            "() => document.activeElement.textContent.startsWith('Take ')")
        check_state(owner.page, width, "box", "2-open")
        check_state(opponent.page, width, "box", "2-open-opponent")
        while focused(page) != "Take Maula Pistol":
            page.keyboard.press("Tab")
            assert focused(page).startswith("Take "), focused(page)
        page.keyboard.press("Enter")
        page.wait_for_selector("#candidates", state="detached")
        owner.settled()
        # Focus moves to my seat, where the new card is, never to the page body.
        page.wait_for_function("() => document.activeElement.id === 'me-title'")
        hand = page.eval_on_selector_all("#my-hand li", "els => els.map(e => e.dataset.card)")
        assert "maula-pistol" in hand
        assert "You took Maula Pistol." in page.inner_text("#mylog")
        assert "You paid 2 spice" in page.inner_text("#mylog")
        check_state(owner.page, width, "box", "3-selected")
        opponent.settled()
        assert "Maula Pistol" not in opponent.page.content()
        check_state(opponent.page, width, "box", "3-selected-opponent")
        # Room id and version live in the details area, not the header.
        assert room not in page.inner_text("header")
        assert page.text_content("#room-version") == str(owner.view()["version"])
    finally:
        owner.close()
        opponent.close()


def ambassador_income(server: Server) -> tuple[str, dict[str, str]]:
    """Atreides entered Arrakeen, Ecaz triggered the Richese ambassador for Harkonnen:
    the Emperor's income window is open, asking Harkonnen and Atreides."""
    created = server.create(AMBASSADOR_LAYOUT)
    room, tokens = created["room"], created["seats"]
    entered = command(server, room, tokens["atreides"], {
        "type": "enter_territory", "territory": "arrakeen", "via": "shipment"})
    assert entered["ok"], entered
    ecaz = server.get(f"/rooms/{room}/view", tokens["ecaz"])
    trigger = next(a for a in ecaz["actions"] if a["type"] == "ambassador_decide"
                   and a.get("trigger") and a.get("beneficiary") == "harkonnen")
    assert command(server, room, tokens["ecaz"], trigger)["ok"]
    return room, tokens


@pytest.mark.parametrize("width", WIDTHS)
def test_a_window_passes_by_default_and_karama_asks_once(browser: Any, server: Server,
                                                         width: int) -> None:
    room, tokens = ambassador_income(server)
    atreides = Seat(browser, server, room, "atreides", tokens["atreides"], width=width)
    try:
        page = atreides.page
        window = atreides.view()["response"]
        assert window["kind"] == "ambassador_income" and window["seconds"] == 30
        # Plain words: the window's name and what a Karama would cancel.
        assert "The Emperor's income" in page.inner_text("#response")
        assert "cancels that income" in page.inner_text("#response-says")
        left = int(re.match(r"(\d+) s left", page.inner_text("#deadline")).group(1))  # type: ignore[union-attr]
        assert 0 < left <= 30
        # Passing is the prominent default; the Karama asks before it spends the card.
        assert "primary" in atreides.button("Pass").get_attribute("class")
        ask = atreides.button("Play Karama…")
        assert "primary" not in (ask.get_attribute("class") or "")
        check_state(atreides.page, width, "window", "1-open")
        version = atreides.view()["version"]
        ask.click()
        page.wait_for_function(
            "() => document.activeElement.textContent.startsWith('Yes, spend it')")
        assert "spends your Karama" in page.inner_text("#response")
        assert atreides.view()["version"] == version  # asking sent nothing
        check_state(atreides.page, width, "window", "2-confirm")
        atreides.button("No, keep it").click()
        page.wait_for_function(
            "() => document.activeElement.textContent === 'Play Karama…'")
        assert atreides.view()["version"] == version
        atreides.button("Play Karama…").click()
        atreides.button("Yes, spend it: Play Karama").click()
        page.wait_for_function(
            "v => Number(document.getElementById('table').dataset.version) > v", arg=version)
        atreides.settled()
        # The window is gone: the focus moved on (to my seat), not to the page body.
        page.wait_for_function("() => document.activeElement !== document.body")
        assert atreides.view()["response"] is None or \
            atreides.view()["response"]["event"] != window["event"]
        assert "karama-2" not in [c["id"] for c in atreides.view()["me"]["hand"]]
        check_state(atreides.page, width, "window", "3-cancelled")
    finally:
        atreides.close()


def test_the_banner_goes_after_reconnecting_and_presence_follows_pages(
        browser: Any, server: Server) -> None:
    created = server.create(BOX_FULL_HAND)
    room, tokens = created["room"], created["seats"]
    owner = Seat(browser, server, room, "richese", tokens["richese"])
    try:
        seat = "[data-seat=emperor] [data-presence]"
        owner.page.wait_for_function(
            f"() => document.querySelector('{seat}')?.dataset.presence === 'closed'")
        emperor = Seat(browser, server, room, "emperor", tokens["emperor"])
        owner.page.wait_for_function(
            f"() => document.querySelector('{seat}')?.dataset.presence === 'open'")
        assert "at the table" in owner.page.inner_text("[data-seat=emperor]")
        emperor.close()
        owner.page.wait_for_function(
            f"() => document.querySelector('{seat}')?.dataset.presence === 'closed'")

        server.kill()
        owner.page.wait_for_function(
            "() => document.getElementById('status').textContent.startsWith('Reconnecting')")
        owner.button("Pay 2 spice and search the discard").click()
        owner.page.wait_for_selector("#error:not([hidden])")
        assert owner.page.inner_text("#error") == "The server does not answer."
        server.start()
        owner.page.wait_for_function(
            "() => document.getElementById('status').textContent === 'Live'")
        owner.page.wait_for_selector("#error", state="hidden")
    finally:
        owner.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_the_spectator_page_follows_the_public_view(browser: Any, server: Server,
                                                    width: int) -> None:
    created = server.create(BOX_FULL_HAND)
    room, tokens, spectator = created["room"], created["seats"], created["spectator"]
    watcher = Watcher(browser, server, room, spectator, width=width)
    try:
        page = watcher.page
        assert page.is_hidden("#me") and page.is_hidden("#box")
        assert page.eval_on_selector_all("[data-seat]", "els => els.map(e => e.dataset.seat)") \
            == ["richese", "emperor", "atreides"]
        check_state(watcher.page, width, "watch", "1-open")
        paid = command(server, room, tokens["richese"], {
            "type": "begin_search", "card": "nullentropy-box"})
        assert paid["ok"], paid
        watcher.settled()
        assert "Richese paid for a Box search" in page.inner_text("#box")
        check_state(watcher.page, width, "watch", "2-search")
        # The spectator's page names no card its public view and log do not.
        known = orjson_text(server.get(f"/rooms/{room}/public", spectator)) + orjson_text(
            server.get(f"/rooms/{room}/log", spectator))
        hidden = {c.id for c in room_cards(("choam_richese",)) if not mentions(known, c.id)}
        assert {"shield-1", "maula-pistol"} <= hidden
        dom = page.content()
        assert [cid for cid in hidden if mentions(dom, cid)] == []
        # A seat token is not a spectator's way in, nor the other way round.
        r = httpx.get(f"{server.base}/rooms/{room}/view",
                      headers={"Authorization": f"Bearer {spectator}"})
        assert r.status_code == 401
    finally:
        watcher.close()


ADMIN = "host-page-operator-token"


def test_the_host_page_creates_a_room_invites_and_reissues(browser: Any,
                                                           tmp_path: Any) -> None:
    server = Server(tmp_path / "host.db", env={"DUNE_LEDGER_ADMIN_TOKEN": ADMIN})
    server.start()
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(15_000)

        def every_width(step: str) -> None:
            for width in WIDTHS:
                page.set_viewport_size({"width": width, "height": 900})
                check_state(page, width, "host", step)

        page.goto(f"{server.base}/host")
        page.wait_for_selector("#token-form:not([hidden])")  # the routes need the token
        every_width("1-sign-in")
        page.get_by_label("Operator token").fill("not-the-token")
        page.get_by_role("button", name="Open the host page").click()
        page.wait_for_selector("#error:not([hidden])")
        assert "operator token" in page.inner_text("#error")
        page.get_by_label("Operator token").fill(ADMIN)
        page.get_by_role("button", name="Open the host page").click()
        page.wait_for_selector("#desk:not([hidden])")
        assert "No rooms yet." in page.inner_text("#rooms")
        every_width("2-empty")

        # A shipped example fills the layout; creating it shows every invitation.
        page.get_by_label("Start from an example").select_option("box")
        page.wait_for_function("() => document.getElementById('layout').value.includes('seats')")
        page.get_by_role("button", name="Create the room").click()
        page.wait_for_selector("#invites:not([hidden]) [data-invite=richese]")
        assert page.evaluate("() => document.activeElement.id") == "invites-title"
        address = page.inner_text("[data-invite=richese] .invite")
        play, _, token = address.partition("#token=")
        room = play.rsplit("/", 1)[1]
        assert play == f"{server.base}/play/{room}"
        assert server.get(f"/rooms/{room}/view", token)["seat"] == "richese"
        watch = page.inner_text("[data-invite=spectator] .invite")
        assert watch.startswith(f"{server.base}/watch/{room}#token=")
        page.wait_for_selector(f"[data-room='{room}']")
        listed = page.inner_text(f"[data-room='{room}']")
        assert "Richese" in listed and "Emperor" in listed
        every_width("3-created")

        # A new token for Richese asks once; then the old one stops, the new invitation
        # works, and the other seats' invitations stay.
        page.get_by_role("button", name="New token for Richese…").click()
        page.get_by_role("button", name="Yes, issue a new token").click()
        page.wait_for_function("() => document.getElementById('invites').textContent"
                               ".includes('no longer works')")
        fresh = page.inner_text("[data-invite=richese] .invite").partition("#token=")[2]
        assert fresh and fresh != token
        old = httpx.get(f"{server.base}/rooms/{room}/view",
                        headers={"Authorization": f"Bearer {token}"})
        assert old.status_code == 401
        assert server.get(f"/rooms/{room}/view", fresh)["seat"] == "richese"
        assert page.inner_text("[data-invite=emperor] .invite").startswith(
            f"{server.base}/play/{room}#token=")
        page.wait_for_function(
            "r => Number(document.querySelector(`[data-room='${r}'] [data-version]`)"
            "?.dataset.version) > 1", arg=room)
        every_width("4-reissued")
        # The invitation opens the seat page.
        seat = Seat(browser, server, room, "richese", fresh)
        assert seat.page.inner_text("#where").startswith("Richese")
        seat.close()
    finally:
        context.close()
        if server.proc is not None:
            server.proc.terminate()
            server.proc.wait(timeout=10)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_other_decisions_say_what_they_do_at_each_width(browser: Any, server: Server,
                                                            width: int) -> None:
    # The Ambassador trigger, as Ecaz sees it before choosing.
    created = server.create(AMBASSADOR_LAYOUT)
    room, tokens = created["room"], created["seats"]
    assert command(server, room, tokens["atreides"], {
        "type": "enter_territory", "territory": "arrakeen", "via": "shipment"})["ok"]
    ecaz = Seat(browser, server, room, "ecaz", tokens["ecaz"], width=width)
    try:
        says = ecaz.page.inner_text("#decision-says")
        assert "Richese ambassador" in says and "3 spice" in says
        assert ecaz.button("Trigger it for Harkonnen").is_visible()
        check_state(ecaz.page, width, "decisions", "1-ambassador")
    finally:
        ecaz.close()

    # A Truthtrance question, then a gift, as the answering seats see them.
    created = server.create(TRUTH_AND_GIFT)
    room, tokens = created["room"], created["seats"]
    emperor = server.get(f"/rooms/{room}/view", tokens["emperor"])
    ask = next(a for a in emperor["actions"] if a["type"] == "ask_truthtrance"
               and a["target"] == "richese")
    asked = command(server, room, tokens["emperor"], {
        "type": "ask_truthtrance", "card": ask["card"], "target": "richese",
        "question": "Will you search the discard this turn?"})
    assert asked["ok"], asked
    richese = Seat(browser, server, room, "richese", tokens["richese"], width=width)
    try:
        assert "promise binds you" in richese.page.inner_text("#truthtrance-says")
        check_state(richese.page, width, "decisions", "2-truthtrance")
        richese.button("Answer no").click()
        richese.page.wait_for_selector("#truthtrance", state="hidden")
        richese.page.wait_for_function("() => document.activeElement !== document.body")
        richese.button("Offer Crysknife to Emperor").click()
        richese.settled()
    finally:
        richese.close()
    ally = Seat(browser, server, room, "emperor", tokens["emperor"], width=width)
    try:
        ally.page.wait_for_selector("#gift:not([hidden])")
        assert "Richese offers Crysknife to Emperor" in ally.page.inner_text("#gift")
        check_state(ally.page, width, "decisions", "3-gift")
    finally:
        ally.close()
