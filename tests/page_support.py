"""The pages in Debian's Chromium: `dune-ledger serve` in a subprocess, a seat's page
and the spectator's, each in a browser context of its own, and the checks every screen
state passes (no sideways scroll, Tab order as drawn, axe-core with no violation).

The browser is tests/conftest.py's `browser` fixture. Screenshots go to tests/artifacts/
(git-ignored), to be looked at.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from dune_ledger.domain.catalog import room_cards
from tests.support import HANG, answering, free_port

ARTIFACTS = Path(__file__).parent / "artifacts"

Page = Any  # playwright's Page: its types are not worth a stub package here

BOX_FULL_HAND: dict[str, Any] = {
    "mode": "advanced",
    "expansions": ["choam_richese"],
    "seed": 3,
    "bank": 500,
    "turn": 2,
    "phase": 6,
    "seats": [
        # At the hand limit (4): the provisional full-hand exchange applies.
        {"faction": "richese", "spice": 10,
         "hand": ["nullentropy-box", "crysknife", "chaumas", "stunner"]},
        {"faction": "emperor", "spice": 10, "hand": ["karama-1"]},
        {"faction": "atreides", "spice": 8, "hand": []},
    ],
    "discard": ["shield-1", "maula-pistol", "baliset", "snooper-3"],
}


TRUTH_AND_GIFT: dict[str, Any] = {
    "mode": "advanced",
    "expansions": ["choam_richese"],
    "seed": 5,
    "bank": 500,
    "turn": 2,
    "phase": 6,
    "seats": [
        {"faction": "richese", "spice": 10, "hand": ["nullentropy-box", "crysknife"],
         "ally": "emperor"},
        {"faction": "emperor", "spice": 10, "hand": ["karama-1", "truthtrance-1"],
         "ally": "richese"},
        {"faction": "harkonnen", "spice": 6, "hand": ["shield-2", "chaumas"]},
    ],
    "discard": ["shield-1", "maula-pistol", "baliset"],
}


class Server:
    """`dune-ledger serve` on one port and one SQLite file; killed and started again at will."""

    def __init__(self, db: Path, env: dict[str, str] | None = None) -> None:
        self.url = f"sqlite:///{db}"
        self.env = env or {}
        self.log = db.with_suffix(".log")  # the server's output, access log included
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "DUNE_LEDGER_ADMIN_TOKEN"}
        env.update(self.env)
        with self.log.open("ab") as out:  # the child keeps its own copy of the file
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "dune_ledger", "--db", self.url, "serve",
                 "--host", "127.0.0.1", "--port", str(self.port)],
                env=env, stdout=out, stderr=subprocess.STDOUT)
        answering(self.base, self.proc)

    def __enter__(self) -> Server:
        self.start()
        return self

    def __exit__(self, *_: Any) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=HANG)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)  # no shutdown: as a crash would
        self.proc.wait(timeout=HANG)
        self.proc = None

    def create(self, layout: dict[str, Any]) -> dict[str, Any]:
        admin = self.env.get("DUNE_LEDGER_ADMIN_TOKEN")
        r = httpx.post(f"{self.base}/rooms", json=layout,
                       headers={"Authorization": f"Bearer {admin}"} if admin else {})
        assert r.status_code == 201, r.text
        created: dict[str, Any] = r.json()
        return created

    def get(self, path: str, token: str) -> Any:
        r = httpx.get(f"{self.base}{path}", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200, r.text
        return r.json()


def command(server: Server, room: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
    """One command sent as a seat, through HTTP; it must be answered (accepted or not)."""
    r = httpx.post(f"{server.base}/rooms/{room}/commands", json=body,
                   headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


def pass_window(server: Server, room: str, tokens: dict[str, str]) -> dict[str, Any]:
    """Every seat the open response window waits for passes, through HTTP; the window."""
    any_token = next(iter(tokens.values()))
    window: dict[str, Any] = server.get(f"/rooms/{room}/public", any_token)["response"]
    assert window is not None and window["waiting"], window
    for faction in window["waiting"]:
        view = server.get(f"/rooms/{room}/view", tokens[faction])
        passing = next(a for a in view["actions"]
                       if a["type"] == "respond" and a["action"] == "pass")
        assert command(server, room, tokens[faction], passing)["ok"]
    return window


class Seat:
    """One player's page, in a browser context of its own."""

    def __init__(self, browser: Any, server: Server, room: str, faction: str, token: str,
                 *, width: int = 1280, height: int = 900, paste: bool = False) -> None:
        self.server, self.room, self.faction, self.token = server, room, faction, token
        self.context = browser.new_context(viewport={"width": width, "height": height})
        self.page: Page = self.context.new_page()
        self.page.set_default_timeout(15_000)
        self.errors: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        url = f"{server.base}/play/{room}"
        if paste:
            self.page.goto(url)
            self.page.get_by_label("Seat token").fill(token)
            self.page.get_by_role("button", name="Open my seat").click()
        else:
            self.page.goto(f"{url}#token={token}")
        self.settled()

    def view(self) -> dict[str, Any]:
        view: dict[str, Any] = self.server.get(f"/rooms/{self.room}/view", self.token)
        return view

    def settled(self) -> None:
        """Wait until the page shows the version the server holds now, or a later one (a
        committed room's page sets its seed by itself as it opens)."""
        version = self.view()["version"]
        self.page.wait_for_function(
            "v => Number(document.getElementById('table').dataset.version) >= v", arg=version)
        self.page.wait_for_function(
            "n => document.querySelectorAll('#log-body [data-seq]').length >= n",
            arg=len(self.server.get(f"/rooms/{self.room}/log", self.token)))

    def button(self, name: str) -> Any:
        return self.page.get_by_role("button", name=name, exact=True)

    def shot(self, journey: str, step: str) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        self.page.screenshot(path=str(ARTIFACTS / f"{journey}-{step}-{self.faction}.png"),
                             full_page=True)

    def hidden(self, expansions: tuple[str, ...]) -> set[str]:
        """Every card of the room that this seat's own view and log never name."""
        known = orjson_text(self.view()) + orjson_text(
            self.server.get(f"/rooms/{self.room}/log", self.token))
        return {c.id for c in room_cards(expansions) if not mentions(known, c.id)}

    def assert_holds_nothing_hidden(self, expansions: tuple[str, ...]) -> set[str]:
        hidden = self.hidden(expansions)
        dom = self.page.content()
        leaked = sorted(cid for cid in hidden if mentions(dom, cid))
        assert not leaked, f"{self.faction}'s page holds hidden cards: {leaked}"
        assert not self.errors, self.errors
        return hidden

    def close(self) -> None:
        self.context.close()


