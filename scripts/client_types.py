"""Write clients/typescript/src/schema.ts: the TypeScript types of the HTTP API, made by
openapi-typescript (clients/typescript's own, after `npm ci` there) from the OpenAPI
this version serves. `--check` writes nothing and exits 1 when the committed file is
not what the schema makes now (tests/test_clients.py runs it).

    python -m scripts.client_types [--check]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from fastapi.testclient import TestClient

from dune_ledger.infrastructure.http import create_app
from dune_ledger.infrastructure.storage import open_rooms

PACKAGE = Path(__file__).resolve().parent.parent / "clients" / "typescript"
TYPES = PACKAGE / "src" / "schema.ts"
GENERATOR = PACKAGE / "node_modules" / ".bin" / "openapi-typescript"


def openapi() -> dict[str, object]:
    with open_rooms("memory://") as rooms, TestClient(create_app(rooms)) as client:
        spec: dict[str, object] = client.get("/openapi.json").json()
    return spec


def generated() -> str:
    """The types openapi-typescript makes of today's schema."""
    if not GENERATOR.exists():
        raise SystemExit(f"{GENERATOR} is missing: run `npm ci` in {PACKAGE}")
    with tempfile.TemporaryDirectory() as tmp:
        source, target = Path(tmp) / "openapi.json", Path(tmp) / "schema.ts"
        source.write_text(json.dumps(openapi(), indent=1))
        subprocess.run([str(GENERATOR), str(source), "-o", str(target)], check=True,
                       capture_output=True, cwd=PACKAGE)
        return target.read_text()


def main(argv: list[str]) -> int:
    types = generated()
    if "--check" in argv:
        if TYPES.exists() and TYPES.read_text() == types:
            return 0
        print(f"{TYPES.relative_to(PACKAGE.parent.parent)} is not current: run "
              "python -m scripts.client_types", file=sys.stderr)
        return 1
    TYPES.write_text(types)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
