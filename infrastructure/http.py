"""The HTTP API (INTERFACE "HTTP"): FastAPI routes over one `RoomsApp`.

A command's path: `post_command` reads the body and the seat token here,
`RoomsApp.execute` (application/rooms.py) loads, decides and saves, and the
rules live in domain/. The acting seat comes only from the token.

Every error, including the framework's own (unknown route, wrong method,
validation), is the command result shape `{"ok": false, "version", "error"}`.
Bodies are parsed here rather than by FastAPI, so a malformed, oversized or
unknown-field body is a 400 with the same message the CLI gives, never the
framework's 422.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import secrets
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import orjson
from eventsourcing.persistence import InterfaceError, OperationalError
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import TypeAdapter
from sse_starlette.sse import EventSourceResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from application.rooms import RoomsApp, token_hash
from domain.commands import AnyCommand
from domain.errors import LayoutError, Rejection
from infrastructure.page import router as page_router
from infrastructure.watch import RoomWatch, canonical

log = logging.getLogger("dune_ledger.http")

MAX_BODY = 64 * 1024  # a layout names every card once: a few KB; commands are far smaller
KEEPALIVE = 15  # seconds between the stream's keep-alive comments
TOKEN_CACHE = 4096  # rooms whose seat-token hashes are kept in memory (they never change)

# Result error codes -> HTTP status; any other rejection is a rule's refusal (422).
STATUS = {
    "invalid_command": 400,
    "invalid_layout": 400,
    "body_too_large": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "unknown_room": 404,
    "not_found": 404,
    "method_not_allowed": 405,
    "conflict": 409,
    "stale_event": 409,
    "busy": 503,
    "unavailable": 503,
    "internal": 500,
}

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["ok", "version", "error"],
    "properties": {
        "ok": {"const": False},
        "version": {"type": "integer"},
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
        },
    },
}


class Refused(Exception):
    """An error to return as the result shape."""

    def __init__(self, code: str, message: str, version: int = 0) -> None:
        super().__init__(message)
        self.code, self.message, self.version = code, message, version


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
    """The body as JSON, refusing more than MAX_BODY bytes before reading them all."""
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
        return orjson.loads(bytes(body))
    except orjson.JSONDecodeError as e:
        raise Refused("invalid_command", f"{what} is not valid JSON: {e}") from None


def bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Refused("unauthorized", "send 'Authorization: Bearer TOKEN'")
    return token.strip()


SECRET_QUERY = re.compile(r"(?i)(token=)[^&\s]*")


class AccessLogRedaction(logging.Filter):
    """uvicorn's access log prints the query string: an EventSource's `?token=` is a
    seat token, and it must not reach a log file."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(SECRET_QUERY.sub(r"\1[redacted]", a) if isinstance(a, str)
                                else a for a in record.args)
        elif isinstance(record.msg, str):
            record.msg = SECRET_QUERY.sub(r"\1[redacted]", record.msg)
        return True


def install_access_log_filter() -> None:
    """Called at startup, after uvicorn configured its loggers."""
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, AccessLogRedaction) for f in access.filters):
        access.addFilter(AccessLogRedaction())


class Tokens:
    """Seat-token hashes per room, read once: a room's tokens never change."""

    def __init__(self, rooms: RoomsApp) -> None:
        self.rooms = rooms
        self.hashes: OrderedDict[str, dict[str, str]] = OrderedDict()

    def of(self, room_id: str) -> dict[str, str]:
        try:
            room_id = canonical(room_id)  # one entry per room, however it is spelled
        except Rejection as r:
            raise Refused(r.code, r.message) from None
        known = self.hashes.get(room_id)
        if known is None:
            try:
                known = dict(self.rooms.load(room_id).token_hashes)
            except Rejection as r:
                raise Refused(r.code, r.message) from None
            self.hashes[room_id] = known
            if len(self.hashes) > TOKEN_CACHE:
                self.hashes.popitem(last=False)
        return known

    def seat(self, room_id: str, token: str) -> str | None:
        digest = token_hash(token)
        found = None
        for faction, stored in self.of(room_id).items():
            if secrets.compare_digest(stored, digest):
                found = faction
        return found


