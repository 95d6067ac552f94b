"""Semuta Drug (RULES 3.6): a window after a single-seat discard, bound to its cards."""

from __future__ import annotations

import pytest

from dune_ledger.application.audit import audit_room
from dune_ledger.domain.actions import actions
from dune_ledger.domain.nullentropy import candidates
from dune_ledger.domain.state import Commitment
from dune_ledger.domain.views import public_view, seat_view
from dune_ledger.infrastructure.storage import open_rooms
from tests.rules_support import (
    BOX,
    close_search,
    code,
    layout,
    open_search,
    run,
    snapshot,
    state_of,
    types,
)

SEMUTA = "semuta-drug"


def with_semuta(**changes):
    """Emperor holds Semuta Drug; the others do not."""
    raw = layout(**changes)
    raw["seats"][1]["hand"] = ["karama-1", SEMUTA]
    return raw


def window(state):
    w = state.control.response
    assert w is not None and w.kind == "semuta"
    return w


def semuta(state, action, card=None, actor="emperor", event=None):
    return run(state, actor, {"type": "semuta", "event": event or window(state).event,
                              "action": action, "card": card})


def after_box(card="maula-pistol", **changes):
    searching = open_search(state_of(with_semuta(**changes)))
    return close_search(searching, card)


def test_the_box_discard_opens_a_window_bound_to_the_box_and_that_event():
    tx = after_box()
    assert types(tx) == ["CardRetrieved", "PileShuffled", "BoxDiscarded", "SearchClosed",
                         "SemutaReactionQueued", "SemutaWindowOpened"]
    state = tx.state
    w = window(state)
    box_event = f"e{state.version - 3}"  # BoxDiscarded, then SearchClosed and the window
    assert w.event == box_event and w.data["cards"] == [BOX]
    # RULES 3.6: every other seat with a card is asked; only the holder may take.
    assert seat_view(state, "emperor")["semuta"]["eligible"] is True
    assert seat_view(state, "emperor")["semuta"]["can_take"] is True
    assert seat_view(state, "harkonnen")["semuta"]["eligible"] is True
    assert seat_view(state, "harkonnen")["semuta"]["can_take"] is False
    assert seat_view(state, "richese")["semuta"]["eligible"] is False  # the discarder
    assert public_view(state)["response"]["waiting"] == ["emperor", "harkonnen"]
    public = public_view(state)
    assert public["semuta"] == {"event": box_event, "discarder": "richese",
                                "cards": [{"id": BOX, "name": "Nullentropy Box",
                                           "category": "special"}], "queued": 0}
    # Nothing public names the holder: no passes, no eligible list.
    assert public["response"]["passes"] == [] and "emperor" not in str(public["semuta"])


def test_taking_the_box_moves_it_and_discards_semuta():
    state = after_box().state
    hand_size = len(state.seat("emperor").hand)
    tx = semuta(state, "take", BOX)
    assert types(tx) == ["SemutaTaken", "CardDiscarded"]
    after = tx.state
    assert BOX in after.seat("emperor").hand and SEMUTA not in after.seat("emperor").hand
    assert len(after.seat("emperor").hand) == hand_size
    assert after.discard[-1] == SEMUTA and BOX not in after.discard
    assert after.control.response is None and after.semuta is None
    assert tx.events[0].public() == {"event": window(state).event, "seat": "emperor",
                                     "card": BOX}
    # The taker may now search with the Box it took.
    again = run(after, "emperor", {"type": "begin_search", "card": BOX})
    assert types(again)[:2] == ["FeePaid", "SearchOpened"]


def test_take_without_a_card_takes_the_only_one():
    tx = semuta(after_box().state, "take")
    assert BOX in tx.state.seat("emperor").hand


