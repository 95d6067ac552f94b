"""What the Bidding round (RULES 10) costs, against a `draw` and a Box search in one run.

    .venv/bin/python -m scripts.bench_bidding [--samples N] [--rounds R] [--db URL]

Two figures, each a ratio against a baseline measured in the same process, in turn:

- a bid or a pass (`RoomsApp.execute`, the room kept in memory as after its last
  command) against a `draw` command in a room of the same seats: the median of
  `samples` of each, interleaved (goal: within 1.2);
- a whole six-seat round (examples/bidding.json: the opening, Richese's answer, the
  Ixians' choice, six cards bid, passed and sold, their income and bonus windows)
  applied, audited (`application.audit.audit_room`) and projected (the read models
  caught up), per command, against a Box search (begin and select) in the same store
  applied, audited and projected, per command.

Times are this process's CPU time (`time.process_time`): the machine is shared, and a
SQLite commit's wait for the disk is not the rules' cost. Ratios are the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dune_ledger.application.audit import audit_room
from dune_ledger.application.rooms import RoomsApp
from dune_ledger.domain.game import OPERATOR
from dune_ledger.infrastructure.demo import BOX_LAYOUT, example
from dune_ledger.infrastructure.storage import open_rooms

ORDER = ["emperor", "atreides", "harkonnen", "ixians", "richese", "bene_gesserit"]


def ok(app: RoomsApp, room: str, seat: str, command: dict[str, Any]) -> None:
    result = app.execute(room, seat, command)
    if not result["ok"]:
        raise SystemExit(f"{seat} {command}: refused: {result['error']}")


def cpu(fn: Callable[[], Any]) -> float:
    started = time.process_time()
    fn()
    return time.process_time() - started


def rich(raw: dict[str, Any]) -> dict[str, Any]:
    """The layout with every seat rich enough to bid for a long time."""
    return {**raw, "bank": 100_000,
            "seats": [{**s, "spice": 10_000} for s in raw["seats"]]}


def bids_against_draws(app: RoomsApp, samples: int) -> dict[str, Any]:
    """A bid or a pass against a draw, interleaved, each in its own room."""
    raw = rich(example("bidding"))
    empty = {**raw, "seats": [{**s, "hand": []} for s in raw["seats"]]}
    bidding = app.create_room(raw)["room"]
    ok(app, bidding, OPERATOR, {"type": "open_bidding", "order": ORDER})
    ok(app, bidding, "richese", {"type": "richese_sale", "when": "none"})
    dealt = app.seat_view(bidding, "ixians")["bidding"]["dealt"]
    ok(app, bidding, "ixians", {"type": "ix_set_aside", "card": dealt[0]["id"], "where": "top"})
    draws: list[float] = []
    bids: list[float] = []
    drawing = app.create_room(empty)["room"]
    left = 0
    amount = 0
    for i in range(samples):
        if left == 0:  # every hand full: a fresh room of empty hands
            drawing, left = app.create_room(empty)["room"], 6 * 4
            app.execute(drawing, "emperor", {"type": "draw"})  # the late shuffle, unmeasured
            left -= 1
        seat = ORDER[(6 * 4 - left) % 6]
        left -= 1
        app.public_view(drawing)  # read between commands, as for the bids: alike
        draws.append(cpu(lambda s=seat, r=drawing: ok(app, r, s, {"type": "draw"})))
        turn = app.public_view(bidding)["bidding"]["up"]["turn"]
        if i % 2 == 0:
            amount += 1
            command: dict[str, Any] = {"type": "bid", "amount": amount}
        else:
            command = {"type": "pass_bid"}
        bids.append(cpu(lambda t=turn, c=command: ok(app, bidding, t, c)))
    draw_ms, bid_ms = statistics.median(draws) * 1e3, statistics.median(bids) * 1e3
    return {"samples": samples, "draw_ms": draw_ms, "bid_or_pass_ms": bid_ms,
            "ratio": bid_ms / draw_ms}


def play_round(app: RoomsApp, room: str) -> int:
    """A whole round: each card's starter bids 1, the others pass, every window passes."""
    commands = 0

    def send(seat: str, command: dict[str, Any]) -> None:
        nonlocal commands
        ok(app, room, seat, command)
        commands += 1

    send(OPERATOR, {"type": "open_bidding", "order": ORDER})
    send("richese", {"type": "richese_sale", "when": "none"})
    dealt = app.seat_view(room, "ixians")["bidding"]["dealt"]
    send("ixians", {"type": "ix_set_aside", "card": dealt[0]["id"], "where": "top"})
    while (view := app.public_view(room))["bidding"] is not None:
        if view["response"] is not None:
            send(view["response"]["waiting"][0],
                 {"type": "respond", "event": view["response"]["event"], "action": "pass"})
        elif view["decision"] is not None:
            send(view["decision"]["player"], {"type": "ix_replace",
                                              "event": view["decision"]["event"],
                                              "accept": False})
        elif view["bidding"]["up"]["high"] is None:
            send(view["bidding"]["up"]["turn"], {"type": "bid", "amount": 1})
        else:
            send(view["bidding"]["up"]["turn"], {"type": "pass_bid"})
    return commands


def play_search(app: RoomsApp, room: str) -> int:
    ok(app, room, "richese", {"type": "begin_search", "card": "nullentropy-box"})
    search = app.seat_view(room, "richese")["nullentropy"]["search"]
    ok(app, room, "richese", {"type": "select_card", "search": search["event"],
                              "card": search["cards"][0]["id"]})
    return 2


def whole(app: RoomsApp, layout: dict[str, Any], play: Callable[[RoomsApp, str], int]
          ) -> tuple[float, int]:
    """Applied, audited and projected: CPU seconds and the commands sent."""
    room = app.create_room(layout)["room"]
    started = time.process_time()
    commands = play(app, room)
    report = audit_room(app, room)
    if not report["ok"]:
        raise SystemExit(f"the room does not audit clean: {report['checks']}")
    if app.read_models is not None:
        app.read_models.catch_up()
    return time.process_time() - started, commands


def round_against_search(app: RoomsApp, rounds: int) -> dict[str, Any]:
    per_round: list[float] = []
    per_search: list[float] = []
    count = 0
    for _ in range(rounds):  # in turn: noise falls on both alike
        seconds, count = whole(app, rich(example("bidding")), play_round)
        per_round.append(seconds / count)
        seconds, pair = whole(app, BOX_LAYOUT, play_search)
        per_search.append(seconds / pair)
    round_ms, search_ms = statistics.median(per_round) * 1e3, statistics.median(per_search) * 1e3
    return {"rounds": rounds, "commands_per_round": count, "round_ms_per_command": round_ms,
            "search_ms_per_command": search_ms, "ratio": round_ms / search_ms}


def bench_bidding(url: str, samples: int, rounds: int) -> dict[str, Any]:
    with open_rooms(url) as app:
        return {"bid_vs_draw": bids_against_draws(app, samples),
                "round_vs_search": round_against_search(app, rounds)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--samples", type=int, default=200, help="bids and draws, each")
    p.add_argument("--rounds", type=int, default=5, help="whole rounds and Box searches")
    p.add_argument("--db", help="a store URL (default: SQLite in a temporary directory)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dl-bench-bidding-") as tmp:
        url = args.db or f"sqlite:///{Path(tmp) / 'bidding.db'}"
        print(json.dumps(bench_bidding(url, args.samples, args.rounds), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
