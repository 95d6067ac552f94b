"""The physical Treachery cards, hand limits and factions.

The card list is data (`domain/cards.json`), read once when the module is
imported; it is part of the package, not an input.

The list only grows, and each growth is a new catalog: a card's `since` is the first
catalog that holds it (1, the printed game as first listed, when the data does not
say). A room keeps the catalog it was created with (`RoomState.catalog`): its cards,
its audit and its replay stay what they were when a later catalog adds a card. A new
room is made with the newest catalog.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

Faction = Literal[
    "atreides",
    "harkonnen",
    "emperor",
    "fremen",
    "guild",
    "bene_gesserit",
    "ixians",
    "tleilaxu",
    "choam",
    "richese",
    "ecaz",
    "moritani",
]
FACTIONS: tuple[str, ...] = Faction.__args__  # type: ignore[attr-defined]

Expansion = Literal["choam_richese", "ixians_tleilaxu", "ecaz_moritani"]
EXPANSIONS: tuple[str, ...] = Expansion.__args__  # type: ignore[attr-defined]

FIRST_CATALOG = 1  # the printed game's cards, as first listed: every room made before catalogs

HAND_LIMITS: dict[str, int] = {"harkonnen": 8, "choam": 5}
DEFAULT_HAND_LIMIT = 4


def hand_limit(faction: str) -> int:
    return HAND_LIMITS.get(faction, DEFAULT_HAND_LIMIT)


@dataclass(frozen=True, slots=True)
class Card:
    id: str
    name: str
    category: str  # weapon, defense, special, worthless
    subtype: str | None
    effect: str | None
    expansions: tuple[str, ...]  # "base" or the expansions that bring this physical card
    zone: str  # where an unplaced card starts: "deck" or "cache"
    since: int = FIRST_CATALOG  # the first catalog that holds this card

    @property
    def is_box(self) -> bool:
        # RULES 2: a Box by effect or by name, however many a room holds.
        return self.effect == "nullentropy_box" or self.name == "Nullentropy Box"

    @property
    def is_karama(self) -> bool:
        return self.effect == "karama"

    @property
    def is_worthless(self) -> bool:
        return self.category == "worthless"

    def public(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "category": self.category}


def _load() -> dict[str, Card]:
    text = resources.files("dune_ledger.domain").joinpath("cards.json").read_text("utf-8")
    raw = json.loads(text)
    cards = {}
    for c in raw["cards"]:
        cards[c["id"]] = Card(
            id=c["id"],
            name=c["name"],
            category=c["category"],
            subtype=c["subtype"],
            effect=c["effect"],
            expansions=tuple(c["expansion"]),
            zone=c["zone"],
            since=c.get("since", FIRST_CATALOG),
        )
    return cards


CARDS: dict[str, Card] = _load()  # every card of every catalog, by id
NEWEST_CATALOG = max(c.since for c in CARDS.values())  # what a new room is made with


def card(card_id: str) -> Card:
    return CARDS[card_id]


@cache
def room_cards(expansions: tuple[str, ...], catalog: int = NEWEST_CATALOG) -> tuple[Card, ...]:
    """Every physical card of a room with these expansions and that catalog, in catalog
    order."""
    chosen = {"base", *expansions}
    return tuple(c for c in CARDS.values()
                 if c.since <= catalog and chosen.intersection(c.expansions))


def is_box(card_id: str) -> bool:
    return CARDS[card_id].is_box


def card_objects(ids: Iterable[str]) -> list[dict[str, str]]:
    """Cards as a view shows them: `{id, name, category}` each."""
    return [CARDS[cid].public() for cid in ids]