def orjson_text(data: Any) -> str:
    import orjson

    return orjson.dumps(data).decode()


def mentions(text: str, card_id: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(card_id)}(?![\w-])", text) is not None


WIDTHS = (280, 900, 1400)


def columns(page: Page, selector: str) -> int:
    """How many columns the elements `selector` finds are laid out in."""
    lefts = page.eval_on_selector_all(
        selector, "els => els.map(e => Math.round(e.getBoundingClientRect().left))")
    return len(set(lefts))


# The public log as the page draws it: one item per command (its `append`), each line
# with its number as shown and whether that number lies whole inside the log's box.
LOG_GROUPS = """() => {
  const list = document.getElementById('log-body').getBoundingClientRect();
  return Array.from(document.querySelectorAll('#log-body > li'), (group) => ({
    append: Number(group.dataset.append),
    lines: Array.from(group.querySelectorAll('[data-seq]'), (line) => {
      const number = line.querySelector('.seq');
      const box = number.getBoundingClientRect();
      return { seq: Number(line.dataset.seq), number: number.textContent,
               text: line.lastElementChild.textContent,
               whole: box.left >= list.left && box.right <= list.right
                 && number.scrollWidth <= number.clientWidth };
    }),
  }));
}"""


def log_groups(page: Page) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = page.evaluate(LOG_GROUPS)
    return groups

