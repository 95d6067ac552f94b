"""Commands as seats send them: one JSON object each, validated by pydantic.

The acting seat never comes from the body: the CLI's `--as` or the HTTP
token supplies it.

Validation is strict (RULES 8): a number given as a string or a boolean, a
boolean given as a number, or a whole number written with a fraction is
refused, not coerced; amounts of spice lie in 0..SPICE_MAX and counters
(versions) in 0..COUNT_MAX, so nothing a command names can overflow what the
store and the read models encode (64-bit integers).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
)

from dune_ledger.domain.catalog import Faction
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.shapes import FreeCard, FreeChoice, FreeSpicePromise, FreeText, Shape

# RULES 8: spice, the Bank, prices, reservations and promises.
SPICE_MAX = 1_000_000
# Versions, turns and seeds: the largest integer every JSON reader keeps exactly
# (JavaScript's 2^53 - 1), well inside the 64-bit integers of the store.
COUNT_MAX = 2**53 - 1

Amount = Annotated[int, Field(ge=0, le=SPICE_MAX)]
Count = Annotated[int, Field(ge=0, le=COUNT_MAX)]
CardId = Annotated[str, Field(min_length=1, max_length=64)]
EventId = Annotated[str, Field(min_length=1, max_length=64)]


# A command a seat may send now, as a view lists it (INTERFACE "Views": `actions`): its
# `type` and bound fields, with the fields the seat writes itself described apart
# (`{field: {"kind", ...bounds}}`). Each effect offers its candidates; `domain.actions`
# keeps those the rules accept.
Action = dict[str, Any]
Candidate = tuple[Action, dict[str, Any]]


class Command(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    # The fields an action leaves to the seat, described under its `free` (their shapes).
    written: ClassVar[dict[str, type[Shape]]] = {}
    command_id: Annotated[str, Field(min_length=1, max_length=128)] | None = None
    expected_version: Count | None = None


class BeginSearch(Command):
    type: Literal["begin_search"]
    card: CardId


class SelectCard(Command):
    type: Literal["select_card"]
    search: EventId
    card: CardId


class SetAutopilot(Command):
    written = {"profile": FreeChoice}
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
    written = {"question": FreeText}
    type: Literal["ask_truthtrance"]
    card: CardId
    target: Faction
    question: Annotated[str, Field(min_length=1, max_length=500)]


class BoxPromise(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    box: CardId


class SpicePromise(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    spice: Annotated[int, Field(ge=1, le=SPICE_MAX)]


def _promise_kind(raw: Any) -> str | None:
    # Told apart by their key, so that an error names `promise.spice`, not both shapes.
    if isinstance(raw, BoxPromise | SpicePromise):
        return "box" if isinstance(raw, BoxPromise) else "spice"
    if isinstance(raw, dict):
        return "box" if "box" in raw else "spice" if "spice" in raw else None
    return None


PROMISE_TAGS = ("box", "spice")
Promise = Annotated[
    Annotated[BoxPromise, Tag("box")] | Annotated[SpicePromise, Tag("spice")],
    Discriminator(_promise_kind, custom_error_type="promise_shape",
                  custom_error_message='a promise is null, {"box": CARD} or {"spice": N}'),
]


class AnswerTruthtrance(Command):
    written = {"promise": FreeSpicePromise}
    type: Literal["answer_truthtrance"]
    event: EventId
    answer: Literal["yes", "no"]
    promise: Promise | None = None


class EnterTerritory(Command):
    written = {"territory": FreeText, "via": FreeChoice}
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
    written = {"card": FreeCard}
    type: Literal["guild_stop"]
    card: CardId


class SetSeed(Command):
    """A seat's seed (RULES 9): 1 to 64 printable ASCII characters, public."""

    written = {"value": FreeText}
    type: Literal["seed"]
    value: Annotated[str, Field(pattern=r"^[\x20-\x7e]{1,64}$")]


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
    | GuildStop
    | SetSeed,
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
    return describe_errors(e, skip_tag=True)


def describe_errors(e: ValidationError, *, skip_tag: bool = False) -> str:
    """Name the fields and what they must be, never the values sent (RULES 8).

    pydantic's messages name expected values only, except an unknown union tag,
    which quotes the tag; field names from the input (an unknown key) are cut
    short. `skip_tag` drops the command type that leads every location of a
    known type, so that the message names `expected_version`, not
    `select_card.expected_version`.
    """
    parts = []
    for err in e.errors(include_url=False, include_input=False)[:5]:
        loc = list(err["loc"])
        if skip_tag and loc and isinstance(loc[0], str) and loc[0] in COMMAND_TYPES:
            loc = loc[1:]
        # The promise's tag repeats its key: `promise.spice.spice` says `promise.spice`.
        loc = [p for i, p in enumerate(loc)
               if not (i and loc[i - 1] == "promise" and p in PROMISE_TAGS)]
        where = ".".join(_short(p) for p in loc) or "command"
        if err["type"] == "union_tag_invalid":
            # Not the list of types: `distrans` is a card's id too, and a message
            # naming card ids is one a leak scan cannot tell from a leak.
            msg = "unknown command type (INTERFACE 'Commands' lists them)"
            where = str(err.get("ctx", {}).get("discriminator", "'type'")).strip("'")
        elif err["type"] == "union_tag_not_found":
            msg, where = "a command needs a 'type'", "type"
        else:
            msg = err["msg"]
        parts.append(f"{where}: {msg}")
    return "; ".join(parts)


def _short(part: str | int) -> str:
    text = str(part)
    return text if len(text) <= 40 else text[:40] + "..."


# Each command of the union, by its `type`: what a seat may send.
COMMANDS: dict[str, type[Command]] = {
    m.model_fields["type"].annotation.__args__[0]: m
    for m in get_args(get_args(AnyCommand)[0])
}
COMMAND_TYPES: frozenset[str] = frozenset(COMMANDS)
