"""Domain events: named, past-tense facts. Applying one only records the fact.

`apply` runs on every replay, so it never validates, draws randomness or
reads anything but the event and the state. `public` returns the fields any
seat may see (None: the event is not shown publicly at all); `text` is the
public log line. Every subclass registers itself by class name, which is
also its stored type name.

To change an event's meaning, add a new class or bump `schema_version` and
write `upcast`: stored streams must keep replaying as they were recorded.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from dune_ledger.domain.catalog import is_box as _is_box
from dune_ledger.domain.randomness import ALGORITHM
from dune_ledger.domain.state import Control, Decision, RoomState, Search
from dune_ledger.domain.words import card, faction

EVENT_TYPES: dict[str, type[Event]] = {}
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

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if cls.__name__ in EVENT_TYPES:
            raise TypeError(f"event type {cls.__name__} defined twice")
        EVENT_TYPES[cls.__name__] = cls

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
        return {}

    def text(self) -> str:
        return self.type


def _absent(value: Any) -> bool:
    return value is None


# An outcome's `rng` (domain.randomness.Rng, dumped): set in a committed room only,
# and left out of the stored event otherwise, so that a seeded room's events are
# stored as they were before fair dealing (RULES 9).
RngField = Field(default=None, exclude_if=_absent)


def rng_public(rng: dict[str, Any] | None) -> dict[str, Any]:
    """The public part of an outcome's `rng` (its `input` is private until the end)."""
    if rng is None:
        return {}
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


class RoomCreated(Event):
    """The whole initial position, including the deck order a shuffle produced."""

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
    return {"mode": "committed", "algorithm": ALGORITHM,
            "commitment": fairness["commitment"]}


# --- custody of cards -------------------------------------------------------


class CardDrawn(Event):
    seat: str
    card: str

    def apply(self, state: RoomState) -> None:
        assert state.deck[0] == self.card
        state.deck.pop(0)
        state.seat(self.seat).hand.append(self.card)

    def public(self) -> dict[str, Any]:
        return {"seat": self.seat}

    def text(self) -> str:
        return f"{faction(self.seat)} drew a card"


class DiscardReshuffled(Event):
    """The empty deck was refilled from the whole discard pile, in this order."""

    order: list[str]
    rng: dict[str, Any] | None = RngField

    def apply(self, state: RoomState) -> None:
        state.deck = list(self.order)
        state.discard = []
        if state.fairness is not None:
            state.fairness.deck_shuffled = True  # the deck is shuffled now: no late shuffle

    def public(self) -> dict[str, Any]:
        return {"count": len(self.order), **rng_public(self.rng)}

    def text(self) -> str:
        return f"The discard pile ({len(self.order)} cards) was shuffled into the empty deck"


class CardDiscarded(Event):
    seat: str
    card: str

    def apply(self, state: RoomState) -> None:
        state.seat(self.seat).hand.remove(self.card)
        state.discard.append(self.card)
        if self.card in state.pile_unseen:
            state.pile_unseen.remove(self.card)

    def public(self) -> dict[str, Any]:
        # A discard is played face up: the card is public from now on.
        return {"seat": self.seat, "card": self.card}

    def text(self) -> str:
        return f"{faction(self.seat)} discarded {card(self.card)}"


class AutopilotSet(Event):
    seat: str
    profile: str | None

    def apply(self, state: RoomState) -> None:
        state.seat(self.seat).autopilot = self.profile  # type: ignore[assignment]

    def public(self) -> dict[str, Any]:
        return {"seat": self.seat, "profile": self.profile}

    def text(self) -> str:
        if self.profile is None:
            return f"{faction(self.seat)} turned autopilot off"
        return f"{faction(self.seat)} turned autopilot on ({self.profile})"


# --- the Nullentropy Box ------------------------------------------------------


class FeePaid(Event):
    seat: str
    amount: int
    card: str  # the card whose effect costs the fee

    def apply(self, state: RoomState) -> None:
        state.seat(self.seat).spice -= self.amount
        state.bank += self.amount

    def public(self) -> dict[str, Any]:
        return {"seat": self.seat, "amount": self.amount, "card": self.card}

    def text(self) -> str:
        return (f"{faction(self.seat)} paid {self.amount} spice to the Spice Bank for "
                f"{card(self.card)}")


