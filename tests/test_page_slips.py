"""The table without slips (issue 38), in Debian's Chromium: what a player or a host
could lose with one click now asks once and says what will happen; the host keeps every
invitation it made; a replaced token's old page says what to do next; the public log
numbers past 9 in full and groups each command's lines in the order they happened; my
log says a purchase before its card; the end is first on the page and in the status;
no empty decision column; the host's rooms newest first under their factions, with a
spectator link that opens the page; the transcript downloads from the host page of a
server without an operator token; no request answered 404 (the favicon).

Every state passes `check_state` at 280, 900 and 1400 px: nothing wider than the
screen, Tab order as drawn, axe-core with no violation, the game's words and no word
split across two lines. Screenshots of every state go to tests/artifacts/ (git-ignored),
to be looked at.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.page_support import (
    Seat,
    Server,
    Watcher,
    asks_once,
    at_each_width,
    columns,
    command,
    log_groups,
    pass_window,
)
from tests.support import example

AMBASSADOR_LAYOUT = example("ambassador")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    # As `dune-ledger table` and `serve` on loopback run by default: no operator token.
    with Server(tmp_path / "rooms.db") as s:
        yield s


def version_of(seat: Seat) -> int:
    return int(seat.page.evaluate("() => Number(document.getElementById('table').dataset.version)"))


def not_found(page: Any) -> list[str]:
    """The addresses the page asked for and got 404 (kept as the page loads)."""
    missed: list[str] = []
    page.on("response", lambda r: missed.append(r.url) if r.status == 404 else None)
    return missed


def test_a_seat_asks_before_a_card_is_lost_and_reads_the_evening_in_words(
        browser: Any, server: Server) -> None:
    created = server.create(AMBASSADOR_LAYOUT)
    room, tokens, spectator = created["room"], created["seats"], created["spectator"]
    harkonnen = Seat(browser, server, room, "harkonnen", tokens["harkonnen"], width=1400)
    atreides = Seat(browser, server, room, "atreides", tokens["atreides"], width=1400)
    missed = not_found(harkonnen.page)
    watcher = None
    try:
        # Atreides enters Arrakeen; Ecaz triggers the Richese ambassador for Harkonnen,
        # who buys a card, and the Emperor's income window opens.
        assert command(server, room, tokens["atreides"], {
            "type": "enter_territory", "territory": "arrakeen", "via": "shipment"})["ok"]
        ecaz = server.get(f"/rooms/{room}/view", tokens["ecaz"])
        trigger = next(a for a in ecaz["actions"] if a["type"] == "ambassador_decide"
                       and a.get("trigger") and a.get("beneficiary") == "harkonnen")
        assert command(server, room, tokens["ecaz"], trigger)["ok"]
        atreides.settled()
        harkonnen.settled()

        # A Karama asks once, saying what it spends and what it cancels; asking sends
        # nothing, and "No" gives the button back.
        version = version_of(atreides)
        says = asks_once(atreides.page, "#response", "Play Karama…", "Yes, spend it: Play Karama",
                         "No, keep it", "slips", "1-karama-asks")
        assert says == ("This spends your Karama: it goes to the discard pile and cancels the "
                        "Emperor's income.")
        assert atreides.view()["version"] == version
        assert "karama-2" in [c["id"] for c in atreides.view()["me"]["hand"]]

        # Everyone passes on the income, then on the bonus card.
        pass_window(server, room, tokens)
        pass_window(server, room, tokens)
        harkonnen.settled()
        view = harkonnen.view()
        (receipt,) = view["receipts"]
        name = {c["id"]: c["name"] for c in view["me"]["hand"]}
        bought, bonus = name[receipt["card"]], name[receipt["bonus"]]

        # My log: the purchase before its card, the bonus card once; nothing twice.
        mine = [line for line in harkonnen.page.inner_text("#mylog-body").splitlines() if line]
        assert mine == [f"You bought {bought} for 3 spice (7 left).",
                        f"You drew {bonus} as your bonus card."], mine

        # The public log: one item per command, its lines in the order they happened,
        # each number written in full past 9, at every width.
        log = server.get(f"/rooms/{room}/log", tokens["harkonnen"])
        assert len(log) > 10
        appends: dict[int, list[int]] = {}
        for entry in log:
            appends.setdefault(entry["append"], []).append(entry["seq"])
        for width in (280, 1400):
            harkonnen.page.set_viewport_size({"width": width, "height": 900})
            groups = log_groups(harkonnen.page)
            assert [g["append"] for g in groups] == list(appends)
            for group in groups:
                assert [line["seq"] for line in group["lines"]] == appends[group["append"]]
                for line in group["lines"]:
                    assert line["number"] == str(line["seq"]) and line["whole"], (width, line)
        drawn = next(g for g in log_groups(harkonnen.page)
                     if "That card is Harkonnen's bonus card" in [x["text"] for x in g["lines"]])
        texts = [line["text"] for line in drawn["lines"]]
        assert texts.index("Harkonnen drew a card") + 1 == \
            texts.index("That card is Harkonnen's bonus card")

        # Eight cards at 280 px: two columns of tiles, not one tall column.
        harkonnen.page.set_viewport_size({"width": 280, "height": 900})
        assert len(view["me"]["hand"]) == 8
        assert columns(harkonnen.page, "#my-hand .card") == 2
        at_each_width(harkonnen.page, "slips", "2-purchased")

        # A discard asks once and says where the card goes; "No" keeps it.
        page = harkonnen.page
        version = version_of(harkonnen)
        says = asks_once(page, "#more", "Discard Crysknife…", "Yes, discard Crysknife",
                         "No, keep it", "slips", "3-discard-asks")
        assert says == ("Crysknife goes face up on top of the discard pile; it does not come "
                        "back to your hand.")
        assert harkonnen.view()["version"] == version
        harkonnen.button("Discard Crysknife…").click()
        harkonnen.button("Yes, discard Crysknife").click()
        page.wait_for_function(
            "v => Number(document.getElementById('table').dataset.version) > v", arg=version)
        harkonnen.settled()
        after = harkonnen.view()
        assert after["version"] > version and after["discard"]["top"]["id"] == "crysknife"
        assert "crysknife" not in [c["id"] for c in after["me"]["hand"]]

        # The end: first on the page, in the status pill, with the transcript.
        ended = httpx.post(f"{server.base}/rooms/{room}/end")
        assert ended.status_code == 200, ended.text
        page.wait_for_selector("#end:not([hidden])")
        page.wait_for_function(
            "() => document.getElementById('status').textContent === 'Room ended'")
        assert page.evaluate("""() => document.getElementById('end').getBoundingClientRect().bottom
            <= document.getElementById('seat').getBoundingClientRect().top""")
        assert page.get_by_role("button", name="Download the transcript").is_visible()
        assert page.locator("#more").is_hidden()  # nothing more to do
        at_each_width(page, "slips", "4-ended")

        # The spectators see the end the same way.
        watcher = Watcher(browser, server, room, spectator)
        watcher.page.wait_for_function(
            "() => document.getElementById('status').textContent === 'Room ended'")
        at_each_width(watcher.page, "slips", "5-spectator-ended")
        assert missed == []
        assert not harkonnen.errors and not atreides.errors
    finally:
        harkonnen.close()
        atreides.close()
        if watcher is not None:
            watcher.close()


def test_the_host_keeps_every_invitation_and_asks_before_a_new_token_or_the_end(
        browser: Any, server: Server) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    others: list[Any] = []
    try:
        page = context.new_page()
        page.set_default_timeout(15_000)
        missed = not_found(page)
        page.goto(f"{server.base}/host")
        page.wait_for_selector("#desk:not([hidden])")  # no operator token to ask for

        # Two rooms, made one after the other: both invitations stay, the newest room
        # is listed first, under its factions' names.
        made = []
        # Each example, once its layout is in the form (a card or a part only it holds).
        for name, holds in (("box", "nullentropy-box"), ("ambassador", "ambassadors")):
            page.get_by_label("Start from an example").select_option(name)
            page.wait_for_function(
                "n => document.getElementById('layout').value.includes(n)", arg=holds)
            page.get_by_role("button", name="Create the room").click()
            page.wait_for_function(
                "n => document.querySelectorAll('#invites-body .invited').length === n",
                arg=len(made) + 1)
            made.append(page.get_attribute("#invites-body .invited", "data-room"))
        box, ambassador = made
        page.wait_for_function(
            "n => document.querySelectorAll('#rooms-body [data-room]').length === n", arg=2)
        listed = page.eval_on_selector_all("#rooms-body > [data-room]",
                                           "els => els.map((e) => e.dataset.room)")
        assert listed == [ambassador, box]
        assert page.inner_text(f"#rooms-body [data-room='{box}'] .title") == \
            "Richese, Emperor, Harkonnen, Atreides"
        invitations = invitations_of(page)
        assert set(invitations[box]) == {"richese", "emperor", "harkonnen", "atreides",
                                         "spectator"}
        assert set(invitations[ambassador]) == {"ecaz", "harkonnen", "emperor", "atreides",
                                                "spectator"}
        at_each_width(page, "host-slips", "1-two-rooms")

        # The room's spectator link carries its token: it opens the page, not a form.
        link = page.get_attribute(f"#rooms-body [data-room='{box}'] a", "href")
        assert link == invitations[box]["spectator"]
        spectators = browser.new_context(viewport={"width": 900, "height": 900})
        others.append(spectators)
        watch = spectators.new_page()
        watch.goto(link)
        watch.wait_for_selector("#seat:not([hidden])")
        assert watch.locator("#token-form").is_hidden()

        # The Emperor's page, from its invitation: no decision open, no empty column.
        token = invitations[box]["emperor"].partition("#token=")[2]
        emperor = Seat(browser, server, box, "emperor", token, width=1400)
        others.append(emperor.context)
        assert emperor.page.locator("#seat .side").is_hidden()
        assert emperor.page.evaluate("""() => document.querySelector('#seat .main')
            .getBoundingClientRect().left === document.getElementById('seat')
            .getBoundingClientRect().left""")
        at_each_width(emperor.page, "host-slips", "2-seat-no-decision")

        # The last move, in words; a new token does not reset it. The example's room is
        # committed: the operator deals once the Emperor's page has committed, the page
        # reveals by itself, and its draw goes signed.
        emperor.page.locator("[data-ceremony=emperor][data-state=committed]").wait_for()
        dealt = httpx.post(f"{server.base}/rooms/{box}/commands", json={"type": "deal"})
        assert dealt.json()["ok"], dealt.text
        emperor.page.locator("#fair-stage[data-stage=dealt]").wait_for()
        emperor.button("Draw a card").click()
        room = f"#rooms-body [data-room='{box}']"
        page.wait_for_function(
            "s => document.querySelector(s + ' .last-move')?.textContent"
            "?.startsWith('Emperor drew a card, ')", arg=room)

        # A new token asks once, saying what happens to the old one.
        version = listed_version(server, box)
        says = asks_once(page, room, "New token for Emperor…", "Yes, issue a new token",
                         "No, keep the current one", "host-slips", "3-reissue-asks")
        assert says.startswith("Emperor's current token stops working at once")
        assert listed_version(server, box) == version
        page.locator(room).get_by_role("button", name="New token for Emperor…").click()
        page.get_by_role("button", name="Yes, issue a new token").click()
        page.wait_for_selector(f"#invites-body [data-room='{box}'] [data-invite=emperor].renewed")
        renewed = invitations_of(page)
        assert renewed[box]["emperor"] != invitations[box]["emperor"]
        # Every other invitation is still on the page, as it was.
        renewed[box]["emperor"] = invitations[box]["emperor"]
        assert renewed == invitations
        assert page.inner_text(f"{room} .last-move").startswith("Emperor drew a card, ")
        at_each_width(page, "host-slips", "4-reissued")

        # The Emperor's old page says what happened and what to do next.
        emperor.page.wait_for_selector("#token-form:not([hidden])")
        assert emperor.page.inner_text("#error") == (
            "This seat's token no longer works: the host gave the seat a new one. Ask the host "
            "for your invitation, then open it or paste its token below.")
        at_each_width(emperor.page, "host-slips", "5-old-token")

        # Ending asks once; then the transcript downloads, with no operator token.
        says = asks_once(page, room, "End room…", "Yes, end it", "No, keep it running",
                         "host-slips", "6-end-asks")
        assert says == "Ending publishes the secret; no command is taken after."
        assert not server.get(f"/rooms/{box}/public", richese_token(renewed, box))["ended"]
        page.locator(room).get_by_role("button", name="End room…").click()
        page.get_by_role("button", name="Yes, end it").click()
        page.wait_for_function(
            "() => document.activeElement.textContent === 'Download the transcript'")
        assert re.fullmatch(r"Ended at version \d+", page.inner_text(f"{room} [data-ended]"))
        at_each_width(page, "host-slips", "7-ended")
        with page.expect_download() as caught:
            page.get_by_role("button", name="Download the transcript").click()
        assert caught.value.suggested_filename == f"transcript-{box}.jsonl"
        seat_copy = httpx.get(f"{server.base}/rooms/{box}/transcript", headers={
            "Authorization": f"Bearer {richese_token(renewed, box)}"})
        assert seat_copy.status_code == 200
        assert Path(caught.value.path()).read_bytes() == seat_copy.content
        assert page.locator("#error").is_hidden()
        assert missed == []
    finally:
        for other in others:
            other.close()
        context.close()


def invitations_of(page: Any) -> dict[str, dict[str, str]]:
    """The host page's invitations: room -> who (a faction, or spectator) -> address."""
    found: dict[str, dict[str, str]] = page.evaluate("""() => Object.fromEntries(
      Array.from(document.querySelectorAll('#invites-body .invited'), (room) => [
        room.dataset.room, Object.fromEntries(Array.from(room.querySelectorAll('[data-invite]'),
          (li) => [li.dataset.invite, li.querySelector('.invite').textContent]))]))""")
    return found


def richese_token(invitations: dict[str, dict[str, str]], room: str) -> str:
    """Richese's token of `room`, from its invitation."""
    return invitations[room]["richese"].partition("#token=")[2]


def listed_version(server: Server, room: str) -> int:
    (summary,) = [r for r in httpx.get(f"{server.base}/rooms").json() if r["room"] == room]
    return int(summary["version"])
