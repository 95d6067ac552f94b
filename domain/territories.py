"""The territories of the printed map, by id (a slug of the name, as card ids are), and
the strongholds among them: what `enter_territory` and a layout's placed ambassadors
name. Hidden Mobile Stronghold, a piece rather than a territory of the map, is not one.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

# The five strongholds: where Ecaz's ambassador tokens sit (RULES 4).
STRONGHOLDS: dict[str, str] = {
    "arrakeen": "Arrakeen",
    "carthag": "Carthag",
    "sietch-tabr": "Sietch Tabr",
    "habbanya-sietch": "Habbanya Sietch",
    "tueks-sietch": "Tuek's Sietch",
}

TERRITORIES: dict[str, str] = {
    **STRONGHOLDS,
    "polar-sink": "Polar Sink",
    "imperial-basin": "Imperial Basin",
    "arsunt": "Arsunt",
    "basin": "Basin",
    "bight-of-the-cliff": "Bight of the Cliff",
    "broken-land": "Broken Land",
    "cielago-depression": "Cielago Depression",
    "cielago-east": "Cielago East",
    "cielago-north": "Cielago North",
    "cielago-south": "Cielago South",
    "cielago-west": "Cielago West",
    "false-wall-east": "False Wall East",
    "false-wall-south": "False Wall South",
    "false-wall-west": "False Wall West",
    "funeral-plain": "Funeral Plain",
    "gara-kulon": "Gara Kulon",
    "habbanya-erg": "Habbanya Erg",
    "habbanya-ridge-flat": "Habbanya Ridge Flat",
    "hagga-basin": "Hagga Basin",
    "harg-pass": "Harg Pass",
    "hole-in-the-rock": "Hole in the Rock",
    "meridian": "Meridian",
    "old-gap": "Old Gap",
    "pasty-mesa": "Pasty Mesa",
    "plastic-basin": "Plastic Basin",
    "red-chasm": "Red Chasm",
    "rim-wall-west": "Rim Wall West",
    "rock-outcroppings": "Rock Outcroppings",
    "shield-wall": "Shield Wall",
    "sihaya-ridge": "Sihaya Ridge",
    "south-mesa": "South Mesa",
    "the-great-flat": "The Great Flat",
    "the-greater-flat": "The Greater Flat",
    "the-minor-erg": "The Minor Erg",
    "tsimpo": "Tsimpo",
    "wind-pass": "Wind Pass",
    "wind-pass-north": "Wind Pass North",
}


def _on_the_map(territory: str) -> str:
    if territory not in TERRITORIES:
        raise PydanticCustomError(
            "territory", "not a territory of the printed map (a view's actions list them)")
    return territory


def _a_stronghold(territory: str) -> str:
    if territory not in STRONGHOLDS:
        raise PydanticCustomError(
            "stronghold", "not a stronghold: an ambassador sits in " + ", ".join(STRONGHOLDS))
    return territory


# A field naming a territory (a command's) or a stronghold (a layout's ambassador): a
# refusal names the field and never the text sent (RULES 8). Stored events are not
# validated, so an old stream keeps replaying whatever it named.
Territory = Annotated[str, Field(min_length=1, max_length=64), AfterValidator(_on_the_map)]
Stronghold = Annotated[str, Field(min_length=1, max_length=64), AfterValidator(_a_stronghold)]
