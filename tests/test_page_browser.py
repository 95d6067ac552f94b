"""The seat page in a real browser: Debian's Chromium driven by Playwright.

Each journey runs the real server (`dune-ledger serve` in a subprocess on a
loopback port, a SQLite file in tmp) and one page per seat, each in its own
browser context, clicking what a player clicks. After every step each page's
DOM is scanned for card ids its seat may not know: every card of the room
that appears nowhere in that seat's own view or public log (as the API gives
them) is hidden from it, and must not be in its page either.

Screenshots of every step go to tests/artifacts/ (git-ignored), to be looked at.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.page_support import (
    BOX_FULL_HAND,
    TRUTH_AND_GIFT,
    Seat,
    Server,
    columns,
)
from tests.support import example

AMBASSADOR_LAYOUT = example("ambassador")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with Server(tmp_path / "rooms.db") as s:
        yield s


def test_paid_search_owner_and_opponent(browser: Any, server: Server) -> None:
    created = server.create(BOX_FULL_HAND)
    room, tokens = created["room"], created["seats"]
    expansions = ("choam_richese",)

    # A wrong token is refused with its message, and the form stays for another try.
    probe = browser.new_context()
    page = probe.new_page()
    page.goto(f"{server.base}/play/{room}")
    page.get_by_label("Seat token").fill("not-a-token")
    page.get_by_role("button", name="Open my seat").click()
    page.wait_for_selector("#error:not([hidden])")
    assert "not a seat token" in page.inner_text("#error")
    assert "Traceback" not in page.content()
    assert page.is_visible("#token-form")
    probe.close()

    owner = Seat(browser, server, room, "richese", tokens["richese"], paste=True)
    opponent = Seat(browser, server, room, "emperor", tokens["emperor"])
    try:
        # The token left the address bar; both pages follow the stream.
        assert "#token" not in opponent.page.url
        for seat in (owner, opponent):
            seat.page.wait_for_function(
                "() => document.getElementById('status').textContent === 'Live'")
        # Before payment: the Box's button is live and the full-hand notice is shown.
        begin = owner.button("Pay 2 spice and search the discard")
        assert begin.is_enabled()
        assert owner.page.is_visible("#full-hand-notice")
        assert "Provisional" in owner.page.inner_text("#full-hand-notice")
        assert owner.page.inner_text("#my-spice") == "10 spice"
        assert not opponent.page.is_visible("#box")  # no Box, no Box control
        opponent.assert_holds_nothing_hidden(expansions)
        owner.shot("search", "1-before")
        opponent.shot("search", "1-before")

        # From the keyboard: focus the button and press Enter.
        begin.focus()
        owner.page.keyboard.press("Enter")
        owner.page.wait_for_selector("#candidates li")
        owner.settled()
        opponent.settled()
        candidates = owner.page.eval_on_selector_all(
            "#candidates li", "els => els.map(e => e.dataset.card)")
        assert sorted(candidates) == ["baliset", "maula-pistol", "shield-1", "snooper-3"]
        assert owner.page.is_visible("#full-hand-notice")  # during the search too
        assert owner.page.inner_text("#my-spice") == "8 spice"
        assert "Richese paid for a Box search" in opponent.page.inner_text("#box")
        hidden = opponent.assert_holds_nothing_hidden(expansions)
        # The check means something: the pile below its top is hidden from the Emperor.
        assert {"shield-1", "maula-pistol", "baliset"} <= hidden
        owner.shot("search", "2-open")
        opponent.shot("search", "2-open")

        # The candidates lay out by their container: 1 column at 280 px, more at 900 px.
        assert columns(owner.page, "#candidates li") == 1  # the desktop sidebar
        for width, expected in ((280, 1), (900, None)):
            owner.page.eval_on_selector("#candidates", f"el => el.style.width = '{width}px'")
            n = columns(owner.page, "#candidates li")
            assert n == expected if expected else n > 1, (width, n)
            owner.shot("search", f"3-candidates-{width}px")
        owner.page.eval_on_selector("#candidates", "el => el.style.width = ''")

        owner.button("Take Maula Pistol").click()
        owner.page.wait_for_selector("#candidates", state="detached")
        owner.settled()
        opponent.settled()
        hand = owner.page.eval_on_selector_all("#my-hand li", "els => els.map(e => e.dataset.card)")
        assert "maula-pistol" in hand and "nullentropy-box" not in hand
        assert opponent.page.inner_text("#discard-top").startswith("Nullentropy Box")
        assert not opponent.page.is_visible("#search-open")
        assert "maula-pistol" in opponent.assert_holds_nothing_hidden(expansions)
        assert "Maula Pistol" not in opponent.page.content()
        owner.shot("search", "4-selected")
        opponent.shot("search", "4-selected")

        # The stream's ?token= never reaches the access log.
        logged = server.log.read_text()
        assert "/stream?presence=1&token=[redacted]" in logged
        assert not [seat for seat, token in tokens.items() if token in logged]
    finally:
        owner.close()
        opponent.close()


def test_phone_width_keeps_one_column_and_the_notice(browser: Any, server: Server) -> None:
    created = server.create(BOX_FULL_HAND)
    owner = Seat(browser, server, created["room"], "richese", created["seats"]["richese"],
                 width=390, height=844)
    try:
        owner.button("Pay 2 spice and search the discard").click()
        owner.page.wait_for_selector("#candidates li")
        assert columns(owner.page, "#candidates li") == 1
        assert owner.page.is_visible("#full-hand-notice")
        # Nothing is wider than the phone's screen.
        assert owner.page.evaluate("() => document.documentElement.scrollWidth") <= 390
        owner.shot("phone", "search-open")
    finally:
        owner.close()


def test_restart_mid_search_reconnects_with_the_search_open(browser: Any,
                                                            server: Server) -> None:
    created = server.create(BOX_FULL_HAND)
    room, tokens = created["room"], created["seats"]
    owner = Seat(browser, server, room, "richese", tokens["richese"])
    try:
        owner.button("Pay 2 spice and search the discard").click()
        owner.page.wait_for_selector("#candidates li")
        owner.settled()
        version = owner.view()["version"]
        owner.page.evaluate("() => { window.sameDocument = true; }")

        server.kill()
        owner.page.wait_for_function(
            "() => document.getElementById('status').textContent.startsWith('Reconnecting')")
        assert owner.page.is_visible("#candidates")  # the last view stays on screen
        owner.shot("restart", "1-server-down")
        # A click while the server is down says so, and changes nothing.
        owner.button("Take Baliset").click()
        owner.page.wait_for_selector("#error:not([hidden])")
        assert owner.page.inner_text("#error") == "The server does not answer."
        assert owner.button("Take Baliset").is_enabled()
        server.start()
        owner.page.wait_for_function(
            "() => document.getElementById('status').textContent.startsWith('Live')")
        owner.settled()
        assert owner.page.inner_text("#status") == "Live"  # on the stream again, not polling
        assert owner.page.evaluate("() => window.sameDocument === true")  # no reload
        assert owner.view()["version"] == version
        assert owner.page.eval_on_selector_all("#candidates li", "els => els.length") == 4
        assert owner.page.inner_text("#my-spice") == "8 spice"  # no second fee
        owner.shot("restart", "2-reconnected")

        owner.button("Take Baliset").click()
        owner.page.wait_for_selector("#candidates", state="detached")
        owner.settled()
        assert "baliset" in owner.page.eval_on_selector_all(
            "#my-hand li", "els => els.map(e => e.dataset.card)")
        owner.shot("restart", "3-selected")
    finally:
        owner.close()


def answer_window(seats: dict[str, Seat], server: Server, journey: str, step: str,
                  expansions: tuple[str, ...]) -> dict[str, Any]:
    """Every seat the open window waits for passes from its own page."""
    any_seat = next(iter(seats.values()))
    window: dict[str, Any] = any_seat.view()["response"]
    assert window is not None
    assert window["waiting"], window
    for seat in seats.values():
        seat.settled()
        assert seat.page.is_visible("#response")
        # The countdown is drawn exactly when the window has a public deadline.
        assert seat.page.is_visible("#deadline") == (window.get("deadline") is not None)
        if window.get("deadline") is not None:
            assert re.fullmatch(r"\d+ s left to answer|Time is up: the window closes",
                                seat.page.inner_text("#deadline"))
        seat.assert_holds_nothing_hidden(expansions)
    for faction in window["waiting"]:
        seats[faction].shot(journey, step)
    for faction in window["waiting"]:
        seat = seats[faction]
        seat.settled()
        before = seat.view()["version"]
        seat.button("Pass").click()
        seat.page.wait_for_function(
            "v => Number(document.getElementById('table').dataset.version) > v", arg=before)
    return window


def test_ambassador_purchase_with_income_and_bonus_windows(browser: Any,
                                                           server: Server) -> None:
    created = server.create(AMBASSADOR_LAYOUT)
    room, tokens = created["room"], created["seats"]
    expansions = tuple(AMBASSADOR_LAYOUT["expansions"])
    # Atreides plays from a phone, the others from desktops.
    seats = {f: Seat(browser, server, room, f, t, width=390 if f == "atreides" else 1100,
                     height=844 if f == "atreides" else 900) for f, t in tokens.items()}
    try:
        # Atreides ships into Arrakeen, choosing the territory on its page.
        atreides = seats["atreides"].page
        form = atreides.locator("form.free", has_text="Enter a territory")
        form.get_by_label("territory").select_option(label="Arrakeen")
        form.get_by_label("via").select_option(label="by shipment")
        form.get_by_role("button", name="Send").click()
        ecaz = seats["ecaz"]
        ecaz.page.wait_for_selector("#decision:not([hidden])")
        ecaz.settled()
        assert ecaz.page.inner_text("#ambassador-stage-name") == "Ecaz may trigger it"
        ecaz.shot("ambassador", "1-offer")
        for seat in seats.values():
            seat.settled()
            seat.assert_holds_nothing_hidden(expansions)

        ecaz.button("Trigger it for Harkonnen").click()
        ecaz.page.wait_for_function(
            "() => document.getElementById('ambassador-stage-name')?.textContent"
            " === \"the Emperor's income\"")
        income = answer_window(seats, server, "ambassador", "2-income", expansions)
        assert income["kind"] == "ambassador_income"

        ecaz.page.wait_for_function(
            "() => document.getElementById('ambassador-stage-name')?.textContent"
            " === 'the Harkonnen bonus card'")
        bonus = answer_window(seats, server, "ambassador", "3-bonus", expansions)
        assert bonus["event"] != income["event"]

        for seat in seats.values():
            seat.settled()
            assert seat.view()["response"] is None
            assert not seat.page.is_visible("#response")
            seat.assert_holds_nothing_hidden(expansions)
            seat.shot("ambassador", "4-done")
        harkonnen = seats["harkonnen"].view()
        assert len(harkonnen["me"]["hand"]) == 8  # six, the bought card and the bonus
        assert "for 3 spice" in seats["harkonnen"].page.inner_text("#me")
    finally:
        for seat in seats.values():
            seat.close()


def test_truthtrance_answer_with_a_promise_and_the_gift_answer(browser: Any,
                                                               server: Server) -> None:
    created = server.create(TRUTH_AND_GIFT)
    room, tokens = created["room"], created["seats"]
    expansions = ("choam_richese",)
    seats = {f: Seat(browser, server, room, f, t) for f, t in tokens.items()}
    richese, emperor, harkonnen = seats["richese"], seats["emperor"], seats["harkonnen"]
    try:
        # The Emperor asks in its own words; markup in them stays text.
        question = "Will you <b>search</b> the discard this turn?"
        form = emperor.page.locator("form.free", has_text="Ask Richese a Truthtrance question")
        # A rejected command shows the server's message and code, never a stack.
        before = emperor.view()["version"]
        form.get_by_label("question").fill("   ")
        form.get_by_role("button", name="Send").click()
        emperor.page.wait_for_selector("#error:not([hidden])")
        error = emperor.page.inner_text("#error")
        assert "(invalid_command)" in error and "Traceback" not in emperor.page.content()
        assert emperor.view()["version"] == before
        form.get_by_label("question").fill(question)
        form.get_by_role("button", name="Send").click()
        richese.page.wait_for_selector("#truthtrance:not([hidden])")
        for seat in seats.values():
            seat.settled()
            assert seat.page.inner_text("#truthtrance blockquote") == question
            assert seat.page.locator("#truthtrance blockquote b").count() == 0
            seat.assert_holds_nothing_hidden(expansions)
        # While the question waits, the Box is blocked and its button says why.
        assert richese.page.inner_text("#box-blocked") == \
            "Not available: a Truthtrance question must be answered first."
        assert richese.page.get_attribute("#box-blocked", "data-blocked") == "truthtrance_pending"
        richese.shot("truthtrance", "1-asked")

        richese.button("Answer yes and promise the fee of Nullentropy Box").click()
        richese.page.wait_for_selector("#truthtrance", state="hidden")
        richese.settled()
        assert richese.page.inner_text("#my-reserved") == str(richese.view()["me"]["reserved"])
        assert richese.view()["me"]["reserved"] == 2
        richese.shot("truthtrance", "2-answered")

        richese.button("Offer Crysknife to Emperor").click()
        emperor.page.wait_for_selector("#gift:not([hidden])")
        for seat in seats.values():
            seat.settled()
            seat.assert_holds_nothing_hidden(expansions)
        assert "crysknife" in harkonnen.hidden(expansions)  # the gift's card is theirs alone
        emperor.shot("gift", "1-offered")
        emperor.button("Accept Crysknife").click()
        emperor.page.wait_for_selector("#gift", state="hidden")
        emperor.settled()
        assert "crysknife" in emperor.page.eval_on_selector_all(
            "#my-hand li", "els => els.map(e => e.dataset.card)")
        for seat in seats.values():
            seat.settled()
            seat.assert_holds_nothing_hidden(expansions)
        emperor.shot("gift", "2-accepted")
    finally:
        for seat in seats.values():
            seat.close()


def test_autopilot_on_with_a_profile_and_off(browser: Any, server: Server) -> None:
    created = server.create(TRUTH_AND_GIFT)
    room, tokens = created["room"], created["seats"]
    harkonnen = Seat(browser, server, room, "harkonnen", tokens["harkonnen"])
    emperor = Seat(browser, server, room, "emperor", tokens["emperor"])
    try:
        assert harkonnen.page.inner_text("#autopilot-now").startswith("Off")
        harkonnen.page.get_by_label("Profile").select_option(label="hard")
        # From the keyboard; after the page redraws, the focus is where it was.
        harkonnen.button("Turn autopilot on").focus()
        harkonnen.page.keyboard.press("Enter")
        harkonnen.page.wait_for_function(
            "() => document.getElementById('autopilot-now')?.textContent.includes('hard')")
        assert harkonnen.page.evaluate("() => document.activeElement.dataset.key") == \
            "autopilot-on"
        assert harkonnen.page.evaluate("() => document.activeElement.textContent") == \
            "Switch to this profile"
        emperor.page.wait_for_function(
            "() => document.querySelector('[data-seat=harkonnen] .seat-autopilot')"
            "?.textContent === 'on autopilot (hard)'")
        assert harkonnen.view()["me"]["autopilot"] == "hard"
        harkonnen.shot("autopilot", "1-on")
        harkonnen.button("Turn autopilot off").click()
        harkonnen.page.wait_for_function(
            "() => document.getElementById('autopilot-now')?.textContent.startsWith('Off')")
        assert harkonnen.view()["me"]["autopilot"] is None
    finally:
        harkonnen.close()
        emperor.close()
