"""The `dune-ledger` command line.

Exit codes: 0 success; 1 a rejected command or an audit that found a
problem; 2 bad usage, unreadable input, a bad setting or a store that cannot
be used. Results go to stdout as JSON; a one-line human message goes to
stderr. No input, setting or store makes it print a traceback
(`DUNE_LEDGER_DEBUG=1` shows one for an unexpected error).
"""

from __future__ import annotations

import argparse
import math
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

import orjson

from dune_ledger.domain.game import EXPANSIONS, FACTIONS, LayoutError, Rejection, room_cards
from dune_ledger.infrastructure import observability, settings, strict_json
from dune_ledger.infrastructure.errors import UsageError
from dune_ledger.infrastructure.observability import first_line, redact_url
from dune_ledger.infrastructure.storage import open_rooms
from dune_ledger.projections.store import ReadModelsTooNew

PROG = "dune-ledger"


class Exit(Exception):
    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def emit(data: Any) -> None:
    sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")


def read_input(source: str, what: str) -> bytes:
    try:
        return sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError as e:
        raise Exit(2, f"cannot read {what} '{source}': {e.strerror}") from None


def read_json(source: str, what: str) -> Any:
    return parse_json(read_input(source, what), what)


def parse_json(text: str | bytes, what: str) -> Any:
    try:
        return strict_json.loads(text)
    except strict_json.JSONInputError as e:
        raise Exit(2, f"{what} is not valid JSON: {e}") from None


def version() -> str:
    try:
        return metadata.version("dune-ledger")
    except metadata.PackageNotFoundError:  # run from a checkout that was not installed
        return "unknown (not installed: pip install -e .)"


# --- settings and the store ------------------------------------------------------


def store_url(args: argparse.Namespace) -> str:
    """--db, else the settings' DUNE_LEDGER_DB."""
    return str(args.db or settings.current().db)


@contextmanager
def rooms(args: argparse.Namespace, url: str | None = None) -> Iterator[Any]:
    """The rooms of the store the command names (`url`, else `store_url`), opened for
    the length of the command."""
    url = url or store_url(args)
    if url.startswith("memory:"):
        print("note: memory:// keeps nothing: the rooms are gone when this command ends",
              file=sys.stderr)
    with store_errors(url), open_rooms(url) as app:
        yield app


@contextmanager
def store_errors(url: str) -> Iterator[None]:
    """A store that cannot be opened or read is a usage error that names the store."""
    from eventsourcing.persistence import PersistenceError

    where = redact_url(url)
    try:
        yield
    except BrokenPipeError:
        raise  # the reader of stdout went away (`| head`): not the store
    except (sqlite3.Error, PersistenceError) as e:
        raise Exit(2, f"the store {where} cannot be used: {first_line(e)}. Check that --db names "
                      "a writable dune-ledger database (a file, not a directory) and that "
                      "the server is up") from None
    except OSError as e:
        # The library reports a bad database setting as an OSError too.
        detail = e.strerror or first_line(e)
        raise Exit(2, f"the store {where} cannot be used: {detail}") from None


