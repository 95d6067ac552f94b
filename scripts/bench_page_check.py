"""The seat page's own check of a transcript (RULES 9.8), in Chromium, against `verify`.

    .venv/bin/python -m scripts.bench_page_check [--moves 400] [--runs 3]

Starts `dune-ledger serve` on 127.0.0.1 with a fresh SQLite file and a committed room;
the Emperor's page (Debian's Chromium through Playwright) makes its key and commits,
the operator deals, the page reveals; the Harkonnen seat (no key) draws and discards
`--moves` times over HTTP; the operator ends the room. Then `--runs` times, the page is
reloaded and checks the transcript with WebCrypto, and the time it shows is read.
Baseline in the same run: `verify` (infrastructure/verify.py, which re-executes every
command as well) on the same transcript, in this process.

Prints JSON: the transcript's events, the page's and verify's times (median) and
their events per second, and the ratio. Figures: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from scripts.bench_page import CHROMIUM, serve, stop

LAYOUT: dict[str, Any] = {
    "mode": "advanced", "expansions": ["choam_richese"], "turn": 2, "phase": 6,
    "seats": [{"faction": "richese", "spice": 10, "hand": ["nullentropy-box"]},
              {"faction": "emperor", "spice": 10, "hand": ["karama-1"]},
              {"faction": "harkonnen", "spice": 6, "hand": []}],
    "discard": ["shield-1", "baliset"],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moves", type=int, default=400)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is missing (apt-get install -y chromium)", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    from dune_ledger.infrastructure.verify import public_key, verify

    work = Path(tempfile.mkdtemp(prefix="dl-bench-check-"))
    base, server = serve(work)
    try:
        client = httpx.Client(base_url=base)
        created = client.post("/rooms", json=LAYOUT).json()
        room, tokens = created["room"], created["seats"]
        auth = {"Authorization": f"Bearer {tokens['harkonnen']}"}

        def command(body: dict[str, Any]) -> None:
            client.post(f"/rooms/{room}/commands", json=body, headers=auth)

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM)
            page = browser.new_page()
            page.set_default_timeout(120_000)
            page.goto(f"{base}/play/{room}#token={tokens['emperor']}")
            page.locator("[data-ceremony=emperor][data-state=committed]").wait_for()
            client.post(f"/rooms/{room}/commands", json={"type": "deal"})
            page.locator("#fair-stage[data-stage=dealt]").wait_for()
            for _ in range(args.moves):
                me = client.get(f"/rooms/{room}/view", headers=auth).json()["me"]
                if len(me["hand"]) >= me["hand_limit"]:
                    command({"type": "discard", "card": me["hand"][0]["id"]})
                command({"type": "draw"})
            client.post(f"/rooms/{room}/end", json={})
            page_ms = []
            for _ in range(args.runs):
                page.reload()
                page.wait_for_selector("#fair-check-result[data-ok=true]")
                took = page.inner_text("#fair-check-took")
                page_ms.append(float(took.split(" ms")[0].rsplit(" ", 1)[1]))
            browser.close()

        data = client.get(f"/rooms/{room}/transcript").content
        events = len(data.splitlines())
        key = public_key(client.get("/keys").json()["public_key"])
        verify_ms = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            report = verify(data, key)
            verify_ms.append((time.perf_counter() - t0) * 1000)
            assert report["ok"], report["first_failure"]
        page_median, verify_median = statistics.median(page_ms), statistics.median(verify_ms)
        print(json.dumps({
            "events": events, "runs": args.runs,
            "page_check_ms": round(page_median, 1),
            "page_events_per_s": round(events / page_median * 1000),
            "verify_ms": round(verify_median, 1),
            "verify_events_per_s": round(events / verify_median * 1000),
            "page_time_over_verify": round(page_median / verify_median, 3),
        }, indent=2))
        return 0
    finally:
        stop(server)


if __name__ == "__main__":
    sys.exit(main())
