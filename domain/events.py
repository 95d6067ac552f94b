"""Domain events: named, past-tense facts. Applying one only records the fact.

Here: the base class and what several effects share (`RoomCreated`, `RngField`,
`DeadlineSinceV2`); each effect's events live beside its handlers, in its module,
and its declaration names them (`effect.Effect.events`): `game.EVENT_TYPES` is
collected from those, by class name, which is also the stored type name.

`apply` runs on every replay, so it never validates, draws randomness or
reads anything but the event and the state. `public` returns the fields any
seat may see (None: the event is not shown publicly at all): its own fields
named in `shown`, unless it computes them (then `shown_as` declares their
shapes, for the OpenAPI); `text` is the public log line.

To change an event's meaning, add a new class or bump `schema_version` and
write `upcast`: stored streams must keep replaying as they were recorded.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from dune_ledger.domain.randomness import ALGORITHM
from dune_ledger.domain.shapes import Shape
from dune_ledger.domain.state import Mode, RoomState, absent
from dune_ledger.domain.words import faction

# The four slots of every pydantic model, set through their descriptors: an
# `object.__setattr__` looks each one up through the class, and a long replay
# rebuilds every stored event.
_set_dict, _set_fields_set, _set_extra, _set_private = (
    BaseModel.__dict__[slot].__set__
    for slot in ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__",
                 "__pydantic_private__"))


class Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    schema_version: ClassVar[int] = 1
    # What `public` shows: these fields as they are, or (`shown_as`) the shape of each
    # field a `public` of its own computes (a bare type: always there; `(type, None)`:
    # at times left out).
    shown: ClassVar[tuple[str, ...] | None] = ()  # None: never shown (no log entry)
    shown_as: ClassVar[dict[str, Any]] = {}

    @property
    def type(self) -> str:
        return type(self).__name__

    @classmethod
    def trusted(cls, data: dict[str, Any]) -> Event:
        """Rebuild a stored event without validation: stored events are trusted.

        A payload that lacks a field (one added later with a default) goes
        through pydantic's model_construct so the default is filled in.
        """
        if len(data) != len(cls.__pydantic_fields__):
            event = cls.model_construct(**data)
            # As the event was made: every field given (an `rng` left out of a seeded
            # room's stored event was None).
            _set_fields_set(event, set(cls.__pydantic_fields__))
            return event
        event = object.__new__(cls)
        _set_dict(event, data)
        _set_fields_set(event, set(data))
        _set_extra(event, None)
        _set_private(event, None)
        return event

    @classmethod
    def upcast(cls, data: dict[str, Any], from_version: int) -> dict[str, Any]:
        """Turn a stored payload of an older schema_version into the current one."""
        raise ValueError(f"{cls.__name__} has no upcast from version {from_version}")

    def apply(self, state: RoomState) -> None:
        raise NotImplementedError

    def public(self) -> dict[str, Any] | None:
        if self.shown is None:
            return None
        return {name: getattr(self, name) for name in self.shown}

    @classmethod
    def public_fields(cls) -> dict[str, Any]:
        """The shape of each field `public` shows (`shapes.py`)."""
        fields = cls.__pydantic_fields__
        return {**{name: (fields[name].annotation, ...) for name in cls.shown or ()},
                **cls.shown_as}

    def text(self) -> str:
        return self.type


# An outcome's `rng` (domain.randomness.Rng, dumped): set in a committed room only,
# and left out of the stored event otherwise, so that a seeded room's events are
# stored as they were before fair dealing (RULES 9).
RngField = Field(default=None, exclude_if=absent)


class RngShown(Shape):
    """An outcome's public `rng` (RULES 9.5): `n` and `mix` (v2), or `version`, `call`
    and `mix` (a v1 room's)."""

    n: int | None = None
    version: int | None = None
    call: int | None = None
    mix: str


# The shape of `rng_public`: left out in a seeded or layout room.
RNG_SHOWN = (RngShown, None)


def rng_public(rng: dict[str, Any] | None) -> dict[str, Any]:
    """The public part of an outcome's `rng` (its `input` is private until the end)."""
    if rng is None:
        return {}
    if "n" in rng:
        return {"rng": {"n": rng["n"], "mix": rng["mix"]}}
    return {"rng": {"version": rng["version"], "call": rng["call"], "mix": rng["mix"]}}


class DeadlineSinceV2:
    """For the window events that gained a `deadline` in schema version 2 (RULES 4.4):
    a window stored at version 1 had none."""

    @classmethod
    def upcast(cls, data: dict[str, Any], from_version: int) -> dict[str, Any]:
        if from_version == 1:
            return {**data, "deadline": None}
        return super().upcast(data, from_version)  # type: ignore[misc]


# --- the room -------------------------------------------------------------


class Commitment(Shape):
    """A committed room's public commitment (RULES 9.2)."""

    mode: Literal["committed"]
    algorithm: str
    commitment: str


class RoomCreated(Event):
    """The whole initial position, including the deck order a shuffle produced."""

    shown_as = {"mode": Mode, "expansions": list[str], "catalog": (int, None),
                "turn": int, "phase": int, "seats": list[str],
                "fairness": (Commitment, None), "rng": RNG_SHOWN}
    state: dict[str, Any]
    rng: dict[str, Any] | None = RngField  # a committed room's cohort, drawn at creation

    def apply(self, state: RoomState) -> None:
        # The only event that replaces the state; `rules.apply` handles it.
        raise RuntimeError("RoomCreated is applied by rules.initial_state")

    def public(self) -> dict[str, Any]:
        s = self.state
        return {
            "mode": s["mode"],
            "expansions": s["expansions"],
            **({"catalog": s["catalog"]} if "catalog" in s else {}),  # a later catalog's room
            "turn": s["turn"],
            "phase": s["phase"],
            "seats": [seat["faction"] for seat in s["seats"]],
            **({"fairness": _public_commitment(s["fairness"])} if s.get("fairness") else {}),
            **rng_public(self.rng),
        }

    def text(self) -> str:
        seats = ", ".join(faction(seat["faction"]) for seat in self.state["seats"])
        return f"Room created ({self.state['mode']}) with {seats}"


def _public_commitment(fairness: dict[str, Any]) -> dict[str, Any]:
    return {"mode": "committed", "algorithm": fairness.get("algorithm", ALGORITHM),
            "commitment": fairness["commitment"]}
