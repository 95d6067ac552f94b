"""Every HTTP error, the framework's own included (unknown route, wrong method,
validation), is the command result shape `{"ok": false, "version", "error"}`
(INTERFACE "HTTP"), with the status its code maps to."""

from __future__ import annotations

import logging
from typing import Any

from eventsourcing.persistence import InterfaceError, OperationalError
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from dune_ledger.infrastructure import http_models as m

log = logging.getLogger("dune_ledger.http")

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

# The error answers every route documents in /openapi.json.
ERRORS: dict[int | str, dict[str, Any]] = {
    s: {"model": m.Failure, "description": d} for s, d in (
        (400, "malformed body or parameter"), (401, "missing or wrong token"),
        (403, "a valid token without the right"), (404, "unknown room"),
        (409, "conflict or stale event"), (422, "a rule refused the command"),
        (429, "too many wrong tokens from this client"), (503, "the store is down"))}


class Refused(Exception):
    """An error to return as the result shape."""

    def __init__(self, code: str, message: str, version: int = 0,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.version, self.headers = code, message, version, headers


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


def store_unavailable() -> Refused:
    return Refused("unavailable", "storage did not answer in time; retry (a command "
                   "with the same command_id)", headers={"Retry-After": "1"})


async def refused(_: Request, exc: Refused) -> JSONResponse:
    return failure(exc.code, exc.message, exc.version, exc.headers)


async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
    where = "; ".join(".".join(str(p) for p in e["loc"]) for e in exc.errors()[:5])
    return failure("invalid_command", f"malformed request: {where}")


async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_command")
    response = failure(code, str(exc.detail))
    response.status_code = exc.status_code
    return response


async def unavailable(_: Request, exc: Exception) -> JSONResponse:
    # The database is down or the pool is exhausted: the command was not applied
    # unless its save committed, and a retry with the same command_id is safe.
    log.warning("storage unavailable: %s", exc)
    return failure("unavailable", "storage is unavailable; retry with the same command_id",
                   headers={"Retry-After": "1"})


async def crashed(_: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error", exc_info=exc)
    return failure("internal", "internal error; the command may not have been applied")


# For `FastAPI(exception_handlers=...)`: every error the app answers is the result shape.
HANDLERS: dict[int | type[Exception], Any] = {
    Refused: refused,
    RequestValidationError: invalid,
    StarletteHTTPException: http_error,
    OperationalError: unavailable,
    InterfaceError: unavailable,
    Exception: crashed,
}
