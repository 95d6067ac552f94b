"""`GET /rooms/{room}/stream`: a seat's view pushed as Server-Sent Events on every
change (INTERFACE "HTTP"), read from the process's one follower of room changes
(`watch.RoomWatch`)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from sse_starlette import ServerSentEvent
from sse_starlette.sse import EventSourceResponse
from starlette.concurrency import run_in_threadpool

from dune_ledger.application.rooms import RoomsApp
from dune_ledger.application.seats import same_secret, token_hash
from dune_ledger.infrastructure.http_auth import (
    SEAT,
    Served,
    ServedApp,
    client,
    token_of,
)
from dune_ledger.infrastructure.http_errors import ERRORS, Refused
from dune_ledger.infrastructure.settings import current
from dune_ledger.infrastructure.watch import PUBLIC, RoomWatch, Watched, canonical

KEEPALIVE = 15  # seconds between the stream's keep-alive comments
STREAMS_PER_TOKEN = 8  # INTERFACE: at most 8 open streams a token, 429 beyond


class Streams:
    """The streams this process has open, by token hash and by client address (on the
    event loop: no lock), and the follower they read from, started by the first."""

    def __init__(self) -> None:
        self.by_token: Counter[str] = Counter()
        self.by_client: Counter[str] = Counter()
        self.per_client = current().streams_per_client
        self.watching: RoomWatch | None = None
        self.starting = asyncio.Lock()

    def opened(self, digest: str, client: str) -> None:
        if self.by_token[digest] >= STREAMS_PER_TOKEN:
            raise Refused("too_many_streams", f"at most {STREAMS_PER_TOKEN} open streams a "
                          "token: close one first", headers={"Retry-After": "5"})
        if self.by_client[client] >= self.per_client:
            raise Refused("too_many_streams", f"at most {self.per_client} open streams "
                          "from one client: close one first", headers={"Retry-After": "5"})
        self.by_token[digest] += 1
        self.by_client[client] += 1

    def closed(self, digest: str, client: str) -> None:
        for counts, key in ((self.by_token, digest), (self.by_client, client)):
            counts[key] -= 1
            if counts[key] <= 0:
                del counts[key]

    async def watch(self, rooms: RoomsApp) -> RoomWatch:
        async with self.starting:
            if self.watching is None:
                self.watching = await run_in_threadpool(
                    RoomWatch, rooms, asyncio.get_running_loop())
        return self.watching

    def wake(self) -> None:
        if self.watching is not None:
            self.watching.wake.set()

    def close(self) -> None:
        if self.watching is not None:
            self.watching.close()
            self.watching = None


async def streams(request: Request) -> Streams:
    kept: Streams = request.app.state.streams
    return kept


OpenStreams = Annotated[Streams, Depends(streams)]
router = APIRouter()


@router.get("/rooms/{room}/stream", summary="the token's seat view, pushed on every change",
            response_class=EventSourceResponse,
            responses={**ERRORS, 200: {"description": "Server-Sent Events", "content": {
                "text/event-stream": {"schema": {
                    "type": "string", "description": "`event: view`, `id: VERSION`, "
                    "`data:` the seat's view (SeatView) as JSON; `: ping` every 15 s"}}}}},
            openapi_extra={"security": [*SEAT, {"spectatorToken": []}, {"queryToken": []}]})
async def get_stream(room: str, request: Request, served: ServedApp,
                     open_streams: OpenStreams,
                     token: str | None = Query(None, description="a seat token, for "
                                               "EventSource (prefer the header)"),
                     presence: bool = Query(False, description="also `event: presence`: "
                                            "{faction: open pages} when it changes")
                     ) -> Response:
    """Server-Sent Events: one `view` event (`id:` the version) each time the seat's
    view changes, a keep-alive comment every 15 s; `Last-Event-ID` resumes. The
    token may come as `?token=` for the browser's EventSource (kept out of the
    access log)."""
    given = token_of(request, token)
    # Checked against the room as stored, never a cache older than its last change:
    # a token reissued by another process a moment ago opens nothing.
    seat, checked = await served.bounded(served.tokens.stored_seat, room, given)
    key, digest, who = canonical(room), token_hash(given), client(request)
    if seat is None:
        # A spectator token streams the public view (its row in the read models); it
        # is never reissued.
        if not await served.bounded(served.tokens.spectator, room, given):
            raise served.wrong_tokens.wrong(who, key, "that token is not a token of this room")
        seat = PUBLIC
    try:
        sent = int(request.headers.get("last-event-id", "0") or 0)
    except ValueError:
        sent = 0
    seated = None if seat == PUBLIC else seat
    open_streams.opened(digest, who)
    try:
        watching = await open_streams.watch(served.rooms)
        watched = await watching.join(key, seated)
    except BaseException:
        open_streams.closed(digest, who)
        raise
    stream = Stream(served, given, key, seat, checked, watched)

    async def views() -> AsyncIterator[dict[str, str] | ServerSentEvent]:
        try:
            async for event in stream.events(sent, presence):
                yield event
        finally:
            watching.leave(key, seated)
            open_streams.closed(digest, who)

    return EventSourceResponse(views(), ping=0)


class Stream:
    """One open stream: the views of `seat` (PUBLIC: the spectator's) that the follower
    reads, for as long as the token stays the seat's."""

    def __init__(self, served: Served, token: str, room: str, seat: str, checked: int,
                 watched: Watched) -> None:
        self.served, self.token, self.room, self.seat = served, token, room, seat
        self.digest, self.checked, self.watched = token_hash(token), checked, watched

    def revoked(self) -> bool:
        """The seat's token as the follower last read it from the store, once that
        read is no older than the open's own check."""
        return self.seat != PUBLIC and self.watched.hashes_at >= self.checked and \
            not same_secret(self.watched.hashes.get(self.seat, ""), self.digest)

    async def still_valid(self) -> bool:
        """The keep-alive's check of the token against the room as stored, should the
        follower have missed a change."""
        if self.seat == PUBLIC:
            return True
        try:
            still, _ = await self.served.bounded(self.served.tokens.stored_seat, self.room,
                                                 self.token)
        except Refused:
            return False  # the store cannot say: the client reconnects
        return still == self.seat

    async def events(self, sent: int, presence: bool
                     ) -> AsyncIterator[dict[str, str] | ServerSentEvent]:
        """The views after version `sent`, and (`presence`) the seats' open pages."""
        watched = self.watched
        told = -1  # the presence count last told
        while not self.revoked():
            signal = watched.changed
            row = watched.views.get(self.seat)
            if row is not None and row[0] > sent:
                sent = row[0]
                yield {"event": "view", "id": str(sent), "data": row[1]}
                continue
            if presence and watched.presence != told:  # after the view: the seats
                told = watched.presence
                yield {"event": "presence",
                       "data": json.dumps(dict(sorted(watched.present.items())))}
                continue
            try:
                await asyncio.wait_for(signal.wait(), KEEPALIVE)
            except TimeoutError:
                if not await self.still_valid():
                    return
                yield ServerSentEvent(comment="ping")
