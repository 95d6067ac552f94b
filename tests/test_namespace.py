"""One import package: the code imports its layers as `dune_ledger.domain`, ..., never by
the generic top-level names that a wheel would otherwise put into site-packages."""

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = {"domain", "application", "infrastructure", "projections"}


def sources() -> list[Path]:
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    return [ROOT / name for name in tracked if not (ROOT / name).is_symlink()]


def test_no_source_imports_a_layer_by_its_bare_name() -> None:
    bare = []
    for path in sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                     else [])
            bare += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in LAYERS]
    assert bare == []


def test_the_wheel_installs_one_top_level_package(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                    str(tmp_path), str(ROOT)], check=True, capture_output=True)
    [wheel] = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"dune_ledger", "dune_ledger-0.1.0.dist-info"}
    assert "dune_ledger/domain/cards.json" in names
    assert "dune_ledger/infrastructure/templates/play.html" in names