def seconds(text: str) -> float:
    """A finite number of seconds, at least 0 (`nan` would wait forever)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number of seconds, not {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"a finite number of seconds, at least 0, "
                                         f"not {text!r}")
    return value


def positive_seconds(text: str) -> float:
    value = seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError("more than 0 seconds")
    return value


def at_least_one(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number, at least 1, not {text!r}")
    return int(text)


def public_key(text: str) -> str:
    from dune_ledger.infrastructure.transfer import valid_public_key

    if not valid_public_key(text):
        raise argparse.ArgumentTypeError("an Ed25519 public key as `dune-ledger keys show` "
                                         "prints it: the base64 of its raw 32 bytes")
    return text


def port_number(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"a port between 1 and 65535, not {text!r}")
    return int(text)


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
    with rooms(args) as app:
        try:
            created = app.create_room(layout)
        except LayoutError as e:
            raise Exit(2, str(e)) from None
    emit(created)
    return 0


def cmd_room_command(args: argparse.Namespace) -> int:
    from dune_ledger.domain.game import OPERATOR

    raw = parse_json(args.command, "the command")
    if args.seat_key is not None:
        if args.operator:
            raise Exit(2, "--seat-key signs a seat's command: use it with --as")
        if not isinstance(raw, dict):
            raise Exit(2, "the command must be a JSON object")
        from dune_ledger.application.signatures import signed
        from dune_ledger.infrastructure.seat_keys import SeatKeyError, read_seat_key

        try:
            key = read_seat_key(args.seat_key)
        except SeatKeyError as e:
            raise Exit(2, str(e)) from None
        raw = signed(key, room_text(args.room), args.seat, raw)
    with rooms(args) as app:
        result = app.execute(args.room, OPERATOR if args.operator else args.seat, raw)
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
    with rooms(args) as app:

        def read() -> Any:
            # --wait-version: a version another writer produces, e.g. a command's result.
            if args.wait_version is not None and not app.wait_for(
                args.room, args.wait_version, args.timeout
            ):
                raise Rejection("timeout", f"the room did not reach version "
                                           f"{args.wait_version} within {args.timeout:g} s")
            # The room's chain verifies, as a token check makes it over HTTP (RULES 8):
            # read models built before an edit of the events are not served.
            app.peek(args.room)
            if args.public:
                return app.public_view(args.room)
            return app.seat_view(args.room, args.seat)

        return query(read)


def cmd_room_log(args: argparse.Namespace) -> int:
    with rooms(args) as app:

        def read() -> Any:
            app.peek(args.room)  # the chain verifies, as for `room view` (RULES 8)
            return app.public_log(args.room)

        return query(read)


def cmd_room_at(args: argparse.Namespace) -> int:
    with rooms(args) as app:
        return query(lambda: app.view_at(args.room, args.version, args.seat))


def cmd_room_end(args: argparse.Namespace) -> int:
    with rooms(args) as app:
        result = app.end_room(args.room, args.command_id)
    emit(result)
    if not result["ok"]:
        error = result["error"]
        print(f"rejected ({error['code']}): {error['message']}", file=sys.stderr)
        return 1
    return 0


def cmd_room_transcript(args: argparse.Namespace) -> int:
    from dune_ledger.infrastructure.verify import transcript

    with rooms(args) as app:
        try:
            lines = list(transcript(app, args.room))
        except Rejection as r:
            emit({"ok": False, "error": r.as_error()})
            print(f"{r.code}: {r.message}", file=sys.stderr)
            return 1
    sys.stdout.buffer.write(b"".join(lines))
    sys.stdout.flush()
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from dune_ledger.infrastructure.keys import KeyFileError, public_key_info
    from dune_ledger.infrastructure.verify import TranscriptError, public_key, verify

    data = read_input(args.file, "transcript")
    try:
        if args.key is None:
            try:
                text = str(public_key_info()["public_key"])
            except KeyFileError as e:
                raise Exit(2, f"{e}; or name the server's public key with --key") from None
        else:
            text = args.key
        report = verify(data, public_key(text))
    except TranscriptError as e:
        raise Exit(2, f"{args.file}: {e}") from None
    emit(report)
    if not report["ok"]:
        failure = report["first_failure"]
        print(f"verify failed at version {failure['version']} ({failure['check']}): "
              f"{failure['detail']}", file=sys.stderr)
        return 1
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from dune_ledger.application.audit import audit_room

    if bool(args.room) == bool(args.all):
        raise Exit(2, "give a ROOM or --all (see dune-ledger audit --help)")
    reports: list[dict[str, Any]] = []
    with rooms(args) as app:
        try:
            ids = [str(r) for r in app.room_ids()] if args.all else [args.room]
            for room in ids:
                report = audit_room(app, room, args.processes)
                observability.audited(report)
                reports.append(report)
        except Rejection as r:
            emit({"ok": False, "error": r.as_error()})
            print(f"{r.code}: {r.message}", file=sys.stderr)
            return 1
    failed = [r for r in reports if not r["ok"]]
    if args.all:
        emit(failed if args.failures_only else reports)
        events = sum(r["events"] or 0 for r in reports)  # None: a room not audited
        problems = sum(1 for r in failed for c in r["checks"].values() if c["ok"] is False)
        print(f"audited {len(reports)} rooms, {events} events: {len(failed)} rooms with "
              f"problems ({problems} failed checks)", file=sys.stderr)
    else:
        emit(reports[0])
    if failed:
        print(f"audit found problems in {len(failed)} room(s): "
              f"{', '.join(r['room'] for r in failed)}; see docs/operations.md "
              "\"When an audit fails\"", file=sys.stderr)
        return 1
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from dune_ledger.infrastructure.transfer import export_rooms

    if bool(args.room) == bool(args.all):
        raise Exit(2, "give ROOM(s) or --all (see dune-ledger export --help)")
    with rooms(args) as app:
        ids = None if args.all else list(args.room)
        try:
            if args.output == "-":
                counts = export_rooms(app, ids, sys.stdout.buffer)
            else:
                with open(args.output, "wb") as out:
                    counts = export_rooms(app, ids, out)
        except Rejection as r:
            print(f"{r.code}: {r.message}", file=sys.stderr)
            return 1
        except BrokenPipeError:
            raise
        except OSError as e:
            raise Exit(2, f"cannot write '{args.output}': {e.strerror}") from None
    rooms_written, events, left_out = counts
    print(f"exported {rooms_written} rooms, {events} events", file=sys.stderr)
    for why in left_out:
        print(f"left out: {why}", file=sys.stderr)
    return 1 if left_out else 0


def cmd_import(args: argparse.Namespace) -> int:
    from dune_ledger.infrastructure.transfer import ImportRefused, import_rooms, parse_export

    data = read_input(args.file, "export file")
    try:
        exported = parse_export(data)
    except ImportRefused as e:
        raise Exit(2, f"{args.file}: {e}") from None
    with rooms(args) as app:
        try:
            stored = import_rooms(app, exported, args.trust_key)
        except ImportRefused as e:
            print(f"import refused, nothing stored: {e}", file=sys.stderr)
            return 1
    emit({"ok": True, "rooms": stored})
    print(f"imported {len(stored)} rooms, {sum(stored.values())} events", file=sys.stderr)
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from dune_ledger.infrastructure.worker import run_worker

    url = store_url(args)
    # The worker opens (and, when the store goes away, reopens) the store itself.
    with store_errors(url):
        return run_worker(url, args.interval, args.once)


def cmd_projections_rebuild(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from dune_ledger.projections.read_models import ReadModels

    with rooms(args) as app:
        models = app.read_models
        assert isinstance(models, ReadModels)
        started = time.perf_counter()
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
        with Progress(*columns, console=Console(stderr=True)) as bar:
            task = bar.add_task("rebuilding read models", total=models.behind(0))

            def progress(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            events = models.rebuild(progress)
        elapsed = time.perf_counter() - started
        emit({"ok": True, "events": events, "position": models.position(),
              "seconds": round(elapsed, 3)})
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from dune_ledger.infrastructure.http import serve
    from dune_ledger.infrastructure.storage import environment

    url = store_url(args)
    if args.workers > 1 and url.startswith("memory:"):
        raise Exit(2, "memory:// storage cannot be shared by several workers")
    if url.startswith("memory:"):
        print("note: memory:// keeps nothing: the rooms are gone when the server stops",
              file=sys.stderr)
    environment(url)  # a bad URL is a usage error now, not a crash inside the server
    check_listen(args.host, args.port)
    serve(url, args.host, args.port, args.workers, worker=not args.no_worker)
    return 0


def check_listen(host: str, port: int) -> None:
    """An address this machine cannot listen on is a usage error, not uvicorn's exit 3."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as e:
        raise Exit(2, f"--host {host!r} is not an address to listen on ({e}): give an IP "
                      "address or a name of this machine, e.g. 127.0.0.1") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as e:
            raise Exit(2, f"cannot listen on {host}:{port}: {e.strerror}: give --host an "
                          "address of this machine and --port a free port") from None