def test_the_window_closes_when_every_seat_asked_has_passed_and_a_pass_is_public():
    state = after_box().state
    first = semuta(state, "pass")
    assert types(first) == ["SemutaPassed"]
    # Everyone is asked, so a pass names nobody's cards.
    assert first.events[0].public() == {"event": window(state).event, "seat": "emperor"}
    tx = semuta(first.state, "pass", actor="harkonnen")
    assert types(tx) == ["SemutaPassed", "SemutaWindowClosed"]
    assert tx.state.control.response is None
    assert tx.state.discard[-1] == BOX and SEMUTA in tx.state.seat("emperor").hand


def test_semuta_never_claims_the_retrieved_card_nor_reruns_the_search():
    tx = after_box("maula-pistol")
    state = tx.state
    assert code(state, "emperor", {"type": "semuta", "event": window(state).event,
                                   "action": "take", "card": "maula-pistol"}) == "not_eligible"
    assert sum(e.type == "PileShuffled" for e in tx.events) == 1
    taken = semuta(state, "take", BOX).state
    assert taken.search is None and "maula-pistol" in taken.seat("richese").hand


def test_an_ordinary_discard_opens_a_window_whoever_holds_semuta():
    state = state_of(with_semuta())
    tx = run(state, "harkonnen", {"type": "discard", "card": "chaumas"})
    assert types(tx) == ["CardDiscarded", "SemutaReactionQueued", "SemutaWindowOpened"]
    assert window(tx.state).event == f"e{state.version + 1}"
    assert window(tx.state).data["cards"] == ["chaumas"]
    taken = semuta(tx.state, "take", "chaumas").state
    assert "chaumas" in taken.seat("emperor").hand
    # The holder's own discard opens one too (RULES 3.6: whether a window opens never
    # tells the discarder who holds Semuta), where nobody can take.
    own = run(state, "emperor", {"type": "discard", "card": "karama-1"})
    assert types(own) == ["CardDiscarded", "SemutaReactionQueued", "SemutaWindowOpened"]
    assert public_view(own.state)["response"]["waiting"] == ["richese", "harkonnen"]
    assert not any(seat_view(own.state, f)["semuta"]["can_take"] for f in ("richese",
                                                                          "harkonnen"))


def test_a_committed_semuta_in_a_hand_still_opens_a_window():
    state = state_of(with_semuta(commitments=[{"card": SEMUTA, "kind": "battle_plan"}]))
    tx = run(state, "harkonnen", {"type": "discard", "card": "chaumas"})
    assert types(tx)[-1] == "SemutaWindowOpened"
    assert not seat_view(tx.state, "emperor")["semuta"]["can_take"]


def test_no_window_while_semuta_is_publicly_out_of_reach():
    in_cache = state_of(layout())  # the cache holds every cache card not placed
    assert SEMUTA in in_cache.cache
    on_top = state_of(layout(discard=["shield-1", "maula-pistol", "baliset", SEMUTA]))
    removed = state_of(layout(removed=[SEMUTA]))
    for state in (in_cache, on_top, removed):
        assert types(run(state, "harkonnen", {"type": "discard", "card": "chaumas"})) == \
            ["CardDiscarded"]


def test_semuta_below_the_top_of_a_layout_pile_is_unseen():
    """Issue 24.6 (RULES 7): the initial pile below its top is unseen, so the window
    opens exactly as if Semuta were in the deck, and the public record is the same."""
    cache = [c for c in state_of(layout()).cache if c != SEMUTA]
    in_pile = layout(discard=["shield-1", SEMUTA, "maula-pistol", "baliset"],
                     richese_cache=cache)
    in_deck = layout(discard=["shield-1", "kulon", "maula-pistol", "baliset"],
                     richese_cache=cache)
    assert SEMUTA in state_of(in_deck).deck
    seen = []
    for raw in (in_pile, in_deck):
        tx = run(state_of(raw), "harkonnen", {"type": "discard", "card": "chaumas"})
        seen.append(([(e.type, e.public()) for e in tx.events], public_view(tx.state),
                     seat_view(tx.state, "richese")))
    assert seen[0][0][-1][0] == "SemutaWindowOpened"
    assert seen[0] == seen[1]


