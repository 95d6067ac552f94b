"""A Bidding round (RULES 10) played through the pages, in Debian's Chromium.

The host opens the round from the host page with the bidding order; each seat bids and
passes on its own page, from the controls its `actions` list; the spectators watch the
public round live. After every step each page's DOM is scanned for the cards its own
view and log do not name: only the Atreides page holds the card up for bid, and no page
holds the auction's other cards. Each new state is looked at 280, 900 and 1400 px (no
sideways scroll, Tab order as drawn, the game's words, axe-core clean).

One server and one browser for the module: the journey is one round, step by step.
Screenshots go to tests/artifacts/ (git-ignored).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.page_support import Seat, Server, Watcher, at_each_width, command, mentions

# Three seats with room in hand: three cards dealt. The Emperor holds a Karama, so its
# turn offers a Karama bid and a Karama buy; another seat's purchase pays the Emperor,
# behind the income window.
ROUND: dict[str, Any] = {
    "mode": "advanced",
    "seed": 11,
    "bank": 500,
    "turn": 2,
    "phase": 4,
    "seats": [
        {"faction": "atreides", "spice": 10, "hand": []},
        {"faction": "emperor", "spice": 10, "hand": ["karama-1"]},
        {"faction": "fremen", "spice": 3, "hand": ["crysknife"]},
    ],
    "discard": ["shield-1"],
}
EXPANSIONS: tuple[str, ...] = ()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with Server(tmp_path_factory.mktemp("bidding") / "rooms.db") as s:
        yield s


def up_card(seat: Seat) -> str | None:
    """The card up for bid as the page draws it: its id on the Atreides page, None where
    it is face down."""
    face: str | None = seat.page.eval_on_selector(
        "#bidding", "el => { const c = el.querySelector('[data-card]'); "
        "return c ? c.dataset.card : null; }")
    return face


def test_a_round_through_the_pages(browser: Any, server: Server) -> None:
    created = server.create(ROUND)
    room, tokens = created["room"], created["seats"]

    # The host opens the round, the order chosen place by place (the seats' own order
    # to start with).
    host_context = browser.new_context(viewport={"width": 1280, "height": 900})
    host = host_context.new_page()
    host.set_default_timeout(15_000)
    host.goto(f"{server.base}/host")
    entry = host.locator(f"li[data-room='{room}']")
    entry.get_by_role("button", name="Open bidding…").click()
    assert host.get_by_label("First to bid", exact=True).input_value() == "atreides"
    at_each_width(host, "bidding", "0-host-order")
    # An order that repeats a seat is refused with the server's words; nothing is stored.
    host.get_by_label("Second to bid", exact=True).select_option("atreides")
    entry.get_by_role("button", name="Open bidding", exact=True).click()
    host.wait_for_selector("#error:not([hidden])")
    assert "every seat of the room once (invalid_command)" in host.inner_text("#error")
    assert server.get(f"/rooms/{room}/public", created["spectator"])["version"] == 1
    host.get_by_label("Second to bid", exact=True).select_option("emperor")
    entry.get_by_role("button", name="Open bidding", exact=True).click()
    entry.locator(".last-move").filter(has_text="bidding round opens").wait_for()
    host_context.close()

    seats = {f: Seat(browser, server, room, f, tokens[f])
             for f in ("atreides", "emperor", "fremen")}
    watcher = Watcher(browser, server, room, created["spectator"])
    atreides, emperor, fremen = seats["atreides"], seats["emperor"], seats["fremen"]

    def settle() -> None:
        for seat in seats.values():
            seat.settled()
        watcher.settled()

    def scan() -> None:
        """No page holds a card its seat may not know; the spectators' none of the
        auction's either."""
        for seat in seats.values():
            seat.assert_holds_nothing_hidden(EXPANSIONS)
        dom = watcher.page.content()
        auction = set(seen_by_atreides)
        assert not [c for c in auction if mentions(dom, c)]

    try:
        settle()
        first = atreides.view()["bidding"]["up"]["card"]["id"]
        seen_by_atreides = [first]
        # Atreides sees the card up for bid; the others see it face down.
        assert up_card(atreides) == first
        assert up_card(emperor) is None and up_card(fremen) is None
        assert emperor.page.is_visible("#bidding [data-face=down]")
        assert "Your turn" in atreides.page.inner_text("#turn")
        assert "Atreides to bid" in emperor.page.inner_text("#turn")
        assert not emperor.page.is_visible("#bid-controls")
        scan()
        at_each_width(atreides.page, "bidding", "1-atreides-turn")
        at_each_width(emperor.page, "bidding", "1-waiting")
        at_each_width(watcher.page, "bidding", "1-spectators")

        # One thumb at 280 px: the amount's buttons, Bid and Pass are at least 44 px tall,
        # Bid and Pass side by side on one line.
        atreides.page.set_viewport_size({"width": 280, "height": 900})
        boxes = atreides.page.eval_on_selector_all(
            "#bid-controls button", "els => els.map(e => { const r = e.getBoundingClientRect();"
            " return {text: e.textContent, top: r.top, height: r.height}; })")
        assert [b["text"] for b in boxes] == ["−", "+", "Bid 1 spice", "Pass"]
        assert min(b["height"] for b in boxes) >= 44, boxes
        assert abs(boxes[2]["top"] - boxes[3]["top"]) < 1, boxes
        atreides.page.set_viewport_size({"width": 1280, "height": 900})

        # The amount's bounds are the action's: 1 to what Atreides can pay (10).
        amount = atreides.page.locator("#bid-amount")
        assert (amount.get_attribute("min"), amount.get_attribute("max")) == ("1", "10")
        atreides.page.get_by_role("button", name="One spice more").click()
        atreides.button("Bid 2 spice").click()
        settle()
        assert "2 spice" in emperor.page.inner_text("#high-bid")
        assert "Atreides" in watcher.page.inner_text("#high-bid")
        assert "Your turn" in emperor.page.inner_text("#turn")
        # The Emperor may bid with its Karama or buy with it: offered, not sent here.
        assert emperor.button("▸ Bid with Karama").is_visible()
        emperor.button("Buy it with Karama…").click()
        assert emperor.page.is_visible("#bidding .confirm")
        scan()
        at_each_width(emperor.page, "bidding", "2-emperor-karama")
        emperor.button("No, keep it").click()

        # Emperor and Fremen pass: the turn comes back to Atreides, who buys the card.
        emperor.button("Pass").click()
        settle()
        # Fremen's 3 spice bound its bid, and bids must be above 2.
        amount = fremen.page.locator("#bid-amount")
        assert (amount.get_attribute("min"), amount.get_attribute("max")) == ("3", "3")
        fremen.button("Pass").click()
        settle()
        hand = atreides.page.eval_on_selector_all("#my-hand li",
                                                  "els => els.map(e => e.dataset.card)")
        assert first in hand
        assert first not in fremen.page.content() and first not in emperor.page.content()

        # The Emperor's income waits for the seats that could cancel it.
        window = atreides.view()["response"]
        if window is not None:
            at_each_width(atreides.page, "bidding", "3-income")
            for f in window["waiting"]:
                seats[f].page.locator("#response").get_by_role("button", name="Pass").click()
                settle()
        assert atreides.view()["response"] is None
        settle()

        # Card 2, started by the Emperor: a bid, two passes, sold.
        second = atreides.view()["bidding"]["up"]["card"]["id"]
        seen_by_atreides.append(second)
        assert second != first and up_card(atreides) == second
        assert "Your turn" in emperor.page.inner_text("#turn")
        scan()
        emperor.button("Bid 1 spice").click()
        settle()
        fremen.button("Pass").click()
        settle()
        atreides.button("Pass").click()
        settle()
        assert second in [c["id"] for c in emperor.view()["me"]["hand"]]
        scan()

        # Card 3: everyone passes and the round ends; its panel goes.
        third = atreides.view()["bidding"]["up"]["card"]["id"]
        seen_by_atreides.append(third)
        scan()
        for _ in range(3):
            turn = atreides.view()["bidding"]["up"]["turn"]
            seats[turn].button("Pass").click()
            settle()
            if atreides.view()["bidding"] is None:
                break
        assert atreides.view()["bidding"] is None
        for page in [*(s.page for s in seats.values()), watcher.page]:
            assert not page.is_visible("#bidding")
        scan()
        assert "Everyone passed" in watcher.page.inner_text("#log-body")
        at_each_width(atreides.page, "bidding", "4-over")
    finally:
        for seat in seats.values():
            seat.close()
        watcher.close()


