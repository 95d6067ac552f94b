"""Who is asking: the token checks of the HTTP routes, as FastAPI dependencies.

A seat token names its seat (the acting seat comes only from it), the room's
spectator token reads what is public, the operator token (`DUNE_LEDGER_ADMIN_TOKEN`)
opens the operator routes; wrong tokens are counted per client (`WrongTokens`).
What the app keeps between requests is one `Served`, on `app.state`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from cachetools import LRUCache
from eventsourcing.persistence import InterfaceError, OperationalError
from fastapi import Depends, Request
from starlette.concurrency import run_in_threadpool

from dune_ledger.application.queries import PUBLIC_VIEW
from dune_ledger.application.rooms import RoomsApp
from dune_ledger.application.seats import TOKEN_CACHE, Seats, same_secret, token_hash
from dune_ledger.domain.game import OPERATOR as OPERATOR_ACTOR
from dune_ledger.domain.game import OPERATOR_COMMANDS, Rejection
from dune_ledger.infrastructure.http_errors import Refused, store_unavailable
from dune_ledger.infrastructure.watch import canonical

# Reads answer 503 rather than wait longer than this on a store that does not answer.
READ_BOUND = 1.8
# Wrong tokens one client may send within WRONG_WINDOW seconds before it gets 429.
WRONG_LIMIT = 20
WRONG_WINDOW = 60.0
CLIENTS = 10_000  # clients whose wrong tokens are counted (the oldest forgotten first)
# After the store failed to answer, seconds during which reads are served from what
# this process has (the last view it answered each seat) without asking the store.
STORE_DOWN = 2.0
OPERATOR_SCOPE = "*operator*"  # the operator routes' scope of wrong tokens: never a room id

SEAT: list[dict[str, list[str]]] = [{"seatToken": []}]
OPERATOR: list[dict[str, list[str]]] = [{"operatorToken": []}]
SECURITY_SCHEMES = {
    "seatToken": {"type": "http", "scheme": "bearer",
                  "description": "a seat token of the room (from room creation)"},
    "spectatorToken": {"type": "http", "scheme": "bearer",
                       "description": "the room's spectator token (from room creation)"},
    "operatorToken": {"type": "http", "scheme": "bearer",
                      "description": "DUNE_LEDGER_ADMIN_TOKEN"},
    "queryToken": {"type": "apiKey", "in": "query", "name": "token",
                   "description": "a seat token as ?token=, for the browser's EventSource"},
}


def bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Refused("unauthorized", "send 'Authorization: Bearer TOKEN'")
    return token.strip()


def token_of(request: Request, query_token: str | None = None) -> str:
    """The request's token: the header, or `?token=` where a route takes it."""
    if query_token and "authorization" not in request.headers:
        return query_token
    return bearer(request)


def client(request: Request) -> str:
    return request.client.host if request.client else "?"


class LastViews:
    """While the store is down, a seat's view is the last one this process answered it
    (each seat only its own), marked stale; never more than TOKEN_CACHE rooms' worth."""

    def __init__(self) -> None:
        self.down_until = 0.0
        self.views: LRUCache[tuple[str, str], dict[str, Any]] = LRUCache(TOKEN_CACHE)

    def down(self) -> bool:
        return time.monotonic() < self.down_until

    def failed(self) -> None:
        self.down_until = time.monotonic() + STORE_DOWN

    def keep(self, room: str, seat: str, view: dict[str, Any]) -> None:
        self.views[(room, seat)] = view

    def get(self, room: str, seat: str) -> dict[str, Any] | None:
        return self.views.get((room, seat))


