"""Logs and metrics: what an operator watches.

Logs go through the standard `logging` module to stderr, as text or, with
`DUNE_LEDGER_LOG_FORMAT=json`, one JSON object a line; the level is
`DUNE_LEDGER_LOG_LEVEL` (default INFO for `serve` and `worker`, WARNING for
the CLI's one-shot commands, whose results are on stdout). Every command logs one line
(`dune_ledger.command`): room, seat, type, result code and milliseconds.
Never a card id, a token or a command's fields: a line says who did what
kind of thing and how it ended, which a log reader may know. A URL is logged or
printed through `redact_url` (no password, no token), an error as `first_line`.

The metrics are prometheus-client's, in its default registry (the HTTP
server serves them at /metrics):

- `dune_ledger_commands_total{type, code}`: commands by type and result code
  (`ok`, or the error code);
- `dune_ledger_command_seconds{type}`: a histogram of a command's latency;
- `dune_ledger_projection_lag_events`: notifications the read models have not
  applied yet (read at scrape time);
- `dune_ledger_audits_total{result}` (`ok`, `failed`) and
  `dune_ledger_audit_failures_total{check}`;
- `dune_ledger_open_streams`: event streams (SSE) open now; the HTTP server
  moves it (`stream_opened`, `stream_closed`).
"""

from __future__ import annotations

import functools
import logging
import re
import sys
import weakref
from typing import Any
from urllib.parse import unquote_plus

import orjson
from prometheus_client import Counter, Gauge, Histogram

from dune_ledger.application.rooms import RoomsApp
from dune_ledger.infrastructure.settings import Settings

log = logging.getLogger("dune_ledger")
command_log = logging.getLogger("dune_ledger.command")

COMMANDS = Counter("dune_ledger_commands", "Commands by type and result code",
                   ["type", "code"])
LATENCY = Histogram("dune_ledger_command_seconds", "Seconds a command took, by type",
                    ["type"], buckets=(.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5,
                                       1, 2.5, 5, 10))
LAG = Gauge("dune_ledger_projection_lag_events",
            "Notifications in the event log the read models have not applied yet")
AUDITS = Counter("dune_ledger_audits", "Room audits by result", ["result"])
AUDIT_FAILURES = Counter("dune_ledger_audit_failures", "Failed audit checks, by check",
                         ["check"])
OPEN_STREAMS = Gauge("dune_ledger_open_streams", "Event streams (SSE) open now")

# The apps whose projection lag the gauge reports (weakly: a closed app drops out).
_watched: weakref.WeakSet[Any] = weakref.WeakSet()


REDACTED = "[redacted]"


def secret_name(name: str) -> bool:
    """Whether a query parameter's name, however percent-encoded (even more than once),
    names a secret (a token, or a libpq URL's `?password=`): its value is then never
    logged."""
    for _ in range(4):
        decoded = unquote_plus(name)
        if decoded == name:
            break
        name = decoded
    name = name.casefold()
    return "token" in name or "password" in name


def redact_url(url: str) -> str:
    """A URL or a request's target as it may be logged or printed: the password of a
    storage URL and every token parameter's value replaced. The query is parsed as the
    framework parses it (split on `&`, each name percent-decoded), so `?%74oken=` is
    redacted as `?token=` is."""
    head, mark, query = url.partition("?")
    scheme, slashes, rest = head.partition("://")
    netloc = rest.partition("/")[0]
    user, _, host = netloc.rpartition("@")
    if slashes and ":" in user:
        head = f"{scheme}://{user.partition(':')[0]}:{REDACTED}@{host}{rest[len(netloc):]}"
    if not mark:
        return head
    parts = []
    for part in re.split(r"([&;])", query):  # `;` too: a parser that splits on it
        name, eq, _ = part.partition("=")
        parts.append(part if not secret_name(name) else f"{name}={REDACTED}" if eq
                     else REDACTED)
    return f"{head}?{''.join(parts)}"


def first_line(e: BaseException) -> str:
    """An error as one line for a person: its message's first line (at most 300
    characters), or its class's name when it has no message."""
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0][:300]


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


class JSONFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message and the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(getattr(record, "fields", {}))
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info).splitlines()[-1]
        return orjson.dumps(line, default=str).decode()


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", {})
        extra = "".join(f" {k}={v}" for k, v in fields.items())
        text = f"{record.levelname.lower()} {record.name}: {record.getMessage()}{extra}"
        if record.exc_info:
            text += f" ({self.formatException(record.exc_info).splitlines()[-1]})"
        return text


class StderrHandler(logging.Handler):
    """Writes to whatever `sys.stderr` is when a line is written (as logging's own
    last-resort handler does), not to the stream that was stderr when it was made."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


def configure_logging(settings: Settings, stream: Any = None,
                      default_level: str = "INFO") -> None:
    """Send the `dune_ledger` loggers to stderr (or `stream`), as the settings say
    (`default_level` when DUNE_LEDGER_LOG_LEVEL is unset: the CLI's one-shot commands
    log only warnings, the server and the worker every command)."""
    handler: logging.Handler = (logging.StreamHandler(stream) if stream is not None
                                else StderrHandler())
    handler.setFormatter(JSONFormatter() if settings.log_format == "json" else TextFormatter())
    log.handlers[:] = [handler]
    log.setLevel(settings.log_level or default_level)
    log.propagate = False
    LAG.set_function(projection_lag)


def command_done(room: str, seat: str, kind: str, code: str, seconds: float) -> None:
    """One command: its log line and its metrics."""
    counted, timed = command_metrics(kind, code)
    counted.inc()
    timed.observe(seconds)
    if command_log.isEnabledFor(logging.INFO):
        ms = round(seconds * 1000, 3)
        command_log.info("command", extra={"fields": {
            "room": room, "seat": seat, "type": kind, "code": code, "ms": ms}})


@functools.cache
def command_metrics(kind: str, code: str) -> tuple[Any, Any]:
    """The labelled counter and histogram of a command type and result code, looked up
    once (`labels` takes a lock and checks its arguments on every call). Both labels
    come from closed lists (`command_type`, the rules' error codes)."""
    return COMMANDS.labels(kind, code), LATENCY.labels(kind)


@functools.cache
def command_types() -> frozenset[str]:
    from dune_ledger.domain.game import Command

    return frozenset(getattr(cls.model_fields["type"].annotation, "__args__", ("?",))[0]
                     for cls in Command.__subclasses__())


def command_type(raw: Any) -> str:
    """The command's type as a metric label: one of the known types, else `invalid`
    (a client must not be able to mint label values)."""
    kind = raw.get("type") if isinstance(raw, dict) else None
    return kind if isinstance(kind, str) and kind in command_types() else "invalid"


def observe(app: RoomsApp) -> None:
    """Log and count every command `app` runs, and report its read models' lag while it
    is open (a closed app leaves the weak set with its last reference)."""
    app.observer = command_ran
    _watched.add(app)


def command_ran(room: str, seat: str, raw: Any, result: dict[str, Any], seconds: float) -> None:
    code = "ok" if result.get("ok") else str(result.get("error", {}).get("code", "error"))
    command_done(room[:64], seat, command_type(raw), code, seconds)


def projection_lag() -> float:
    lag = 0
    for app in list(_watched):
        models = getattr(app, "read_models", None)
        try:
            lag = max(lag, models.behind()) if models is not None else lag
        except Exception:  # a closed or unreachable store: no figure, not a failed scrape
            continue
    return float(lag)


def audited(report: dict[str, Any]) -> None:
    AUDITS.labels("ok" if report.get("ok") else "failed").inc()
    for name, check in report.get("checks", {}).items():
        if check.get("ok") is False:
            AUDIT_FAILURES.labels(name).inc()
    if not report.get("ok"):
        log.warning("audit found problems", extra={"fields": {
            "room": report.get("room"),
            "checks": [n for n, c in report.get("checks", {}).items() if c.get("ok") is False]}})


def stream_opened() -> None:
    OPEN_STREAMS.inc()


def stream_closed() -> None:
    OPEN_STREAMS.dec()