def panel(page: Any) -> str:
    """The bidding panel as drawn, without what names the room."""
    html: str = page.eval_on_selector("#bidding", "el => el.outerHTML")
    return html


def test_twin_rooms_draw_the_same_panel_for_every_seat_but_atreides(browser: Any,
                                                                    server: Server) -> None:
    """Two rooms that differ only in the deck's order (so in the cards dealt into the
    auction): the Emperor's and the spectators' bidding panels are the same markup,
    step by step; the Atreides panels differ, by the card each sees."""
    order = ["atreides", "emperor", "fremen"]
    drawn: list[dict[str, str]] = []
    seen: list[str] = []
    for seed in (11, 12):
        created = server.create({**ROUND, "seed": seed})
        room, tokens = created["room"], created["seats"]
        r = httpx.post(f"{server.base}/rooms/{room}/commands",
                       json={"type": "open_bidding", "order": order})
        assert r.json()["ok"], r.text
        pages = {f: Seat(browser, server, room, f, tokens[f]) for f in ("atreides", "emperor")}
        watcher = Watcher(browser, server, room, created["spectator"])
        try:
            seen.append(pages["atreides"].view()["bidding"]["up"]["card"]["id"])
            steps: dict[str, str] = {}
            for step, body in (("up", None), ("bid", {"type": "bid", "amount": 2}),
                               ("pass", {"type": "pass_bid"})):
                if body is not None:
                    turn = pages["atreides"].view()["bidding"]["up"]["turn"]
                    assert command(server, room, tokens[turn], body)["ok"]
                for seat in pages.values():
                    seat.settled()
                watcher.settled()
                steps[f"emperor-{step}"] = panel(pages["emperor"].page)
                steps[f"spectators-{step}"] = panel(watcher.page)
                steps[f"atreides-{step}"] = panel(pages["atreides"].page)
            drawn.append(steps)
        finally:
            for seat in pages.values():
                seat.close()
            watcher.close()
    assert seen[0] != seen[1]  # the rooms differ in the card up for bid
    for key in drawn[0]:
        if key.startswith("atreides"):
            assert drawn[0][key] != drawn[1][key], key
        else:
            assert drawn[0][key] == drawn[1][key], key


