"""The `dune-ledger` command line.

Exit codes: 0 success; 1 a rejected command or an audit that found a
problem; 2 bad usage or unreadable input. Results go to stdout as JSON; a
one-line human message goes to stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import orjson

from domain.catalog import EXPANSIONS, FACTIONS, room_cards
from domain.errors import LayoutError, Rejection
from infrastructure.storage import DEFAULT_URL, UsageError, open_rooms


class Exit(Exception):
    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def emit(data: Any) -> None:
    sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")


def read_json(source: str, what: str) -> Any:
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text("utf-8")
    except OSError as e:
        raise Exit(2, f"cannot read {what} '{source}': {e.strerror}") from None
    return parse_json(text, what)


def parse_json(text: str, what: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise Exit(2, f"{what} is not valid JSON: {e}") from None


# --- commands -------------------------------------------------------------------


def cmd_catalog(args: argparse.Namespace) -> int:
    chosen: list[str] = []
    if args.expansions:
        chosen = [e.strip() for e in args.expansions.split(",") if e.strip()]
        unknown = [e for e in chosen if e not in EXPANSIONS]
        if unknown:
            raise Exit(2, f"unknown expansions: {', '.join(unknown)} "
                          f"(known: {', '.join(EXPANSIONS)})")
    ordered = tuple(sorted(set(chosen), key=EXPANSIONS.index))
    emit([{**c.public(), "zone": c.zone} for c in room_cards(ordered)])
    return 0


def cmd_room_create(args: argparse.Namespace) -> int:
    layout = read_json(args.layout, "layout")
    with open_rooms(args.db) as app:
        try:
            created = app.create_room(layout)
        except LayoutError as e:
            raise Exit(2, str(e)) from None
    emit(created)
    return 0


def cmd_room_command(args: argparse.Namespace) -> int:
    raw = parse_json(args.command, "the command")
    with open_rooms(args.db) as app:
        result = app.execute(args.room, args.seat, raw)
    emit(result)
    if not result["ok"]:
        error = result["error"]
        print(f"rejected ({error['code']}): {error['message']}", file=sys.stderr)
        return 1
    return 0


def query(fn: Callable[[], Any]) -> int:
    try:
        data = fn()
    except Rejection as r:
        emit({"ok": False, "error": r.as_error()})
        print(f"{r.code}: {r.message}", file=sys.stderr)
        return 1
    emit(data)
    return 0


def cmd_room_view(args: argparse.Namespace) -> int:
    if bool(args.seat) == bool(args.public):
        raise Exit(2, "give exactly one of --as FACTION or --public")
    with open_rooms(args.db) as app:

        def read() -> Any:
            # --wait-version: a version another writer produces, e.g. a command's result.
            if args.wait_version is not None and not app.wait_for(
                args.room, args.wait_version, args.timeout
            ):
                raise Rejection("timeout", f"the room did not reach version "
                                           f"{args.wait_version} within {args.timeout:g} s")
            if args.public:
                return app.public_view(args.room)
            return app.seat_view(args.room, args.seat)

        return query(read)


def cmd_room_log(args: argparse.Namespace) -> int:
    with open_rooms(args.db) as app:
        return query(lambda: app.public_log(args.room))


def cmd_room_at(args: argparse.Namespace) -> int:
    with open_rooms(args.db) as app:
        return query(lambda: app.view_at(args.room, args.version, args.seat))


def at_least_one(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number, at least 1, not {text!r}")
    return int(text)


def cmd_audit(args: argparse.Namespace) -> int:
    from application.audit import audit_all, audit_room

    if bool(args.room) == bool(args.all):
        raise Exit(2, "give a ROOM or --all")
    with open_rooms(args.db) as app:
        try:
            reports = (audit_all(app, args.processes) if args.all
                       else [audit_room(app, args.room, args.processes)])
        except Rejection as r:
            emit({"ok": False, "error": r.as_error()})
            print(f"{r.code}: {r.message}", file=sys.stderr)
            return 1
    emit(reports if args.all else reports[0])
    failed = [r["room"] for r in reports if not r["ok"]]
    if failed:
        print(f"audit found problems in {len(failed)} room(s): {', '.join(failed)}",
              file=sys.stderr)
        return 1
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from infrastructure.worker import run_worker

    with open_rooms(args.db) as app:
        return run_worker(app, args.interval, args.once)


def cmd_projections_rebuild(args: argparse.Namespace) -> int:
    import time

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from projections import ReadModels

    with open_rooms(args.db) as app:
        models = app.read_models
        assert isinstance(models, ReadModels)
        started = time.perf_counter()
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
        with Progress(*columns, console=Console(stderr=True)) as bar:
            task = bar.add_task("rebuilding read models", total=models.head())

            def progress(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            events = models.rebuild(progress)
        seconds = time.perf_counter() - started
        emit({"ok": True, "events": events, "position": models.position(),
              "seconds": round(seconds, 3)})
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from infrastructure.http import serve
    from infrastructure.storage import environment

    if args.workers < 1 or not 0 < args.port < 65536:
        raise Exit(2, "--workers must be at least 1 and --port between 1 and 65535")
    url = args.db or os.environ.get("DUNE_LEDGER_DB") or DEFAULT_URL
    if args.workers > 1 and url.startswith("memory:"):
        raise Exit(2, "memory:// storage cannot be shared by several workers")
    environment(url)  # a bad URL is a usage error now, not a crash inside the server
    serve(url, args.host, args.port, args.workers)
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    from infrastructure.keys import KeyFileError, adopt_rooms, init_key_file, public_key_info

    try:
        if args.keys_cmd == "adopt":
            with open_rooms(args.db, key_file=args.file) as app:
                emit(adopt_rooms(app, args.file))
        else:
            emit(init_key_file(args.file, cipher=args.cipher) if args.keys_cmd == "init"
                 else public_key_info(args.file))
    except KeyFileError as e:
        raise Exit(2, str(e)) from None
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from infrastructure.demo import run_demo

    with open_rooms(args.db) as app:
        return run_demo(app)


# --- parser -------------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise Exit(2, f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="dune-ledger", description="Treachery-card custody for GF9 Dune rooms")
    p.add_argument("--db", help="storage URL (default: $DUNE_LEDGER_DB or "
                                "sqlite:///dune-ledger.db)")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=Parser)

    demo = sub.add_parser("demo", help="play a scripted room end to end")
    demo.set_defaults(fn=cmd_demo)

    cat = sub.add_parser("catalog", help="print the physical cards")
    cat.add_argument("--expansions", help=f"comma-separated: {','.join(EXPANSIONS)}")
    cat.set_defaults(fn=cmd_catalog)

    room = sub.add_parser("room", help="create, command and read rooms")
    rsub = room.add_subparsers(dest="room_cmd", required=True, parser_class=Parser)
    create = rsub.add_parser("create", help="create a room from a layout file ('-': stdin)")
    create.add_argument("layout")
    create.set_defaults(fn=cmd_room_create)
    command = rsub.add_parser("command", help="run one command as a seat")
    command.add_argument("room")
    command.add_argument("--as", dest="seat", required=True, choices=FACTIONS)
    command.add_argument("command", help="the command as a JSON object")
    command.set_defaults(fn=cmd_room_command)
    view = rsub.add_parser("view", help="a seat's view, or the public view")
    view.add_argument("room")
    view.add_argument("--as", dest="seat", choices=FACTIONS)
    view.add_argument("--public", action="store_true")
    view.add_argument("--wait-version", type=int, metavar="N",
                      help="first wait until the room's read model reaches version N")
    view.add_argument("--timeout", type=float, default=10.0,
                      help="seconds --wait-version waits (default 10)")
    view.set_defaults(fn=cmd_room_view)
    log = rsub.add_parser("log", help="the public log")
    log.add_argument("room")
    log.set_defaults(fn=cmd_room_log)
    at = rsub.add_parser("at", help="a seat's view as it was at a version")
    at.add_argument("room")
    at.add_argument("version", type=int)
    at.add_argument("--as", dest="seat", required=True, choices=FACTIONS)
    at.set_defaults(fn=cmd_room_at)

    audit = sub.add_parser("audit", help="replay and check a room, or every room")
    audit.add_argument("room", nargs="?")
    audit.add_argument("--all", action="store_true")
    audit.add_argument("--processes", type=at_least_one, default=len(os.sched_getaffinity(0)),
                       metavar="N", help="audit a long room in up to N parts at once, one "
                       "process each (default: the CPUs this process may use)")
    audit.set_defaults(fn=cmd_audit)

    worker = sub.add_parser("worker", help="follow the event log: projections and autopilot")
    worker.add_argument("--interval", type=float, default=0.5,
                        help="seconds between ticks (default 0.5)")
    worker.add_argument("--once", action="store_true", help="run one tick and exit")
    worker.set_defaults(fn=cmd_worker)

    proj = sub.add_parser("projections", help="manage the read models")
    psub = proj.add_subparsers(dest="projections_cmd", required=True, parser_class=Parser)
    rebuild = psub.add_parser("rebuild", help="drop and rebuild every read model, with progress")
    rebuild.set_defaults(fn=cmd_projections_rebuild)

    keys = sub.add_parser("keys", help="the key file: signing key, optional cipher key")
    ksub = keys.add_subparsers(dest="keys_cmd", required=True, parser_class=Parser)
    kinit = ksub.add_parser("init", help="create the key file (mode 0600)")
    kinit.add_argument("--cipher", action="store_true",
                       help="also an AES-256 key: encryption at rest")
    kshow = ksub.add_parser("show", help="print the public signing key")
    kadopt = ksub.add_parser("adopt", help="sign, once, the rooms stored before signing")
    for kp in (kinit, kshow, kadopt):
        kp.add_argument("--file", help="default: $DUNE_LEDGER_KEY_FILE or dune-ledger.key")
        kp.set_defaults(fn=cmd_keys)

    serve = sub.add_parser("serve", help="the HTTP API (uvicorn)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1,
                       help="uvicorn worker processes, all on the same storage")
    serve.set_defaults(fn=cmd_serve)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        code = int(args.fn(args))
    except Exit as e:
        if e.message:
            print(e.message, file=sys.stderr)
        code = e.code
    except UsageError as e:
        print(str(e), file=sys.stderr)
        code = 2
    sys.stdout.flush()
    return code


def run() -> NoReturn:
    sys.exit(main())


if __name__ == "__main__":
    run()