def room_text(room: str) -> str:
    """The room id as the views write it (what a seat signs): a UUID's canonical form."""
    from uuid import UUID

    try:
        return str(UUID(room))
    except ValueError:
        return room  # the store answers unknown_room


def cmd_seat_key_new(args: argparse.Namespace) -> int:
    from dune_ledger.infrastructure.seat_keys import SeatKeyError, new_seat_key

    try:
        emit(new_seat_key(args.file))
    except SeatKeyError as e:
        raise Exit(2, str(e)) from None
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    from dune_ledger.infrastructure.keys import KeyFileError, init_key_file, public_key_info

    try:
        if args.keys_cmd == "init":
            emit(init_key_file(args.file, cipher=args.cipher))
        else:
            emit(public_key_info(args.file))
    except KeyFileError as e:
        raise Exit(2, str(e)) from None
    return 0


def cmd_table(args: argparse.Namespace) -> int:
    from dune_ledger.infrastructure.demo import DEMO_URL
    from dune_ledger.infrastructure.table import serve_table

    if args.host not in ("127.0.0.1", "localhost", "::1"):
        raise Exit(2, "the demo table serves only on a loopback address (127.0.0.1, ::1)")
    # The demo's own file, as `demo` uses: never the operator's rooms unless --db says so.
    return serve_table(args.db or DEMO_URL, args.host, args.port)