# The Ixians seated and allied to Atreides: one more card dealt for their choice, their
# support behind Atreides' bids, and Atreides' purchase open to the ally's replacement.
# Harkonnen's hand is full: it does not bid.
IXIANS: dict[str, Any] = {
    "mode": "advanced",
    "seed": 4,
    "bank": 500,
    "turn": 2,
    "phase": 4,
    "seats": [
        {"faction": "ixians", "spice": 12, "hand": ["karama-1"], "ally": "atreides"},
        {"faction": "atreides", "spice": 2, "hand": [], "ally": "ixians"},
        {"faction": "fremen", "spice": 3, "hand": ["crysknife"]},
        {"faction": "harkonnen", "spice": 7,
         "hand": ["shield-2", "chaumas", "stunner", "baliset", "kulon", "la-la-la",
                  "trip-to-gamont", "lasgun"]},
    ],
    "discard": ["shield-1"],
}


def test_the_ixians_choice_support_and_replacement(browser: Any, server: Server) -> None:
    created = server.create(IXIANS)
    room, tokens = created["room"], created["seats"]
    r = httpx.post(f"{server.base}/rooms/{room}/commands", json={
        "type": "open_bidding", "order": ["ixians", "atreides", "fremen", "harkonnen"]})
    assert r.json()["ok"], r.text
    seats = {f: Seat(browser, server, room, f, tokens[f])
             for f in ("ixians", "atreides", "harkonnen")}
    ixians, atreides, harkonnen = seats["ixians"], seats["atreides"], seats["harkonnen"]

    def settle() -> None:
        for seat in seats.values():
            seat.settled()
            seat.assert_holds_nothing_hidden(())

    try:
        settle()
        dealt = [c["id"] for c in ixians.view()["bidding"]["dealt"]]
        assert len(dealt) == 4  # three seats with room, one more for the Ixians
        drawn = ixians.page.eval_on_selector_all("#ix-choice [data-card]",
                                                 "els => els.map(e => e.dataset.card)")
        assert drawn == dealt
        assert "Waiting for the Ixians" in " ".join(atreides.page.inner_text("#bidding").split())
        assert "do not bid" in harkonnen.page.inner_text("#bidding")
        at_each_width(ixians.page, "bidding", "5-ixians-choose")
        name = ixians.view()["bidding"]["dealt"][0]["name"]
        ixians.page.get_by_role("button", name=f"{name} on top of the deck").first.click()
        settle()
        assert not ixians.page.is_visible("#ix-choice")

        # The Ixians back Atreides with 3 spice: Atreides may bid up to 2 + 3.
        ixians.button("▸ Support my ally's bids").click()
        at_each_width(ixians.page, "bidding", "6-support")
        amount = ixians.page.locator("#support-amount")
        amount.fill("3")
        ixians.button("Support with 3 spice").click()
        settle()
        support = atreides.page.inner_text("#support")
        assert "Ixians' support for your bids: up to 3 spice" in support
        ixians.button("Pass").click()
        settle()
        assert atreides.page.locator("#bid-amount").get_attribute("max") == "5"
        atreides.page.locator("#bid-amount").fill("5")
        atreides.button("Bid 5 spice").click()
        settle()
        fremen = tokens["fremen"]
        assert command(server, room, fremen, {"type": "pass_bid"})["ok"]
        ixians.button("Pass").click()
        settle()

        # Sold to Atreides, the Ixians' ally: keep the card or replace it.
        assert atreides.page.is_visible("#replacement")
        assert "Atreides may discard" in ixians.page.inner_text("#replacement")
        # My log counts only Atreides' own spice: 2 paid, the support paid the rest.
        assert "You bought" in atreides.page.inner_text("#mylog")
        assert "received" not in atreides.page.inner_text("#mylog")
        assert not atreides.page.is_visible("#decision")
        at_each_width(atreides.page, "bidding", "7-replacement")
        atreides.button("Keep it").click()
        settle()
        assert not atreides.page.is_visible("#replacement")
    finally:
        for seat in seats.values():
            seat.close()


