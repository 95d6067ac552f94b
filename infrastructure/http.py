"""The HTTP API (INTERFACE "HTTP"): FastAPI routes over one `RoomsApp`.

A command's path: `post_command` reads the body and the seat token here,
`RoomsApp.execute` (application/rooms.py) loads, decides and saves, and the
rules live in domain/. The acting seat comes only from the token.

Every error, including the framework's own (unknown route, wrong method,
validation), is the command result shape `{"ok": false, "version", "error"}`.
Bodies are parsed here (`strict_json`) rather than by FastAPI, so a malformed,
oversized, repeated-key or unknown-field body is a 400 with the same message
the CLI gives, never the framework's 422. The response models in
`http_models` describe what the routes return, for `/openapi.json`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import re
import secrets
import socket
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import unquote_plus

from eventsourcing.persistence import InterfaceError, OperationalError
from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response
from pydantic import TypeAdapter, ValidationError
from sse_starlette import ServerSentEvent
from sse_starlette.sse import EventSourceResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from dune_ledger.application.rooms import RoomsApp
from dune_ledger.application.seats import TOKEN_CACHE, Seats, token_hash
from dune_ledger.domain.game import AnyCommand, Layout, LayoutError, Rejection, describe_errors
from dune_ledger.infrastructure import http_models as m
from dune_ledger.infrastructure import observability
from dune_ledger.infrastructure.errors import UsageError
from dune_ledger.infrastructure.page import router as page_router
from dune_ledger.infrastructure.strict_json import JSONInputError, loads
from dune_ledger.infrastructure.watch import (
    PUBLIC,
    RoomWatch,
    canonical,
    configured_streams_per_client,
)

log = logging.getLogger("dune_ledger.http")

MAX_BODY = 64 * 1024  # a layout names every card once: a few KB; commands are far smaller
KEEPALIVE = 15  # seconds between the stream's keep-alive comments
STREAMS_PER_TOKEN = 8  # INTERFACE: at most 8 open streams a token, 429 beyond
# Reads answer 503 rather than wait longer than this on a store that does not answer.
READ_BOUND = 1.8
READY_BOUND = 1.0  # /readyz: the store answers within this, or 503
# Wrong tokens one client may send within WRONG_WINDOW seconds before it gets 429.
WRONG_LIMIT = 20
WRONG_WINDOW = 60.0
CLIENTS = 10_000  # clients whose wrong tokens are counted (the oldest forgotten first)
# After the store failed to answer, seconds during which reads are served from what
# this process has (the last view it answered each seat) without asking the store.
STORE_DOWN = 2.0
STALE = {"Warning": '110 - "the store is unavailable: the last view this server had"'}

# Result error codes -> HTTP status; any other rejection is a rule's refusal (422).
STATUS = {
    "invalid_command": 400,
    "invalid_layout": 400,
    "body_too_large": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "unknown_room": 404,
    "unknown_seat": 404,
    "not_found": 404,
    "method_not_allowed": 405,
    "conflict": 409,
    "stale_event": 409,
    "room_not_ended": 409,
    "too_many_attempts": 429,
    "too_many_streams": 429,
    "busy": 503,
    "unavailable": 503,
    "not_configured": 503,
    "internal": 500,
}
LOOPBACK_NAMES = ("localhost",)


class Refused(Exception):
    """An error to return as the result shape."""

    def __init__(self, code: str, message: str, version: int = 0,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.version, self.headers = code, message, version, headers


class StoreDown(UsageError):
    """`serve` could not reach its store: one line for the CLI, exit 2."""


def failure(code: str, message: str, version: int = 0,
            headers: dict[str, str] | None = None) -> JSONResponse:
    if code == "unauthorized":
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    return JSONResponse(
        {"ok": False, "version": version, "error": {"code": code, "message": message}},
        status_code=STATUS.get(code, 422), headers=headers,
    )


def result_response(result: dict[str, Any], ok_status: int = 200) -> JSONResponse:
    if result["ok"]:
        return JSONResponse(result, status_code=ok_status)
    return JSONResponse(result, status_code=STATUS.get(result["error"]["code"], 422))


async def read_json(request: Request, what: str) -> Any:
    """The body as strict JSON, refusing more than MAX_BODY bytes before reading them all."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY):
        raise Refused("body_too_large", f"{what} must be at most {MAX_BODY} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            raise Refused("body_too_large", f"{what} must be at most {MAX_BODY} bytes")
    if not body.strip():
        raise Refused("invalid_command", f"{what} is missing: send a JSON object")
    try:
        return loads(bytes(body))
    except JSONInputError as e:
        raise Refused("invalid_command", f"{what} is not valid JSON: {e}") from None


def bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Refused("unauthorized", "send 'Authorization: Bearer TOKEN'")
    return token.strip()


def same_secret(a: str, b: str) -> bool:
    return secrets.compare_digest(a.encode(), b.encode())


REDACTED = "[redacted]"


def secret_name(name: str) -> bool:
    """Whether a query parameter's name, however percent-encoded (even more than once),
    names a token: its value is then never logged."""
    for _ in range(4):
        decoded = unquote_plus(name)
        if decoded == name:
            break
        name = decoded
    return "token" in name.casefold()


def redact_url(target: str) -> str:
    """A path with its query string, every token parameter's value replaced: the query
    is parsed as the framework parses it (split on `&`, each name percent-decoded), so
    `?%74oken=` is redacted as `?token=` is."""
    path, mark, query = target.partition("?")
    if not mark:
        return target
    parts = []
    for part in re.split(r"([&;])", query):  # `;` too: a parser that splits on it
        name, eq, _ = part.partition("=")
        parts.append(part if not secret_name(name) else f"{name}={REDACTED}" if eq
                     else REDACTED)
    return f"{path}?{''.join(parts)}"


class AccessLogRedaction(logging.Filter):
    """uvicorn's access log prints the query string: an EventSource's `?token=` is a
    seat token, and it must not reach a log file."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact_url(a) if isinstance(a, str) else a
                                for a in record.args)
        elif isinstance(record.msg, str):
            record.msg = " ".join(redact_url(word) for word in record.msg.split(" "))
        return True


def install_access_log_filter() -> None:
    """Called at startup, after uvicorn configured its loggers."""
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, AccessLogRedaction) for f in access.filters):
        access.addFilter(AccessLogRedaction())


OPERATOR_SCOPE = "*operator*"  # the operator routes' scope of wrong tokens: never a room id


class LastViews:
    """While the store is down, a seat's view is the last one this process answered it
    (each seat only its own), marked stale; never more than TOKEN_CACHE rooms' worth."""

    def __init__(self) -> None:
        self.down_until = 0.0
        self.views: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()

    def down(self) -> bool:
        return time.monotonic() < self.down_until

    def failed(self) -> None:
        self.down_until = time.monotonic() + STORE_DOWN

    def keep(self, room: str, seat: str, view: dict[str, Any]) -> None:
        self.views[(room, seat)] = view
        self.views.move_to_end((room, seat))
        if len(self.views) > TOKEN_CACHE:
            self.views.popitem(last=False)

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
        self.clients: OrderedDict[tuple[str, str], list[float]] = OrderedDict()
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
            self.clients.move_to_end(key)
            while len(self.clients) > CLIENTS:
                self.clients.popitem(last=False)
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


class OpenStreams:
    """The streams this process has open, by token hash and by client address (on the
    event loop: no lock)."""

    def __init__(self) -> None:
        self.by_token: Counter[str] = Counter()
        self.by_client: Counter[str] = Counter()

    def opened(self, digest: str, client: str) -> None:
        self.by_token[digest] += 1
        self.by_client[client] += 1

    def closed(self, digest: str, client: str) -> None:
        for counts, key in ((self.by_token, digest), (self.by_client, client)):
            counts[key] -= 1
            if counts[key] <= 0:
                del counts[key]


def command_schema() -> tuple[dict[str, Any], dict[str, Any]]:
    """The command body's JSON schema, and its definitions for `components`."""
    schema = TypeAdapter(AnyCommand).json_schema(ref_template="#/components/schemas/{model}")
    defs = schema.pop("$defs", {})
    return schema, defs


def layout_schema() -> tuple[dict[str, Any], dict[str, Any]]:
    schema = Layout.model_json_schema(ref_template="#/components/schemas/{model}")
    defs = schema.pop("$defs", {})
    return schema, defs


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


def cors_origins() -> list[str]:
    raw = os.environ.get("DUNE_LEDGER_CORS_ORIGINS", "")
    return [o.strip() for o in raw.split(",") if o.strip()]


def create_app(rooms: RoomsApp | Callable[[], RoomsApp], *,
               admin_token: str | None = None) -> FastAPI:
    """The API over `rooms` (or a factory called at startup, closed at shutdown).

    `admin_token` guards the operator routes; None reads `DUNE_LEDGER_ADMIN_TOKEN`.
    An empty one leaves them open (`serve` then listens on loopback only), though a
    seat token on an operator route is still 403.
    """
    if admin_token is None:
        admin_token = os.environ.get("DUNE_LEDGER_ADMIN_TOKEN", "")
    state: dict[str, Any] = {}
    wrong_tokens = WrongTokens()
    streams = OpenStreams()
    streams_per_client = configured_streams_per_client()
    last_views = LastViews()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if callable(rooms) and not isinstance(rooms, RoomsApp):
            state["rooms"] = await run_in_threadpool(rooms)
            owned = True
        else:
            owned = False
        install_access_log_filter()
        yield
        if "watch" in state:
            state.pop("watch").close()
        if owned:
            state["rooms"].close()

    if isinstance(rooms, RoomsApp):
        state["rooms"] = rooms
    api = FastAPI(title="dune-ledger", version="0.1.0", lifespan=lifespan,
                  docs_url="/docs", redoc_url=None,
                  description="Custody of Treachery cards and spice for online Dune rooms. "
                              "See docs/http.md.")
    origins = cors_origins()
    if origins:
        api.add_middleware(
            CORSMiddleware, allow_origins=origins, allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", "If-None-Match", "Last-Event-ID"],
            expose_headers=["ETag", "Retry-After"])

    def app() -> RoomsApp:
        rooms_app: RoomsApp = state["rooms"]
        return rooms_app

    def tokens() -> Seats:
        return app().seats

    def client(request: Request) -> str:
        return request.client.host if request.client else "?"

    def is_admin(token: str) -> bool:
        return bool(admin_token) and same_secret(token, admin_token)

    def token_of(request: Request, query_token: str | None = None) -> str:
        """The request's token: the header, or `?token=` where a route takes it."""
        if query_token and "authorization" not in request.headers:
            return query_token
        return bearer(request)

    async def seat_of(request: Request, room: str, query_token: str | None = None) -> str:
        token = token_of(request, query_token)
        if last_views.down():
            # The hashes this process last read: a token it never saw waits for the store.
            try:
                seat = tokens().seat(room, token, stored_only=True)
            except Rejection as r:
                raise Refused(r.code, r.message) from None
            if seat is None:
                raise store_unavailable()
            return seat
        seat = await bounded(tokens().seat, room, token)
        if seat is None:
            raise wrong_tokens.wrong(client(request), canonical(room),
                                     "that token is not a seat token of this room")
        return seat

    async def seat_or_spectator(request: Request, room: str) -> str | None:
        """The seat of a seat token, None for the room's spectator token."""
        seat = await bounded(tokens().seat_of, room, bearer(request))
        if seat is None:
            raise wrong_tokens.wrong(client(request), canonical(room),
                                     "that token is not a token of this room")
        return None if seat == PUBLIC else seat

    async def operator(request: Request, room: str | None = None) -> None:
        """The operator routes: the operator token when one is set; never a seat token."""
        who = client(request)
        if admin_token:
            wrong_tokens.check(who, OPERATOR_SCOPE)  # before the comparison: no oracle
        token = bearer(request) if admin_token or "authorization" in request.headers else ""
        if is_admin(token):
            return
        if token and await is_room_token(token, room):
            raise Refused("forbidden", "this route needs the operator token, not a seat token")
        if admin_token:
            raise wrong_tokens.wrong(who, OPERATOR_SCOPE, "this route needs the operator token")

    async def is_room_token(token: str, room: str | None) -> bool:
        """Whether `token` is a seat or spectator token of `room`, or (no room in the
        route) of the room the read models say it was issued in, checked against
        that room as this process knows it."""
        if room is None:
            models = app().read_models
            if models is None:
                return False
            room = await bounded(models.token_room, token_hash(token))
            if room is None:
                return False
            try:
                return await is_room_token(token, room)
            except Refused:  # that room is gone or damaged: the token is no token of it
                return False
        return await bounded(tokens().seat_of, room, token) is not None

    async def bounded(fn: Callable[..., Any], *args: Any, seconds: float = READ_BOUND) -> Any:
        """A read that answers 503 rather than wait on a store that does not answer."""
        try:
            return await asyncio.wait_for(run_in_threadpool(fn, *args), seconds)
        except Rejection as r:
            raise Refused(r.code, r.message) from None
        except TimeoutError:
            last_views.failed()
            raise store_unavailable() from None
        except (OperationalError, InterfaceError):
            last_views.failed()
            raise

    def store_unavailable() -> Refused:
        return Refused("unavailable", "storage did not answer in time; retry (a command "
                       "with the same command_id)", headers={"Retry-After": "1"})

    # --- errors: always the result shape ------------------------------------

    @api.exception_handler(Refused)
    async def refused(_: Request, exc: Refused) -> JSONResponse:
        return failure(exc.code, exc.message, exc.version, exc.headers)

    @api.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        where = "; ".join(".".join(str(p) for p in e["loc"]) for e in exc.errors()[:5])
        return failure("invalid_command", f"malformed request: {where}")

    @api.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_command")
        response = failure(code, str(exc.detail))
        response.status_code = exc.status_code
        return response

    @api.exception_handler(OperationalError)
    @api.exception_handler(InterfaceError)
    async def unavailable(_: Request, exc: Exception) -> JSONResponse:
        # The database is down or the pool is exhausted: the command was not applied
        # unless its save committed, and a retry with the same command_id is safe.
        log.warning("storage unavailable: %s", exc)
        return failure("unavailable", "storage is unavailable; retry with the same command_id",
                       headers={"Retry-After": "1"})

    @api.exception_handler(Exception)
    async def crashed(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return failure("internal", "internal error; the command may not have been applied")

    # --- routes ---------------------------------------------------------------

    errors: dict[int | str, dict[str, Any]] = {
        s: {"model": m.Failure, "description": d} for s, d in (
            (400, "malformed body or parameter"), (401, "missing or wrong token"),
            (403, "a valid token without the right"), (404, "unknown room"),
            (409, "conflict or stale event"), (422, "a rule refused the command"),
            (429, "too many wrong tokens from this client"), (503, "the store is down"))}
    command_body_schema, command_defs = command_schema()
    layout_body_schema, layout_defs = layout_schema()

    def body(schema: dict[str, Any], examples: dict[str, Any]) -> dict[str, Any]:
        return {"requestBody": {"required": True, "content": {"application/json": {
            "schema": schema, "examples": examples}}}}

    @api.get("/healthz", summary="liveness: the process is up", response_model=m.Health)
    async def healthz() -> dict[str, Any]:
        return {"ok": True}

    @api.get("/readyz", summary="readiness: the store answers within 1 s",
             response_model=m.Health, responses={503: errors[503]})
    async def readyz() -> Response:
        await bounded(app().recorder.max_notification_id, seconds=READY_BOUND)
        return JSONResponse({"ok": True})

    @api.get("/keys", summary="the public signing key", response_model=m.PublicKey,
             responses={503: errors[503]})
    async def keys() -> Response:
        from dune_ledger.infrastructure.keys import public_key_info

        # The key this app signs with (its key file), as `keys show` prints it.
        path = getattr(app().signer, "path", None)
        if path is None:
            raise Refused("not_configured", "this server has no signing key configured")
        return JSONResponse(await run_in_threadpool(public_key_info, path, create=True))

    @api.post("/rooms", status_code=201, summary="create a room from a layout",
              response_model=m.CreatedRoom, responses=errors,
              openapi_extra={**body(layout_body_schema, {"box room": {
                  "summary": "a Box room", "value": m.LAYOUT_EXAMPLE}}), "security": OPERATOR})
    async def post_room(request: Request) -> Response:
        await operator(request)
        layout = await read_json(request, "the layout")
        try:
            created = await run_in_threadpool(app().create_room, layout)
        except LayoutError as e:
            raise Refused("invalid_layout", str(e)) from None
        return JSONResponse(created, status_code=201)

    @api.get("/rooms", summary="every room (operator)", response_model=list[m.RoomSummary],
             responses=errors, openapi_extra={"security": OPERATOR})
    async def get_rooms(request: Request) -> Response:
        await operator(request)
        return JSONResponse(await run_in_threadpool(app().room_summaries))

    @api.post("/rooms/{room}/commands", summary="run one command as the token's seat",
              response_model=m.CommandResult, responses=errors,
              openapi_extra={**body(command_body_schema, m.COMMAND_EXAMPLES),
                             "security": SEAT})
    async def post_command(room: str, request: Request) -> Response:
        seat = await seat_of(request, room)
        raw = await read_json(request, "the command")
        # Bounded like a read: a store that does not answer gets 503 within 2 s. The
        # command may still be applied if the store comes back: retry with its command_id.
        result = await bounded(app().execute, room, seat, raw)
        if result["ok"] and "watch" in state:
            state["watch"].wake.set()  # this process's streams see it without a poll's wait
        return result_response(result)

    @api.get("/rooms/{room}/view", summary="the token's seat view (ETag: the version)",
             response_model=m.SeatView, responses={**errors, 304: {"description": "unchanged"}},
             openapi_extra={"security": SEAT})
    async def get_view(room: str, request: Request) -> Response:
        seat = await seat_of(request, room)
        key, stale = canonical(room), False
        try:
            if last_views.down():
                raise store_unavailable()
            view = await bounded(app().seat_view, room, seat)
            last_views.keep(key, seat, view)
        except (Refused, OperationalError, InterfaceError) as e:
            kept = last_views.get(key, seat)
            if kept is None or getattr(e, "code", "unavailable") != "unavailable":
                raise
            view, stale = kept, True
        tag = f'"{view.get("version", 0)}"'
        headers = {"ETag": tag, **(STALE if stale else {})}
        if tag in etags(request.headers.get("if-none-match", "")):
            return Response(status_code=304, headers=headers)
        return JSONResponse(view, headers=headers)

    @api.get("/rooms/{room}/public", summary="the public view (a seat or the spectator)",
             response_model=m.PublicView, responses=errors,
             openapi_extra={"security": [*SEAT, {"spectatorToken": []}]})
    async def get_public(room: str, request: Request) -> Response:
        await seat_or_spectator(request, room)
        return JSONResponse(await bounded(app().public_view, room))

    @api.get("/rooms/{room}/log", summary="public log entries after `after` (all without it)",
             response_model=list[m.LogEntry], responses=errors,
             openapi_extra={"security": [*SEAT, {"spectatorToken": []}]})
    async def get_log(room: str, request: Request,
                      after: int = Query(0, ge=0, le=2**62, description="the last seq seen")
                      ) -> Response:
        await seat_or_spectator(request, room)  # the public log: the spectator's too
        return JSONResponse(await bounded(app().public_log, room, after))

    starting = asyncio.Lock()

    async def watch() -> RoomWatch:
        """The process's one follower of room changes, started by the first stream."""
        async with starting:
            if "watch" not in state:
                state["watch"] = await run_in_threadpool(
                    RoomWatch, app(), asyncio.get_running_loop())
        watching: RoomWatch = state["watch"]
        return watching

    @api.get("/rooms/{room}/stream", summary="the token's seat view, pushed on every change",
             response_class=EventSourceResponse,
             responses={**errors, 200: {"description": "Server-Sent Events", "content": {
                 "text/event-stream": {"schema": {
                     "type": "string", "description": "`event: view`, `id: VERSION`, "
                     "`data:` the seat's view (SeatView) as JSON; `: ping` every 15 s"}}}}},
             openapi_extra={"security": [*SEAT, {"spectatorToken": []}, {"queryToken": []}]})
    async def get_stream(room: str, request: Request,
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
        seat, checked = await bounded(tokens().stored_seat, room, given)
        key, digest, who = canonical(room), token_hash(given), client(request)
        if seat is None:
            # A spectator token streams the public view (its row in the read models); it
            # is never reissued.
            if not await bounded(tokens().spectator, room, given):
                raise wrong_tokens.wrong(who, key, "that token is not a token of this room")
            seat = PUBLIC
        if streams.by_token[digest] >= STREAMS_PER_TOKEN:
            raise Refused("too_many_streams", f"at most {STREAMS_PER_TOKEN} open streams a "
                          "token: close one first", headers={"Retry-After": "5"})
        if streams.by_client[who] >= streams_per_client:
            raise Refused("too_many_streams", f"at most {streams_per_client} open streams "
                          "from one client: close one first", headers={"Retry-After": "5"})
        try:
            sent = int(request.headers.get("last-event-id", "0") or 0)
        except ValueError:
            sent = 0
        seated = None if seat == PUBLIC else seat
        streams.opened(digest, who)
        try:
            watching = await watch()
            watched = await watching.join(key, seated)
        except BaseException:
            streams.closed(digest, who)
            raise

        def revoked() -> bool:
            """The seat's token as the follower last read it from the store, once that
            read is no older than the open's own check."""
            return seated is not None and watched.hashes_at >= checked and \
                not same_secret(watched.hashes.get(seat, ""), digest)

        async def still_valid() -> bool:
            """The keep-alive's check of the token against the room as stored, should the
            follower have missed a change."""
            if seated is None:
                return True
            try:
                still, _ = await bounded(tokens().stored_seat, key, given)
            except Refused:
                return False  # the store cannot say: the client reconnects
            return still == seat

        async def views() -> AsyncIterator[dict[str, str] | ServerSentEvent]:
            nonlocal sent
            told = -1  # the presence count last told (with ?presence=1)
            try:
                while not revoked():
                    signal = watched.changed
                    row = watched.views.get(seat)
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
                        if not await still_valid():
                            return
                        yield ServerSentEvent(comment="ping")
            finally:
                watching.leave(key, seated)
                streams.closed(digest, who)

        return EventSourceResponse(views(), ping=0)

    @api.post("/rooms/{room}/seats/{faction}/token", status_code=201,
              summary="a new token for a seat; the old one stops working (operator)",
              response_model=m.NewToken, responses=errors,
              openapi_extra={"security": OPERATOR})
    async def post_token(room: str, faction: str, request: Request) -> Response:
        await operator(request, room)
        try:
            issued = await run_in_threadpool(app().reissue_token, room, faction)
        except Rejection as r:
            raise Refused(r.code, r.message) from None
        return JSONResponse(issued, status_code=201)

    @api.get("/rooms/{room}/audit", summary="replay and check the room (operator)",
             response_model=m.AuditReport, responses=errors,
             openapi_extra={"security": OPERATOR})
    async def get_audit(room: str, request: Request) -> Response:
        from dune_ledger.application.audit import audit_room

        await operator(request, room)
        try:
            report = await run_in_threadpool(audit_room, app(), room)
        except Rejection as r:
            raise Refused(r.code, r.message) from None
        observability.audited(report)
        return JSONResponse(report)

    @api.post("/rooms/{room}/end", summary="end the room: its secret is published, later "
              "commands are refused (operator; RULES 9)", response_model=m.CommandResult,
              responses=errors, openapi_extra={
                  "requestBody": {"required": False, "content": {"application/json": {
                      "schema": m.EndRoom.model_json_schema()}}},
                  "security": OPERATOR})
    async def post_end(room: str, request: Request) -> Response:
        await operator(request, room)
        command_id = None
        if int(request.headers.get("content-length") or 0):
            raw = await read_json(request, "the body")
            try:
                command_id = m.EndRoom.model_validate(raw).command_id
            except ValidationError as e:
                raise Refused("invalid_command", describe_errors(e)) from None
        result = await bounded(app().end_room, room, command_id)
        return result_response(result)

    @api.get("/rooms/{room}/transcript", summary="an ended room's whole stream in the "
             "export's format (a seat, the spectator or the operator; RULES 9)",
             response_class=Response,
             responses={**errors, 200: {"description": "JSON lines", "content": {
                 "application/x-ndjson": {"schema": {
                     "type": "string", "description": "one export line a stored event: "
                     "{room, version, type, payload, prev, hash, sig}"}}}}},
             openapi_extra={"security": [*SEAT, {"spectatorToken": []}, *OPERATOR]})
    async def get_transcript(room: str, request: Request) -> Response:
        from dune_ledger.infrastructure.verify import transcript

        if not (admin_token and is_admin(bearer(request))):
            await seat_or_spectator(request, room)
        lines = await bounded(lambda: b"".join(transcript(app(), room)), seconds=30.0)
        return Response(lines, media_type="application/x-ndjson")

    # /metrics: prometheus-client's text of the default registry (the metrics are
    # defined in infrastructure/observability.py), behind the operator token if set,
    # its wrong tokens counted as on every operator route.
    @api.get("/metrics", include_in_schema=False)
    async def metrics(request: Request) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

        await operator(request)
        return Response(await run_in_threadpool(generate_latest, REGISTRY),
                        media_type=CONTENT_TYPE_LATEST)

    # The seat page (GET /play/{room}) is mounted here by its own module.

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi

            schema = get_openapi(title=api.title, version=api.version,
                                 description=api.description, routes=api.routes)
            components = schema.setdefault("components", {})
            components.setdefault("schemas", {}).update({**command_defs, **layout_defs})
            components["securitySchemes"] = SECURITY_SCHEMES
            api.openapi_schema = schema
        return api.openapi_schema

    api.openapi = openapi  # type: ignore[method-assign]
    api.include_router(page_router)
    return api


def etags(header: str) -> set[str]:
    """The entity tags of an If-None-Match header, weak ones as strong (a view's tag is
    its version), `*` as any."""
    out = {t.strip().removeprefix("W/") for t in header.split(",") if t.strip()}
    return out


def app_from_env() -> FastAPI:
    """For `uvicorn --factory` and `dune-ledger serve --workers N`: storage from DUNE_LEDGER_DB."""
    from dune_ledger.infrastructure import observability
    from dune_ledger.infrastructure.storage import open_rooms

    # A worker process of its own: its logs as the CLI's `serve` would set them.
    observability.configure_logging(default_level="INFO")
    return create_app(lambda: open_rooms(None))


def check_host(host: str) -> None:
    """A usage error for an address that is not one, or that is not loopback while no
    operator token is set (the operator routes would be open to the network)."""
    try:
        addresses = [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        try:
            found = socket.getaddrinfo(host, None)
        except (socket.gaierror, UnicodeError):
            raise UsageError(f"--host {host!r} is not an IP address or a known host name") \
                from None
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in found]
    loopback = all(a.is_loopback for a in addresses) or host in LOOPBACK_NAMES
    if not loopback and not os.environ.get("DUNE_LEDGER_ADMIN_TOKEN"):
        raise UsageError(f"refusing to listen on {host} while DUNE_LEDGER_ADMIN_TOKEN is "
                         "unset: set it, or listen on 127.0.0.1")


def check_store(rooms: RoomsApp, url: str) -> None:
    """StoreDown unless the store answers within READY_BOUND seconds."""
    import concurrent.futures

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        pool.submit(rooms.recorder.max_notification_id).result(timeout=READY_BOUND)
    except concurrent.futures.TimeoutError:
        raise StoreDown(f"the store at {safe_url(url)} did not answer within "
                        f"{READY_BOUND:g} s") from None
    except Exception as e:  # noqa: BLE001 - any failure of the store is the same one line
        raise StoreDown(f"the store at {safe_url(url)} does not answer: "
                        f"{first_line(e)}") from None
    finally:
        pool.shutdown(wait=False)


def safe_url(url: str | None) -> str:
    return re.sub(r"//([^:/@]+):[^@]*@", r"//\1:***@", url or "the default URL")


def first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]


def serve(url: str | None, host: str, port: int, workers: int = 1, *,
          worker: bool = True) -> None:
    """Run the API, and the worker's duties in a thread unless `worker` is False
    (`--no-worker`). UsageError (exit 2, one line) for a bad or unsafe host; StoreDown
    (a UsageError) when the store does not answer."""
    import uvicorn

    from dune_ledger.infrastructure.storage import open_rooms
    from dune_ledger.infrastructure.worker import Background

    check_host(host)
    # A dead store answers 503 within 2 s: a pooled connection is waited for, and a
    # new one connected, for at most a second (unless the operator chose otherwise).
    os.environ.setdefault("DUNE_LEDGER_PG_CONNECT_TIMEOUT", "1")
    try:
        rooms = open_rooms(url)
    except UsageError as e:
        raise StoreDown(first_line(e)) from None
    except Exception as e:  # noqa: BLE001 - the store is down or unreadable: one line
        raise StoreDown(f"cannot open the store at {safe_url(url)}: {first_line(e)}") from None
    try:
        check_store(rooms, url or "")
    except StoreDown:
        rooms.close()
        raise
    # One worker thread per `serve`, however many uvicorn processes: memory:// shares the
    # serving app's store, any other store gets the worker's own connections.
    shared = rooms if (url or "").startswith("memory:") else None
    background = Background(url, shared).start() if worker else None
    try:
        if workers > 1:
            rooms.close()
            if url:
                os.environ["DUNE_LEDGER_DB"] = url
            uvicorn.run("dune_ledger.infrastructure.http:app_from_env", factory=True, host=host,
                        port=port, workers=workers)
            return
        uvicorn.run(create_app(rooms), host=host, port=port)
    finally:
        if background is not None:
            background.stop()
        rooms.close()
