"""The house's static figures (issue 25): no import circle, no function too long to read.

Measured as `python -m scripts.house_figures` measures them (docs/map.md, "How the house
is measured").
"""

from __future__ import annotations

from pathlib import Path

from scripts.house_figures import (
    Moment,
    circle_lines,
    functions,
    import_circles,
    imported,
    main_line_figures,
    packages_of,
)

LONGEST = 170  # lines: no production function this long or longer


def test_the_package_modules_import_no_circle() -> None:
    circles = import_circles()
    assert not circles, f"{len(circles)} import circle(s) among the package's modules:\n" + \
        "\n".join(circle_lines(circles))


def test_no_production_function_is_too_long_to_read() -> None:
    long = [f for f in functions() if f.lines >= LONGEST]
    assert not long, f"{len(long)} production function(s) of {LONGEST} lines or more:\n" + \
        "\n".join(f"  {f}" for f in long)


def test_the_measure_sees_every_import_that_runs(tmp_path: Path) -> None:
    source = tmp_path / "a.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from p import b\n"          # a submodule: p.b
        "from p.c import name\n"     # a name: p.c
        "from . import d\n"          # relative: p.d
        "if TYPE_CHECKING:\n"
        "    import p.e\n"           # never runs
        "def f():\n"
        "    import p.f\n")          # runs when called
    known = {m: source for m in ("p", "p.a", "p.b", "p.c", "p.d", "p.e", "p.f")}
    assert imported("p.a", source, known) == {"p.b", "p.c", "p.d", "p.f"}
    assert import_circles({"a": {"b"}, "b": {"a", "c"}, "c": {"c"}}) == [["a", "b"]]


def test_a_package_init_that_imports_one_of_its_modules_is_in_a_circle_with_it() -> None:
    """Importing `p.q.r` runs `p` and `p.q` first: each module imports its packages."""
    known = {m: Path(m) for m in ("p", "p.q", "p.q.r", "p.s")}
    assert packages_of("p.q.r", known) == {"p", "p.q"}
    graph = {m: packages_of(m, known) for m in known}
    graph["p.q"] |= {"p.q.r"}  # p/q/__init__.py re-exports from p/q/r.py
    assert import_circles(graph) == [["p.q", "p.q.r"]]


def test_a_file_is_entered_once_per_run_of_its_frames_on_a_stack() -> None:
    made = Moment("FeePaid", [("http.py", "post"), ("rooms.py", "execute"),
                              ("rooms.py", "_decide"), ("stream.py", "load"),
                              ("rooms.py", "_apply")])
    written = Moment("insert_events", [("http.py", "post"), ("rooms.py", "save")])
    main = main_line_figures([made, written])
    assert main["main_line"] == ["http.py", "rooms.py", "stream.py"]
    assert main["entries"] == {"http.py": 1, "rooms.py": 2, "stream.py": 1}
    assert (main["most_entered"], main["most_entered_file"], main["most_entered_at"]) == \
        (2, "rooms.py", "FeePaid")
