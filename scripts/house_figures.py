"""The figures of issues 25 and 34 ("the house"): how far a reader must follow the code,
and what adding an effect takes.

1. A Box command's path: one `POST /rooms/{room}/commands` with a `begin_search`, through
   FastAPI's TestClient over a RoomsApp on `memory://`, traced with `sys.setprofile` in
   every thread, the whole request (dependencies, route handler, the stored event, the
   response). Only frames whose file lies in the package's folders count. Two measures:
   - its main line: the chain of calls a reader follows from the route to the stored
     event. A moment of the main line is each construction of a domain event (a call to
     `__init__` of a subclass of `dune_ledger.domain.events.Event`: the decision emitting
     `FeePaid`, `SearchOpened`, ...) and each write of the stored events (the outermost
     call of an `insert_events` of eventsourcing's recorder or of a project recorder). At
     each moment its stack is taken: the project frames, from the outermost (the route
     handler) to the innermost; a thread the work was handed to continues the stack of
     the handing frames still running (the route handler awaiting the command run off
     the event loop). The main-line files: every file on those stacks, in the order first
     seen. An entry of a file on a stack: a maximal run of consecutive frames in it (a
     stack http -> rooms -> stream -> rooms enters rooms twice); a file's figure is its
     most entries on one moment's stack, the path's the largest of those.
   - the files touched: every project file any call enters, however short (a leaf helper
     called in a loop is entered as often as it is called).
2. A seat view pushed over the stream: the stream's refresh of one room, traced, after a
   command (the read models catch up, the room's views are read); and the application
   functions it and `GET /view` read a view through (one read path, or two).
3. Import circles among the `dune_ledger.*` modules (`ast`; imports under
   `if TYPE_CHECKING:` do not run, so they do not count), package `__init__` modules
   counted: importing `a.b.c` runs `a.b`'s `__init__` first, so each module imports the
   packages it is in.
4. The longest production functions (`ast`, nested functions on their own).
5. Adding an effect: the sample effect of `tests/effects/` (its module and its card) is
   added to a copy of the repository as whoever adds one would; the production files
   the copy then changes are counted, and `tests/effects/check_spice_glass.py` plays it
   there (listed, accepted, shown to its owner only, replayed, audited).
6. The production files that read the environment (`os.environ`, `os.getenv`; `ast`).

For the files touched: a call's caller is the innermost project frame below it in its
thread, library frames in between skipped (eventsourcing calling the mapper, pydantic a
validator). A call with none below it was handed over from another thread (the command
runs off the event loop): its caller is the file of the call recorded just before it. An
entry is a call into a file from another file (or from outside the project); a crossing,
a call between two project files; a layer change, a call between two top-level folders.
Generator and coroutine resumptions and comprehensions are not calls.

Run from the repository root: `python -m scripts.house_figures [--json] [--verbose]`
(`--verbose` prints the main line's stacks, the functions in each file; `--static` the
figures read from the files alone: 3, 4 and 6).
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import dis
import importlib
import json
import os
import pkgutil
import shutil
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from inspect import CO_ASYNC_GENERATOR, CO_COROUTINE, CO_GENERATOR
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from tempfile import TemporaryDirectory
from types import FrameType
from typing import Any

import eventsourcing

import dune_ledger
from scripts.package import folders, modules

PACKAGE = "dune_ledger"
LONG = 80  # lines: the issue counts the production functions over this
KEY_FILE_ENV = "DUNE_LEDGER_KEY_FILE"  # INTERFACE: the signing key's file
COMPREHENSIONS = {"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"}
RESUMABLE = CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR


# --- the package's files ------------------------------------------------------------------


def repository() -> Path:
    return Path(dune_ledger.__file__).resolve().parent.parent


@cache
def project_file(filename: str) -> str | None:
    """`filename` relative to the repository (`domain/rules.py`), or None outside the
    package."""
    path = Path(filename).resolve()
    if not any(path.is_relative_to(root.resolve()) for root in folders().values()):
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
class Moment:
    """A domain event made, or the stored events written, and the main line to it."""

    what: str  # the event's type, or `insert_events`
    stack: list[tuple[str, str]]  # project frames (file, function), outermost first


@dataclass
class Recording:
    calls: list[Call] = field(default_factory=list)
    moments: list[Moment] = field(default_factory=list)


@dataclass
class Trace:
    """Project calls, and the moments of the main line, recorded by a profile function
    while `on`."""

    on: bool = False
    now: Recording = field(default_factory=Recording)
    frames: set[FrameType] = field(default_factory=set)  # kept: ids are not reused
    finished: set[FrameType] = field(default_factory=set)
    # A thread's first project frame -> the logical stack that handed the work over.
    handed: dict[FrameType, list[FrameType]] = field(default_factory=dict)
    last: list[FrameType] = field(default_factory=list)  # the last call's logical stack
    last_thread: int | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def profile(self, frame: FrameType, event: str, _: Any) -> None:
        if not self.on:
            return
        if event == "return":
            self.returned(frame)
            return
        if event != "call":
            return
        self.moment(frame)
        code = frame.f_code
        callee = project_file(code.co_filename)
        if callee is None or code.co_name in COMPREHENSIONS:
            return
        with self.lock:
            if frame in self.frames:  # a generator or coroutine resumed
                return
            self.frames.add(frame)
            caller = enclosing(frame.f_back)
            if caller is None and self.now.calls:  # handed over from another thread
                caller = self.now.calls[-1].callee, self.now.calls[-1].function
                if self.last_thread != threading.get_ident():
                    self.handed[frame] = [f for f in self.last if f not in self.finished]
            file, function = caller or (None, None)
            self.now.calls.append(Call(file, function, callee, code.co_qualname))
            self.last, self.last_thread = self.stack(frame), threading.get_ident()

    def returned(self, frame: FrameType) -> None:
        """Mark a project frame finished (a coroutine or generator that only yields is
        not)."""
        if frame in self.frames and not suspended(frame):
            self.finished.add(frame)

    def moment(self, frame: FrameType) -> None:
        code = frame.f_code
        if code.co_name == "__init__" and code.co_argcount:
            made = frame.f_locals.get(code.co_varnames[0])
            if isinstance(made, event_base()) and not initialising(frame.f_back, made):
                self.now.moments.append(Moment(type(made).__name__, self.main_line(frame)))
        elif code.co_name == "insert_events" and writes(code.co_filename) and not any(
                f.f_code.co_name == "insert_events" for f in outward(frame.f_back)):
            self.now.moments.append(Moment(code.co_name, self.main_line(frame)))

    def stack(self, frame: FrameType | None) -> list[FrameType]:
        """The project frames from `frame` outward, across the threads that handed the
        work over, innermost first."""
        found = [f for f in outward(frame) if project_file(f.f_code.co_filename) is not None]
        if found and found[-1] in self.handed:
            found += self.handed[found[-1]]
        return found

    def main_line(self, frame: FrameType) -> list[tuple[str, str]]:
        with self.lock:
            frames = self.stack(frame)
        return [(project_file(f.f_code.co_filename) or "", f.f_code.co_qualname)
                for f in reversed(frames) if f.f_code.co_name not in COMPREHENSIONS]

    @contextmanager
    def recording(self) -> Iterator[Recording]:
        """The calls and moments meanwhile."""
        self.now, self.on = Recording(), True
        try:
            yield self.now
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


def outward(frame: FrameType | None) -> Iterator[FrameType]:
    while frame is not None:
        yield frame
        frame = frame.f_back


def enclosing(frame: FrameType | None) -> tuple[str, str] | None:
    """The innermost project frame's file and function."""
    for f in outward(frame):
        file = project_file(f.f_code.co_filename)
        if file is not None:
            return file, f.f_code.co_qualname
    return None


