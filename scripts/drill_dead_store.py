"""How fast `serve` answers once its PostgreSQL database is gone.

    .venv/bin/python -m scripts.drill_dead_store [--admin PG_ADMIN_URL] [--port 8931]

Starts `dune-ledger serve` on a throwaway database on 127.0.0.1, creates a room,
reads a view, drops the database under the server (`DROP DATABASE ... WITH
(FORCE)`), then times /readyz, a view, a command and a view again. Each should
be a 503 within 2 s. Figures: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psycopg

from scripts.throwaway import ADMIN_URL, throwaway_database
from tests.support import layout

ROOT = Path(__file__).resolve().parent.parent

OPERATOR = "drill-operator"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admin", default=ADMIN_URL)
    parser.add_argument("--port", type=int, default=8931)
    args = parser.parse_args()
    base = f"http://127.0.0.1:{args.port}"
    env = {**os.environ, "DUNE_LEDGER_ADMIN_TOKEN": OPERATOR}
    with throwaway_database(args.admin, "dl_drill") as url:
        server = subprocess.Popen(
            [sys.executable, "-m", "dune_ledger", "--db", url, "serve",
             "--port", str(args.port)], cwd=ROOT, env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(400):
                with contextlib.suppress(httpx.TransportError):
                    httpx.get(f"{base}/healthz")
                    break
                time.sleep(0.05)
            room = httpx.post(f"{base}/rooms", json=layout(),
                              headers={"Authorization": f"Bearer {OPERATOR}"}).json()
            seat = {"Authorization": f"Bearer {room['seats']['emperor']}"}
            rooms = f"{base}/rooms/{room['room']}"
            assert httpx.get(f"{rooms}/view", headers=seat).status_code == 200
            with psycopg.connect(args.admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE "{url.rsplit("/", 1)[1]}" WITH (FORCE)')
            calls = [("GET /readyz", lambda: httpx.get(f"{base}/readyz", timeout=60)),
                     ("GET view", lambda: httpx.get(f"{rooms}/view", headers=seat, timeout=60)),
                     ("POST command", lambda: httpx.post(f"{rooms}/commands", headers=seat,
                                                         json={"type": "draw"}, timeout=60)),
                     ("GET view again", lambda: httpx.get(f"{rooms}/view", headers=seat,
                                                          timeout=60))]
            for name, call in calls:
                started = time.monotonic()
                status = call().status_code
                print(f"{name}: {status} in {time.monotonic() - started:.2f} s")
        finally:
            server.terminate()
            server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