def test_the_round_waits_for_richese(browser: Any, server: Server) -> None:
    """Richese seated with its cache: the round waits for its answer, which its page
    offers as the server lists it; the others read what the round waits for."""
    created = server.create({"mode": "advanced", "expansions": ["choam_richese"], "seed": 6,
                             "turn": 2, "phase": 4,
                             "seats": [{"faction": "richese", "spice": 8, "hand": []},
                                       {"faction": "atreides", "spice": 8, "hand": []}]})
    room, tokens = created["room"], created["seats"]
    r = httpx.post(f"{server.base}/rooms/{room}/commands",
                   json={"type": "open_bidding", "order": ["richese", "atreides"]})
    assert r.json()["ok"], r.text
    richese = Seat(browser, server, room, "richese", tokens["richese"])
    atreides = Seat(browser, server, room, "atreides", tokens["atreides"])
    try:
        offered = {a["when"] for a in richese.view()["actions"] if a["type"] == "richese_sale"}
        assert offered and "none" in offered
        assert "Waiting for Richese" in atreides.page.inner_text("#bidding-waiting")
        assert not atreides.page.is_visible("#bidding button")
        at_each_width(richese.page, "bidding", "8-richese-answer")
        richese.button("No cache sale this round").click()
        for seat in (richese, atreides):
            seat.settled()
            seat.assert_holds_nothing_hidden(("choam_richese",))
        assert not atreides.page.is_visible("#bidding-waiting")
        assert up_card(atreides) == atreides.view()["bidding"]["up"]["card"]["id"]
        assert "Your turn" in richese.page.inner_text("#turn")
    finally:
        richese.close()
        atreides.close()


# Richese sells a cache card first, in a silent auction.
SALE: dict[str, Any] = {
    "mode": "advanced", "expansions": ["choam_richese"], "seed": 8, "turn": 2, "phase": 4,
    "seats": [{"faction": "richese", "spice": 5, "hand": []},
              {"faction": "atreides", "spice": 10, "hand": []},
              {"faction": "fremen", "spice": 6, "hand": []}],
}