# Every element the Tab key reaches, in document order, with its box on the screen.
TABBABLE = """() => Array.from(document.querySelectorAll(
    'a[href], button, input, select, textarea, summary, [tabindex]'))
  .filter((el) => el.tabIndex >= 0 && !el.disabled && el.getClientRects().length > 0
    && getComputedStyle(el).visibility !== 'hidden')
  .map((el) => { const r = el.getBoundingClientRect();
    return { text: (el.textContent || el.id || el.tagName).trim().slice(0, 40),
             top: r.top + scrollY, bottom: r.bottom + scrollY, left: r.left, right: r.right }; })"""


def out_of_order(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Pairs where the next Tab stop is drawn before the current one: above it in the
    same column, or to its left on the same line."""
    bad = []
    for a, b in zip(items, items[1:], strict=False):
        same_column = b["left"] < a["right"] - 1 and b["right"] > a["left"] + 1
        above = b["bottom"] <= a["top"] + 1
        same_line = b["top"] < a["bottom"] - 1 and b["bottom"] > a["top"] + 1
        if (above and same_column) or (same_line and b["right"] <= a["left"] + 1):
            bad.append((a["text"], b["text"]))
    return bad


# What a player never reads: an id of the rules (a faction or a card as the rules write
# it, a window kind, an event's type), a "(s)" plural, or the old jargon.
JARGON = re.compile(
    r"\b(?:atreides|harkonnen|emperor|fremen|guild|bene_gesserit|ixians|tleilaxu|choam|"
    r"richese|ecaz|moritani)\b|\b[a-z]+_[a-z_]+\b|\b[a-z]+-\d+\b|\(s\)|"
    r"\b[A-Z][a-z]+[A-Z][A-Za-z]+\b|played by hand|\(finish\)|system:")

# The text a player reads, outside ids, tokens and hex values (which are shown as they
# are and may break anywhere), and the words in it drawn across two lines.
READ = """() => {
  const skip = '.room, .invite, .mono, code, pre, input, textarea, select, script, style';
  const text = [];
  const broken = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!el || el.closest(skip) || !el.getClientRects().length) continue;
    text.push(node.data);
    for (const m of node.data.matchAll(/[^\\s\\-/]+/g)) {
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const tops = new Set(Array.from(range.getClientRects(), (r) => Math.round(r.top)));
      if (tops.size > 1) broken.push(m[0]);
    }
  }
  return { text: text.join(' '), broken };
}"""


def check_words(page: Any, where: Any) -> None:
    """The page reads in the game's words, and no word is split across two lines."""
    read = page.evaluate(READ)
    jargon = [m.group(0) for m in JARGON.finditer(read["text"])]
    assert jargon == [], (where, jargon)
    assert read["broken"] == [], (where, read["broken"])


def check_state(page: Any, width: int, journey: str, step: str) -> None:
    """One screen state: no sideways scroll, Tab order as drawn, no axe violation, the
    game's words and no word split across lines."""
    axe_api = pytest.importorskip("axe_playwright_python.sync_playwright")
    scroll = page.evaluate("() => document.documentElement.scrollWidth")
    assert scroll <= width, (journey, step, width, scroll)
    check_words(page, (journey, step, width))
    stops = page.evaluate(TABBABLE)
    assert stops, (journey, step)
    assert out_of_order(stops) == [], (journey, step, width)
    results = axe_api.Axe().run(page)
    assert results.violations_count == 0, (journey, step, width,
                                            results.generate_report())
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"table-{journey}-{step}-{width}px.png"),
                    full_page=True)


