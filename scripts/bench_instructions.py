"""The client's instructions per command of the bench's begin+select mix, counted by callgrind.

    .venv/bin/python -m scripts.bench_instructions                   # this checkout
    .venv/bin/python -m scripts.bench_instructions /tmp/old .        # another tree, then this
    .venv/bin/python -m scripts.bench_instructions --storage sqlite --pairs 100

The wall-clock figures of scripts/bench move by a third when the machine is shared;
the instructions a command costs in this process do not. Each tree (a checkout: `git
worktree add /tmp/old REV`) runs scripts/bench_commands.py's mix in a child of its own:
the rooms are made first, unmeasured, then one pair of commands warms the process and
valgrind's callgrind counts only the pairs after it (every thread of the process: the
decision, the encoding, the signatures, the store's client, and on SQLite the store
itself). The database server's own work is not in the count: PostgreSQL's figures are
the client's.
"""

from __future__ import annotations

import argparse
import functools
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def child(phase: str, tree: str, url: str, pairs: int, work: str) -> None:
    """In the child (this file run as a script, `tree` on PYTHONPATH): make
    the rooms, or run the mix over them inside functools.reduce (callgrind collects
    there alone: --toggle-collect=functools_reduce)."""
    # `tree`'s layers as dune_ledger's subpackages, whichever way it laid them out (links
    # in dune_ledger/, pyproject.toml's package-dir, or bare top-level packages before
    # 61b5c66, whose modules then import each other by their bare names through
    # PYTHONPATH), and never the installed ones.
    init = Path(tree, "dune_ledger", "__init__.py")
    spec = (importlib.util.spec_from_file_location("dune_ledger", init,
                                                   submodule_search_locations=[tree])
            if init.exists() else importlib.machinery.ModuleSpec("dune_ledger", None,
                                                                is_package=True))
    assert spec is not None
    package = sys.modules["dune_ledger"] = importlib.util.module_from_spec(spec)
    package.__path__ = [tree]
    if spec.loader is not None:
        spec.loader.exec_module(package)
    from dune_ledger.infrastructure.storage import open_rooms

    if not str(sys.modules[open_rooms.__module__].__file__).startswith(tree):
        raise SystemExit(f"the code imported is not {tree}'s")

    app = open_rooms(url)
    rooms_file = Path(work) / "rooms.json"
    if phase == "make":
        layout = json.loads((Path(work) / "layout.json").read_text())
        made = [app.create_room(layout)["room"] for _ in range(pairs + 1)]
        for room in made:
            # A committed room is dealt before play (RULES 9.4); a tree from before the
            # ceremony refuses the command, which changes nothing there.
            app.execute(room, "operator", {"type": "deal"})
        rooms_file.write_text(json.dumps(made))
        os._exit(0)
    rooms = json.loads(rooms_file.read_text())

    def pair(_: Any, room: str) -> None:
        begun = app.execute(room, "richese", {"type": "begin_search",
                                               "card": "nullentropy-box"})
        search = next(e["search"] for e in begun["events"] if e["type"] == "SearchOpened")
        chosen = app.execute(room, "richese", {"type": "select_card", "search": search,
                                               "card": "shield-1"})
        if not chosen["ok"]:
            raise SystemExit(f"the mix was refused: {chosen['error']}")

    pair(None, rooms[0])
    functools.reduce(pair, rooms[1:], None)
    os._exit(0)  # no close at exit: nothing of it is counted, and it need not wait


def count(tree: Path, url: str, pairs: int, work: Path) -> float:
    """Millions of instructions per command of `tree`'s code on the store at `url`."""
    from scripts.bench_commands import LAYOUT

    out = work / "callgrind.out"
    (work / "layout.json").write_text(json.dumps(LAYOUT))
    env = {**os.environ, "DUNE_LEDGER_KEY_FILE": str(work / "bench.key")}
    env["PYTHONPATH"] = str(tree)  # its code first
    me = [sys.executable, str(Path(__file__).resolve()), "--child"]
    args = [str(tree), url, str(pairs), str(work)]
    made = subprocess.run([*me, "make", *args], env=env, cwd=work, capture_output=True,
                          text=True)
    if made.returncode != 0:
        raise SystemExit(f"making the rooms failed:\n{made.stderr[-3000:]}")
    done = subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no",
                           "--toggle-collect=functools_reduce", f"--callgrind-out-file={out}",
                           *me, "run", *args], env=env, cwd=work, capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise SystemExit(f"the counted run failed:\n{done.stderr[-3000:]}")
    for line in out.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1]) / (2 * pairs) / 1e6
    raise SystemExit(f"no count in {out}")


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6])
        return 0
    from scripts.throwaway import ADMIN_URL, throwaway_database

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trees", nargs="*", default=["."], help="checkouts to measure, in turn")
    p.add_argument("--storage", default="sqlite,postgresql")
    p.add_argument("--pairs", type=int, default=100, help="searches (2 commands) counted")
    p.add_argument("--pg-admin", default=ADMIN_URL)
    args = p.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    print("| code | storage | instructions a command |\n|---|---|---:|")
    for storage in args.storage.split(","):
        for tree in map(Path, args.trees):
            tree = tree.resolve()
            if not (tree / "infrastructure" / "storage.py").is_file():
                raise SystemExit(f"{tree} is not a checkout of dune-ledger")
            with tempfile.TemporaryDirectory(prefix="dl-instructions-") as tmp:
                work = Path(tmp)
                if storage == "sqlite":
                    millions = count(tree, f"sqlite:///{work / 'mix.db'}", args.pairs, work)
                else:
                    with throwaway_database(args.pg_admin, "dl_bench_instr") as url:
                        millions = count(tree, url, args.pairs, work)
            print(f"| {tree} | {storage} | {millions:.3f} M |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
