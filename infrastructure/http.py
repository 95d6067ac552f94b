"""The HTTP API (INTERFACE "HTTP"): FastAPI routes over one `RoomsApp`.

A command's path: `post_command` takes the seat from the token (`http_auth.seat_of`)
and reads the body here, `RoomsApp.execute` (application/rooms.py) loads, decides
and saves, and the rules live in domain/. The acting seat comes only from the token.

Beside this module: `http_errors` (every error is the result shape), `http_auth`
(the token checks, as FastAPI dependencies, and `Served`, what the app keeps),
`http_stream` (the Server-Sent Events route) and `http_models` (what the routes
return, for `/openapi.json`). Bodies are parsed here (`strict_json`) rather than by
FastAPI, so a malformed, oversized, repeated-key or unknown-field body is a 400 with
the same message the CLI gives, never the framework's 422.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, Union

from eventsourcing.persistence import InterfaceError, OperationalError
from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response
from pydantic import Field, TypeAdapter, ValidationError
from starlette.concurrency import run_in_threadpool

from dune_ledger.application.rooms import RoomsApp
from dune_ledger.domain.game import (
    COMMANDS,
    OPERATOR_COMMANDS,
    Layout,
    LayoutError,
    Rejection,
    describe_errors,
)
from dune_ledger.infrastructure import http_models as m
from dune_ledger.infrastructure import observability, settings
from dune_ledger.infrastructure.errors import UsageError
from dune_ledger.infrastructure.http_auth import (
    OPERATOR,
    SEAT,
    SECURITY_SCHEMES,
    Reader,
    Seat,
    Served,
    ServedApp,
    operator,
    reader_or_operator,
    room_operator,
    sender,
)
from dune_ledger.infrastructure.http_errors import (
    ERRORS,
    HANDLERS,
    Refused,
    result_response,
    store_unavailable,
)
from dune_ledger.infrastructure.http_stream import OpenStreams, Streams
from dune_ledger.infrastructure.http_stream import router as stream_router
from dune_ledger.infrastructure.page import router as page_router
from dune_ledger.infrastructure.strict_json import JSONInputError, loads
from dune_ledger.infrastructure.watch import canonical

MAX_BODY = 64 * 1024  # a layout names every card once: a few KB; commands are far smaller
READY_BOUND = 1.0  # /readyz: the store answers within this, or 503
STALE = {"Warning": '110 - "the store is unavailable: the last view this server had"'}
LOOPBACK_NAMES = ("localhost",)


class StoreDown(UsageError):
    """`serve` could not reach its store: one line for the CLI, exit 2."""


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


def command_schema() -> tuple[dict[str, Any], dict[str, Any]]:
    """The command body's JSON schema (a seat's commands and the operator's), and its
    definitions for `components`."""
    kinds = (*COMMANDS.values(), *OPERATOR_COMMANDS.values())
    sent: Any = Annotated[Union[kinds], Field(discriminator="type")]  # noqa: UP007
    schema = TypeAdapter(sent).json_schema(ref_template="#/components/schemas/{model}")
    defs = schema.pop("$defs", {})
    return schema, defs


def layout_schema() -> tuple[dict[str, Any], dict[str, Any]]:
    schema = Layout.model_json_schema(ref_template="#/components/schemas/{model}")
    defs = schema.pop("$defs", {})
    return schema, defs


COMMAND_BODY, COMMAND_DEFS = command_schema()
LAYOUT_BODY, LAYOUT_DEFS = layout_schema()


def body(schema: dict[str, Any], examples: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": schema, "examples": examples}}}}


def create_app(rooms: RoomsApp | Callable[[], RoomsApp], *,
               admin_token: str | None = None) -> FastAPI:
    """The API over `rooms` (or a factory called at startup, closed at shutdown).

    `admin_token` guards the operator routes; None: the settings' DUNE_LEDGER_ADMIN_TOKEN.
    An empty one leaves them open (`serve` then listens on loopback only), though a
    seat token on an operator route is still 403.
    """
    token = settings.current().admin_token if admin_token is None else admin_token

    def start(opened: RoomsApp) -> None:
        api.state.served = Served(opened, opened.seats, token)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        factory = None if isinstance(rooms, RoomsApp) else rooms
        if factory is not None:
            start(await run_in_threadpool(factory))
        observability.install_access_log_filter()
        yield
        api.state.streams.close()
        if factory is not None:
            api.state.served.rooms.close()

    api = FastAPI(title="dune-ledger", version="0.1.0", lifespan=lifespan,
                  docs_url="/docs", redoc_url=None, exception_handlers=HANDLERS,
                  description="Custody of Treachery cards and spice for online Dune rooms. "
                              "See docs/http.md.")
    api.state.streams = Streams()
    if isinstance(rooms, RoomsApp):
        start(rooms)
    origins = settings.current().cors_origins
    if origins:
        api.add_middleware(
            CORSMiddleware, allow_origins=list(origins), allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", "If-None-Match", "Last-Event-ID"],
            expose_headers=["ETag", "Retry-After"])

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi

            schema = get_openapi(title=api.title, version=api.version,
                                 description=api.description, routes=api.routes)
            components = schema.setdefault("components", {})
            components.setdefault("schemas", {}).update({**COMMAND_DEFS, **LAYOUT_DEFS})
            components["securitySchemes"] = SECURITY_SCHEMES
            api.openapi_schema = schema
        return api.openapi_schema

    api.openapi = openapi  # type: ignore[method-assign]
    api.include_router(router)
    api.include_router(stream_router)
    # The seat page (GET /play/{room}) is mounted here by its own module.
    api.include_router(page_router)
    return api


router = APIRouter()
OPERATOR_ONLY = [Depends(operator)]


@router.get("/healthz", summary="liveness: the process is up", response_model=m.Health)
async def healthz() -> dict[str, Any]:
    return {"ok": True}


@router.get("/readyz", summary="readiness: the store answers within 1 s",
            response_model=m.Health, responses={503: ERRORS[503]})
async def readyz(served: ServedApp) -> Response:
    await served.bounded(served.rooms.recorder.max_notification_id, seconds=READY_BOUND)
    return JSONResponse({"ok": True})


@router.get("/keys", summary="the public signing key", response_model=m.PublicKey,
            responses={503: ERRORS[503]})
async def keys(served: ServedApp) -> Response:
    from dune_ledger.infrastructure.keys import public_key_info

    # The key this app signs with (its key file), as `keys show` prints it.
    path = getattr(served.rooms.signer, "path", None)
    if path is None:
        raise Refused("not_configured", "this server has no signing key configured")
    return JSONResponse(await run_in_threadpool(public_key_info, path, create=True))


@router.post("/rooms", status_code=201, summary="create a room from a layout",
             response_model=m.CreatedRoom, responses=ERRORS, dependencies=OPERATOR_ONLY,
             openapi_extra={**body(LAYOUT_BODY, {"box room": {
                 "summary": "a Box room", "value": m.LAYOUT_EXAMPLE}}), "security": OPERATOR})
async def post_room(request: Request, served: ServedApp) -> Response:
    layout = await read_json(request, "the layout")
    try:
        created = await run_in_threadpool(served.rooms.create_room, layout)
    except LayoutError as e:
        raise Refused("invalid_layout", str(e)) from None
    return JSONResponse(created, status_code=201)


@router.get("/rooms", summary="every room (operator)", response_model=list[m.RoomSummary],
            responses=ERRORS, dependencies=OPERATOR_ONLY, openapi_extra={"security": OPERATOR})
async def get_rooms(served: ServedApp) -> Response:
    return JSONResponse(await run_in_threadpool(served.rooms.room_summaries))


@router.post("/rooms/{room}/commands", summary="run one command as the token's seat, or "
             "one of the operator's (deal, open_bidding, end_room) with the operator token",
             response_model=m.CommandResult, responses=ERRORS,
             openapi_extra={**body(COMMAND_BODY, m.COMMAND_EXAMPLES),
                            "security": [*SEAT, *OPERATOR]})
async def post_command(room: str, request: Request, served: ServedApp,
                       streams: OpenStreams) -> Response:
    raw = await read_json(request, "the command")
    seat = await sender(room, request, served, raw)
    # Bounded like a read: a store that does not answer gets 503 within 2 s. The
    # command may still be applied if the store comes back: retry with its command_id.
    result = await served.bounded(served.rooms.execute, room, seat, raw)
    if result["ok"]:
        streams.wake()  # this process's streams see it without a poll's wait
    return result_response(result)


@router.get("/rooms/{room}/view", summary="the token's seat view (ETag: the version)",
            response_model=m.SeatView, responses={**ERRORS, 304: {"description": "unchanged"}},
            openapi_extra={"security": SEAT})
async def get_view(room: str, seat: Seat, request: Request, served: ServedApp) -> Response:
    key, stale, last_views = canonical(room), False, served.last_views
    try:
        if last_views.down():
            raise store_unavailable()
        view = await served.bounded(served.rooms.seat_view, room, seat)
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


@router.get("/rooms/{room}/public", summary="the public view (a seat or the spectator)",
            response_model=m.PublicView, responses=ERRORS,
            openapi_extra={"security": [*SEAT, {"spectatorToken": []}]})
async def get_public(room: str, _: Reader, served: ServedApp) -> Response:
    return JSONResponse(await served.bounded(served.rooms.public_view, room))


@router.get("/rooms/{room}/log", summary="public log entries after `after` (all without it)",
            response_model=list[m.LogEntry], responses=ERRORS,
            openapi_extra={"security": [*SEAT, {"spectatorToken": []}]})
async def get_log(room: str, _: Reader, served: ServedApp,
                  after: int = Query(0, ge=0, le=2**62, description="the last seq seen")
                  ) -> Response:
    # The public log: the spectator's too.
    return JSONResponse(await served.bounded(served.rooms.public_log, room, after))


@router.post("/rooms/{room}/seats/{faction}/token", status_code=201,
             summary="a new token for a seat; the old one stops working (operator)",
             response_model=m.NewToken, responses=ERRORS,
             dependencies=[Depends(room_operator)], openapi_extra={"security": OPERATOR})
async def post_token(room: str, faction: str, served: ServedApp) -> Response:
    try:
        issued = await run_in_threadpool(served.rooms.reissue_token, room, faction)
    except Rejection as r:
        raise Refused(r.code, r.message) from None
    return JSONResponse(issued, status_code=201)


@router.get("/rooms/{room}/audit", summary="replay and check the room (operator)",
            response_model=m.AuditReport, responses=ERRORS,
            dependencies=[Depends(room_operator)], openapi_extra={"security": OPERATOR})
async def get_audit(room: str, served: ServedApp) -> Response:
    from dune_ledger.application.audit import audit_room

    try:
        report = await run_in_threadpool(audit_room, served.rooms, room)
    except Rejection as r:
        raise Refused(r.code, r.message) from None
    observability.audited(report)
    return JSONResponse(report)


@router.post("/rooms/{room}/end", summary="end the room: its secret is published, later "
             "commands are refused (operator; RULES 9)", response_model=m.CommandResult,
             responses=ERRORS, dependencies=[Depends(room_operator)], openapi_extra={
                 "requestBody": {"required": False, "content": {"application/json": {
                     "schema": m.EndRoom.model_json_schema()}}},
                 "security": OPERATOR})
async def post_end(room: str, request: Request, served: ServedApp) -> Response:
    command_id = None
    if int(request.headers.get("content-length") or 0):
        raw = await read_json(request, "the body")
        try:
            command_id = m.EndRoom.model_validate(raw).command_id
        except ValidationError as e:
            raise Refused("invalid_command", describe_errors(e)) from None
    result = await served.bounded(served.rooms.end_room, room, command_id)
    return result_response(result)


@router.get("/rooms/{room}/transcript", summary="an ended room's whole stream in the "
            "export's format (a seat, the spectator or the operator; RULES 9)",
            response_class=Response, dependencies=[Depends(reader_or_operator)],
            responses={**ERRORS, 200: {"description": "JSON lines", "content": {
                "application/x-ndjson": {"schema": {
                    "type": "string", "description": "one export line a stored event: "
                    "{room, version, type, payload, prev, hash, sig}"}}}}},
            openapi_extra={"security": [*SEAT, {"spectatorToken": []}, *OPERATOR]})
async def get_transcript(room: str, served: ServedApp) -> Response:
    from dune_ledger.infrastructure.verify import transcript

    lines = await served.bounded(lambda: b"".join(transcript(served.rooms, room)),
                                 seconds=30.0)
    return Response(lines, media_type="application/x-ndjson")


# /metrics: prometheus-client's text of the default registry (the metrics are
# defined in infrastructure/observability.py), behind the operator token if set,
# its wrong tokens counted as on every operator route.
@router.get("/metrics", include_in_schema=False, dependencies=OPERATOR_ONLY)
async def metrics() -> Response:
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

    return Response(await run_in_threadpool(generate_latest, REGISTRY),
                    media_type=CONTENT_TYPE_LATEST)


def etags(header: str) -> set[str]:
    """The entity tags of an If-None-Match header, weak ones as strong (a view's tag is
    its version), `*` as any."""
    out = {t.strip().removeprefix("W/") for t in header.split(",") if t.strip()}
    return out


def app_from_env() -> FastAPI:
    """For `uvicorn --factory` and `dune-ledger serve --workers N`: storage from DUNE_LEDGER_DB."""
    from dune_ledger.infrastructure.storage import open_rooms

    # A worker process of its own: its logs as the CLI's `serve` would set them.
    observability.configure_logging(settings.current(), default_level="INFO")
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
    if not loopback and not settings.current().admin_token:
        raise UsageError(f"refusing to listen on {host} while DUNE_LEDGER_ADMIN_TOKEN is "
                         "unset: set it, or listen on 127.0.0.1")


def check_store(rooms: RoomsApp, where: str) -> None:
    """StoreDown unless the store answers within READY_BOUND seconds."""
    import concurrent.futures

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        pool.submit(rooms.recorder.max_notification_id).result(timeout=READY_BOUND)
    except concurrent.futures.TimeoutError:
        raise StoreDown(f"the store at {where} did not answer within "
                        f"{READY_BOUND:g} s") from None
    except Exception as e:  # noqa: BLE001 - any failure of the store is the same one line
        raise StoreDown(f"the store at {where} does not answer: "
                        f"{observability.first_line(e)}") from None
    finally:
        pool.shutdown(wait=False)


def serve(url: str | None, host: str, port: int, workers: int = 1, *,
          worker: bool = True) -> None:
    """Run the API, and the worker's duties in a thread unless `worker` is False
    (`--no-worker`). UsageError (exit 2, one line) for a bad or unsafe host; StoreDown
    (a UsageError) when the store does not answer."""
    import uvicorn

    from dune_ledger.infrastructure.storage import open_rooms
    from dune_ledger.infrastructure.worker import Background

    check_host(host)
    where = observability.redact_url(url) if url else "the default URL"
    # A dead store answers 503 within 2 s: a pooled connection is waited for, and a
    # new one connected, for at most a second (unless the operator chose otherwise).
    if not settings.given("pg_connect_timeout"):
        settings.change(pg_connect_timeout=1)
    try:
        rooms = open_rooms(url)
    except UsageError as e:
        raise StoreDown(observability.first_line(e)) from None
    except Exception as e:  # noqa: BLE001 - the store is down or unreadable: one line
        raise StoreDown(f"cannot open the store at {where}: "
                        f"{observability.first_line(e)}") from None
    try:
        check_store(rooms, where)
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
                settings.change(db=url)  # the workers open the store from their settings
            uvicorn.run("dune_ledger.infrastructure.http:app_from_env", factory=True, host=host,
                        port=port, workers=workers)
            return
        uvicorn.run(create_app(rooms), host=host, port=port)
    finally:
        if background is not None:
            background.stop()
        rooms.close()