def test_a_silent_cache_sale_shows_no_sealed_amount_early(browser: Any, server: Server) -> None:
    """Two rooms that differ only in Atreides' sealed amount: the Fremen's bidding panel
    is the same markup until the last sealed bid is in; then every amount is shown."""
    drawn: list[str] = []
    for amount in (3, 4):
        created = server.create(SALE)
        room, tokens = created["room"], created["seats"]
        r = httpx.post(f"{server.base}/rooms/{room}/commands",
                       json={"type": "open_bidding", "order": ["richese", "atreides", "fremen"]})
        assert r.json()["ok"], r.text
        richese = Seat(browser, server, room, "richese", tokens["richese"])
        atreides = Seat(browser, server, room, "atreides", tokens["atreides"])
        fremen = Seat(browser, server, room, "fremen", tokens["fremen"])
        pages = (richese, atreides, fremen)
        try:
            richese.button("Sell a cache card first").click()
            richese.page.get_by_role("button", name="Sell Ornithopter silent").click()
            for seat in pages:
                seat.settled()
            assert "Ornithopter" in fremen.page.inner_text("#sale")
            if amount == 3:
                at_each_width(atreides.page, "bidding", "9-sealed-bid")
            atreides.page.locator("#sealed-amount").fill(str(amount))
            atreides.button(f"Seal my bid of {amount} spice").click()
            for seat in pages:
                seat.settled()
                seat.assert_holds_nothing_hidden(("choam_richese",))
            assert "Sealed bids in: Atreides" in fremen.page.inner_text("#sealed-in")
            drawn.append(panel(fremen.page))
            # The rest seal theirs: then every amount is public at once.
            for seat in (fremen, richese):
                if seat.page.locator("#sealed-amount").count():
                    seat.button("Seal my bid of 0 spice").click()
                    seat.settled()
            for seat in pages:
                seat.settled()
            # The sale is over in the same append: its amounts are in the public log.
            log = " ".join(fremen.page.inner_text("#log-body").split())
            assert f"The sealed bids: Richese 0, Atreides {amount}, Fremen 0" in log, log
            assert "Ornithopter" in atreides.page.inner_text("#my-hand")
            if amount == 3:
                at_each_width(fremen.page, "bidding", "10-sealed-revealed")
        finally:
            for seat in pages:
                seat.close()
    assert drawn[0] == drawn[1]


def test_a_once_around_cache_sale(browser: Any, server: Server) -> None:
    """Once around: the sale's turn and high bid on every page, each bidder once with the
    same Bid and Pass, Richese last; the card to the high bidder."""
    created = server.create(SALE)
    room, tokens = created["room"], created["seats"]
    r = httpx.post(f"{server.base}/rooms/{room}/commands",
                   json={"type": "open_bidding", "order": ["richese", "atreides", "fremen"]})
    assert r.json()["ok"], r.text
    assert command(server, room, tokens["richese"], {"type": "richese_sale", "when": "first"})["ok"]
    richese = Seat(browser, server, room, "richese", tokens["richese"])
    atreides = Seat(browser, server, room, "atreides", tokens["atreides"])
    try:
        richese.page.get_by_role("button", name="Sell Ornithopter once around").click()
        for seat in (richese, atreides):
            seat.settled()
        assert "Your turn" in atreides.page.inner_text("#sale-turn")
        assert "Atreides to bid" in richese.page.inner_text("#sale-turn")
        at_each_width(atreides.page, "bidding", "11-once-around")
        atreides.page.get_by_role("button", name="One spice more").click()
        atreides.button("Bid 2 spice").click()
        assert command(server, room, tokens["fremen"], {"type": "pass_bid"})["ok"]
        for seat in (richese, atreides):
            seat.settled()
        assert "2 spice by Atreides" in " ".join(richese.page.inner_text("#sale-high").split())
        richese.button("Pass").click()
        for seat in (richese, atreides):
            seat.settled()
            seat.assert_holds_nothing_hidden(("choam_richese",))
        assert "Ornithopter" in atreides.page.inner_text("#my-hand")
        assert not richese.page.is_visible("#sale")
    finally:
        richese.close()
        atreides.close()
