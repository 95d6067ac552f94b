"""Random sources: the operating system's, or a seeded one for repeatable rooms."""

from __future__ import annotations

import hashlib
import random

from dune_ledger.domain.game import Randomness, Rng


class Source:
    """A randomness port over a `random.Random`; counts its draws for the tests."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self.draws = 0

    def shuffle(self, ids: list[str]) -> list[str]:
        self.draws += 1
        out = list(ids)
        self._rng.shuffle(out)
        return out

    def sample(self, ids: list[str], k: int) -> list[str]:
        self.draws += 1
        return self._rng.sample(list(ids), k)

    def last_draw(self) -> Rng | None:
        return None  # nothing verifies a seeded or the OS's draw: no record


def for_room(seed: int | None, version: int) -> Randomness:
    """Seeded rooms draw from (seed, version): the same layout replays the same game.

    A retried decision runs against a newer version, so it draws afresh.
    """
    if seed is None:
        return Source(random.SystemRandom())
    digest = hashlib.sha256(f"{seed}:{version}".encode()).digest()
    return Source(random.Random(int.from_bytes(digest[:8], "big")))