def suspended(frame: FrameType) -> bool:
    """Whether a frame returning is a coroutine or generator that yields (to be
    resumed), not one that ends."""
    code = frame.f_code
    return bool(code.co_flags & RESUMABLE) and \
        dis.opname[code.co_code[frame.f_lasti]] == "YIELD_VALUE"


@cache
def event_base() -> type:
    """The domain's base event class: every event the rules emit is made through it."""
    return importlib.import_module(f"{PACKAGE}.domain.events").Event


def initialising(frame: FrameType | None, made: object) -> bool:
    """Whether `frame` is an `__init__` of `made` already (a subclass's calling its
    base's): one event, made once."""
    return frame is not None and frame.f_code.co_name == "__init__" and \
        frame.f_code.co_argcount > 0 and \
        frame.f_locals.get(frame.f_code.co_varnames[0]) is made


@cache
def writes(filename: str) -> bool:
    """Whether an `insert_events` in `filename` is the store's write: the library's
    recorders' or a project recorder's."""
    library = Path(eventsourcing.__file__).resolve().parent
    return project_file(filename) is not None or Path(filename).resolve().is_relative_to(library)


def main_line_figures(moments: list[Moment]) -> dict[str, Any]:
    """The main-line files, and how often each is entered on one moment's stack."""
    files = list(dict.fromkeys(file for m in moments for file, _ in m.stack))
    most: dict[str, tuple[int, str]] = {}  # file -> (entries, at which moment)
    for m in moments:
        for file, n in Counter(file for file, _ in groupby(m.stack, key=itemgetter(0))).items():
            if n > most.get(file, (0, ""))[0]:
                most[file] = n, m.what
    top = max(files, key=lambda f: most[f][0], default=None)
    return {
        "files": len(files),
        "main_line": files,
        "most_entered": most[top][0] if top else 0,
        "most_entered_file": top,
        "most_entered_at": most[top][1] if top else None,
        "entries": {f: most[f][0] for f in files},
        "moments": [{"what": m.what, "stack": [list(frame) for frame in m.stack]}
                    for m in moments],
    }


