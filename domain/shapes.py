"""The shapes of what the rules show: pydantic models that describe, for clients, the
JSON of the views, their actions and the public events (INTERFACE "Views", the
OpenAPI at `/openapi.json`).

The views are built as plain dicts (`views.py` and each effect's part); these models
are their declarations, which each effect makes beside the code that renders them, in
its `EFFECT` or in what it holds (`effect.Effect`): the shape of each key its view part
adds (`view_shapes`), of each kind of decision it opens (`decisions`), of what each
window kind shows (`responses.WindowKind`), of the fields each event shows
(`events.Event.shown`) and of those a seat writes itself (`commands.Command.written`).
Nothing validates a view against them while it is served (a view is rendered for
every seat after every append); tests/test_schema.py checks every view of every
golden state against the schema built from them, no field missing and none extra.

A field that a view leaves out at times is declared with a default; every other
field is always there, null included where its type says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from operator import or_
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, create_model

from dune_ledger.domain.catalog import Faction


class Shape(BaseModel):
    """A part of what a reader is shown: exactly these fields."""

    model_config = ConfigDict(extra="forbid")


def shape(name: str, fields: dict[str, Any], base: type[Shape] | None = None) -> type[Shape]:
    """A shape made of `fields` (`{name: type}` always there, `{name: (type, None)}` at
    times left out), on `base`."""
    made: dict[str, Any] = {k: v if isinstance(v, tuple) else (v, ...) for k, v in fields.items()}
    return create_model(name, __base__=base or Shape, __module__=__name__, **made)


def one_of(name: str, shapes: Sequence[type[BaseModel]], key: str) -> type[RootModel[Any]]:
    """The union of `shapes` under the name `name`, told apart by their field `key`."""
    union: Any = Annotated[reduce(or_, shapes), Field(discriminator=key)]
    return type(name, (RootModel[union],), {"__module__": __name__})


class CardFace(Shape):
    """A physical card as views show it (`catalog.Card.public`)."""

    id: str
    name: str
    category: str


class DecisionShape(Shape):
    """An open decision, public (INTERFACE "Views": `decision`): who must act, and the
    event its answer quotes."""

    kind: str
    event: str
    player: Faction


class WindowShape(Shape):
    """An open response window (RULES 4.4), public: each kind (`responses.WindowKind`)
    adds its own fields."""

    kind: str
    event: str
    name: str
    says: str | None
    passes: list[Faction]
    waiting: list[Faction]
    deadline: str | None
    seconds: int | None


# The fields a seat writes itself, as an action describes them under `free`.
class FreeText(Shape):
    kind: Literal["text"]
    min_length: int
    max_length: int
    of: str | None = None  # what the text names, where the rules say


class FreeChoice(Shape):
    kind: Literal["choice"]
    options: list[str]


class FreeSpicePromise(Shape):
    kind: Literal["spice_promise"]
    min: int
    max: int


class FreeAmount(Shape):
    """A whole amount of spice from `min` to `max` (a bid, a support)."""

    kind: Literal["amount"]
    min: int
    max: int


class FreeCard(Shape):
    kind: Literal["card"]
    of: str  # which cards: guild_stop's, a shipping-cost card not stopped yet
