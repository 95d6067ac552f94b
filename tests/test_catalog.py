"""The catalog (RULES 2): the printed game is the first catalog, and it never changes; a
card added later comes in a catalog of its own (tests/test_adding_an_effect.py adds one)."""

import hashlib
import json
from collections import Counter
from dataclasses import asdict

from dune_ledger.domain.catalog import (
    CARDS,
    EXPANSIONS,
    FIRST_CATALOG,
    NEWEST_CATALOG,
    hand_limit,
    room_cards,
)
from dune_ledger.infrastructure.cli import main

PRINTED = FIRST_CATALOG  # the printed game's cards, as first listed
# sha256 of the first catalog's cards (every field but `since`, sorted keys): every room
# made before catalogs holds these cards, and their audits and layouts count on them.
FIRST_DIGEST = "292510d051b03aca851d46d03e1bc058ad81602114e2fdb1b9d84948e8a2864a"


def test_card_counts_per_expansion_set():
    assert len(room_cards((), PRINTED)) == 33
    assert len(room_cards(("choam_richese",), PRINTED)) == 45
    assert len([c for c in room_cards(("ixians_tleilaxu",), PRINTED) if c.zone == "deck"]) == 47
    both = room_cards(("choam_richese", "ixians_tleilaxu"), PRINTED)
    assert len([c for c in both if c.zone == "deck"]) == 47
    assert len([c for c in both if c.zone == "cache"]) == 10


def test_the_first_catalog_never_changes():
    cards = [{k: v for k, v in asdict(c).items() if k != "since"}
             for c in room_cards(tuple(EXPANSIONS), FIRST_CATALOG)]
    digest = hashlib.sha256(json.dumps(cards, sort_keys=True).encode()).hexdigest()
    assert (len(cards), digest) == (57, FIRST_DIGEST), \
        'a card added to domain/cards.json takes "since": the newest catalog + 1'


def test_a_later_catalog_holds_every_card_of_the_ones_before():
    for catalog in range(FIRST_CATALOG, NEWEST_CATALOG):
        older = room_cards(tuple(EXPANSIONS), catalog)
        assert room_cards(tuple(EXPANSIONS), catalog + 1)[:len(older)] == older


def test_base_categories_match_the_printed_game():
    base = room_cards((), PRINTED)
    by_category = Counter(c.category for c in base)
    assert by_category == {"weapon": 9, "defense": 8, "special": 11, "worthless": 5}
    assert {c.id for c in base if c.name == "Shield"} == {f"shield-{i}" for i in range(1, 5)}
    assert {c.id for c in base if c.is_karama} == {"karama-1", "karama-2"}


def test_richese_cache_and_box_identity():
    cache = [c.id for c in room_cards(("choam_richese",), PRINTED) if c.zone == "cache"]
    assert cache == ["nullentropy-box", "semuta-drug", "distrans", "juice-of-sapho",
                     "richese-karama", "mirror-weapon", "portable-snooper", "residual-poison",
                     "stone-burner", "ornithopter"]
    assert CARDS["nullentropy-box"].is_box
    assert CARDS["richese-karama"].is_karama
    assert [c.id for c in room_cards(tuple(EXPANSIONS), PRINTED) if c.is_box] == \
        ["nullentropy-box"]


def test_hand_limits():
    assert hand_limit("harkonnen") == 8
    assert hand_limit("choam") == 5
    assert hand_limit("atreides") == hand_limit("richese") == 4


def test_catalog_command(capsys):
    """It prints the cards a new room holds: the newest catalog's."""
    import orjson

    assert main(["catalog", "--expansions", "choam_richese,ecaz_moritani"]) == 0
    cards = orjson.loads(capsys.readouterr().out)
    newest = room_cards(("choam_richese", "ecaz_moritani"), NEWEST_CATALOG)
    assert [c["id"] for c in cards] == [c.id for c in newest]
    assert [c["id"] for c in cards[:45]] == [c.id for c in room_cards(
        ("choam_richese", "ecaz_moritani"), PRINTED)]
    assert set(cards[0]) == {"id", "name", "category", "zone"}
    assert main(["catalog", "--expansions", "spice_harvest"]) == 2
    assert "unknown expansions" in capsys.readouterr().err
