"""The randomness port. The caller hands one in; what it returns goes into an event.

`Derived` is the port of a committed room (RULES 9): every outcome is read from
HMAC-SHA256 under the room's secret, so that anyone holding the secret once the
room has ended can derive each shuffle again. It is pure: no clock, no I/O.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

ALGORITHM = "hmac-sha256-fy-v1"  # rooms committed before the ceremony (RULES 9, v1)
ALGORITHM_V2 = "hmac-sha256-fy-v2"
COMMIT_PREFIX = b"dune-ledger:commit:"


class Rng(BaseModel):
    """How an outcome of a committed room was derived: `version`, `call` and `mix` are
    public; `input`, the list it shuffled in order, is private until the room ends."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    version: int
    call: int
    mix: str
    input: list[str]

    def public(self) -> dict[str, Any]:
        return {"version": self.version, "call": self.call, "mix": self.mix}


class CountedRng(BaseModel):
    """How an outcome of a v2 room was derived (RULES 9.5): `n`, the room's call, and
    `mix` are public; `input`, the list it shuffled in order, is private until the end."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    n: int
    mix: str
    input: list[str]

    def public(self) -> dict[str, Any]:
        return {"n": self.n, "mix": self.mix}


class Randomness(Protocol):
    def shuffle(self, ids: list[str]) -> list[str]:
        """Return a new list: a uniformly random permutation of `ids`."""
        ...

    def sample(self, ids: list[str], k: int) -> list[str]:
        """Return `k` distinct members of `ids` in random order."""
        ...

    def last_draw(self) -> Rng | CountedRng | None:
        """The record of the last draw, for the event that carries its outcome (None:
        a source nothing verifies, the OS's or a seeded one)."""
        ...


def commitment(secret: bytes) -> str:
    return hashlib.sha256(COMMIT_PREFIX + secret).hexdigest()


def mix(seeds: dict[str, str | None]) -> str:
    """The mix in force: sha256 of the canonical JSON of {faction: seed}, "" for none."""
    canonical = json.dumps({f: s or "" for f, s in seeds.items()}, sort_keys=True,
                           separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def words(secret: bytes, room: str, version: int, call: int, mixed: str) -> Iterator[int]:
    """The call's stream of big-endian unsigned 32-bit words, block after block."""
    block = 0
    while True:
        message = f"{room}:{version}:{call}:{mixed}:{block}".encode()
        digest = hmac.new(secret, message, hashlib.sha256).digest()
        for i in range(0, 32, 4):
            yield int.from_bytes(digest[i:i + 4], "big")
        block += 1


def counted_words(secret: bytes, room: str, n: int, mixed: str) -> Iterator[int]:
    """The words of the room's `n`-th random call (v2): no version, so that nothing the
    operator appends before a draw moves it."""
    block = 0
    while True:
        message = f"{room}:{n}:{mixed}:{block}".encode()
        digest = hmac.new(secret, message, hashlib.sha256).digest()
        for i in range(0, 32, 4):
            yield int.from_bytes(digest[i:i + 4], "big")
        block += 1


def uniform(stream: Iterator[int], n: int) -> int:
    """Rejection sampling: exact, no modulo bias."""
    limit = (2**32 // n) * n
    for word in stream:
        if word < limit:
            return word % n
    raise AssertionError("the word stream is endless")


def derived_shuffle(stream: Iterator[int], ids: list[str]) -> list[str]:
    """Fisher-Yates from the end."""
    out = list(ids)
    for i in range(len(out) - 1, 0, -1):
        j = uniform(stream, i + 1)
        out[i], out[j] = out[j], out[i]
    return out


class Derived:
    """A committed room's port for the command whose first event has `version`: its
    `k`-th draw reads `words(secret, room, version, k, mix)`. `calls` counts the draws.

    `mixed` may be given as the function that makes it: most commands draw nothing,
    and the mix (canonical JSON and a hash) was most of what a port cost them."""

    def __init__(self, secret: bytes, room: str, version: int,
                 mixed: str | Callable[[], str]) -> None:
        self._secret = secret
        self.room, self.version = room, version
        self._mix = mixed
        self.calls = 0
        self._last: Rng | None = None

    @property
    def mix(self) -> str:
        if not isinstance(self._mix, str):
            self._mix = self._mix()
        return self._mix

    def shuffle(self, ids: list[str]) -> list[str]:
        call = self.calls
        self.calls += 1
        self._last = Rng(version=self.version, call=call, mix=self.mix, input=list(ids))
        return derived_shuffle(words(self._secret, self.room, self.version, call, self.mix),
                               ids)

    def sample(self, ids: list[str], k: int) -> list[str]:
        return self.shuffle(ids)[:k]

    def last_draw(self) -> Rng | None:
        return self._last


class Counted:
    """A v2 room's port (RULES 9.5): its draws read `counted_words(secret, room, n, mix)`
    for the room's next call `n`. `at` tells it the room's counter and mix as they
    stand (`None`: before the deal, when no draw may happen); each draw then counts."""

    def __init__(self, secret: bytes, room: str, calls: int, mixed: str | None) -> None:
        self._secret = secret
        self.room = room
        self.calls, self.mix = calls, mixed
        self._last: CountedRng | None = None

    def at(self, calls: int, mixed: str | None) -> None:
        # A draw not yet recorded by an applied event keeps its place in the count.
        self.calls, self.mix = max(self.calls, calls), mixed

    def shuffle(self, ids: list[str]) -> list[str]:
        if self.mix is None:
            raise AssertionError("a committed room draws nothing before its deal")
        n = self.calls
        self.calls += 1
        self._last = CountedRng(n=n, mix=self.mix, input=list(ids))
        return derived_shuffle(counted_words(self._secret, self.room, n, self.mix), ids)

    def sample(self, ids: list[str], k: int) -> list[str]:
        return self.shuffle(ids)[:k]

    def last_draw(self) -> CountedRng | None:
        return self._last