def stack_lines(stack: list[list[str]]) -> list[str]:
    """A main-line stack, one line per entry into a file: its functions, in call order."""
    return [f"      {file}: {' > '.join(f for _, f in frames)}"
            for file, frames in ((file, list(frames))
                                 for file, frames in groupby(stack, key=itemgetter(0)))]


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
        "touched": files,
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


def traced_paths() -> dict[str, Recording]:
    """The project calls of a Box command, of the seat's `GET /view` after it, and of
    the stream's refresh of the room after it."""
    from fastapi.testclient import TestClient

    # Found by their names, wherever the serving and the storage live.
    create_app = find_attribute(f"{PACKAGE}.infrastructure", "create_app")
    open_rooms = find_attribute(f"{PACKAGE}.infrastructure", "open_rooms")

    box = json.loads((repository() / "examples" / "box.json").read_text())
    begin = {"type": "begin_search", "card": "nullentropy-box"}
    admin = {"Authorization": "Bearer house"}
    paths: dict[str, Recording] = {}
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
    """Each package module -> the package modules it imports (when run or called), and
    the packages it is in: importing `a.b.c` runs `a/__init__` and `a.b/__init__` first,
    so a package's `__init__` that imports one of its modules is in a circle with it."""
    known = modules()
    return {name: imported(name, path, known) | packages_of(name, known)
            for name, path in known.items()}


def packages_of(name: str, known: dict[str, Path]) -> set[str]:
    parts = name.split(".")
    return {p for i in range(1, len(parts)) if (p := ".".join(parts[:i])) in known}


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


# --- 5: adding an effect -------------------------------------------------------------------

SAMPLE = "tests/effects/spice_glass"  # the sample effect: its module (.py) and its card (.json)
SAMPLE_CHECK = "tests/effects/check_spice_glass.py"  # plays it where it was added


def copied_tree(into: Path) -> dict[str, str]:
    """A copy of the repository's files (tracked, and new ones not ignored) at
    `into/tree`, importable from there as the package, its folders linked into it as
    pyproject.toml's package-dir maps them: the environment that runs Python on the copy
    (`into/tree` as its working directory)."""
    root, tree = repository(), into / "tree"
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=root, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (root / name).is_file():  # not one deleted in the checkout, not yet in git
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / name, tree / name)
    for name, folder in folders().items():
        package = tree / Path(*name.split("."))
        if not package.exists():
            package.symlink_to(tree / folder.relative_to(root))
    return {**os.environ, "PYTHONPATH": str(tree)}


def add_sample_card(tree: Path) -> None:
    """The sample effect's card, in the catalog after the newest (domain/catalog.py)."""
    path = tree / "domain" / "cards.json"
    data = json.loads(path.read_text())
    card = json.loads((repository() / f"{SAMPLE}.json").read_text())
    card["since"] = max(c.get("since", 1) for c in data["cards"]) + 1
    data["cards"].append(card)
    path.write_text(json.dumps(data, indent=1) + "\n")


def add_sample_module(tree: Path) -> None:
    module = repository() / f"{SAMPLE}.py"
    shutil.copy2(module, tree / "domain" / module.name)


def changed_files(tree: Path) -> list[str]:
    """The files outside `tests/` that the copy at `tree` adds or changes."""
    root, out = repository(), []
    for path in sorted(tree.rglob("*")):
        name = path.relative_to(tree)
        if name.parts[0] == "tests" or "__pycache__" in name.parts or path.is_dir() \
                or path.is_symlink():  # the package's folders, linked in by `copied_tree`
            continue
        theirs = root / name
        if not (theirs.is_file() and theirs.read_bytes() == path.read_bytes()):
            out.append(name.as_posix())
    return out


