"""The state of one room: every zone of physical cards, spice, and control.

State is only ever changed by applying events (`domain.rules.apply`). It is
plain pydantic so that it dumps to canonical JSON for snapshots and the
audit's state hash.

The effects written before an effect could declare its part of the state
(`effect.Part`) keep theirs here, where they were, so that every stored state
reads and dumps as it did; a new effect declares its part, and `domain/game.py`
adds it to this class (`game.RoomState`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from dune_ledger.domain.catalog import FIRST_CATALOG, Faction, hand_limit, room_cards

Mode = Literal["basic", "advanced"]
Profile = Literal["easy", "medium", "hard", "brutal"]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def absent(value: Any) -> bool:
    """A field left out of the stored JSON while it holds nothing."""
    return value is None


def first_catalog(value: int) -> bool:
    """A room of the first catalog, which every room made before catalogs is."""
    return value == FIRST_CATALOG


class Seat(Model):
    faction: Faction
    spice: int
    hand: list[str] = Field(default_factory=list)
    ally: Faction | None = None
    autopilot: Profile | None = None

    @property
    def limit(self) -> int:
        return hand_limit(self.faction)


class Reservation(Model):
    """Spice promised elsewhere (paid auction, Truthtrance promise)."""

    faction: Faction
    amount: int
    reason: str
    box: str | None = None  # a Truthtrance promise of a future Box activation


# The commitments a layout may stage (RULES 3.1): every kind refuses the card
# alike (`custody.check_own_card`); the names are for people reading a layout.
COMMITMENT_KINDS = ("battle_plan", "prescience", "ixian_replacement", "black_market",
                    "retained_loser", "truthtrance")


class Commitment(Model):
    """A card committed elsewhere: it cannot be played or given."""

    card: str
    kind: str


class ShippingCost(Model):
    card: str
    creator: Faction
    beneficiary: Faction
    price: int
    claimed: bool = False  # a Box retrieved the card, or a stop refunded it: never again
    stopped: bool = False  # the Guild stopped this shipment (one stop per record)


class Decision(Model):
    """An open decision: one seat must act, bound to the event that opened it.

    `data` holds what the rules need to finish it; views show only `kind`,
    `event` and `player` unless a rules module says more is public.
    """

    kind: str
    event: str
    player: Faction
    turn: int
    phase: int
    data: dict[str, Any] = Field(default_factory=dict)


class ResponseWindow(Model):
    """A response window (RULES 4.4, 3.6) or the Richese gift offer (RULES 5).

    Who is waiting is read from public facts only (hand counts, passes), never
    from which cards a seat holds. `deadline` is an ISO time stored by the event
    that opened (or restored) it; `remaining` the seconds it had left when a
    search suspended it.
    """

    kind: str
    event: str
    turn: int
    phase: int
    passes: list[Faction] = Field(default_factory=list)
    data: dict[str, Any] = Field(default_factory=dict)
    deadline: str | None = None
    remaining: float | None = None


class SemutaQueue(Model):
    """Semuta windows waiting for the response slot, first in, first out (RULES 3.6)."""

    queue: list[ResponseWindow]


class QuestionFacts(Model):
    """What everyone sees of a Truthtrance question (RULES 5): all of it is public."""

    event: str  # the asking event's id: the answer quotes it
    asker: Faction
    target: Faction
    question: str
    card: str


class Question(QuestionFacts):
    """The open Truthtrance question: it must be answered first."""

    turn: int
    phase: int
    public: QuestionFacts


class GiftFacts(Model):
    event: str
    giver: Faction
    to: Faction


class GiftOffer(GiftFacts):
    """A Richese gift offer recorded before gifts were responses (GiftOffered v1)."""

    card: str  # private to the giver and the ally
    turn: int
    phase: int
    public: GiftFacts


class Control(Model):
    """What the game is waiting for. A Box search saves and restores all of it."""

    decision: Decision | None = None
    response: ResponseWindow | None = None
    pending_karama: dict[str, Any] | None = None
    phase_opening: dict[str, Any] | None = None


class Search(Model):
    """An open, paid Nullentropy Box search."""

    event: str
    owner: Faction
    box: str
    turn: int
    phase: int
    discard: list[str]  # the authorized inventory: the exact pile at payment
    parent: Control


class AmbassadorEntry(Model):
    """An entry into a territory holding an ambassador, being resolved (RULES 4)."""

    event: str  # the offer's event: the decision and the receipt are bound to it
    owner: str
    entrant: str
    token: str
    territory: str
    via: str
    turn: int
    phase: int
    stage: str  # offer, declined, copy, cards, no_effect, then the receipt's stages
    beneficiary: str | None
    effect: str | None  # the token whose effect resolves (a BG token's: the one it copies)
    # Left out of the dump until set, so that the state hash is what it was before they
    # were typed.
    committed: str | None = Field(default=None, exclude_if=absent)  # the token triggered
    receipt: str | None = Field(default=None, exclude_if=absent)  # the purchase's receipt


class AmbassadorState(Model):
    """Ecaz's tokens. `cohort` is the current five (each also in `placed`, `used`,
    `removed` or still in Ecaz's hand); `supply` the undrawn tokens; `copy_pool` what
    a BG token may copy; `entry` the entry being resolved (RULES 4)."""

    placed: dict[str, str] = Field(default_factory=dict)  # territory -> token
    cohort: list[str] = Field(default_factory=list)
    own: str | None = "ecaz"  # Ecaz's own token while in supply
    used: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    copy_pool: list[str] = Field(default_factory=list)
    supply: list[str] = Field(default_factory=list)  # tokens not yet drawn
    entry: AmbassadorEntry | None = None


class Receipt(Model):
    event: str
    buyer: Faction
    card: str
    amount: int
    emperor: Faction | None
    stage: str  # income, bonus or finish: advanced in the append that opens the next window
    bonus: str | None = None  # the Harkonnen bonus card, when one was drawn


class Fairness(Model):
    """A committed room's commit-reveal (RULES 9). `secret` (64 hex) is private until
    the room ends; `seeds` holds every seat's seed in force (None: none set)."""

    commitment: str
    secret: str
    seeds: dict[str, str | None]
    deck_shuffled: bool = False  # the late shuffle: at the first draw or reshuffle


