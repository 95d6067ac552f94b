"""The figures of issue 25 ("the house"): how far a reader must follow the code.

1. A Box command's path: one `POST /rooms/{room}/commands` with a `begin_search`, through
   FastAPI's TestClient over a RoomsApp on `memory://`, traced with `sys.setprofile` in
   every thread, the whole request (dependencies, route handler, the stored event, the
   response). Only frames whose file lies in the package's folders count.
2. A seat view pushed over the stream: the stream's refresh of one room, traced, after a
   command (the read models catch up, the room's views are read); and the application
   functions it and `GET /view` read a view through (one read path, or two).
3. Import circles among the `dune_ledger.*` modules (`ast`; imports under
   `if TYPE_CHECKING:` do not run, so they do not count).
4. The longest production functions (`ast`, nested functions on their own).

A call's caller is the innermost project frame below it in its thread, library frames
in between skipped (eventsourcing calling the mapper, pydantic a validator). A call with
none below it was handed over from another thread (the command runs off the event loop):
its caller is the file of the call recorded just before it. An entry is a call into a
file from another file (or from outside the project); a crossing, a call between two
project files; a layer change, a call between two top-level folders. Generator and
coroutine resumptions and comprehensions are not calls.

Run from the repository root: `python -m scripts.house_figures [--json]`.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import importlib
import json
import os
import pkgutil
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from tempfile import TemporaryDirectory
from types import FrameType
from typing import Any

import dune_ledger

PACKAGE = "dune_ledger"
LONG = 80  # lines: the issue counts the production functions over this
KEY_FILE_ENV = "DUNE_LEDGER_KEY_FILE"  # INTERFACE: the signing key's file
COMPREHENSIONS = {"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"}


# --- the package's files ------------------------------------------------------------------


def repository() -> Path:
    return Path(dune_ledger.__file__).resolve().parent.parent


def package_roots() -> dict[str, Path]:
    """Each package folder (resolved: the layers are links) by its module name."""
    roots = {PACKAGE: Path(dune_ledger.__file__).resolve().parent}
    for sub in pkgutil.iter_modules(dune_ledger.__path__):
        if sub.ispkg:
            roots[f"{PACKAGE}.{sub.name}"] = (roots[PACKAGE] / sub.name).resolve()
    return roots


def modules() -> dict[str, Path]:
    """Every module of the package, by its dotted name."""
    found: dict[str, Path] = {}
    for name, root in package_roots().items():
        paths = root.glob("*.py") if name == PACKAGE else root.rglob("*.py")
        for path in paths:
            parts = [*name.split("."), *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


@cache
def project_file(filename: str) -> str | None:
    """`filename` relative to the repository (`domain/rules.py`), or None outside the
    package."""
    path = Path(filename).resolve()
    if not any(path.is_relative_to(root) for root in package_roots().values()):
        return None
    return path.relative_to(repository()).as_posix()


def layer(file: str) -> str:
    return file.split("/", 1)[0]


# --- 1 and 2: traced paths ------------------------------------------------------------------


@dataclass
class Call:
    caller: str | None  # None: from outside the project
    caller_function: str | None
    callee: str
    function: str


@dataclass
class Trace:
    """Project calls recorded by a profile function while `on`."""

    on: bool = False
    calls: list[Call] = field(default_factory=list)  # of the current recording
    frames: set[FrameType] = field(default_factory=set)  # kept: ids are not reused
    lock: threading.Lock = field(default_factory=threading.Lock)

    def profile(self, frame: FrameType, event: str, _: Any) -> None:
        if not self.on or event != "call":
            return
        code = frame.f_code
        callee = project_file(code.co_filename)
        if callee is None or code.co_name in COMPREHENSIONS:
            return
        with self.lock:
            if frame in self.frames:  # a generator or coroutine resumed
                return
            self.frames.add(frame)
            caller = enclosing(frame.f_back)
            if caller is None and self.calls:  # handed over from another thread
                caller = self.calls[-1].callee, self.calls[-1].function
            file, function = caller or (None, None)
            self.calls.append(Call(file, function, callee, code.co_qualname))

    @contextmanager
    def recording(self) -> Iterator[list[Call]]:
        """The calls made meanwhile."""
        calls: list[Call] = []
        self.calls, self.on = calls, True
        try:
            yield calls
        finally:
            self.on = False

    @contextmanager
    def threads(self) -> Iterator[None]:
        """Record in this thread and in every thread started meanwhile."""
        threading.setprofile(self.profile)
        sys.setprofile(self.profile)
        try:
            yield
        finally:
            sys.setprofile(None)
            threading.setprofile(None)


def enclosing(frame: FrameType | None) -> tuple[str, str] | None:
    """The innermost project frame's file and function."""
    while frame is not None:
        file = project_file(frame.f_code.co_filename)
        if file is not None:
            return file, frame.f_code.co_qualname
        frame = frame.f_back
    return None