def run_tests(tree: Path, env: dict[str, str], *tests: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *tests], cwd=tree, env=env, capture_output=True, text=True)


def sample_effect_figures() -> dict[str, Any]:
    """Add the sample effect to a copy of the repository, as whoever adds one would, and
    play it there: the production files that took, and whether it is listed, accepted,
    shown to its owner only, replayed, audited and typed in the OpenAPI (`SAMPLE_CHECK`)."""
    with TemporaryDirectory() as tmp:
        env = copied_tree(Path(tmp))
        tree = Path(tmp) / "tree"
        add_sample_card(tree)
        add_sample_module(tree)
        changed = changed_files(tree)
        played = run_tests(tree, env, SAMPLE_CHECK).returncode == 0
    return {"files_changed": len(changed), "changed": changed, "plays": played}


# --- 6: who reads the environment ----------------------------------------------------------

ENVIRON = ("environ", "environb", "getenv", "getenvb")


def environ_readers() -> list[str]:
    """The production files that read the environment: `os.environ`, `os.getenv` (or the
    same imported from `os`)."""
    out = []
    for path in modules().values():
        tree = ast.parse(path.read_text(), str(path))
        if any((isinstance(n, ast.Attribute) and n.attr in ENVIRON
                and isinstance(n.value, ast.Name) and n.value.id == "os")
               or (isinstance(n, ast.ImportFrom) and n.module == "os"
                   and any(a.name in ENVIRON for a in n.names)) for n in ast.walk(tree)):
            out.append(path.relative_to(repository()).as_posix())
    return sorted(out)


def figures(trace: bool = True) -> dict[str, Any]:
    longest = functions()
    out: dict[str, Any] = {}
    if trace:
        out["sample_effect"] = sample_effect_figures()
        paths = traced_paths()
        out["box_main_line"] = main_line_figures(paths["box_command"].moments)
        out["box_command"] = path_figures(paths["box_command"].calls)
        out["stream_view"] = path_figures(paths["stream_view"].calls)
        out["read_path"] = {
            "GET /view": application_entries(paths["seat_view"].calls),
            "stream": application_entries(paths["stream_view"].calls)}
    circles = import_circles()
    out["import_circles"] = {"count": len(circles), "circles": circles}
    out["functions"] = {"over_80": sum(f.lines > LONG for f in longest),
                        "longest": [vars(f) for f in longest[:5]]}
    out["environ_readers"] = environ_readers()
    return out


def table(out: dict[str, Any], verbose: bool = False) -> str:
    lines = []
    if "sample_effect" in out:
        sample = out["sample_effect"]
        lines += [f"Adding the sample effect ({SAMPLE}): production files changed "
                  f"{sample['files_changed']} ({', '.join(sample['changed'])}); listed, "
                  f"accepted, shown to its owner only, replayed, audited and typed: "
                  f"{'yes' if sample['plays'] else 'no'} ({SAMPLE_CHECK})", ""]
    if "box_main_line" in out:
        main = out["box_main_line"]
        lines += ["A Box command's main line (the project frames on the stack at each domain "
                  "event made and at the store's write)",
                  f"  main-line files {main['files']}, most entries of one file on one "
                  f"stack {main['most_entered']} ({main['most_entered_file']}, at "
                  f"{main['most_entered_at']}); moments: "
                  f"{', '.join(m['what'] for m in main['moments'])}",
                  "    entries (most on one stack)  file, in the order first seen",
                  *(f"    {n:>7}                      {f}" for f, n in main["entries"].items())]
        if verbose:
            for m in main["moments"]:
                lines += [f"    at {m['what']}:", *stack_lines(m["stack"])]
        lines.append("")
    for key, title in (("box_command", "A Box command (POST .../commands, begin_search): "
                        "every file touched"),
                       ("stream_view", "A seat view pushed over the stream (its refresh)")):
        if key not in out:
            continue
        path = out[key]
        lines += [title,
                  f"  files touched {path['files']}, functions {path['functions']}, "
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
    readers = out["environ_readers"]
    lines += ["", f"Production files that read the environment: {len(readers)}",
              *(f"  {r}" for r in readers)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--static", action="store_true",
                        help="only the figures read from the files: import circles, function "
                             "lengths, environment readers (nothing run)")
    parser.add_argument("--verbose", action="store_true",
                        help="print the main line's stacks, the functions in each file")
    args = parser.parse_args(argv)
    out = figures(trace=not args.static)
    print(json.dumps(out, indent=2) if args.json else table(out, args.verbose))


if __name__ == "__main__":
    main()