class PromiseFulfilled(Event):
    """A Truthtrance promise of this Box activation was kept by paying its fee."""

    seat: str
    box: str

    def apply(self, state: RoomState) -> None:
        state.reservations = [
            r for r in state.reservations if not (r.faction == self.seat and r.box == self.box)
        ]

    def public(self) -> dict[str, Any]:
        return {"seat": self.seat, "box": self.box}

    def text(self) -> str:
        return f"{faction(self.seat)} kept the promise to activate {card(self.box)}"


class SearchOpened(Event):
    search: str
    owner: str
    box: str
    turn: int
    phase: int
    discard: list[str]  # private custody evidence: never public
    parent: dict[str, Any]  # the exact control the search suspends

    def apply(self, state: RoomState) -> None:
        # Any card of the pile but a Box may leave it unseen (derived, not stored).
        seen = set(state.pile_unseen)
        state.pile_unseen += [cid for cid in self.discard if cid not in seen
                              and not _is_box(cid)]
        state.search = Search(
            event=self.search,
            owner=self.owner,
            box=self.box,
            turn=self.turn,
            phase=self.phase,
            discard=list(self.discard),
            parent=Control.model_validate(self.parent),
        )
        state.control = Control(
            decision=Decision(
                kind="nullentropy",
                event=self.search,
                player=self.owner,
                turn=self.turn,
                phase=self.phase,
            )
        )

    def public(self) -> dict[str, Any]:
        return {"search": self.search, "owner": self.owner, "box": self.box}

    def text(self) -> str:
        return f"{faction(self.owner)} opened a paid Nullentropy Box search"


class CardRetrieved(Event):
    """v2: `claimed`, private like the card: the retrieved card was an unclaimed
    shipping cost, whose refund is now spent for ever (RULES 3.5). In v1 a
    `ShippingCostClaimed` event of its own followed, so the version numbers told
    everyone which card was taken."""

    schema_version = 2
    search: str
    seat: str
    card: str  # private to the owner
    claimed: bool  # private to the owner

    @classmethod
    def upcast(cls, data: dict[str, Any], from_version: int) -> dict[str, Any]:
        if from_version == 1:
            return {**data, "claimed": False}  # its ShippingCostClaimed follows
        return super().upcast(data, from_version)

    def apply(self, state: RoomState) -> None:
        state.discard.remove(self.card)
        state.seat(self.seat).hand.append(self.card)
        if self.claimed:
            for rec in state.shipping_costs:
                if rec.card == self.card:
                    rec.claimed = True

    def public(self) -> dict[str, Any]:
        return {"search": self.search, "seat": self.seat}

    def text(self) -> str:
        return f"{faction(self.seat)} took a card from the discard pile"


class PileShuffled(Event):
    search: str
    order: list[str]  # the resulting pile, bottom first: private
    rng: dict[str, Any] | None = RngField

    def apply(self, state: RoomState) -> None:
        state.discard = list(self.order)

    def public(self) -> dict[str, Any]:
        return {"search": self.search, "count": len(self.order), **rng_public(self.rng)}

    def text(self) -> str:
        return f"The discard pile was shuffled ({len(self.order)} cards)"


class BoxDiscarded(Event):
    search: str
    seat: str
    card: str

    def apply(self, state: RoomState) -> None:
        state.seat(self.seat).hand.remove(self.card)
        state.discard.append(self.card)

    def public(self) -> dict[str, Any]:
        return {"search": self.search, "seat": self.seat, "card": self.card}

    def text(self) -> str:
        return f"{faction(self.seat)} discarded {card(self.card)} on top of the discard pile"


class SearchClosed(DeadlineSinceV2, Event):
    """The search ended: the control it suspended is restored exactly. v2: a
    suspended window's new deadline, its remaining time from now (v1: none)."""

    schema_version = 2
    search: str
    deadline: str | None

    def apply(self, state: RoomState) -> None:
        assert state.search is not None and state.search.event == self.search
        state.control = state.search.parent
        state.search = None
        window = state.control.response
        if window is not None and window.remaining is not None:
            window.deadline, window.remaining = self.deadline, None

    def public(self) -> dict[str, Any]:
        return {"search": self.search}

    def text(self) -> str:
        return "The search closed and the game resumed where it was"