@pytest.mark.parametrize(("why", "actor", "command", "expected"), [
    ("stale event", "emperor", {"event": "e99", "action": "pass"}, "stale_event"),
    ("no semuta", "harkonnen", {"action": "take", "card": BOX}, "not_eligible"),
    ("the discarder", "richese", {"action": "pass"}, "not_eligible"),
    ("card of another discard", "emperor", {"action": "take", "card": "shield-1"},
     "not_eligible"),
    ("pass naming a card", "emperor", {"action": "pass", "card": BOX}, "invalid_command"),
])
def test_every_semuta_refusal_changes_nothing(why, actor, command, expected):
    state = after_box().state
    full = {"type": "semuta", "event": window(state).event, **command}
    assert code(state, actor, full) == expected


def test_no_window_open_is_stale():
    state = state_of(with_semuta())
    assert code(state, "emperor", {"type": "semuta", "event": "e1", "action": "pass"}) == \
        "stale_event"


def test_a_committed_semuta_cannot_react():
    state = after_box().state
    state.commitments.append(Commitment(card=SEMUTA, kind="prescience"))
    assert code(state, "emperor", {"type": "semuta", "event": window(state).event,
                                   "action": "take", "card": BOX}) == "not_eligible"


def test_a_second_discard_waits_for_the_open_window():
    state = state_of(with_semuta())
    first = run(state, "harkonnen", {"type": "discard", "card": "chaumas"}).state
    tx = run(first, "richese", {"type": "discard", "card": "crysknife"})
    assert types(tx) == ["CardDiscarded", "SemutaReactionQueued"]
    second = tx.state
    assert window(second).data["cards"] == ["chaumas"]
    assert public_view(second)["semuta"]["queued"] == 1
    queued_event = second.semuta.queue[0].event
    assert code(second, "emperor", {"type": "semuta", "event": queued_event,
                                    "action": "pass"}) == "stale_event"
    second = semuta(second, "pass", actor="richese").state
    passed = semuta(second, "pass")
    assert types(passed) == ["SemutaPassed", "SemutaWindowClosed", "SemutaWindowOpened"]
    assert window(passed.state).event == queued_event
    taken = semuta(passed.state, "take", "crysknife").state
    assert "crysknife" in taken.seat("emperor").hand and taken.semuta is None


def test_a_window_waits_behind_another_kind_of_window():
    other = {"kind": "test_other", "event": "e1", "turn": 2, "phase": 6, "passes": [],
             "data": {}}
    state = state_of(with_semuta(control={"response": other}))
    tx = run(state, "harkonnen", {"type": "discard", "card": "chaumas"})
    assert types(tx) == ["CardDiscarded", "SemutaReactionQueued"]
    assert tx.state.control.response.kind == "test_other"
    assert len(tx.state.semuta.queue) == 1


def test_a_search_suspends_the_window_and_restores_it_exactly():
    state = run(state_of(with_semuta()), "harkonnen",
                {"type": "discard", "card": "chaumas"}).state
    before = window(state).model_dump()
    searching = open_search(state)
    assert searching.control.response is None
    assert code(searching, "emperor", {"type": "semuta", "event": before["event"],
                                       "action": "take", "card": "chaumas"}) == "locked"
    tx = close_search(searching, "shield-1")
    after = tx.state
    assert window(after).model_dump() == before  # restored, still open
    assert [w.data["cards"] for w in after.semuta.queue] == [[BOX]]  # the Box waits
    passed = semuta(semuta(after, "pass").state, "pass", actor="richese").state
    assert window(passed).data["cards"] == [BOX]
    assert BOX in semuta(passed, "take", BOX).state.seat("emperor").hand