def at_each_width(page: Any, journey: str, step: str) -> None:
    """`check_state` at 280, 900 and 1400 px, then back to 1280."""
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        check_state(page, width, journey, step)
    page.set_viewport_size({"width": 1280, "height": 900})


def asks_once(page: Page, scope: str, press: str, yes: str, no: str, journey: str,
              step: str) -> str:
    """Press `press` in `scope` (a selector), a choice that asks once: the focus goes to
    `yes`, the state is checked at each width, then `no` puts the focus back on `press`.
    Returns what the question said; whether anything was sent is the caller's check."""
    within = page.locator(scope)
    within.get_by_role("button", name=press, exact=True).click()
    page.wait_for_function("t => document.activeElement.textContent === t", arg=yes)
    says = str(within.locator(".confirm .says").inner_text())
    at_each_width(page, journey, step)
    within.get_by_role("button", name=no, exact=True).click()
    page.wait_for_function("t => document.activeElement.textContent === t", arg=press)
    return says


class Watcher:
    """The spectator page, in a browser context of its own."""

    def __init__(self, browser: Any, server: Server, room: str, token: str,
                 width: int = 1280) -> None:
        self.server, self.room, self.token = server, room, token
        self.context = browser.new_context(viewport={"width": width, "height": 900})
        self.page = self.context.new_page()
        self.page.set_default_timeout(15_000)
        self.page.goto(f"{server.base}/watch/{room}")
        self.page.get_by_label("Spectator token").fill(token)
        self.page.get_by_role("button", name="Watch").click()
        self.settled()

    def settled(self) -> None:
        version = self.server.get(f"/rooms/{self.room}/public", self.token)["version"]
        self.page.wait_for_function(
            "v => document.getElementById('table').dataset.version === String(v)", arg=version)

    def close(self) -> None:
        self.context.close()




# A seat page's record in the browser's IndexedDB (infrastructure/static/fairness.js):
# its seed, its public key and whether the private key can leave the browser.
KEPT = """async (id) => new Promise((done, fail) => {
  const opening = indexedDB.open('dune-ledger-fairness', 1);
  opening.onerror = () => fail(opening.error);
  opening.onsuccess = () => {
    const asked = opening.result.transaction('seats').objectStore('seats').get(id);
    asked.onsuccess = () => { const r = asked.result; opening.result.close();
      done(r ? { seed: r.seed, hash: r.hash, public_key: r.public_key,
                 extractable: r.pair.privateKey.extractable } : null); };
  };
})"""


def kept_in_browser(page: Page, room: str, seat: str) -> dict[str, Any] | None:
    kept: dict[str, Any] | None = page.evaluate(KEPT, f"{room}:{seat}")
    return kept


def resigned(text: bytes, key_file: Path, edit: Any) -> bytes:
    """A transcript edited as a dishonest operator would: `edit(payloads)` changes the
    parsed payloads in place, then every hash is chained and every append signed again
    with the server's own key, so that only the page's other checks can catch it."""
    import orjson

    from dune_ledger.application.stream import APPEND, chain_hash
    from dune_ledger.infrastructure.keys import Keys

    lines = [orjson.loads(line) for line in text.splitlines()]
    payloads = [orjson.loads(line["payload"]) for line in lines]
    edit(payloads)
    keys = Keys(key_file)
    head = "0" * 64
    out = []
    for i, (line, payload) in enumerate(zip(lines, payloads, strict=True)):
        payload["prev"] = head
        body = orjson.dumps(payload).decode()
        digest = chain_hash(line["room"], line["version"], line["type"], body.encode())
        last = i + 1 == len(lines) or payloads[i + 1]["append"] != payload["append"]
        out.append({**line, "payload": body, "prev": head, "hash": digest,
                    "sig": keys.sign(APPEND + digest.encode()) if last else None})
        head = digest
    return b"".join(orjson.dumps(line) + b"\n" for line in out)
