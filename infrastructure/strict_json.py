"""JSON from users (command bodies, layouts, imports): a repeated key is an error.

orjson and the standard parser both keep the last of two equal keys without a
word (RULES 8 forbids it), so input from outside is parsed here; what the
project stored itself is read with orjson.
"""

from __future__ import annotations

import json
from typing import Any


class JSONInputError(ValueError):
    """Input that is not JSON, or JSON with a repeated key."""


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise JSONInputError(f"the key '{key[:40]}' is repeated")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise JSONInputError(f"{name} is not a JSON number")


def loads(data: str | bytes | bytearray) -> Any:
    """Decode JSON text strictly: UTF-8, no repeated key, no NaN or Infinity."""
    if isinstance(data, bytes | bytearray):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise JSONInputError("the input is not UTF-8 text") from None
    try:
        return json.loads(data, object_pairs_hook=_no_repeats, parse_constant=_no_constant)
    except JSONInputError:
        raise
    except (ValueError, RecursionError) as e:
        raise JSONInputError(f"not JSON: {str(e)[:120]}") from None
