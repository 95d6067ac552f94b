"""One import package: the code imports its layers as `dune_ledger.domain`, ..., never by
the generic top-level names that a wheel would otherwise put into site-packages."""

import ast
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from scripts.house_figures import is_type_checking

ROOT = Path(__file__).resolve().parent.parent
LAYERS = {"domain", "application", "infrastructure", "projections"}


def sources() -> list[Path]:
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    return [ROOT / name for name in tracked]


def test_the_package_is_made_of_no_links() -> None:
    """pyproject.toml's package-dir makes the folders `dune_ledger.domain`, ...: a link
    would hide imports from the tools that read files, and not every checkout keeps it."""
    staged = subprocess.run(["git", "ls-files", "-s"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    assert [line for line in staged if line.startswith("120000 ")] == []


def test_no_source_imports_a_layer_by_its_bare_name() -> None:
    bare = []
    for path in sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                     else [])
            bare += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in LAYERS]
    assert bare == []


def test_the_wheel_installs_one_top_level_package_that_plays_the_demo(tmp_path: Path) -> None:
    # Built from the tracked files alone: a checkout's stale build/ would add removed files.
    tree = tmp_path / "tree"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True).stdout.decode().split("\0")
    for name in filter(None, tracked):
        source, copy = ROOT / name, tree / name
        if source.exists():
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                    str(tmp_path), str(tree)], check=True, capture_output=True)
    [wheel] = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"dune_ledger", "dune_ledger-0.1.0.dist-info"}
    assert "dune_ledger/domain/cards.json" in names
    assert "dune_ledger/infrastructure/templates/play.html" in names
    assert "dune_ledger/examples/box.json" in names  # the demo plays it
    assert not [n for n in names if n.endswith("throwaway.py")]  # test support stays out

    # Installed alone (its dependencies are this environment's), ahead of the checkout.
    site, played = tmp_path / "site", tmp_path / "played"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(site), str(wheel)], check=True, capture_output=True)
    played.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    where = subprocess.run(
        [sys.executable, "-c", "import dune_ledger.infrastructure.demo as d; print(d.__file__)"],
        cwd=played, env=env, capture_output=True, text=True, check=True).stdout
    assert Path(where.strip()).is_relative_to(site)
    demo = subprocess.run([sys.executable, "-m", "dune_ledger", "demo"], cwd=played, env=env,
                          capture_output=True, text=True, timeout=120)
    assert demo.returncode == 0, demo.stderr
    assert "audit clean" in demo.stdout


def test_the_other_layers_use_the_rules_through_their_face() -> None:
    """Outside `domain/`, the shipped layers import `dune_ledger.domain.game` and no other
    domain module, at module level or in a function."""
    other = []
    for path in sources():
        if path.relative_to(ROOT).parts[0] not in LAYERS - {"domain"}:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [f"{node.module}.{a.name}" for a in node.names]
                     if isinstance(node, ast.ImportFrom) and node.module else [])
            other += [f"{path.relative_to(ROOT)}: {n}" for n in names
                      if n.startswith("dune_ledger.domain")
                      and not n.startswith("dune_ledger.domain.game.")]
    assert other == []


def domain_imports() -> dict[str, set[str]]:
    """Each domain module's imports of domain modules, at module level or in a function
    (not those under `if TYPE_CHECKING:`, which never run); importing any of them first
    runs the package's `__init__`."""
    package = "dune_ledger.domain"
    modules = {p.stem: p for p in (ROOT / "domain").glob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                       and is_type_checking(block.test) for n in ast.walk(block)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            found = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [f"{node.module}.{a.name}" for a in node.names]
                     if isinstance(node, ast.ImportFrom) and node.module else [])
            for full in found:
                if full == package or full.startswith(package + "."):
                    parts = full[len(package) + 1:].split(".")
                    graph[name].update({"__init__", parts[0]} & set(modules))
        graph[name].discard(name)
    return graph


def test_no_import_circle_among_the_domain_modules() -> None:
    graph = domain_imports()
    done: set[str] = set()

    def circle(name: str, path: list[str]) -> list[str] | None:
        if name in path:
            return path[path.index(name):] + [name]
        if name in done:
            return None
        for then in sorted(graph[name]):
            found = circle(then, path + [name])
            if found:
                return found
        done.add(name)
        return None

    assert [c for name in sorted(graph) if (c := circle(name, []))] == []


def test_the_face_loads_every_registration() -> None:
    """After `domain.game` alone, importing every other domain module adds nothing to the
    house: no handler, continuation, gate, reaction, command, window kind or event type is
    declared anywhere `game` did not collect."""
    script = """
import importlib, pathlib, sys
from dune_ledger.domain import game
from dune_ledger.domain.effect import HOUSE
def registered():
    return (set(HOUSE.handlers), HOUSE.continuations, HOUSE.gates, HOUSE.after_discard,
            set(HOUSE.operator), set(HOUSE.system), HOUSE.any_time, set(HOUSE.windows),
            set(HOUSE.events),
            set(HOUSE.commands), len(HOUSE.effects))
before = registered()
for path in pathlib.Path(game.__file__).parent.glob("*.py"):
    importlib.import_module(f"dune_ledger.domain.{path.stem}")
sys.exit(registered() != before or not before[-1])
"""
    assert subprocess.run([sys.executable, "-c", script], cwd=ROOT).returncode == 0
