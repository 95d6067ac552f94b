"""The audit finds forged streams: checks that can fail, on streams built by hand."""

from __future__ import annotations

from uuid import uuid4

from application.audit import audit_records
from application.stream import GENESIS, Recorded
from domain.events import CardDrawn, DiscardReshuffled, Event
from domain.layout import build_room, parse_layout
from tests.support import Counting, layout


def stream(*facts: Event) -> list[Recorded]:
    created = build_room(parse_layout(layout()), "r", Counting())
    room = uuid4()
    out: list[Recorded] = []
    prev = GENESIS
    for version, fact in enumerate((created, *facts), start=1):
        rec = Recorded(room, version, fact, prev, None if version == 1 else "emperor", None,
                       version, "2026-01-01T00:00:00+00:00")
        out.append(rec)
        prev = rec.hash()
    return out


def checks(records: list[Recorded]) -> dict[str, bool]:
    report, _ = audit_records("r", records)
    return {name: check["ok"] for name, check in report["checks"].items()}


def test_an_honest_stream_passes():
    records = stream()
    top = records[0].fact.state["deck"][0]  # type: ignore[attr-defined]
    assert all(checks(stream(CardDrawn(seat="emperor", card=top))).values())


def test_a_shuffle_that_is_not_a_permutation_is_caught():
    forged = DiscardReshuffled(order=["shield-1", "maula-pistol", "baliset", "karama-1"])
    result = checks(stream(forged))
    assert result["shuffles_are_permutations"] is False
    assert result["cards_conserved"] is False  # karama-1 is now in two zones


def test_a_draw_above_the_hand_limit_is_caught():
    records = stream()
    deck = records[0].fact.state["deck"]  # type: ignore[attr-defined]
    draws = [CardDrawn(seat="emperor", card=card) for card in deck[:4]]
    result = checks(stream(*draws))
    assert result["hands_within_limits"] is False  # emperor held 1 and drew 4


def test_an_event_that_does_not_fit_breaks_the_chain_check():
    result = checks(stream(CardDrawn(seat="emperor", card="not-on-top")))
    assert result["chain_intact"] is False
