"""Type-check the package: `python -m scripts.typecheck [mypy options]`.

mypy finds a module by walking folders, and the package's folders are not named as it
imports them (`domain/` is `dune_ledger.domain`, through setuptools' package-dir), so
each file is handed to mypy with its import name (scripts/package.py); the options are
pyproject.toml's `[tool.mypy]`. Exit 0 when clean, 1 on an error, 2 when mypy cannot
run."""

from __future__ import annotations

import sys

from mypy import build
from mypy.errors import CompileError
from mypy.main import process_options
from mypy.modulefinder import BuildSource

from scripts.package import ROOT, modules


def main(argv: list[str]) -> int:
    _, options = process_options(argv, require_targets=False)
    sources = [BuildSource(str(path.relative_to(ROOT)), name)
               for name, path in modules().items()]
    try:
        messages = build.build(sources, options).errors
    except CompileError as e:  # a file mypy cannot parse: reported as the others
        messages = e.messages
    for line in messages:
        print(line)
    errors = sum(": error:" in line for line in messages)
    if errors:
        print(f"Found {errors} errors (checked {len(sources)} source files)")
        return 1
    print(f"Success: no issues found in {len(sources)} source files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