def path_figures(calls: list[Call]) -> dict[str, Any]:
    into = [c for c in calls if c.caller != c.callee]
    entries = Counter(c.callee for c in into)
    # The places a reader is sent into a file from: a loop's repeats count once.
    sites = Counter(c.callee for c in {(c.caller, c.caller_function, c.callee, c.function): c
                                       for c in into}.values())
    files = list(dict.fromkeys(c.callee for c in calls))  # in the order first entered
    between = [c for c in calls if c.caller is not None and c.caller != c.callee]
    return {
        "files": len(files),
        "main_line": files,
        "functions": len({(c.callee, c.function) for c in calls}),
        "calls": len(calls),
        "crossings": len(between),
        "layer_changes": sum(layer(c.caller) != layer(c.callee) for c in between
                             if c.caller is not None),
        "most_entered": max(entries.values(), default=0),
        "most_entry_sites": max(sites.values(), default=0),
        "entries": {f: entries[f] for f in files},
        "entry_sites": {f: sites[f] for f in files},
    }


def traced_paths() -> dict[str, list[Call]]:
    """The project calls of a Box command, of the seat's `GET /view` after it, and of
    the stream's refresh of the room after it."""
    from fastapi.testclient import TestClient

    from dune_ledger.infrastructure.http import create_app
    from dune_ledger.infrastructure.storage import open_rooms

    box = json.loads((repository() / "examples" / "box.json").read_text())
    begin = {"type": "begin_search", "card": "nullentropy-box"}
    admin = {"Authorization": "Bearer house"}
    paths: dict[str, list[Call]] = {}
    trace = Trace()
    with (TemporaryDirectory() as keys, signing_key(Path(keys) / "house.key"),
          open_rooms("memory://") as rooms, trace.threads(),
          TestClient(create_app(rooms, admin_token="house")) as client):

        def create() -> tuple[str, dict[str, str]]:
            created = client.post("/rooms", json=box, headers=admin)
            assert created.status_code == 201, created.text
            body = created.json()
            return body["room"], {"Authorization": f"Bearer {body['seats']['richese']}"}

        def command(room: str, owner: dict[str, str]) -> None:
            posted = client.post(f"/rooms/{room}/commands", json=begin, headers=owner)
            assert posted.status_code == 200 and posted.json()["ok"], posted.text

        def view(room: str, owner: dict[str, str]) -> None:
            assert client.get(f"/rooms/{room}/view", headers=owner).status_code == 200

        def opened() -> tuple[str, dict[str, str]]:
            """A room as a player finds it: its page open (the view read), the room
            kept in memory."""
            room, owner = create()
            view(room, owner)
            return room, owner

        # Each traced step follows a command its room has not been read since; the
        # warm-up goes through all of them once, so imports and caches do not count.
        refresh = stream_refresh(rooms)
        warm, warm_owner = opened()
        command(warm, warm_owner)
        refresh(warm)
        view(warm, warm_owner)
        room, owner = opened()
        with trace.recording() as paths["box_command"]:
            command(room, owner)
        with trace.recording() as paths["stream_view"]:
            refresh(room)
        read, reader = opened()
        command(read, reader)
        with trace.recording() as paths["seat_view"]:
            view(read, reader)
    return paths


@contextmanager
def signing_key(path: Path) -> Iterator[None]:
    """Sign with a key file of this run's own, never a `dune-ledger.key` in the checkout."""
    before = os.environ.get(KEY_FILE_ENV)
    os.environ[KEY_FILE_ENV] = str(path)
    try:
        yield
    finally:
        if before is None:
            del os.environ[KEY_FILE_ENV]
        else:
            os.environ[KEY_FILE_ENV] = before


def stream_refresh(rooms: Any) -> Callable[[str], None]:
    """The stream's refresh of one room, its follower thread stopped so that only the
    call made here runs. The watch is found by its name, wherever it lives."""
    watch_class = find_attribute(f"{PACKAGE}.infrastructure", "RoomWatch")
    watch = watch_class(rooms, asyncio.new_event_loop())
    watch.close()

    def refresh(room: str) -> None:
        watch._refresh([room])

    return refresh


def find_attribute(package: str, name: str) -> Any:
    base = importlib.import_module(package)
    for info in pkgutil.walk_packages(base.__path__, f"{package}."):
        found = getattr(importlib.import_module(info.name), name, None)
        if found is not None:
            return found
    raise LookupError(f"no {name} in {package}")