def test_the_cards_of_a_suspended_window_are_not_candidates():
    """Issue 24.4: the holder's take never depends on what the search took (RULES 3.6)."""
    state = run(state_of(with_semuta()), "harkonnen",
                {"type": "discard", "card": "chaumas"}).state
    searching = open_search(state)
    assert "chaumas" in searching.discard
    assert "chaumas" not in candidates(searching, "richese")
    assert code(searching, "richese", {"type": "select_card", "search": searching.search.event,
                                       "card": "chaumas"}) == "not_eligible"
    # Whatever the Box takes, the holder is offered the same take and it is accepted.
    takes = []
    for pick in candidates(searching, "richese"):
        restored = close_search(searching, pick).state
        offered = [a for a in actions(restored, "emperor") if a["type"] == "semuta"]
        takes.append(offered)
        taken = semuta(restored, "take", "chaumas").state
        assert "chaumas" in taken.seat("emperor").hand
    assert len(takes) > 1 and all(t == takes[0] for t in takes)
    assert {"type": "semuta", "event": window(state).event, "action": "take",
            "card": "chaumas"} in takes[0]


def test_a_pile_of_only_bound_cards_has_nothing_eligible():
    # The window is public, so refusing for it tells nothing (RULES 3.1 step 5).
    raw = with_semuta(discard=[])
    state = run(state_of(raw), "harkonnen", {"type": "discard", "card": "chaumas"}).state
    assert state.discard == ["chaumas"]
    assert code(state, "richese", {"type": "begin_search", "card": BOX}) == "no_eligible_card"
    assert seat_view(state, "richese")["nullentropy"]["blocked"] == "no_eligible_card"
    # One eligible card besides the bound one: selected in the same command.
    state = run(state_of(with_semuta(discard=["baliset"])), "harkonnen",
                {"type": "discard", "card": "chaumas"}).state
    tx = run(state, "richese", {"type": "begin_search", "card": BOX})
    assert "CardRetrieved" in types(tx) and "baliset" in tx.state.seat("richese").hand
    assert "chaumas" in tx.state.discard


def test_a_queued_window_binds_its_cards_too():
    state = state_of(with_semuta())
    first = run(state, "harkonnen", {"type": "discard", "card": "chaumas"}).state
    second = run(first, "richese", {"type": "discard", "card": "crysknife"}).state
    assert second.semuta.queue[0].data["cards"] == ["crysknife"]
    searching = open_search(second)
    assert not {"chaumas", "crysknife"} & set(candidates(searching, "richese"))


def test_the_truthtrance_discard_waits_for_the_answer():
    raw = with_semuta()
    raw["seats"][2]["hand"] = ["truthtrance-1"]
    state = run(state_of(raw), "harkonnen", {"type": "ask_truthtrance", "card": "truthtrance-1",
                                             "target": "richese", "question": "?"}).state
    event = window(state).event
    assert code(state, "emperor", {"type": "semuta", "event": event, "action": "take",
                                   "card": "truthtrance-1"}) == "truthtrance_pending"
    state = run(state, "richese", {"type": "answer_truthtrance",
                                   "event": state.truthtrance.event, "answer": "no"}).state
    assert "truthtrance-1" in semuta(state, "take").state.seat("emperor").hand


def test_a_refused_semuta_command_draws_nothing_and_changes_nothing():
    state = after_box().state
    before = snapshot(state)
    code(state, "harkonnen", {"type": "semuta", "event": window(state).event, "action": "take"})
    assert snapshot(state) == before


def test_semuta_after_a_box_search_replays_and_audits(tmp_path):
    raw = with_semuta()
    with open_rooms(f"sqlite:///{tmp_path / 'rooms.db'}") as rooms:
        room = rooms.create_room(raw)["room"]
        opened = rooms.execute(room, "richese", {"type": "begin_search", "card": BOX})
        assert opened["ok"], opened
        search = rooms.load(room).state.search.event
        done = rooms.execute(room, "richese", {"type": "select_card", "search": search,
                                               "card": "maula-pistol"})
        assert done["ok"], done
        event = rooms.seat_view(room, "emperor")["semuta"]["event"]
        taken = rooms.execute(room, "emperor", {"type": "semuta", "event": event,
                                                "action": "take", "card": BOX})
        assert taken["ok"], taken
        assert [e["type"] for e in taken["events"]] == ["SemutaTaken", "CardDiscarded"]
        report = audit_room(rooms, room)
        failed = {k: v for k, v in report["checks"].items() if v["ok"] is False}
        assert not failed