class WrongTokens:
    """Wrong tokens per client address and scope (a room, or the operator routes):
    WRONG_LIMIT within WRONG_WINDOW seconds, then 429.

    Only wrong tokens are counted and refused: a correct seat or spectator token is
    checked first and always accepted, whatever its address sent before, so one
    player's guesses never lock out the other seats behind the same address (a game
    site's backend, a table behind one router). Those tokens are 192 random bits:
    the limit slows a scan, it is not what makes them safe. The operator token is
    chosen by a person and may be weak, so on the operator routes an address over
    the limit gets 429 before its token is compared: no answer tells it whether a
    guess was right.
    """

    def __init__(self) -> None:
        self.clients: LRUCache[tuple[str, str], list[float]] = LRUCache(CLIENTS)
        self.lock = threading.Lock()

    def check(self, client: str, scope: str) -> None:
        """429 when `client` is over the limit in `scope`."""
        with self.lock:
            times = self._recent((client, scope))
        if len(times) >= WRONG_LIMIT:
            wait = int(WRONG_WINDOW - (time.monotonic() - times[0])) + 1
            raise Refused("too_many_attempts", "too many wrong tokens from this client; "
                          f"wait {wait} s", headers={"Retry-After": str(wait)})

    def wrong(self, client: str, scope: str, message: str) -> Refused:
        """Count one wrong token; the refusal to raise (429 over the limit, else 401)."""
        key = (client, scope)
        with self.lock:
            times = self._recent(key)
            times.append(time.monotonic())
            del times[:-WRONG_LIMIT]  # the oldest that still counts is all the limit needs
        try:
            self.check(client, scope)
        except Refused as over:
            return over
        return Refused("unauthorized", message)

    def _recent(self, key: tuple[str, str]) -> list[float]:
        horizon = time.monotonic() - WRONG_WINDOW
        times = [t for t in self.clients.get(key, []) if t > horizon]
        self.clients[key] = times
        return times


@dataclass
class Served:
    """What the app keeps between requests: the rooms it serves, their token hashes,
    the operator token (empty: the operator routes are open), the wrong tokens counted
    and the views kept for when the store is down."""

    rooms: RoomsApp
    tokens: Seats
    admin_token: str
    wrong_tokens: WrongTokens = field(default_factory=WrongTokens)
    last_views: LastViews = field(default_factory=LastViews)

    def __post_init__(self) -> None:
        # Compared as hashes, as the seat tokens are: equal lengths, so the comparison's
        # time tells nothing of the operator token's length.
        self.admin_hash = token_hash(self.admin_token)

    def is_admin(self, token: str) -> bool:
        return bool(self.admin_token) and same_secret(token_hash(token), self.admin_hash)

    async def bounded(self, fn: Callable[..., Any], *args: Any,
                      seconds: float = READ_BOUND) -> Any:
        """A read that answers 503 rather than wait on a store that does not answer."""
        try:
            return await asyncio.wait_for(run_in_threadpool(fn, *args), seconds)
        except Rejection as r:
            raise Refused(r.code, r.message) from None
        except TimeoutError:
            self.last_views.failed()
            raise store_unavailable() from None
        except (OperationalError, InterfaceError):
            self.last_views.failed()
            raise

    async def is_room_token(self, token: str, room: str | None) -> bool:
        """Whether `token` is a seat or spectator token of `room`, or (no room in the
        route) of the room the read models say it was issued in, checked against
        that room as this process knows it."""
        if room is None:
            models = self.rooms.read_models
            if models is None:
                return False
            room = await self.bounded(models.token_room, token_hash(token))
            if room is None:
                return False
            try:
                return await self.is_room_token(token, room)
            except Refused:  # that room is gone or damaged: the token is no token of it
                return False
        return await self.bounded(self.tokens.seat_of, room, token) is not None

    async def operator(self, request: Request, room: str | None = None) -> None:
        """The operator token when one is set; never a seat token."""
        who = client(request)
        if self.admin_token:
            self.wrong_tokens.check(who, OPERATOR_SCOPE)  # before the comparison: no oracle
        token = bearer(request) if self.admin_token or "authorization" in request.headers \
            else ""
        if self.is_admin(token):
            return
        try:
            room_token = bool(token) and await self.is_room_token(token, room)
        except (Refused, OperationalError, InterfaceError):
            # No room to check it against (unknown, damaged, the store down): a guess at
            # the operator token all the same, counted, so no answer tells it apart.
            room_token = False
        if room_token:
            raise Refused("forbidden", "this route needs the operator token, not a seat token")
        if self.admin_token:
            raise self.wrong_tokens.wrong(who, OPERATOR_SCOPE,
                                          "this route needs the operator token")

    async def seat_or_spectator(self, request: Request, room: str) -> str | None:
        """The seat of a seat token, None for the room's spectator token."""
        seat = await self.bounded(self.tokens.seat_of, room, bearer(request))
        if seat is None:
            raise self.wrong_tokens.wrong(client(request), canonical(room),
                                          "that token is not a token of this room")
        return None if seat == PUBLIC_VIEW else seat


