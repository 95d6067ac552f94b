"""The facts a seeded room's plays append, as JSON text: run by tests/test_fairness.py at
this code and, once, at the code before fair dealing (a493917: the rules of issue 24, not yet
fair dealing), which wrote tests/fairness/seeded-before.json. Stdlib and the project only,
so it runs at both: `python -m tests.fairness.seeded_facts` from the repository root."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

MOMENT = datetime(2026, 1, 1, tzinfo=UTC)  # the clock of every play: deadlines repeat


class Fixed(datetime):
    @classmethod
    def now(cls, tz: Any = None) -> Any:
        return MOMENT


def played() -> list[list[Any]]:
    from dune_ledger.infrastructure.storage import open_rooms
    from scripts import make_golden

    make_golden.datetime = Fixed  # its window_deadline play reads the clock
    out = []
    with open_rooms("memory://") as app:
        app.clock = lambda: MOMENT
        # The cards of those plays: the first catalog's, whatever a later one adds (at the
        # code before catalogs the attribute is not read).
        app.catalog = 1
        for play in make_golden.PLAYS:
            if play.__name__ == "committed_room":
                continue  # fair dealing's own play: not seeded
            room = play(app)
            facts = []
            for rec in app.records(app.load(room).id):
                text = json.dumps(rec.fact.model_dump(mode="json"), sort_keys=True)
                facts.append([rec.type, text.replace(str(rec.originator_id), "ROOM")])
            out.append([play.__name__, facts])
    return out


if __name__ == "__main__":
    print(json.dumps(played(), indent=1))
