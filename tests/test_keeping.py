"""How the tests are kept: a test module imports helpers (tests/support.py and its
siblings), never another test module, so that each test file can move or go alone."""

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def imported(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
    return names


def test_no_test_module_imports_another_or_the_conftest() -> None:
    crossed = []
    for path in sorted(TESTS.rglob("*.py")):
        for name in imported(path):
            last = name.split(".")[-1]
            if name.startswith("tests.") and (last.startswith("test_") or last == "conftest"):
                crossed.append(f"{path.relative_to(TESTS)}: {name}")
    assert crossed == []


def test_no_script_or_test_patches_the_import_path() -> None:
    """Scripts run as modules (`python -m scripts.bench_x`) and import the installed
    package and their siblings (`scripts.benchcommon`) by name."""
    root = TESTS.parent
    patched = [str(path.relative_to(root)) for folder in ("scripts", "tests")
               for path in sorted((root / folder).rglob("*.py"))
               if re.search(r"sys\.path\.(insert|append)", path.read_text())]
    assert patched == []


def test_the_domain_tests_import_only_the_rules() -> None:
    """`pytest tests/domain` runs the rules alone: no storage, server or browser."""
    outside = []
    for path in sorted((TESTS / "domain").glob("test_*.py")):
        for name in imported(path):
            top = name.split(".")[0]
            if (top == "dune_ledger" and not name.startswith("dune_ledger.domain")) or top in {
                    "fastapi", "httpx", "psycopg", "sqlite3", "subprocess", "playwright"}:
                outside.append(f"{path.name}: {name}")
    assert outside == []
