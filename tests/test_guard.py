"""The guard's fast card scan finds exactly what its token regex finds."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from domain.catalog import CARDS
from domain.events import CardRetrieved
from projections import guard
from projections.projectors import dumps
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
            event = CardRetrieved(search="e2", seat="richese", card=rng.choice(IDS))
            assert guard.public_leaks(current, text) == set(named) & hidden
            assert guard.public_leaks(current, text, event) == set(named) & (
                hidden | {event.card})


@given(st.lists(st.sampled_from(PIECES), max_size=6),
       st.lists(st.tuples(st.integers(-3, 10**9), st.integers(-3, 10**9),
                          st.sampled_from([*IDS, "x", 7, None])), min_size=1, max_size=4))
def test_a_log_entry_names_the_cards_its_text_names_whatever_its_numbers(pieces, entries):
    """The answer kept for an entry shape is the scan of each entry's own text."""
    for seq, version, card in entries:
        entry = {"seq": seq, "version": version, "type": "CardDiscarded",
                 "text": "".join(pieces), "card": card}
        text = dumps(entry)
        assert guard.entry_card_ids(entry, text) == by_regex(text)


def test_an_entry_whose_numbers_or_fields_are_not_plain_is_scanned_every_time(monkeypatch):
    monkeypatch.setattr(guard, "NAMED_BY_ENTRY", {})
    hidden = "kulon"
    overridden = {"seq": hidden, "version": 3, "type": "X", "text": "t"}
    assert guard.entry_card_ids(overridden, dumps(overridden)) == {hidden}
    unhashable = {"seq": 1, "version": 3, "type": "X", "text": "t", "cards": [hidden]}
    assert guard.entry_card_ids(unhashable, dumps(unhashable)) == {hidden}
    assert guard.NAMED_BY_ENTRY == {}  # neither was kept


def test_the_kept_entry_shapes_are_bounded(monkeypatch):
    monkeypatch.setattr(guard, "NAMED_BY_ENTRY", {})
    monkeypatch.setattr(guard, "NAMED_BY_ENTRY_LIMIT", 3)
    for n in range(7):
        entry = {"seq": n, "version": n, "type": "X", "text": f"shield-{n}"}
        assert guard.entry_card_ids(entry, dumps(entry)) == by_regex(f"shield-{n}")
        assert len(guard.NAMED_BY_ENTRY) <= 3