def cmd_demo(args: argparse.Namespace) -> int:
    from dune_ledger.infrastructure.demo import DEMO_URL, DemoRefused, play_demo, print_summary

    url = args.db or DEMO_URL  # never the operator's own rooms, unless --db says so
    with rooms(args, url) as app:
        try:
            transcript = play_demo(app)
        except DemoRefused as e:
            raise Exit(1, str(e)) from None
    if args.json:
        emit(transcript.as_json())
    else:
        print_summary(transcript, redact_url(url))
    return 0 if transcript.ok else 1


# --- parser -------------------------------------------------------------------------


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Examples kept as written; a default shown where there is one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and "%(default)" not in text \
                and "default" not in text and action.option_strings:
            text += " (default: %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        hint = ""
        if "unrecognized arguments" in message:
            hint = f" (see {self.prog} --help)"
        raise Exit(2, f"{self.format_usage().strip()}\n{self.prog}: {message}{hint}")


DB_HELP = ("storage URL: sqlite:///PATH, postgresql://USER@HOST:PORT/DB[?sslmode=...], "
           "memory:// (default: $DUNE_LEDGER_DB, else sqlite:///dune-ledger.db)")


def examples(*lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def command_types() -> str:
    """Every command type and its fields, from the command models themselves."""
    from dune_ledger.domain.game import COMMANDS, OPERATOR_COMMANDS, Command

    common = set(Command.model_fields)

    def listed(commands: dict[str, type[Command]]) -> list[str]:
        lines = []
        for name, cls in commands.items():
            fields = {field: f for field, f in cls.model_fields.items()
                      if field not in common and field != "type"}
            shown = ", ".join(n if f.is_required() else f"[{n}]" for n, f in fields.items())
            lines.append(f"  {name:<20} {shown}")
        return lines

    return ("command types (every command may also carry command_id and "
            "expected_version):\n" + "\n".join(listed(COMMANDS))
            + "\n\nthe operator's (--operator):\n" + "\n".join(listed(OPERATOR_COMMANDS)))


def command(parent: Any, name: str, help: str, *example: str,
            epilog: str = "") -> argparse.ArgumentParser:
    """A subcommand with its examples, taking --db after its name too."""
    text = examples(*example) + (f"\n\n{epilog}" if epilog else "") if example else epilog
    parser: argparse.ArgumentParser = parent.add_parser(
        name, help=help, description=help, epilog=text or None, formatter_class=Formatter)
    # --db after the subcommand too; SUPPRESS: absent, it leaves the global one alone.
    parser.add_argument("--db", default=argparse.SUPPRESS, help=DB_HELP)
    return parser


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog=PROG, formatter_class=Formatter,
               description="Treachery-card custody for GF9 Dune rooms: an event-sourced "
                           "room engine.",
               epilog=examples("dune-ledger demo",
                               "dune-ledger room create examples/box.json",
                               "dune-ledger --db postgresql://postgres@127.0.0.1:5432/dune "
                               "audit --all",
                               "dune-ledger COMMAND --help   (each command's own help)"))
    p.add_argument("--db", help=DB_HELP)
    p.add_argument("--version", action="version", version=f"{PROG} {version()}")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=Parser)

    demo = command(sub, "demo", "play three scripted rooms (a Box search, an Ambassador "
                   "purchase, a Bidding round) and print a short summary; its rooms go to "
                   "dune-ledger-demo.db unless --db names another store",
                   "dune-ledger demo", "dune-ledger demo --json > demo.json")
    demo.add_argument("--json", action="store_true",
                      help="print every scene (commands, views, logs, audits) as JSON")
    demo.set_defaults(fn=cmd_demo)

    cat = command(sub, "catalog", "print the physical cards as JSON",
                  "dune-ledger catalog", "dune-ledger catalog --expansions choam_richese")
    cat.add_argument("--expansions", metavar="LIST",
                     help=f"comma-separated, of: {','.join(EXPANSIONS)} (none: the base game)")
    cat.set_defaults(fn=cmd_catalog)

    add_room_commands(sub)
    add_chain_commands(sub)
    add_service_commands(sub)
    p.set_defaults(fn=lambda args: usage(p))
    return p


