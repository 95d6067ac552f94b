"""The guard's fast card scan finds exactly what its token regex finds."""

from __future__ import annotations

import random
from typing import Any
from uuid import uuid4

from hypothesis import given
from hypothesis import strategies as st

from dune_ledger.application.stream import GENESIS, Recorded
from dune_ledger.domain import views
from dune_ledger.domain.catalog import CARDS
from dune_ledger.domain.custody import CardDiscarded, CardDrawn, DiscardReshuffled
from dune_ledger.domain.events import Event
from dune_ledger.domain.nullentropy import CardRetrieved, FeePaid
from dune_ledger.domain.state import RoomState
from dune_ledger.projections import guard, projectors
from dune_ledger.projections.projectors import UNSHAPED, dumps, entry_shape, public_entry_text
from tests.support import layout, run, state_of

IDS = sorted(CARDS)
PIECES = [*IDS, "-", "--", " ", '"', ":", ",", "{", "}", "\\n", "é", "Ω", "X", "a", "1", "e12"]


def by_regex(text: str) -> set[str]:
    return {t for t in guard.TOKEN.findall(text) if t in CARDS}


@given(st.lists(st.sampled_from(PIECES), max_size=12))
def test_card_ids_are_the_regex_tokens_that_name_cards(pieces):
    text = "".join(pieces)
    assert guard.card_ids(text) == by_regex(text)


def test_card_ids_on_edge_cases():
    for text in ["shield-1", "-shield-1", "shield-1-", "x-shield-1", "shield-1-x",
                 "--shield-1--", "shield-1é", "éshield-1", "Shield-1", '"amount":-2,"card":"kulon"',
                 "kulon--baliset", "", "-", "kulon\n-baliset"]:
        assert guard.card_ids(text) == by_regex(text), text


def test_public_leaks_are_the_named_cards_hidden_from_everyone():
    state = state_of(layout())
    tx = run(state, "richese", {"type": "begin_search", "card": "nullentropy-box"})
    searching = tx.state
    assert searching.search is not None
    rng = random.Random(3)
    for current in (state, searching):
        hidden = guard.secret_to_all(current)
        for _ in range(300):
            named = rng.sample(IDS, rng.randint(0, 4))
            text = " ".join(named)
            event = CardRetrieved(search="e2", seat="richese", card=rng.choice(IDS),
                                  claimed=False)
            assert guard.public_leaks(current, text) == set(named) & hidden
            assert guard.public_leaks(current, text, event) == set(named) & (
                hidden | {event.card})


class ShapeProbe(Event):
    """An event whose one field may hold any JSON scalar, for the entry shapes."""

    value: Any
    seat: str = "emperor"

    def public(self) -> dict[str, Any]:
        return {"value": self.value, "seat": self.seat}

    def text(self) -> str:
        return f"{self.seat} probed {self.value}"


def rendered_every_time(seq: int, rec: Recorded, state: RoomState) -> str | None:
    """The log entry as the projector made it before entry shapes were kept."""
    entry = views.public_entry(seq, rec.originator_version, rec.fact, rec.append)
    if entry is None:
        return None
    text = dumps(entry)
    if guard.public_leaks(state, text, rec.fact):
        text = dumps(guard.withheld_entry(entry))
    return text


WORDS = [*IDS[:6], "nullentropy-box", 'a"seq":0', '"version":0', "-", "é", "x y", ""]
SCALARS = st.one_of(st.sampled_from(WORDS), st.integers(-2, 3), st.booleans(), st.none(),
                    st.sampled_from([1.0, 0.5]))


def event_of(kind: str, word: str, scalar: Any, n: int) -> Event:
    if kind == "drawn":
        return CardDrawn(seat=word, card=word)
    if kind == "discarded":
        return CardDiscarded(seat="emperor", card=word)
    if kind == "fee":
        return FeePaid(seat=word, amount=n % 7, card=word)
    if kind == "probe":
        return ShapeProbe(value=scalar, seat=word)
    return DiscardReshuffled(order=[word, word])


@given(st.lists(st.tuples(st.sampled_from(["drawn", "discarded", "fee", "probe", "shuffle"]),
                          st.sampled_from(WORDS), SCALARS, st.integers(0, 10**6),
                          st.integers(1, 10**6)), min_size=1, max_size=6))
def test_a_kept_entry_shape_renders_what_rendering_every_time_does(events):
    """Text and guard verdict alike, whatever the numbers, warm or cold, on a state
    where the Box is in the deck (secret to all) and other cards are not."""
    state = state_of(layout())
    room = uuid4()
    for kind, word, scalar, seq, version in events:
        fact = event_of(kind, word, scalar, seq)
        rec = Recorded(room, version, fact, GENESIS, "emperor", None, version, "at")
        for n in (seq, seq + 1):
            assert public_entry_text(n, rec, state) == rendered_every_time(n, rec, state)


def test_entries_that_cannot_be_shaped_are_rendered_every_time():
    assert entry_shape(DiscardReshuffled(order=["kulon"])) is UNSHAPED  # a list field
    assert entry_shape(ShapeProbe(value=[1])) is UNSHAPED
    assert entry_shape(CardDrawn(seat="emperor", card="kulon")) not in (None, UNSHAPED)


def test_equal_values_of_other_types_are_other_shapes():
    state = state_of(layout())
    texts = set()
    for value in (1, True, 1.0):
        rec = Recorded(uuid4(), 2, ShapeProbe(value=value), GENESIS, "emperor", None, 2, "at")
        texts.add(public_entry_text(1, rec, state))
    assert len(texts) == 3


def test_the_kept_entry_shapes_are_bounded(monkeypatch):
    monkeypatch.setattr(projectors, "ENTRY_SHAPES", {})
    monkeypatch.setattr(projectors, "ENTRY_SHAPES_LIMIT", 3)
    for n in range(7):
        entry_shape(CardDrawn(seat=f"seat-{n}", card="kulon"))
        assert len(projectors.ENTRY_SHAPES) <= 3
