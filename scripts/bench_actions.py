"""What `actions` in every seat's view costs the projector and a command, in one run.

    .venv/bin/python -m scripts.bench_actions [--db sqlite|PG_ADMIN_URL] [--commands N]
        [--rounds R]

Plays the same commands (draws, discards, a Box search each tenth command) in a
fresh room twice per round, once with `actions` computed and once with
`domain.views.actions` replaced by an empty list, alternating, and reports the
median over rounds of:

- the render: every seat's view and the public view of one state, as the
  SeatViews projector stores them after each append (`projectors.render`);
- a command: `RoomsApp.execute` plus catching the read models up on it.

The ratios (with / without) are the figures; absolute times depend on the machine.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

from dune_ledger.domain import views
from dune_ledger.infrastructure.storage import open_rooms
from dune_ledger.projections.projectors import render
from scripts.throwaway import throwaway_database

BOX = "nullentropy-box"
LAYOUT: dict[str, Any] = {
    "expansions": ["choam_richese"], "turn": 2, "phase": 6, "seed": 3,
    "seats": [
        {"faction": "richese", "spice": 1000, "hand": [BOX, "crysknife"]},
        {"faction": "emperor", "spice": 10, "hand": ["karama-1"]},
        {"faction": "harkonnen", "spice": 10, "hand": ["shield-2"]},
        {"faction": "atreides", "spice": 10, "hand": ["truthtrance-1"]},
        {"faction": "guild", "spice": 10, "hand": []},
    ],
    "discard": ["shield-1", "maula-pistol", "baliset"],
}


def play(url: str, commands: int) -> tuple[float, float]:
    """Seconds per command (execute and catch-up) and per render, for one room."""
    with open_rooms(url) as app:
        room = app.create_room(LAYOUT)["room"]
        assert app.read_models is not None
        app.read_models.catch_up()
        spent, renders = 0.0, []
        for i in range(commands):
            state = app.load(room).state
            seat = ("emperor", "harkonnen", "atreides", "guild")[i % 4]
            hand = state.seat(seat).hand
            if i % 10 == 9 and state.search is None and BOX in state.seat("richese").hand:
                seat, cmd = "richese", {"type": "begin_search", "card": BOX}
            elif state.search is not None:
                seat = "richese"
                cmd = {"type": "select_card", "search": state.search.event,
                       "card": next(c for c in state.search.discard if c != BOX)}
            elif len(hand) >= 3 or (hand and i % 2):
                cmd = {"type": "discard", "card": hand[-1]}
            else:
                cmd = {"type": "draw"}
            start = time.perf_counter()
            app.execute(room, seat, cmd)
            app.read_models.catch_up()
            spent += time.perf_counter() - start
            state = app.load(room).state
            start = time.perf_counter()
            render(state)
            renders.append(time.perf_counter() - start)
        return spent / commands, statistics.median(renders)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="'sqlite' (a fresh file per run, the default) or a "
                        "PostgreSQL admin URL (a throwaway database per run)")
    parser.add_argument("--commands", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    real = views.actions
    results: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for on in (True, False) if r % 2 == 0 else (False, True):
                views.actions = real if on else (lambda state, faction: [])  # type: ignore
                if args.db and args.db.startswith("postgresql"):
                    with throwaway_database(args.db, "dl_bench") as url:
                        results[on].append(play(url, args.commands))
                else:
                    url = f"sqlite:///{tmp}/bench-{r}-{int(on)}.db"
                    results[on].append(play(url, args.commands))
    views.actions = real  # type: ignore[assignment]
    for label, index in (("a command (execute + catch-up)", 0), ("render (every view)", 1)):
        on = statistics.median(x[index] for x in results[True])
        off = statistics.median(x[index] for x in results[False])
        print(f"{label}: {on * 1e3:.3f} ms with actions, {off * 1e3:.3f} ms without, "
              f"ratio {on / off:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
