"""What every benchmark in scripts/ shares: timing, throwaway databases, pgbench, the machine.

The benchmarks report ratios against a baseline measured in the same run
(docs/benchmarks.md): absolute figures move with the disk's fsync and with
whatever else the machine runs.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from dune_ledger.infrastructure.observability import first_line
from scripts.throwaway import ADMIN_URL, throwaway_database

SHARED = ("measured while other agents shared the machine's 2 cores: read the ratios, "
          "not the absolute figures")


def timed(fn: Callable[[], Any], passes: int) -> float:
    """The median wall time of `passes` calls of `fn`, in seconds."""
    times = []
    for _ in range(passes):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def percentile(values: Sequence[float], fraction: float) -> float:
    """The value below which `fraction` of `values` lie (nearest rank)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def pg_reachable(admin_url: str = ADMIN_URL) -> str | None:
    """None when the server answers, else why not."""
    try:
        import psycopg

        psycopg.connect(admin_url, connect_timeout=3).close()
        return None
    except Exception as e:  # any failure means: skip PostgreSQL with a note
        return first_line(e)


@contextmanager
def database(storage: str, tmp: Path, name: str,
             admin_url: str = ADMIN_URL) -> Iterator[str]:
    """A fresh database URL: a SQLite file in `tmp`, or a throwaway PostgreSQL database."""
    if storage == "sqlite":
        yield f"sqlite:///{tmp / (name + '.db')}"
        return
    with throwaway_database(admin_url, f"dl_bench_{name}") as url:
        yield url


def pgbench_binary() -> str:
    found = shutil.which("pgbench")
    if found:
        return found
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/pgbench"))
    if not candidates:
        raise SystemExit("pgbench not found (it comes with PostgreSQL's server package)")
    return str(candidates[-1])


def pgbench(url: str, script: str, clients: int, seconds: float) -> float:
    """Transactions per second of pgbench running `script` (its SQL) on `clients`
    connections for `seconds`."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(script)
    u = urlparse(url)
    try:
        done = subprocess.run(
            [pgbench_binary(), "-n", "-M", "prepared", "-c", str(clients), "-j", str(clients),
             "-T", str(max(1, round(seconds))), "-f", f.name,
             "-h", u.hostname or "127.0.0.1", "-p", str(u.port or 5432),
             "-U", u.username or "postgres", u.path.strip("/")],
            capture_output=True, text=True, check=True,
            env={**os.environ, "PGPASSWORD": u.password or ""},
        )
    except subprocess.CalledProcessError as e:
        raise SystemExit(f"pgbench failed:\n{e.stdout}\n{e.stderr}") from None
    finally:
        os.unlink(f.name)
    match = re.search(r"tps = ([\d.]+)", done.stdout)
    if not match:
        raise SystemExit(f"cannot read pgbench's output:\n{done.stdout}")
    return float(match.group(1))


def machine() -> dict[str, Any]:
    mem = 0.0
    try:
        with open("/proc/meminfo") as f:
            mem = int(f.readline().split()[1]) / 1024 / 1024
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "memory_gib": round(mem, 1),
            "python": platform.python_version(), "platform": platform.platform()}


def code_commit(root: Path) -> str | None:
    try:
        return subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except Exception:  # not a git checkout: say nothing
        return None
