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

WHEN = {400: "malformed body or parameter", 401: "missing or wrong token",
        403: "a valid token without the right", 404: "not there",
        409: "the room moved on, or is not there yet", 422: "the rules refused",
        429: "too many wrong tokens, or too many open streams",
        500: "internal error", 503: "the store did not answer in time: retry"}
RETRY_AFTER = {"Retry-After": {"description": "seconds to wait before trying again",
                               "schema": {"type": "integer"}}}
# The codes every route that takes a token may answer, and every route that reads the
# store; `internal` is every route's.
TOKEN = ("unauthorized", "too_many_attempts")
STORE = ("unavailable",)
# A rule's refusal of a command (422 and the others a handler may raise).
RULES = tuple(sorted(c.value for c in m.ErrorCode if c.value not in STATUS)) + (
    "invalid_command", "conflict", "stale_event", "busy")


def errors(*codes: str) -> dict[int | str, dict[str, Any]]:
    """A route's error answers for /openapi.json: each status with the codes this route
    may answer it with, in the result shape (`Failure`)."""
    by_status: dict[int, list[str]] = {}
    for code in sorted({*codes, "internal"}):
        by_status.setdefault(STATUS.get(code, 422), []).append(code)
    return {status: {
        "description": f"{WHEN[status]}: " + ", ".join(f"`{c}`" for c in found),
        **({"headers": RETRY_AFTER} if status in (429, 503) else {}),
        "content": {"application/json": {"schema": failure_schema(found)}}}
        for status, found in sorted(by_status.items())}


def failure_schema(codes: list[str]) -> dict[str, Any]:
    """`Failure` with `error.code` one of `codes`."""
    return {"type": "object", "additionalProperties": False,
            "required": ["ok", "version", "error"], "properties": {
                "ok": {"type": "boolean", "const": False},
                "version": {"type": "integer"},
                "error": {"type": "object", "additionalProperties": False,
                          "required": ["code", "message"], "properties": {
                              "code": {"type": "string", "enum": codes},
                              "message": {"type": "string"}}}}}


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
