"""Commands as seats send them: one JSON object each, validated by pydantic.

The acting seat never comes from the body: the CLI's `--as` or the HTTP
token supplies it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from domain.catalog import Faction
from domain.errors import Rejection

CardId = Annotated[str, Field(min_length=1, max_length=64)]
EventId = Annotated[str, Field(min_length=1, max_length=64)]


class Command(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    command_id: Annotated[str, Field(min_length=1, max_length=128)] | None = None
    expected_version: Annotated[int, Field(ge=0)] | None = None


class BeginSearch(Command):
    type: Literal["begin_search"]
    card: CardId


class SelectCard(Command):
    type: Literal["select_card"]
    search: EventId
    card: CardId


class SetAutopilot(Command):
    type: Literal["set_autopilot"]
    enabled: bool
    profile: Literal["easy", "medium", "hard", "brutal"] | None = None


class Discard(Command):
    type: Literal["discard"]
    card: CardId


class Draw(Command):
    type: Literal["draw"]


class Distrans(Command):
    type: Literal["distrans"]
    card: CardId
    give: CardId
    to: Faction


class OfferGift(Command):
    type: Literal["offer_gift"]
    card: CardId
    to: Faction


class AnswerGift(Command):
    type: Literal["answer_gift"]
    event: EventId
    accept: bool


class AskTruthtrance(Command):
    type: Literal["ask_truthtrance"]
    card: CardId
    target: Faction
    question: Annotated[str, Field(min_length=1, max_length=500)]


class BoxPromise(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    box: CardId


class SpicePromise(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    spice: Annotated[int, Field(ge=1)]


class AnswerTruthtrance(Command):
    type: Literal["answer_truthtrance"]
    event: EventId
    answer: Literal["yes", "no"]
    promise: BoxPromise | SpicePromise | None = None


class EnterTerritory(Command):
    type: Literal["enter_territory"]
    territory: Annotated[str, Field(min_length=1, max_length=64)]
    via: Literal["shipment", "movement", "worm"]


class AmbassadorDecide(Command):
    type: Literal["ambassador_decide"]
    event: EventId
    trigger: bool
    beneficiary: Faction | None = None


class AmbassadorCopy(Command):
    type: Literal["ambassador_copy"]
    event: EventId
    token: Annotated[str, Field(min_length=1, max_length=32)]


class Respond(Command):
    type: Literal["respond"]
    event: EventId
    action: Literal["pass", "karama"]
    card: CardId | None = None


class Semuta(Command):
    type: Literal["semuta"]
    event: EventId
    action: Literal["pass", "take"]
    card: CardId | None = None


class GuildStop(Command):
    type: Literal["guild_stop"]
    card: CardId


AnyCommand = Annotated[
    BeginSearch
    | SelectCard
    | SetAutopilot
    | Discard
    | Draw
    | Distrans
    | OfferGift
    | AnswerGift
    | AskTruthtrance
    | AnswerTruthtrance
    | EnterTerritory
    | AmbassadorDecide
    | AmbassadorCopy
    | Respond
    | Semuta
    | GuildStop,
    Field(discriminator="type"),
]

_adapter: TypeAdapter[AnyCommand] = TypeAdapter(AnyCommand)


def parse_command(raw: Any) -> Command:
    """Validate a decoded JSON object; a bad one is an `invalid_command` rejection."""
    if not isinstance(raw, dict):
        raise Rejection("invalid_command", "a command must be a JSON object")
    try:
        return _adapter.validate_python(raw)
    except ValidationError as e:
        raise Rejection("invalid_command", _describe(e)) from None


def _describe(e: ValidationError) -> str:
    # Name the fields, never echo the input values back.
    parts = []
    for err in e.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "command"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)