def application_entries(calls: list[Call]) -> list[str]:
    """The application functions a read calls from outside the application layer: the
    query path it takes."""
    return list(dict.fromkeys(
        f"{c.callee} {c.function}" for c in calls
        if layer(c.callee) == "application" and c.caller is not None
        and layer(c.caller) not in ("application", "domain")))


# --- 3: import circles ----------------------------------------------------------------------


def import_graph() -> dict[str, set[str]]:
    """Each package module -> the package modules it imports (when run or called)."""
    known = modules()
    return {name: imported(name, path, known) for name, path in known.items()}


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and is_type_checking(block.test) for n in ast.walk(block)}
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for a in node.names:
                if f"{base}.{a.name}" in known:
                    out.add(f"{base}.{a.name}")
                elif base in known:
                    out.add(base)
    out.discard(name)
    return out


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def import_circles(graph: dict[str, set[str]] | None = None) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted,
    the largest first."""
    graph = import_graph() if graph is None else graph
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(circles, key=lambda c: (-len(c), c))


def circle_lines(circles: list[list[str]]) -> list[str]:
    """Each circle, and what each of its modules imports of it."""
    graph = import_graph()
    lines = []
    for circle in circles:
        lines.append(f"  {len(circle)} modules:")
        lines += [f"    {m} imports {', '.join(sorted(graph[m] & set(circle)))}"
                  for m in circle]
    return lines


# --- 4: the longest functions ---------------------------------------------------------------


@dataclass(frozen=True)
class Function:
    file: str
    name: str  # qualified: `create_app.post_command`
    line: int
    lines: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line} {self.name} ({self.lines} lines)"


def functions() -> list[Function]:
    """Every function and method of the package, the longest first."""
    found: list[Function] = []
    for path in modules().values():
        file = path.relative_to(repository()).as_posix()
        found += functions_in(ast.parse(path.read_text(), str(path)), file, "")
    return sorted(found, key=lambda f: (-f.lines, f.file, f.line))


def functions_in(node: ast.AST, file: str, prefix: str) -> list[Function]:
    found: list[Function] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{prefix}{child.name}"
            if not isinstance(child, ast.ClassDef):
                end = child.end_lineno or child.lineno
                found.append(Function(file, name, child.lineno, end - child.lineno + 1))
            found += functions_in(child, file, f"{name}.")
        else:
            found += functions_in(child, file, prefix)
    return found


# --- the report ----------------------------------------------------------------------------


def figures(trace: bool = True) -> dict[str, Any]:
    longest = functions()
    out: dict[str, Any] = {}
    if trace:
        paths = traced_paths()
        out["box_command"] = path_figures(paths["box_command"])
        out["stream_view"] = path_figures(paths["stream_view"])
        out["read_path"] = {
            "GET /view": application_entries(paths["seat_view"]),
            "stream": application_entries(paths["stream_view"])}
    circles = import_circles()
    out["import_circles"] = {"count": len(circles), "circles": circles}
    out["functions"] = {"over_80": sum(f.lines > LONG for f in longest),
                        "longest": [vars(f) for f in longest[:5]]}
    return out


def table(out: dict[str, Any]) -> str:
    lines = []
    for key, title in (("box_command", "A Box command (POST .../commands, begin_search)"),
                       ("stream_view", "A seat view pushed over the stream (its refresh)")):
        if key not in out:
            continue
        path = out[key]
        lines += [title,
                  f"  main-line files {path['files']}, functions {path['functions']}, "
                  f"calls {path['calls']}, file crossings {path['crossings']}, "
                  f"layer changes {path['layer_changes']}, "
                  f"most entries of one file {path['most_entered']} "
                  f"(from {path['most_entry_sites']} distinct call sites)",
                  "    entries (call sites)  file, in the order first entered",
                  *(f"    {n:>7} ({path['entry_sites'][f]:>3})         {f}"
                    for f, n in path["entries"].items()), ""]
    if "read_path" in out:
        lines.append("The application functions a seat view is read through")
        for path, entries in out["read_path"].items():
            lines += [f"  {path}:", *(f"    {e}" for e in entries)]
        lines.append("")
    circles = out["import_circles"]
    lines.append(f"Import circles: {circles['count']}")
    lines += circle_lines(circles["circles"])
    lines += ["", f"Production functions over {LONG} lines: {out['functions']['over_80']}; "
              "the longest:"]
    lines += [f"  {Function(**f)}" for f in out["functions"]["longest"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--static", action="store_true",
                        help="only the import circles and the function lengths (no tracing)")
    args = parser.parse_args(argv)
    out = figures(trace=not args.static)
    print(json.dumps(out, indent=2) if args.json else table(out))


if __name__ == "__main__":
    main()