def command_schema() -> tuple[dict[str, Any], dict[str, Any]]:
    """The command body's JSON schema, and its definitions for `components`."""
    schema = TypeAdapter(AnyCommand).json_schema(ref_template="#/components/schemas/{model}")
    defs = schema.pop("$defs", {})
    return schema, defs


def create_app(rooms: RoomsApp | Callable[[], RoomsApp], *,
               admin_token: str | None = None) -> FastAPI:
    """The API over `rooms` (or a factory called at startup, closed at shutdown).

    `admin_token` guards room creation and audit; None reads
    `DUNE_LEDGER_ADMIN_TOKEN`. An empty one leaves room creation and the audit
    open (for a server on localhost), though a seat token on the audit is still 403.
    """
    if admin_token is None:
        admin_token = os.environ.get("DUNE_LEDGER_ADMIN_TOKEN", "")
    state: dict[str, Any] = {}

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
                  description="Custody of Treachery cards and spice for online Dune rooms.")

    def app() -> RoomsApp:
        rooms_app: RoomsApp = state["rooms"]
        return rooms_app

    def tokens() -> Tokens:
        if "tokens" not in state:
            state["tokens"] = Tokens(app())
        known: Tokens = state["tokens"]
        return known

    def is_admin(token: str) -> bool:
        return bool(admin_token) and secrets.compare_digest(token.encode(), admin_token.encode())

    def seat_of(request: Request, room: str, query_token: str | None = None) -> str:
        token = query_token if query_token and "authorization" not in request.headers \
            else bearer(request)
        seat = tokens().seat(room, token)
        if seat is None:
            raise Refused("unauthorized", "that token is not a seat token of this room")
        return seat

    # --- errors: always the result shape ------------------------------------

    @api.exception_handler(Refused)
    async def refused(_: Request, exc: Refused) -> JSONResponse:
        return failure(exc.code, exc.message, exc.version)

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

    error_body = {"application/json": {"schema": ERROR_SCHEMA}}
    errors: dict[int | str, dict[str, Any]] = {
        s: {"description": "error", "content": error_body}
        for s in (400, 401, 403, 404, 409, 422, 503)}
    layout_body = {"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"type": "object", "required": ["seats"],
                   "description": "a layout (INTERFACE 'Layout')"}}}}}
    command_body_schema, command_defs = command_schema()
    command_body = {"requestBody": {"required": True, "content": {"application/json": {
        "schema": command_body_schema}}}}

    @api.get("/healthz", summary="liveness")
    async def healthz() -> dict[str, Any]:
        return {"ok": True}

    @api.post("/rooms", status_code=201, summary="create a room from a layout",
              openapi_extra=layout_body, responses=errors)
    async def post_room(request: Request) -> Response:
        if admin_token and not is_admin(bearer(request)):
            raise Refused("unauthorized", "room creation needs the operator token")
        layout = await read_json(request, "the layout")
        try:
            created = await run_in_threadpool(app().create_room, layout)
        except LayoutError as e:
            raise Refused("invalid_layout", str(e)) from None
        return JSONResponse(created, status_code=201)

    @api.post("/rooms/{room}/commands", summary="run one command as the token's seat",
              openapi_extra=command_body, responses=errors)
    async def post_command(room: str, request: Request) -> Response:
        seat = seat_of(request, room)
        raw = await read_json(request, "the command")
        result = await run_in_threadpool(app().execute, room, seat, raw)
        return result_response(result)

    @api.get("/rooms/{room}/view", summary="the token's seat view", responses=errors)
    async def get_view(room: str, request: Request) -> Response:
        seat = seat_of(request, room)
        return JSONResponse(await query(app().seat_view, room, seat))

    @api.get("/rooms/{room}/log", summary="the public log", responses=errors)
    async def get_log(room: str, request: Request) -> Response:
        seat_of(request, room)
        return JSONResponse(await query(app().public_log, room))

    def watch() -> RoomWatch:
        if "watch" not in state:
            state["watch"] = RoomWatch(app(), asyncio.get_running_loop())
        watching: RoomWatch = state["watch"]
        return watching

    @api.get("/rooms/{room}/stream", summary="the token's seat view, pushed on every change",
             response_class=EventSourceResponse, responses=errors)
    async def get_stream(room: str, request: Request, token: str | None = None) -> Response:
        """Server-Sent Events: one `view` event (`id:` the version) each time the seat's
        view changes, a keep-alive comment every 15 s; `Last-Event-ID` resumes. The
        token may come as `?token=` for the browser's EventSource (kept out of the
        access log)."""
        seat = seat_of(request, room, token)
        key = canonical(room)
        try:
            sent = int(request.headers.get("last-event-id", "0") or 0)
        except ValueError:
            sent = 0
        watching = watch()
        watched = await watching.join(key)

        async def views() -> AsyncIterator[dict[str, str]]:
            nonlocal sent
            try:
                while True:
                    signal = watched.changed
                    row = watched.views.get(seat)
                    if row is not None and row[0] > sent:
                        sent = row[0]
                        yield {"event": "view", "id": str(sent), "data": row[1]}
                        continue
                    await signal.wait()
            finally:
                watching.leave(key)

        return EventSourceResponse(views(), ping=KEEPALIVE)

    @api.get("/rooms/{room}/audit", summary="replay and check the room (operator)",
             responses=errors)
    async def get_audit(room: str, request: Request) -> Response:
        from application.audit import audit_room

        # Without an operator token configured the audit is open, but never to a seat.
        token = bearer(request) if admin_token or "authorization" in request.headers else ""
        if not is_admin(token):
            if token and tokens().seat(room, token) is not None:
                raise Refused("forbidden", "the audit needs the operator token, not a seat token")
            if admin_token:
                raise Refused("unauthorized", "the audit needs the operator token")
        return JSONResponse(await query(audit_room, app(), room))

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi

            schema = get_openapi(title=api.title, version=api.version,
                                 description=api.description, routes=api.routes)
            schema.setdefault("components", {}).setdefault("schemas", {}).update(command_defs)
            schema["components"]["securitySchemes"] = {
                "bearer": {"type": "http", "scheme": "bearer"}}
            api.openapi_schema = schema
        return api.openapi_schema

    api.openapi = openapi  # type: ignore[method-assign]
    api.include_router(page_router)
    return api


async def query(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return await run_in_threadpool(fn, *args)
    except Rejection as r:
        raise Refused(r.code, r.message) from None


def app_from_env() -> FastAPI:
    """For `uvicorn --factory` and `dune-ledger serve --workers N`: storage from DUNE_LEDGER_DB."""
    from infrastructure.storage import open_rooms

    return create_app(lambda: open_rooms(None))


def serve(url: str | None, host: str, port: int, workers: int = 1) -> None:
    import uvicorn

    from infrastructure.storage import open_rooms

    if not os.environ.get("DUNE_LEDGER_ADMIN_TOKEN") and host not in ("127.0.0.1", "localhost",
                                                                       "::1"):
        log.warning("DUNE_LEDGER_ADMIN_TOKEN is not set: anyone who reaches %s may create rooms",
                    host)
    if workers > 1:
        if url:
            os.environ["DUNE_LEDGER_DB"] = url
        uvicorn.run("infrastructure.http:app_from_env", factory=True, host=host, port=port,
                    workers=workers)
        return
    uvicorn.run(create_app(lambda: open_rooms(url)), host=host, port=port)