async def sender(room: str, request: Request, served: Served, raw: Any) -> str:
    """Who sends this command to `POST /rooms/{room}/commands`: the seat of a seat token,
    or the operator (`OPERATOR_ACTOR`) for the operator's own commands, with its token
    (none needed where the operator routes are open: no `DUNE_LEDGER_ADMIN_TOKEN`, on
    loopback). Each sends only its own commands: anything else is 403."""
    kind = raw.get("type") if isinstance(raw, dict) else None
    if isinstance(kind, str) and kind in OPERATOR_COMMANDS:
        await served.operator(request, room)  # 403 for a seat token, counted if wrong
        return OPERATOR_ACTOR
    if served.admin_token and served.is_admin(bearer(request)):
        raise Refused("forbidden", "the operator token sends the operator's commands "
                      "(deal, open_bidding, end_room), not a seat's")
    return await seat_of(room, request, served)


async def served(request: Request) -> Served:
    kept: Served = request.app.state.served
    return kept


ServedApp = Annotated[Served, Depends(served)]


async def seat_of(room: str, request: Request, served: ServedApp) -> str:
    """The seat whose token the request carries."""
    token = bearer(request)
    if served.last_views.down():
        # The hashes this process last read: a token it never saw waits for the store.
        try:
            seat = served.tokens.seat(room, token, stored_only=True)
        except Rejection as r:
            raise Refused(r.code, r.message) from None
        if seat is None:
            raise store_unavailable()
        return seat
    seat = await served.bounded(served.tokens.seat, room, token)
    if seat is None:
        raise served.wrong_tokens.wrong(client(request), canonical(room),
                                        "that token is not a seat token of this room")
    return seat


async def reader(room: str, request: Request, served: ServedApp) -> str | None:
    """A seat or the room's spectator (None): what is public."""
    return await served.seat_or_spectator(request, room)


async def operator(request: Request, served: ServedApp) -> None:
    """The operator routes without a room."""
    await served.operator(request)


async def room_operator(room: str, request: Request, served: ServedApp) -> None:
    """The operator routes of a room: a token of that room is told it is not enough."""
    await served.operator(request, room)


async def reader_or_operator(room: str, request: Request, served: ServedApp) -> None:
    """A seat, the spectator or the operator (an ended room's transcript). A token of the
    room is checked first; any other is a guess at the operator token, limited as on the
    operator routes (429 before the comparison). Without an operator token (which `serve`
    allows on loopback only) the operator routes are open, and so is this one to a
    request that sends no token: the host page's download."""
    if not served.admin_token and "authorization" not in request.headers:
        return
    token = bearer(request)
    if await served.bounded(served.tokens.seat_of, room, token) is not None:
        return
    who = client(request)
    if not served.admin_token:
        raise served.wrong_tokens.wrong(who, canonical(room),
                                        "that token is not a token of this room")
    served.wrong_tokens.check(who, OPERATOR_SCOPE)
    if not served.is_admin(token):
        raise served.wrong_tokens.wrong(who, OPERATOR_SCOPE,
                                        "that token is not a token of this room")


Seat = Annotated[str, Depends(seat_of)]
Reader = Annotated[str | None, Depends(reader)]