def add_room_commands(sub: Any) -> None:
    """`room` and its actions: create, command and read rooms, end them."""
    room = command(sub, "room", "create, command and read rooms",
                   "dune-ledger room create examples/box.json",
                   "dune-ledger room view ROOM --as richese")
    rsub = room.add_subparsers(dest="room_cmd", metavar="ACTION", parser_class=Parser)
    room.set_defaults(fn=lambda args: usage(room))
    create = command(rsub, "create", "create a room from a layout file; prints the room id and "
                     "each seat's token (shown once)",
                     "dune-ledger room create examples/box.json",
                     "dune-ledger room create - < my-layout.json")
    create.add_argument("layout", metavar="LAYOUT",
                        help="a layout JSON file (INTERFACE 'Layout'; see examples/), or - "
                             "for stdin")
    create.set_defaults(fn=cmd_room_create)
    cmd = command(rsub, "command", "run one command as a seat, or one of the operator's; "
                  "prints the result (exit 1 when a rule refuses it)",
                  "dune-ledger room command ROOM --as richese "
                  "'{\"type\": \"begin_search\", \"card\": \"nullentropy-box\"}'",
                  "dune-ledger room command ROOM --as emperor '{\"type\": \"draw\"}'",
                  "dune-ledger room command ROOM --operator '{\"type\": \"end_room\"}'",
                  epilog=command_types())
    cmd.add_argument("room", metavar="ROOM", help="the room id `room create` printed")
    sent_by = cmd.add_mutually_exclusive_group(required=True)
    sent_by.add_argument("--as", dest="seat", choices=FACTIONS, metavar="FACTION",
                         help=f"the acting seat: {', '.join(FACTIONS)}")
    sent_by.add_argument("--operator", action="store_true",
                         help="send one of the operator's commands (types below)")
    cmd.add_argument("--seat-key", metavar="FILE",
                     help="sign the command with the seat's private key (`seat-key new`); "
                          "a seat that registered a key accepts nothing unsigned")
    cmd.add_argument("command", metavar="JSON",
                     help="the command as one JSON object (types below)")
    cmd.set_defaults(fn=cmd_room_command)
    view = command(rsub, "view", "print a seat's view, or the public view",
                   "dune-ledger room view ROOM --as richese",
                   "dune-ledger room view ROOM --public --wait-version 7")
    view.add_argument("room", metavar="ROOM", help="the room id")
    view.add_argument("--as", dest="seat", choices=FACTIONS, metavar="FACTION",
                      help="the seat whose view to print")
    view.add_argument("--public", action="store_true", help="the public view instead")
    view.add_argument("--wait-version", type=int, metavar="N",
                      help="first wait until the room's read model reaches version N")
    view.add_argument("--timeout", type=seconds, default=10.0, metavar="S",
                      help="seconds --wait-version waits before exit 1 (timeout)")
    view.set_defaults(fn=cmd_room_view)
    log = command(rsub, "log", "print the public log", "dune-ledger room log ROOM")
    log.add_argument("room", metavar="ROOM", help="the room id")
    log.set_defaults(fn=cmd_room_log)
    at = command(rsub, "at", "print a seat's view as it was at a version (a closed search's "
                 "candidates stay hidden)", "dune-ledger room at ROOM 3 --as richese")
    at.add_argument("room", metavar="ROOM", help="the room id")
    at.add_argument("version", type=int, metavar="VERSION",
                    help="a version of the room (1 = its creation)")
    at.add_argument("--as", dest="seat", required=True, choices=FACTIONS, metavar="FACTION",
                    help="the seat whose past view to print")
    at.set_defaults(fn=cmd_room_at)

    end = command(rsub, "end", "end a room (the operator): its secret is published and "
                  "every later command is refused (RULES 9)", "dune-ledger room end ROOM")
    end.add_argument("room", metavar="ROOM", help="the room id")
    end.add_argument("--command-id", metavar="ID",
                     help="a client id: repeating it returns the first result")
    end.set_defaults(fn=cmd_room_end)
    tr = command(rsub, "transcript", "print an ended room's whole stream, private facts "
                 "included, in the export's line format",
                 "dune-ledger room transcript ROOM > room.transcript")
    tr.add_argument("room", metavar="ROOM", help="the room id")
    tr.set_defaults(fn=cmd_room_transcript)


