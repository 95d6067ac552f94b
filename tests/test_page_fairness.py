"""Fair dealing on the pages (RULES 9), in Debian's Chromium: a committed room's seat
pages make their keys, commit and reveal their seeds with no click and sign every
command; the host page deals a stalled ceremony and ends the room; each seat page then
checks the transcript in the browser, and names the check a forged transcript fails.
A page in a non-secure context says it cannot hold a key; a press answered 503 is sent
again with its command_id and its signature and applied once. Each new state is checked
at 280, 900 and 1400 px (no sideways scroll, Tab order as drawn, axe-core with no
violation) and photographed to tests/artifacts/.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.page_support import Seat, Server, Watcher, at_each_width, kept_in_browser, resigned
from tests.support import committed_layout


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with Server(tmp_path / "rooms.db",
                env={"DUNE_LEDGER_KEY_FILE": str(tmp_path / "server.key")}) as s:
        yield s


def public(server: Server, room: str, token: str) -> dict[str, Any]:
    view: dict[str, Any] = server.get(f"/rooms/{room}/public", token)
    return view


def until(what: Callable[[], Any], timeout: float = 15.0) -> Any:
    """What `what` returns once it is true; fails after `timeout` seconds."""
    end = time.monotonic() + timeout
    while True:
        got = what()
        if got:
            return got
        assert time.monotonic() < end, "waited in vain"
        time.sleep(0.1)


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


def send(server: Server, room: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
    r = httpx.post(f"{server.base}/rooms/{room}/commands", json=body,
                   headers={"Authorization": f"Bearer {token}"})
    result: dict[str, Any] = r.json()
    return result


def draw_through_the_deck(server: Server, room: str, token: str) -> None:
    """A seat without a key draws until the deck is empty and once more (the discard
    pile is shuffled into it), discarding whenever its hand is full."""
    for _ in range(200):
        view = server.get(f"/rooms/{room}/view", token)
        if view["deck"]["count"] == 0:
            break
        if view["me"]["hand_limit"] <= len(view["me"]["hand"]):
            card = view["me"]["hand"][0]["id"]
            assert send(server, room, token, {"type": "discard", "card": card})["ok"]
        assert send(server, room, token, {"type": "draw"})["ok"]
    view = server.get(f"/rooms/{room}/view", token)
    card = view["me"]["hand"][0]["id"]
    assert send(server, room, token, {"type": "discard", "card": card})["ok"]
    drawn = send(server, room, token, {"type": "draw"})
    assert drawn["ok"] and "DiscardReshuffled" in [e["type"] for e in drawn["events"]], drawn


def last_draw_dropped(transcript: bytes, seat: str) -> bytes:
    """The transcript without `seat`'s last draw: the lines after it take their versions
    down by one, as an operator who dropped that command would number them."""
    lines = [orjson.loads(line) for line in transcript.splitlines()]
    payloads = [orjson.loads(line["payload"]) for line in lines]
    gone = max(i for i, p in enumerate(payloads) if p.get("seat") == seat
               and (p.get("meta") or {}).get("command", {}).get("type") == "draw")
    assert payloads[gone + 1]["append"] != payloads[gone]["append"]  # one event
    out = []
    for i, (line, payload) in enumerate(zip(lines, payloads, strict=True)):
        if i == gone:
            continue
        if i > gone:
            line["version"] -= 1
            payload["append"] -= 1
        out.append({**line, "payload": orjson.dumps(payload).decode()})
    return b"".join(orjson.dumps(line) + b"\n" for line in out)


def serving(body: bytes) -> Callable[[Any], None]:
    """A route handler that answers with `body` as a transcript."""
    def answer(route: Any) -> None:
        route.fulfill(status=200, body=body, content_type="application/x-ndjson")
    return answer


def check_shown(page: Any) -> dict[str, str]:
    """The page's own check, once done: each check's result by name."""
    page.wait_for_selector("#fair-check-result[data-ok]", timeout=30_000)
    shown: dict[str, str] = page.eval_on_selector_all(
        "#fair-checks [data-check]",
        "els => Object.fromEntries(els.map(e => [e.dataset.check, e.dataset.result]))")
    return shown


def test_the_ceremony_a_game_the_end_and_the_check_in_the_browser(
        browser: Any, server: Server, tmp_path: Path) -> None:
    created = server.create(committed_layout(deck=None))
    room, tokens, spectator = created["room"], created["seats"], created["spectator"]

    # With no click, each open page registers its key and commits a seed; the Harkonnen
    # seat is played without a page (no key, no seed).
    richese = Seat(browser, server, room, "richese", tokens["richese"])
    emperor = Seat(browser, server, room, "emperor", tokens["emperor"])
    def fairness() -> dict[str, Any]:
        shown: dict[str, Any] = public(server, room, spectator)["fairness"]
        return shown

    fair = until(lambda: (f := fairness())["commitments"]["richese"]
                 and f["commitments"]["emperor"] and f)
    assert fair["stage"] == "commit" and fair["commitments"]["harkonnen"] is None
    for seat in (richese, emperor):
        kept = kept_in_browser(seat.page, room, seat.faction)
        assert kept is not None and kept["extractable"] is False
        assert fair["keys"][seat.faction] == kept["public_key"]
        assert fair["commitments"][seat.faction] == kept["hash"]
    # Gameplay waits for the deal.
    refused = send(server, room, tokens["harkonnen"], {"type": "draw"})
    assert refused["error"]["code"] == "not_dealt"

    # Before the reveal no page shows a seed, not even its own: only the public hash.
    secret_seeds = {s.faction: kept_in_browser(s.page, room, s.faction)["seed"]  # type: ignore[index]
                    for s in (richese, emperor)}
    for seat in (richese, emperor):
        seat.page.locator("[data-ceremony=emperor][data-state=committed]").wait_for()
        dom = seat.page.content()
        assert not any(value in dom for value in secret_seeds.values())
    assert "This browser holds this seat's key" in richese.page.inner_text("#fair-me")
    richese.settled()
    at_each_width(richese.page, "fair", "commit")

    # The host page shows the stage and deals the stalled ceremony: the pages reveal by
    # themselves, and the last reveal deals.
    context, host = new_page(browser)
    host.goto(f"{server.base}/host")
    host.locator(f"[data-room='{room}'] .ceremony[data-stage=commit]").wait_for()
    assert "2 of 3 seats committed" in host.inner_text(f"[data-room='{room}'] .ceremony")
    host.get_by_role("button", name="Deal…").click()
    says = host.locator(".confirm .says").inner_text()
    assert "Starts the reveal stage now" in says and "Harkonnen" in says
    at_each_width(host, "fair", "host-deal")
    host.get_by_role("button", name="Yes, deal").click()
    fair = until(lambda: (f := fairness())["stage"] == "dealt" and f)
    assert fair["withheld"] == [] and fair["mix"]
    assert fair["seeds"] == {"richese": secret_seeds["richese"],
                             "emperor": secret_seeds["emperor"], "harkonnen": None}
    host.locator(f"[data-room='{room}'] .ceremony[data-stage=dealt]").wait_for()
    assert host.get_by_role("button", name="Deal…").count() == 0
    richese.settled()
    richese.page.locator("#fair-stage[data-stage=dealt]").wait_for()
    at_each_width(richese.page, "fair", "dealt")
    # The spectators see the same ceremony, and hold no key.
    watcher = Watcher(browser, server, room, spectator)
    watcher.page.locator("[data-ceremony=emperor][data-state=revealed]").wait_for()
    assert watcher.page.locator("#fair-me").count() == 0
    watcher.close()

    # A Box search from the page (signed), then the deck drawn through to a reshuffle.
    richese.button("Pay 2 spice and search the discard").click()
    richese.page.wait_for_selector("#candidates li")
    richese.button("Take Maula Pistol").click()
    richese.page.wait_for_selector("#candidates", state="detached")
    draw_through_the_deck(server, room, tokens["harkonnen"])
    richese.settled()
    richese.button("Draw a card").click()  # the command a forgery below drops
    until(lambda: len(richese.view()["me"]["hand"]) == 3)
    richese.settled()

    # The host ends the room; each seat page checks the transcript in the browser.
    host.get_by_role("button", name="End room…").click()
    host.get_by_role("button", name="Yes, end it").click()
    host.get_by_role("button", name="Download the transcript").wait_for()
    for seat in (richese, emperor):
        shown = check_shown(seat.page)
        assert seat.page.locator("#fair-check-result").get_attribute("data-ok") == "true", \
            seat.page.inner_text("#fair-check-result")
        assert set(shown.values()) == {"holds"}, shown
        assert len(shown) == 8
    derived = richese.page.inner_text("[data-check=derivations]")
    assert "3 random calls derived again" in derived  # the deal, the pile, the reshuffle
    # The commitment, the reveal, the search and the card taken.
    mine = richese.page.inner_text("[data-check=my_commands]")
    assert "5 signed by this browser" in mine, mine
    assert "the 6 it saw accepted are all recorded" in mine, mine  # the key's too
    richese.settled()
    at_each_width(richese.page, "fair", "checked")

    # The transcript the page checked is one `dune-ledger verify` accepts.
    with richese.page.expect_download() as caught:
        richese.page.get_by_role("button", name="Download the transcript").click()
    file = tmp_path / caught.value.suggested_filename
    caught.value.save_as(file)
    key = httpx.get(f"{server.base}/keys").json()["public_key"]
    checked = subprocess.run([sys.executable, "-m", "dune_ledger", "verify", str(file),
                              "--key", key], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    transcript = file.read_bytes()

    # Forged transcripts, signed again with the server's own key: each fails, named.
    def seed_changed(payloads: list[dict[str, Any]]) -> None:
        reveal = next(p for p in payloads if p["fact"].get("seat") == "emperor"
                      and "value" in p["fact"] and "hash" not in p["fact"])
        reveal["fact"]["value"] = "chosen by the operator"

    def sig_removed(payloads: list[dict[str, Any]]) -> None:
        searched = next(p for p in payloads if (p.get("meta") or {}).get("command", {})
                        .get("type") == "begin_search")
        del searched["meta"]["command"]["sig"]

    key_file = tmp_path / "server.key"
    for edit, failing, words in ((seed_changed, "ceremony", "reveal does not match"),
                                 (sig_removed, "my_commands", "carries no signature"),
                                 (None, "my_commands", "sent and the server accepted is "
                                  "not in the transcript")):
        # None: richese's last draw dropped, the rest numbered, chained and signed again,
        # which every other check of the page accepts (it draws nothing at random).
        forged = resigned(transcript, key_file, edit) if edit else \
            resigned(last_draw_dropped(transcript, "richese"), key_file, lambda _: None)
        richese.page.route(f"**/rooms/{room}/transcript", serving(forged))
        richese.page.reload()
        shown = check_shown(richese.page)
        result = richese.page.inner_text("#fair-check-result")
        assert richese.page.locator("#fair-check-result").get_attribute("data-ok") == "false"
        assert shown[failing] == "fails", shown
        assert failing.replace("_", " ") in result and words in result, result
        richese.page.unroute(f"**/rooms/{room}/transcript")
    at_each_width(richese.page, "fair", "forged")
    for seat in (richese, emperor):
        assert not seat.errors, seat.errors
        seat.close()
    context.close()


def test_a_page_in_a_non_secure_context_says_it_cannot_hold_a_key(browser: Any,
                                                                   server: Server) -> None:
    created = server.create(committed_layout(deck=None))
    room, tokens, spectator = created["room"], created["seats"], created["spectator"]
    context, page = new_page(browser)

    # The same server under a name that is not this computer's: plain HTTP there is not
    # a secure context, so the browser gives the page no crypto.subtle.
    def forward(route: Any) -> None:
        if "/stream" in route.request.url:
            route.abort()  # a stream does not end: the page reads every 2 s instead
            return
        url = route.request.url.replace("http://fairness.test", server.base)
        route.fulfill(response=route.fetch(url=url))

    context.route("http://fairness.test/**", forward)
    page.goto(f"http://fairness.test/play/{room}#token={tokens['richese']}")
    page.locator("#fair-me").wait_for()
    assert page.evaluate("() => window.isSecureContext") is False
    said = page.inner_text("#fair-me")
    assert "not in a secure context" in said and "cannot make or hold a seat key" in said
    page.wait_for_timeout(500)
    assert public(server, room, spectator)["fairness"]["keys"]["richese"] is None
    at_each_width(page, "fair", "not-secure")
    context.close()


def test_a_press_answered_503_is_sent_again_with_its_command_id(browser: Any,
                                                               server: Server) -> None:
    created = server.create(committed_layout(deck=None))
    room, tokens, spectator = created["room"], created["seats"], created["spectator"]
    before = public(server, room, spectator)["version"]
    context, page = new_page(browser)
    sent = lose_the_first_answer(page, f"**/rooms/{room}/commands")
    page.goto(f"{server.base}/play/{room}#token={tokens['harkonnen']}")
    # (Waiting through the page: its routes are answered only while Playwright is called.)
    page.locator("[data-ceremony=harkonnen][data-state=committed]").wait_for()
    page.wait_for_timeout(500)  # and nothing more is sent
    # The key's registration, sent again whole (its command_id and signature), then the
    # commitment: a new command.
    assert [c["type"] for c in sent] == ["seat_key", "seat_key", "seed_commit"], sent
    assert sent[0] == sent[1] and sent[0]["sig"]
    assert sent[2]["command_id"] != sent[0]["command_id"]
    # Stored once: one event for the key, one for the commitment.
    assert public(server, room, spectator)["version"] == before + 2
    assert page.locator("#error").is_hidden()
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


def test_a_room_ended_before_its_deal_is_checked_for_what_it_holds(browser: Any,
                                                                   server: Server) -> None:
    created = server.create(committed_layout(deck=None))
    room, tokens = created["room"], created["seats"]
    seat = Seat(browser, server, room, "emperor", tokens["emperor"])
    seat.page.locator("[data-ceremony=emperor][data-state=committed]").wait_for()
    assert httpx.post(f"{server.base}/rooms/{room}/end", json={}).status_code == 200
    seat.page.wait_for_selector("#fair-check-result[data-ok=true]", timeout=30_000)
    assert "ended before its deal" in seat.page.inner_text("#fair-check-result")
    assert not seat.errors, seat.errors
    seat.close()


def test_a_reveal_the_server_dropped_is_said_plainly(browser: Any, server: Server) -> None:
    created = server.create(committed_layout(deck=None))
    room, tokens, spectator = created["room"], created["seats"], created["spectator"]
    context, page = new_page(browser)

    # The server takes the key and the commitment, and drops the reveal: as an operator
    # choosing among deals would.
    def drop_the_reveal(route: Any) -> None:
        if json.loads(route.request.post_data)["type"] == "seed_reveal":
            route.abort()
        else:
            route.continue_()

    page.route(f"**/rooms/{room}/commands", drop_the_reveal)
    page.goto(f"{server.base}/play/{room}#token={tokens['emperor']}")
    page.locator("[data-ceremony=emperor][data-state=committed]").wait_for()
    operator = f"{server.base}/rooms/{room}/commands"
    assert httpx.post(operator, json={"type": "deal"}).json()["ok"]  # the reveal stage
    page.locator("#error:not([hidden])").wait_for(timeout=20_000)  # the reveal never landed
    # The host page deals in the reveal stage, saying who will be recorded as withheld.
    host_context, host = new_page(browser)
    host.goto(f"{server.base}/host")
    host.locator(f"[data-room='{room}'] .ceremony[data-stage=reveal]").wait_for()
    assert "Reveal stage: 0 of 1 committed seats revealed." in host.inner_text(
        f"[data-room='{room}'] .ceremony")
    host.get_by_role("button", name="Deal…").click()
    assert host.locator(".confirm .says").inner_text() == (
        "Deals now: Emperor committed and did not reveal, and will be recorded as withheld, "
        "publicly.")
    host.get_by_role("button", name="Yes, deal").click()
    host.locator(f"[data-room='{room}'] .ceremony[data-stage=dealt]").wait_for()
    assert "withheld reveals: Emperor" in host.inner_text(f"[data-room='{room}'] .ceremony")
    host_context.close()
    page.locator("#fair-stage[data-stage=dealt]").wait_for()
    assert public(server, room, spectator)["fairness"]["withheld"] == ["emperor"]
    assert "This page sent its reveal, and the deal recorded it as withheld" in \
        page.inner_text("#fair-me")
    assert "Withheld reveals: you." in page.inner_text("#fair-withheld")
    at_each_width(page, "fair", "withheld")

    # After the end, the page's own check names it.
    assert httpx.post(f"{server.base}/rooms/{room}/end", json={}).status_code == 200
    shown = check_shown(page)
    assert shown["my_reveal"] == "fails", shown
    assert "the server dealt without it" in page.inner_text("#fair-check-result")
    context.close()


def test_two_tabs_of_one_seat_hold_one_key_and_one_seed(browser: Any, server: Server) -> None:
    created = server.create(committed_layout(deck=None))
    room, tokens, spectator = created["room"], created["seats"], created["spectator"]
    context = browser.new_context()
    tabs = [context.new_page() for _ in range(2)]
    for tab in tabs:  # opened together: each may find no key yet
        tab.goto(f"{server.base}/play/{room}#token={tokens['richese']}", wait_until="commit")
    for tab in tabs:
        tab.locator("[data-ceremony=richese][data-state=committed]").wait_for(timeout=15_000)
    tabs[0].wait_for_timeout(500)
    kept = kept_in_browser(tabs[0], room, "richese")
    fair = public(server, room, spectator)["fairness"]
    assert kept is not None
    assert fair["keys"]["richese"] == kept["public_key"]
    assert fair["commitments"]["richese"] == kept["hash"]
    for tab in tabs:
        tab.locator("#fair-me", has_text="This browser holds this seat's key").wait_for()
        assert "This browser holds this seat's key" in tab.inner_text("#fair-me")
    context.close()
