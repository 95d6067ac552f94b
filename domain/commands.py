"""Commands as seats send them: one JSON object each, validated by pydantic.

Here: the base every command shares, the field types several effects use, and the
words of a refusal. Each command lives beside its handler, in its effect's module;
the union a seat's JSON is parsed with is derived from the effects' declarations
(`effect.House.parse_command`). The acting seat never comes from the body: the
CLI's `--as` or the HTTP token supplies it.

Validation is strict (RULES 8): a number given as a string or a boolean, a
boolean given as a number, or a whole number written with a fraction is
refused, not coerced; amounts of spice lie in 0..SPICE_MAX and counters
(versions) in 0..COUNT_MAX, so nothing a command names can overflow what the
store and the read models encode (64-bit integers).
"""

from __future__ import annotations

from collections.abc import Set
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError

from dune_ledger.domain.shapes import Shape

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
    # A keyed seat's Ed25519 signature of the command (RULES 9.3), checked by the
    # application before the rules see it.
    sig: Annotated[str, Field(max_length=128)] | None = None


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


def describe_errors(e: ValidationError, *, skip: Set[str] = frozenset()) -> str:
    """Name the fields and what they must be, never the values sent (RULES 8).

    pydantic's messages name expected values only, except an unknown union tag,
    which quotes the tag; field names from the input (an unknown key) are cut
    short. `skip` (the command types) drops the type that leads every location of a
    known type, so that the message names `expected_version`, not
    `select_card.expected_version`.
    """
    parts = []
    for err in e.errors(include_url=False, include_input=False)[:5]:
        loc = list(err["loc"])
        if loc and isinstance(loc[0], str) and loc[0] in skip:
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
