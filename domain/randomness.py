"""The randomness port. The caller hands one in; what it returns goes into an event."""

from __future__ import annotations

from typing import Protocol


class Randomness(Protocol):
    def shuffle(self, ids: list[str]) -> list[str]:
        """Return a new list: a uniformly random permutation of `ids`."""
        ...

    def sample(self, ids: list[str], k: int) -> list[str]:
        """Return `k` distinct members of `ids` in random order."""
        ...


class NoRandomness:
    """For replay and read-only checks: any draw is a programming error."""

    def shuffle(self, ids: list[str]) -> list[str]:
        raise RuntimeError("randomness drawn where none is allowed")

    def sample(self, ids: list[str], k: int) -> list[str]:
        raise RuntimeError("randomness drawn where none is allowed")
