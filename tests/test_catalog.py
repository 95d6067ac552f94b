from collections import Counter

from dune_ledger.domain.catalog import CARDS, hand_limit, room_cards
from dune_ledger.infrastructure.cli import main


def test_card_counts_per_expansion_set():
    assert len(room_cards(())) == 33
    assert len(room_cards(("choam_richese",))) == 45
    assert len([c for c in room_cards(("ixians_tleilaxu",)) if c.zone == "deck"]) == 47
    both = room_cards(("choam_richese", "ixians_tleilaxu"))
    assert len([c for c in both if c.zone == "deck"]) == 47
    assert len([c for c in both if c.zone == "cache"]) == 10


def test_base_categories_match_the_printed_game():
    base = room_cards(())
    by_category = Counter(c.category for c in base)
    assert by_category == {"weapon": 9, "defense": 8, "special": 11, "worthless": 5}
    assert {c.id for c in base if c.name == "Shield"} == {f"shield-{i}" for i in range(1, 5)}
    assert {c.id for c in base if c.is_karama} == {"karama-1", "karama-2"}


def test_richese_cache_and_box_identity():
    cache = [c.id for c in room_cards(("choam_richese",)) if c.zone == "cache"]
    assert cache == ["nullentropy-box", "semuta-drug", "distrans", "juice-of-sapho",
                     "richese-karama", "mirror-weapon", "portable-snooper", "residual-poison",
                     "stone-burner", "ornithopter"]
    assert CARDS["nullentropy-box"].is_box
    assert CARDS["richese-karama"].is_karama
    assert [c.id for c in CARDS.values() if c.is_box] == ["nullentropy-box"]


def test_hand_limits():
    assert hand_limit("harkonnen") == 8
    assert hand_limit("choam") == 5
    assert hand_limit("atreides") == hand_limit("richese") == 4


def test_catalog_command(capsys):
    import orjson

    assert main(["catalog", "--expansions", "choam_richese,ecaz_moritani"]) == 0
    cards = orjson.loads(capsys.readouterr().out)
    assert len(cards) == 45
    assert set(cards[0]) == {"id", "name", "category", "zone"}
    assert main(["catalog", "--expansions", "spice_harvest"]) == 2
    assert "unknown expansions" in capsys.readouterr().err
