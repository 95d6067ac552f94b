"""Rejections: every refused command names a stable code and a human message.

Messages are shown to the acting seat; they must never name another seat's
hidden cards or spice, nor cards of the discard pile.
"""

from __future__ import annotations


class Rejection(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def as_error(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


class LayoutError(ValueError):
    """A layout that cannot become a room; the message names the offending ids."""
