"""A real pg_auto_failover cluster on loopback: a monitor and three data nodes.

    .venv/bin/python -m scripts.pgaf_cluster up [--dir DIR]   # prints the URL, runs until ^C
    .venv/bin/python -m scripts.pgaf_cluster check            # packages there? (exit 0/1)

One primary and two standbys with `number_sync_standbys` 1: a commit is
acknowledged once a standby has it, and with one standby dead the other still
takes the commits (with a single standby pg_auto_failover turns synchronous
replication off when it dies, and acknowledged writes could then be lost).
Every node listens on a free port of 127.0.0.1, in a temporary directory,
run as the `postgres` user (pg_autoctl refuses root). The monitor checks the
nodes every second so that a dead primary is replaced in seconds, not the
default half minute. Installs Debian's `pg-auto-failover-cli` and
`postgresql-15-auto-failover` with apt-get when they are missing (`ensure_packages`).

`Cluster` is used by scripts/failover_drill.py and tests/test_failover.py.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_AUTOCTL = Path("/usr/bin/pg_autoctl")
EXTENSION = Path("/usr/share/postgresql/15/extension/pgautofailover.control")
PACKAGES = ("pg-auto-failover-cli", "postgresql-15-auto-failover")
USER = "postgres"
DBNAME = "dune"
NODES = 3
# The monitor's health checks (milliseconds): a dead node is found in about 2 s,
# and a standby is promoted 2 s later (the defaults take about 30 s in all).
MONITOR_SETTINGS = {
    "pgautofailover.health_check_period": "1000",
    "pgautofailover.health_check_timeout": "1000",
    "pgautofailover.health_check_max_retries": "1",
    "pgautofailover.health_check_retry_delay": "500",
    "pgautofailover.node_considered_unhealthy_timeout": "2000",
    "pgautofailover.primary_demote_timeout": "2000",
}


def packages_missing() -> list[str]:
    return [p for p, f in zip(PACKAGES, (PG_AUTOCTL, EXTENSION), strict=True) if not f.exists()]


def ensure_packages(quiet: bool = True) -> bool:
    """Install the packages with apt-get when missing; True when they are there after."""
    if not packages_missing():
        return True
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return False
    out = subprocess.DEVNULL if quiet else None
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # Another process may hold the dpkg lock (installing chromium): wait for it.
    subprocess.run(["apt-get", "-o", "DPkg::Lock::Timeout=600", "update", "-q"],
                   stdout=out, stderr=out, env=env, check=False)
    subprocess.run(["apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y", "-q",
                    *PACKAGES], stdout=out, stderr=out, env=env, check=False)
    return not packages_missing()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """A monitor and three data nodes under `root`; `start()`, then `url()`."""

    def __init__(self, root: str | None = None) -> None:
        self.made_root = root is None
        self.root = Path(root or tempfile.mkdtemp(prefix="dl_pgaf_"))
        self.user = pwd.getpwnam(USER)
        os.chown(self.root, self.user.pw_uid, self.user.pw_gid)
        self.root.chmod(0o700)
        self.monitor_port = free_port()
        self.ports = {f"node{i}": free_port() for i in range(1, NODES + 1)}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.killed: set[str] = set()  # nodes down on purpose

    # --- processes -----------------------------------------------------------------

    def env(self) -> dict[str, str]:
        # pg_autoctl keeps its state under XDG directories: this cluster's own.
        return {"PATH": f"{PG_BIN}:/usr/bin:/bin", "HOME": str(self.root),
                "XDG_CONFIG_HOME": str(self.root / "config"),
                "XDG_DATA_HOME": str(self.root / "data"),
                "XDG_RUNTIME_DIR": str(self.root / "run"),
                "PG_CONFIG": str(PG_BIN / "pg_config"), "LANG": "C.UTF-8"}

    def spawn(self, name: str, *args: str) -> None:
        log = open(self.root / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it
        self.procs[name] = subprocess.Popen(
            [str(PG_AUTOCTL), *args], env=self.env(), cwd=self.root, user=self.user.pw_uid,
            group=self.user.pw_gid, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
        log.close()

    def pgdata(self, name: str) -> str:
        return str(self.root / name)

    def monitor_uri(self) -> str:
        return (f"postgresql://autoctl_node@127.0.0.1:{self.monitor_port}/pg_auto_failover"
                "?sslmode=disable")

    def url(self, dbname: str = DBNAME, **options: str) -> str:
        """libpq's multi-host URL of the data nodes: whichever is the primary takes it."""
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.ports.values())
        query = "&".join(f"{k}={v}" for k, v in
                         {"target_session_attrs": "read-write", **options}.items())
        return f"postgresql://{USER}@{hosts}/{dbname}?{query}"

    # --- building it ------------------------------------------------------------------

    def start(self, timeout: float = 180) -> None:
        common = ["--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl"]
        self.spawn("monitor", "create", "monitor", "--pgdata", self.pgdata("monitor"),
                   "--pgport", str(self.monitor_port), *common, "--run")
        self.wait(lambda: self.monitor_query("SELECT 1") is not None, timeout, "the monitor")
        for key, value in MONITOR_SETTINGS.items():
            self.monitor_query(f"ALTER SYSTEM SET {key} = '{value}'", admin=True)
        self.monitor_query("SELECT pg_reload_conf()", admin=True)
        for i, (name, port) in enumerate(self.ports.items()):
            self.spawn(name, "create", "postgres", "--pgdata", self.pgdata(name),
                       "--pgport", str(port), "--name", name, "--dbname", DBNAME,
                       "--monitor", self.monitor_uri(), "--pgctl", str(PG_BIN / "pg_ctl"),
                       *common, "--run")
            want = ["single"] if i == 0 else ["primary", *["secondary"] * i]

            def joined(want: list[str] = want) -> bool:
                if self.states() == want:
                    return True
                # pg_basebackup asks the primary for a spread checkpoint (a minute and
                # more on an idle server); an immediate one finishes it now.
                self.checkpoint()
                return False
            self.wait(joined, timeout, f"{name} to join")
            if os.environ.get("PGAF_VERBOSE"):
                print(f"{name} joined", time.strftime("%T"), file=sys.stderr)
        self.monitor_query("SELECT pgautofailover.set_formation_number_sync_standbys("
                           "'default', 1)", admin=True)
        self.wait_healthy(timeout)

    def monitor_query(self, sql: str, admin: bool = False) -> list[tuple[Any, ...]] | None:
        import psycopg

        user = USER if admin else "autoctl_node"
        try:
            with psycopg.connect(host="127.0.0.1", port=self.monitor_port, user=user,
                                 dbname="pg_auto_failover", connect_timeout=2,
                                 autocommit=True) as conn:
                cur = conn.execute(sql)
                return cur.fetchall() if cur.description else []
        except psycopg.Error:
            if admin:
                raise
            return None

    def checkpoint(self) -> None:
        import psycopg

        with contextlib.suppress(psycopg.Error), psycopg.connect(
                self.url(connect_timeout="2"), autocommit=True) as conn:
            conn.execute("CHECKPOINT")

    def nodes(self) -> list[tuple[str, str, str]]:
        """(name, reported state, goal state) of every data node, by name."""
        rows = self.monitor_query("SELECT nodename, reportedstate, goalstate "
                                  "FROM pgautofailover.node ORDER BY nodename")
        return [(str(n), str(r), str(g)) for n, r, g in rows or []]

    def states(self) -> list[str]:
        """The settled states of the nodes, sorted; a node on its way reports '~'."""
        return sorted(r if r == g else "~" for _, r, g in self.nodes())

    def primary(self) -> str | None:
        for name, reported, goal in self.nodes():
            if reported == goal == "primary":
                return name
        return None

    def wait_healthy(self, timeout: float = 180) -> None:
        """Until one primary and two standbys are settled (a node back from the dead
        has caught up and streams again)."""
        self.wait(lambda: self.states() == ["primary", "secondary", "secondary"], timeout,
                  "one primary and two secondaries")

    def wait(self, ready: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            for name, proc in self.procs.items():
                if proc.poll() is not None and name not in self.killed:
                    raise RuntimeError(f"pg_autoctl for {name} exited: see "
                                       f"{self.root / (name + '.log')}")
            time.sleep(0.2)
        raise TimeoutError(f"waited {timeout:.0f} s for {what}: {self.nodes()}")

    # --- failing it ---------------------------------------------------------------------

    def kill(self, name: str) -> None:
        """kill -9 the node: its postgres and the pg_autoctl that would restart it."""
        self.killed.add(name)
        pid_file = self.root / name / "postmaster.pid"
        postmaster = int(pid_file.read_text().split()[0]) if pid_file.exists() else None
        proc = self.procs[name]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        if postmaster:
            with contextlib.suppress(ProcessLookupError):
                os.kill(postmaster, signal.SIGKILL)
        proc.wait()

    def restart(self, name: str) -> None:
        """Run the node again: pg_autoctl rewinds it and it rejoins as a standby."""
        self.killed.discard(name)
        self.spawn(name, "run", "--pgdata", self.pgdata(name))

    def stop(self) -> None:
        """Stop every node and the monitor, then remove the directory."""
        for name in [*self.ports, "monitor"]:
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()  # the supervisor stops its services in order
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for name in [*self.ports, "monitor"]:  # a postmaster left behind by a kill
            pid_file = self.root / name / "postmaster.pid"
            if pid_file.exists():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)
        if self.made_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Cluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("up", "check"))
    parser.add_argument("--dir", help="the cluster's directory (default: a fresh temporary one)")
    args = parser.parse_args()
    if args.action == "check":
        missing = packages_missing()
        print("missing: " + ", ".join(missing) if missing else "installed")
        return 1 if missing else 0
    if not ensure_packages(quiet=False):
        print(f"cannot install {', '.join(PACKAGES)} (apt-get, as root)", file=sys.stderr)
        return 1
    if args.dir:
        Path(args.dir).mkdir(parents=True, exist_ok=True)
    with Cluster(args.dir) as cluster:
        print(cluster.url(), flush=True)
        print(f"monitor: {cluster.monitor_uri()}  (^C stops and removes it)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
