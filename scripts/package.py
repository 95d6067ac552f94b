"""The package's folders and modules by import name, as pyproject.toml's package-dir maps
them: `dune_ledger.domain` is `domain/`, `dune_ledger.domain.game` is `domain/game.py`.

Tools that read files rather than import them (the type check, the house figures) learn
the import names here."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def folders() -> dict[str, Path]:
    """Each package of the distribution, and the folder it is made of."""
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    where = setup.get("package-dir", {})
    return {name: ROOT / where.get(name, name.replace(".", "/")) for name in setup["packages"]}


def modules() -> dict[str, Path]:
    """Every module of the package, by its dotted name."""
    found: dict[str, Path] = {}
    for package, folder in folders().items():
        for path in sorted(folder.glob("*.py")):
            found[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return found
