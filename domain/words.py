"""The game's own words for the ids the rules use: faction, card, territory, window,
phase and stage names, for the public log (each event's `text()`), the text of the
views and the pages (`PAGE_WORDS`)."""

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
    "bidding_income": "the Emperor's income",
    "bidding_bonus": "the Harkonnen bonus card",
    "semuta": "the Semuta Drug window",
    "gift": "a gift from Richese",
}
PHASES = {
    1: "Storm", 2: "Spice Blow and Nexus", 3: "CHOAM Charity", 4: "Bidding", 5: "Revival",
    6: "Shipment and Movement", 7: "Battle", 8: "Spice Collection", 9: "Mentat Pause",
}
# How forces entered a territory (an Ambassador entry's `via`).
VIA = {"shipment": "by shipment", "movement": "by moving", "worm": "riding a worm"}
# Where an Ambassador entry stands (its `stage`) and where a purchase stands (a
# receipt's `stage`), as a player reads it.
STAGES = {
    "offer": "Ecaz may trigger it",
    "declined": "declined",
    "copy": "choosing the token to copy",
    "cards": "the purchase",
    "no_effect": "no effect",
    "income": "the Emperor's income",
    "bonus": "the Harkonnen bonus card",
    "replacement": "the Ixian ally's replacement",
    "finish": "complete",
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


def via(how: str) -> str:
    return VIA.get(how, how)


def stage(name: str) -> str:
    return STAGES.get(name, name.replace("_", " "))


# What the pages draw ids with (infrastructure/page.py hands it to them), so that every
# name a player reads comes from here.
PAGE_WORDS = {"factions": FACTIONS, "windows": WINDOWS, "phases": PHASES, "via": VIA,
              "stages": STAGES, "territory": TERRITORIES}
