"""A seat's key file (RULES 9.3): the Ed25519 private key a seat signs its commands with
from the CLI (`dune-ledger seat-key new FILE`, `room command --seat-key FILE`). The
server never holds it: only the public key, registered with `seat_key`."""

from __future__ import annotations

import base64
import binascii
import json
import os
from pathlib import Path
from typing import Any

from nacl.signing import SigningKey

from dune_ledger.application.signatures import public_text


class SeatKeyError(ValueError):
    """The file cannot be made or read: the message says why and what to do."""


def new_seat_key(path: str | Path) -> dict[str, Any]:
    """Write a new private key to `path` (mode 0600, never over an existing file)."""
    key = SigningKey.generate()
    body = {"seat_key": "ed25519", "private_key": base64.b64encode(bytes(key)).decode(),
            "public_key": public_text(key)}
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise SeatKeyError(f"{path} exists: a seat key is never overwritten (pick another "
                           "file)") from None
    except OSError as e:
        raise SeatKeyError(f"cannot write {path}: {e.strerror}") from None
    with os.fdopen(fd, "w") as f:
        json.dump(body, f)
        f.write("\n")
    public = body["public_key"]
    return {"file": str(path), "public_key": public,
            "command": {"type": "seat_key", "public_key": public}}


def read_seat_key(path: str | Path) -> SigningKey:
    try:
        body = json.loads(Path(path).read_text())
        key = SigningKey(base64.b64decode(body["private_key"], validate=True))
    except OSError as e:
        raise SeatKeyError(f"cannot read the seat key {path}: {e.strerror}") from None
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise SeatKeyError(f"{path} is not a seat key (make one with `dune-ledger seat-key "
                           "new FILE`)") from None
    return key