def add_chain_commands(sub: Any) -> None:
    """What checks or moves stored streams: verify, audit, export, import."""
    ver = command(sub, "verify", "check an ended room's transcript: commitment, every "
                  "shuffle and sample, every draw, hashes, signatures, replay (exit 1 on a "
                  "failure; docs/fairness.md)",
                  "dune-ledger verify room.transcript",
                  "dune-ledger verify room.transcript --key BASE64_PUBLIC_KEY")
    ver.add_argument("file", metavar="FILE", help="a transcript, or - for stdin")
    ver.add_argument("--key", metavar="PUBLIC_KEY",
                     help="the server's public key as `keys show` prints it (default: the "
                          "key file's)")
    ver.set_defaults(fn=cmd_verify)

    audit = command(sub, "audit", "replay a room's stream from its first event and check it "
                    "(exit 1 on a problem)",
                    "dune-ledger audit ROOM", "dune-ledger audit --all --failures-only")
    audit.add_argument("room", nargs="?", metavar="ROOM", help="the room to audit")
    audit.add_argument("--all", action="store_true",
                       help="every room; a summary line (rooms, events, problems) on stderr")
    audit.add_argument("--failures-only", action="store_true",
                       help="with --all: print only the reports of rooms with a problem")
    audit.add_argument("--processes", type=at_least_one, default=len(os.sched_getaffinity(0)),
                       metavar="N", help="audit a long room in up to N parts at once, one "
                       "process each (default: the CPUs this process may use)")
    audit.set_defaults(fn=cmd_audit)

    export = command(sub, "export", "write rooms as JSON lines, one stored event a line "
                     "(room, version, type, the stored payload, its chain hash)",
                     "dune-ledger export ROOM > room.jsonl",
                     "dune-ledger export --all --output backup.jsonl")
    export.add_argument("room", nargs="*", metavar="ROOM", help="the rooms to export")
    export.add_argument("--all", action="store_true", help="every room")
    export.add_argument("--output", "-o", default="-", metavar="FILE",
                        help="write here instead of stdout")
    export.set_defaults(fn=cmd_export)

    imp = command(sub, "import", "store exported rooms unchanged (same ids, versions and "
                  "hashes); refuses, storing nothing, a room that exists or does not verify",
                  "dune-ledger --db postgresql://postgres@127.0.0.1:5432/dune import "
                  "backup.jsonl",
                  "dune-ledger import other-site.jsonl --trust-key 'Vq1...='")
    imp.add_argument("file", metavar="FILE", help="a file `export` wrote, or - for stdin")
    imp.add_argument("--trust-key", type=public_key, metavar="PUBLIC_KEY",
                     help="also accept appends signed by this Ed25519 public key (base64, as "
                          "the source's `dune-ledger keys show` prints it)")
    imp.set_defaults(fn=cmd_import)