class RoomState(Model):
    room: str
    mode: Mode
    expansions: list[str]
    # The catalog the room was created with (domain/catalog.py): left out of the stored
    # JSON for the first, so that a room made before catalogs reads as what it is.
    catalog: int = Field(default=FIRST_CATALOG, exclude_if=first_catalog)
    seed: int | None = None
    turn: int
    phase: int
    bank: int
    seats: list[Seat]
    deck: list[str]  # top first
    discard: list[str]  # bottom first: the top is the last element
    cache: list[str]
    removed: list[str]
    reservations: list[Reservation] = Field(default_factory=list)
    commitments: list[Commitment] = Field(default_factory=list)
    shipping_costs: list[ShippingCost] = Field(default_factory=list)
    ambassadors: AmbassadorState | None = None
    receipts: list[Receipt] = Field(default_factory=list)
    control: Control = Field(default_factory=Control)
    search: Search | None = None
    truthtrance: Question | None = None
    gift: GiftOffer | None = None  # only an offer recorded before gifts were responses
    semuta: SemutaQueue | None = None
    # Pile cards a Box search could have taken since they were last seen face up: where
    # they are is no longer public (RULES 3.6 reads it for "publicly out of reach").
    pile_unseen: list[str] = Field(default_factory=list)
    # Seconds a response or Semuta window waits before the worker closes it (0: no deadline).
    response_seconds: int = 30
    # Left out of the dump while None, so that a seeded or layout room's stored events,
    # snapshots and state hash are what they were before fair dealing.
    fairness: Fairness | None = Field(default=None, exclude_if=absent)
    ended: int | None = Field(default=None, exclude_if=absent)  # the version of the end
    version: int = 0  # the version of the last applied event

    def clone(self) -> RoomState:
        """An independent copy, of the same class (the effects' parts included); dump
        and validate is four times faster than deepcopy."""
        return type(self).model_validate(self.model_dump())

    def seat(self, faction: str) -> Seat:
        for s in self.seats:
            if s.faction == faction:
                return s
        raise KeyError(faction)

    def has_seat(self, faction: str) -> bool:
        return any(s.faction == faction for s in self.seats)

    def reserved(self, faction: str) -> int:
        return sum(r.amount for r in self.reservations if r.faction == faction)

    def free_spice(self, faction: str, *, activating: str | None = None) -> int:
        """Spice not promised elsewhere. Activating a Box that a promise names does
        not count that promise against its own fee (RULES 3.1)."""
        promised = sum(r.amount for r in self.reservations
                       if r.faction == faction and (activating is None or r.box != activating))
        return self.seat(faction).spice - promised

    def committed(self, card_id: str) -> str | None:
        for c in self.commitments:
            if c.card == card_id:
                return c.kind
        return None

    def holder(self, card_id: str) -> str | None:
        for s in self.seats:
            if card_id in s.hand:
                return s.faction
        return None

    def cards(self) -> tuple[str, ...]:
        """Every physical card of this room, in catalog order: each is in one zone."""
        return tuple(c.id for c in room_cards(tuple(self.expansions), self.catalog))

    def zones(self) -> dict[str, list[str]]:
        zones = {"deck": self.deck, "discard": self.discard, "cache": self.cache,
                 "removed": self.removed}
        for s in self.seats:
            zones[f"hand:{s.faction}"] = s.hand
        return zones

    def total_spice(self) -> int:
        return self.bank + sum(s.spice for s in self.seats)
