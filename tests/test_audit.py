"""The audit finds forged streams: checks that can fail, on streams built by hand."""

from __future__ import annotations

import gc
from uuid import uuid4

from dune_ledger.application.audit import audit_records
from dune_ledger.application.stream import GENESIS, Recorded, chain_hash
from dune_ledger.domain.custody import CardDrawn, DiscardReshuffled
from dune_ledger.domain.events import Event
from dune_ledger.domain.layout import build_room, parse_layout
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


def test_a_part_started_from_a_state_checks_as_the_whole_stream_does():
    """The audit of the events after a known state (a part, application/audit.Start)
    checks them as the replay from the first event does: limits, cards, chain."""
    from dune_ledger.application.audit import Start
    from dune_ledger.domain.rules import apply, initial_state

    deck = stream()[0].fact.state["deck"]  # type: ignore[attr-defined]
    records = stream(*(CardDrawn(seat="emperor", card=card) for card in deck[:4]))
    whole, _ = audit_records("r", records)

    def start(split: int, head: str) -> Start:  # the replay changes its state: one each
        state = initial_state(records[0].fact)  # type: ignore[arg-type]
        for rec in records[1:split]:
            apply(state, rec.fact)
        return Start(records[0].fact, state, split, head)  # type: ignore[arg-type]

    for split in (1, 2):
        part, _ = audit_records("r", records[split:],
                                start=start(split, records[split - 1].hash()))
        assert part["checks"]["hands_within_limits"]["ok"] is False
        assert part["checks"]["hands_within_limits"] == whole["checks"]["hands_within_limits"]
        assert part["checks"]["chain_intact"]["ok"] is True
        wrong, _ = audit_records("r", records[split:], start=start(split, GENESIS))
        assert wrong["checks"]["chain_intact"]["details"] == [
            f"version {split + 1}: it does not carry its predecessor's hash"]


def test_an_event_that_does_not_fit_breaks_the_chain_check():
    result = checks(stream(CardDrawn(seat="emperor", card="not-on-top")))
    assert result["chain_intact"] is False


def test_a_card_duplicated_at_a_middle_version_is_caught_there():
    records = stream()
    deck = records[0].fact.state["deck"]  # type: ignore[attr-defined]
    # Version 3 reshuffles the pile plus a card the emperor holds: karama-1 is then in
    # the deck and in a hand, and the cards of the deck are lost.
    forged = DiscardReshuffled(order=["shield-1", "maula-pistol", "baliset", "karama-1"])
    records = stream(CardDrawn(seat="emperor", card=deck[0]), forged,
                     CardDrawn(seat="harkonnen", card="shield-1"))
    report, _ = audit_records("r", records)
    details = report["checks"]["cards_conserved"]["details"]
    assert report["checks"]["cards_conserved"]["ok"] is False
    assert not any(d.startswith("version 2:") for d in details)
    assert details[0].startswith("version 3: duplicated or foreign ['karama-1']")
    assert any(d.startswith("version 4:") for d in details)  # every event is checked


def test_a_reshuffle_over_a_full_deck_loses_cards_and_only_conservation_sees_it():
    records = stream()
    state = records[0].fact.state  # type: ignore[attr-defined]
    # A permutation of the pile (so the shuffle check passes), but the deck was not empty.
    result = checks(stream(DiscardReshuffled(order=list(reversed(state["discard"])))))
    assert result["shuffles_are_permutations"] is True
    assert result["cards_conserved"] is False


def test_a_stored_byte_edited_at_a_middle_version_breaks_the_chain_after_it():
    deck = stream()[0].fact.state["deck"]  # type: ignore[attr-defined]
    records = stream(*(CardDrawn(seat="emperor", card=card) for card in deck[:3]))
    assert records[2].hash() == chain_hash(str(records[2].originator_id), 3, "CardDrawn",
                                           records[2].body())
    records[2].stored = records[2].body().replace(b"2026", b"2027")
    report, _ = audit_records("r", records)
    assert report["checks"]["chain_intact"]["details"] == [
        "version 4: it does not carry its predecessor's hash"]


def test_an_event_of_another_room_spliced_in_breaks_the_chain():
    deck = stream()[0].fact.state["deck"]  # type: ignore[attr-defined]
    records = stream(*(CardDrawn(seat="emperor", card=card) for card in deck[:3]))
    spliced = records[2]
    records[2] = Recorded(uuid4(), spliced.originator_version, spliced.fact, spliced.prev_hash,
                          spliced.seat, spliced.command_id, spliced.append, spliced.at)
    report, _ = audit_records("r", records)
    assert report["checks"]["chain_intact"]["details"] == [
        "version 4: it does not carry its predecessor's hash"]


def test_the_audit_leaves_garbage_collection_as_it_found_it():
    from dune_ledger.application.audit import audit_room
    from dune_ledger.infrastructure.storage import open_rooms

    with open_rooms("memory://") as app:
        room = app.create_room(layout())["room"]
        assert gc.isenabled()
        assert audit_room(app, room)["ok"]
        assert gc.isenabled()
        gc.disable()
        try:
            assert audit_room(app, room)["ok"]
            assert not gc.isenabled()
        finally:
            gc.enable()