def add_service_commands(sub: Any) -> None:
    """The long-running processes and their keys: worker, projections, keys, serve, table."""
    worker = command(sub, "worker", "follow the event log: read models, autopilot seats, "
                     "window deadlines; reconnects with backoff when the store goes away",
                     "dune-ledger worker", "dune-ledger worker --once")
    worker.add_argument("--interval", type=positive_seconds, default=0.5, metavar="S",
                        help="seconds between ticks")
    worker.add_argument("--once", action="store_true", help="run one tick and exit")
    worker.set_defaults(fn=cmd_worker)

    proj = command(sub, "projections", "manage the read models",
                   "dune-ledger projections rebuild")
    psub = proj.add_subparsers(dest="projections_cmd", metavar="ACTION", parser_class=Parser)
    proj.set_defaults(fn=lambda args: usage(proj))
    rebuild = command(psub, "rebuild", "drop and rebuild every read model from the event "
                      "log, with progress", "dune-ledger projections rebuild")
    rebuild.set_defaults(fn=cmd_projections_rebuild)

    seat_key = command(sub, "seat-key", "a seat's Ed25519 key pair, to sign its commands "
                       "(docs/fairness.md)", "dune-ledger seat-key new emperor.key")
    sksub = seat_key.add_subparsers(dest="seat_key_cmd", metavar="ACTION", parser_class=Parser)
    seat_key.set_defaults(fn=lambda args: usage(seat_key))
    sknew = command(sksub, "new", "make a key pair: the private key in FILE (mode 0600), the "
                    "public key printed as `seat_key` wants it",
                    "dune-ledger seat-key new emperor.key")
    sknew.add_argument("file", metavar="FILE", help="where to write the private key (never "
                       "overwritten)")
    sknew.set_defaults(fn=cmd_seat_key_new)

    keys = command(sub, "keys", "the key file: the signing key, and an optional cipher key "
                   "(docs/security.md)", "dune-ledger keys init", "dune-ledger keys show")
    ksub = keys.add_subparsers(dest="keys_cmd", metavar="ACTION", parser_class=Parser)
    keys.set_defaults(fn=lambda args: usage(keys))
    kinit = command(ksub, "init", "create the key file (mode 0600), outside the database",
                    "dune-ledger keys init", "dune-ledger keys init --cipher --file /etc/dl.key")
    kinit.add_argument("--cipher", action="store_true",
                       help="also an AES-256 key: encryption at rest")
    kshow = command(ksub, "show", "print the public signing key", "dune-ledger keys show")
    for kp in (kinit, kshow):
        kp.add_argument("--file", help="the key file (default: $DUNE_LEDGER_KEY_FILE, else "
                                       "dune-ledger.key)")
        kp.set_defaults(fn=cmd_keys)

    serve = command(sub, "serve", "serve the HTTP API (uvicorn) and the pages, and do the "
                    "worker's duties unless --no-worker",
                    "dune-ledger serve", "dune-ledger serve --port 8080 --workers 2")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (an address other than loopback needs "
                            "DUNE_LEDGER_ADMIN_TOKEN)")
    serve.add_argument("--port", type=port_number, default=8000, help="port to listen on")
    serve.add_argument("--workers", type=at_least_one, default=1, metavar="N",
                       help="uvicorn worker processes, all on the same storage")
    serve.add_argument("--no-worker", action="store_true",
                       help="leave window deadlines, autopilot seats and read models to "
                            "a separate `dune-ledger worker`")
    serve.set_defaults(fn=cmd_serve)

    table = command(sub, "table", "create the demo room, serve it and print its seat pages",
                    "dune-ledger table", "dune-ledger table --port 8080")
    table.add_argument("--host", default="127.0.0.1", help="loopback address to listen on")
    table.add_argument("--port", type=port_number, default=8000, help="port to listen on")
    table.set_defaults(fn=cmd_table)


def usage(parser: argparse.ArgumentParser) -> int:
    """No command given: the usage line and the commands, then exit 2."""
    raise Exit(2, parser.format_help().rstrip())


# Commands that run for long and log every command they see (the rest: warnings only).
LONG_RUNNING = ("serve", "worker")


def main(argv: list[str] | None = None) -> int:
    debug = False
    try:
        args = build_parser().parse_args(argv)
        chosen = settings.current()  # every setting, read and checked now: a bad one is exit 2
        debug = chosen.debug
        observability.configure_logging(
            chosen, default_level="INFO" if args.cmd in LONG_RUNNING else "WARNING")
        code = int(args.fn(args))
    except Exit as e:
        if e.message:
            print(e.message, file=sys.stderr)
        code = e.code
    except UsageError as e:
        print(str(e), file=sys.stderr)
        code = 2
    except ReadModelsTooNew as e:
        print(str(e), file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:  # `dune-ledger export --all | head`: the reader has enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:  # the last resort: still no traceback for the user
        if debug:
            raise
        print(f"{PROG}: unexpected error: {type(e).__name__}: {first_line(e)}. "
              "Run again with DUNE_LEDGER_DEBUG=1 to see where, and report it.",
              file=sys.stderr)
        code = 2
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return code


def run() -> NoReturn:
    sys.exit(main())


if __name__ == "__main__":
    run()
