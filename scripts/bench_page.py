"""The seat page in Chromium: its first paint, and a move reaching 8 open pages.

    .venv/bin/python -m scripts.bench_page [--loads 30] [--moves 60] [--bids 60] [--pages 8]

Starts `dune-ledger serve` on 127.0.0.1 with a fresh SQLite file and a room of six
seats, and drives Debian's Chromium (/usr/bin/chromium) through Playwright:

1. first paint: `--loads` times, a fresh browser context opens a seat's page
   (token in the fragment); from the navigation's start, the page's
   first-contentful-paint and the moment the seat's own view is drawn (the table's
   `data-version` set). Baseline in the same run: the loopback round trip of
   `GET /healthz` from this process.
2. a move reaching the pages: `--pages` pages open (the five other seats, then
   spectator pages), Richese draws and discards `--moves` times over HTTP; for each
   move and page, the time from sending the command until that page drew the new
   version (a MutationObserver stamps it with Date.now(); one machine, one clock).
   Baseline in the same run: the command's own HTTP round trip.
3. a bid reaching the pages: the operator opens a Bidding round and the seat whose
   turn it is bids one more than the high bid, `--bids` times; timed as the move, so
   the Bidding panel's redraw on 8 pages stands beside the draw's and the discard's.

Prints JSON with the median and p99 of each figure and the ratios to their
baselines. Figures: docs/benchmarks.md (say whether the machine was shared).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent

CHROMIUM = "/usr/bin/chromium"
SEATS = ["richese", "emperor", "harkonnen", "atreides", "fremen", "guild"]
LAYOUT: dict[str, Any] = {
    "mode": "advanced", "seed": 11, "bank": 500, "turn": 1, "phase": 4,
    "response_seconds": 0,
    "seats": [{"faction": f, "spice": 1000, "hand": []} for f in SEATS],
}
DRAWN = """document.addEventListener('DOMContentLoaded', () => {
  const root = document.getElementById('table');
  new MutationObserver(() => {
    if (window.__drawn === undefined) window.__drawn = performance.now();
  }).observe(root, { attributes: true, attributeFilter: ['data-version'] }); });"""
STAMP = """() => { window.__seen = {};
  const root = document.getElementById('table');
  new MutationObserver(() => { window.__seen[root.dataset.version] = Date.now(); })
    .observe(root, { attributes: true, attributeFilter: ['data-version'] }); }"""


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(work: Path) -> tuple[str, subprocess.Popen[bytes]]:
    """`dune-ledger serve` on a free loopback port, its rooms and key file in `work`,
    without an operator token (the host page's loopback default): its base URL once
    it answers, and the process."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if k != "DUNE_LEDGER_ADMIN_TOKEN"}
    env["DUNE_LEDGER_KEY_FILE"] = str(work / "bench.key")
    server = subprocess.Popen(
        [sys.executable, "-m", "dune_ledger", "--db", f"sqlite:///{work / 'rooms.db'}",
         "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(400):
        try:
            if httpx.get(f"{base}/healthz").status_code == 200:
                return base, server
        except httpx.TransportError:
            time.sleep(0.05)
    stop(server)
    raise SystemExit(f"bench: serve did not answer at {base}")


def stop(server: subprocess.Popen[bytes]) -> None:
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=10)


def quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"n": len(ordered), "median_ms": round(statistics.median(ordered), 1),
            "p99_ms": round(p99, 1), "max_ms": round(ordered[-1], 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, default=30)
    parser.add_argument("--moves", type=int, default=60)
    parser.add_argument("--bids", type=int, default=60)
    parser.add_argument("--pages", type=int, default=8)
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is missing (apt-get install -y chromium)", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="dl-bench-page-"))
    base, server = serve(work)
    try:
        client = httpx.Client(base_url=base)
        created = client.post("/rooms", json=LAYOUT).json()
        room, tokens = created["room"], created["seats"]
        healthz = []
        for _ in range(50):
            t0 = time.perf_counter()
            client.get("/healthz")
            healthz.append((time.perf_counter() - t0) * 1000)

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM)
            paint, drawn, plain = [], [], []
            for i in range(args.loads):
                context = browser.new_context()
                # When the seat's own view is first drawn, from the navigation's start.
                context.add_init_script(DRAWN)
                page = context.new_page()
                page.goto(f"{base}/play/{room}#token={tokens[SEATS[i % len(SEATS)]]}")
                page.wait_for_function("() => window.__drawn !== undefined")
                page.wait_for_function("() => performance.getEntriesByName("
                                       "'first-contentful-paint').length > 0")
                paint.append(page.evaluate("() => performance.getEntriesByName("
                                           "'first-contentful-paint')[0].startTime"))
                drawn.append(page.evaluate("() => window.__drawn"))
                context.close()
                # Baseline: the same browser's first paint of a plain JSON document.
                context = browser.new_context()
                page = context.new_page()
                page.goto(f"{base}/healthz")
                page.wait_for_function("() => performance.getEntriesByName("
                                       "'first-contentful-paint').length > 0")
                plain.append(page.evaluate("() => performance.getEntriesByName("
                                           "'first-contentful-paint')[0].startTime"))
                context.close()

            pages = []
            for i in range(args.pages):
                context = browser.new_context()
                page = context.new_page()
                others = SEATS[1:]
                if i < len(others):
                    page.goto(f"{base}/play/{room}#token={tokens[others[i]]}")
                else:
                    page.goto(f"{base}/watch/{room}#token={created['spectator']}")
                page.wait_for_function("() => document.getElementById('status')"
                                       ".textContent === 'Live'")
                page.evaluate(STAMP)
                pages.append(page)
            mover = {"Authorization": f"Bearer {tokens['richese']}"}
            reach, round_trip = [], []

            def timed(command: dict[str, Any], seat: str, into: list[float]) -> None:
                sent = time.time() * 1000
                t0 = time.perf_counter()
                result = client.post(f"/rooms/{room}/commands", json=command, headers={
                    "Authorization": f"Bearer {tokens[seat]}"}).json()
                round_trip.append((time.perf_counter() - t0) * 1000)
                assert result["ok"], result
                version = str(result["version"])
                for page in pages:
                    page.wait_for_function("v => window.__seen[v] !== undefined",
                                           arg=version, timeout=10_000)
                    into.append(page.evaluate("v => window.__seen[v]", version) - sent)

            for _ in range(args.moves):
                view = client.get(f"/rooms/{room}/view", headers=mover).json()
                hand = view["me"]["hand"]
                timed({"type": "discard", "card": hand[0]["id"]} if hand else {"type": "draw"},
                      "richese", reach)
            bid_reach: list[float] = []
            if args.bids:
                opened = client.post(f"/rooms/{room}/commands", json={
                    "type": "open_bidding", "order": SEATS}).json()
                assert opened["ok"], opened
                for _ in range(args.bids):
                    up = client.get(f"/rooms/{room}/public",
                                    headers=mover).json()["bidding"]["up"]
                    high = up["high"]["amount"] if up["high"] else 0
                    timed({"type": "bid", "amount": high + 1}, up["turn"], bid_reach)
            browser.close()
        first = quantiles(paint)
        plain_paint = quantiles(plain)
        view_drawn = quantiles(drawn)
        moved = quantiles(reach)
        bidden = quantiles(bid_reach) if bid_reach else None
        trip = quantiles(round_trip)
        base_trip = quantiles(healthz)
        print(json.dumps({
            "first_contentful_paint": first,
            "own_view_drawn": view_drawn,
            "first_paint_of_plain_json": plain_paint,
            "healthz_round_trip": base_trip,
            "move_reaching_pages": {**moved, "pages": args.pages},
            "bid_reaching_pages": bidden and {**bidden, "pages": args.pages},
            "command_round_trip": trip,
            "ratios": {
                "first_paint_median_over_plain_json": round(
                    first["median_ms"] / max(plain_paint["median_ms"], 0.1), 2),
                "view_drawn_median_over_plain_json": round(
                    view_drawn["median_ms"] / max(plain_paint["median_ms"], 0.1), 2),
                "reach_p99_over_command_p99": round(moved["p99_ms"]
                                                    / max(trip["p99_ms"], 0.1), 2),
                "bid_reach_median_over_move_reach_median": bidden and round(
                    bidden["median_ms"] / max(moved["median_ms"], 0.1), 2),
            },
            "targets": {"first_paint_p99_within_300ms": first["p99_ms"] <= 300,
                        "move_p99_within_250ms": moved["p99_ms"] <= 250},
        }, indent=2))
    finally:
        stop(server)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
