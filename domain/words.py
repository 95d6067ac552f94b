"""The game's own words for the ids the rules use: faction, card, territory and window
names, for the public log (each event's `text()`) and the text of the views."""

from __future__ import annotations

from dune_ledger.domain.catalog import CARDS
from dune_ledger.domain.territories import TERRITORIES

FACTIONS = {
    "atreides": "Atreides", "harkonnen": "Harkonnen", "emperor": "Emperor",
    "fremen": "Fremen", "guild": "Spacing Guild", "bene_gesserit": "Bene Gesserit",
    "ixians": "Ixians", "tleilaxu": "Tleilaxu", "choam": "CHOAM", "richese": "Richese",
    "ecaz": "Ecaz", "moritani": "Moritani",
}
WINDOWS = {
    "ambassador_income": "the Emperor's income",
    "ambassador_bonus": "the Harkonnen bonus card",
    "semuta": "the Semuta Drug window",
    "gift": "a gift from Richese",
}


def faction(f: str | None) -> str:
    return "nobody" if f is None else FACTIONS.get(f, f)


def card(card_id: str | None) -> str:
    if card_id is None:
        return "no card"
    known = CARDS.get(card_id)
    return known.name if known is not None else card_id


def place(territory: str) -> str:
    """A territory's name on the map; an old stream's free text, title-cased."""
    known = TERRITORIES.get(territory)
    return known if known is not None else territory.replace("_", " ").replace("-", " ").title()


def window(kind: str) -> str:
    return WINDOWS.get(kind, kind.replace("_", " ") + " window")
