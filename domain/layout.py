"""Layouts: the position a room starts from, validated before anything is stored."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from domain.catalog import EXPANSIONS, Expansion, Faction, room_cards
from domain.errors import LayoutError
from domain.events import RoomCreated
from domain.randomness import Randomness
from domain.state import (
    AmbassadorState,
    Commitment,
    Control,
    Mode,
    Reservation,
    RoomState,
    Seat,
    ShippingCost,
)

Spice = Annotated[int, Field(ge=0)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SeatLayout(Strict):
    faction: Faction
    spice: Spice = 0
    hand: list[str] = Field(default_factory=list)
    ally: Faction | None = None


class PlacedToken(Strict):
    token: str
    territory: str


class AmbassadorLayout(Strict):
    """Ecaz's tokens. `cohort` null draws five at random from the supply; `copy_pool`
    null is every supply token a BG token may copy; `removed` holds spent BG tokens."""

    placed: list[PlacedToken] = Field(default_factory=list)
    cohort: list[str] | None = None
    used: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    copy_pool: list[str] | None = None


class ReservationLayout(Strict):
    faction: Faction
    amount: Spice
    reason: str
    box: str | None = None


class ShippingCostLayout(Strict):
    card: str
    creator: Faction
    beneficiary: Faction
    price: Spice
    claimed: bool = False


class Layout(Strict):
    mode: Mode = "advanced"
    expansions: list[Expansion] = Field(default_factory=list)
    seed: int | None = None
    bank: Spice = 1000
    turn: Annotated[int, Field(ge=1)] = 1
    phase: Annotated[int, Field(ge=1, le=9)] = 1
    seats: Annotated[list[SeatLayout], Field(min_length=1, max_length=12)]
    discard: list[str] = Field(default_factory=list)
    deck: list[str] | None = None
    richese_cache: list[str] | None = None
    removed: list[str] = Field(default_factory=list)
    reservations: list[ReservationLayout] = Field(default_factory=list)
    commitments: list[Commitment] = Field(default_factory=list)
    shipping_costs: list[ShippingCostLayout] = Field(default_factory=list)
    ambassadors: AmbassadorLayout | None = None
    response_seconds: Annotated[int, Field(ge=0, le=1_000_000)] = 30
    # Extension: stage what the game is waiting for, to reproduce a position.
    control: Control | None = None

    @model_validator(mode="after")
    def _seats_make_sense(self) -> Layout:
        factions = [s.faction for s in self.seats]
        twice = sorted(f for f, n in Counter(factions).items() if n > 1)
        if twice:
            raise ValueError(f"factions seated twice: {', '.join(twice)}")
        allies = {s.faction: s.ally for s in self.seats}
        for f, ally in allies.items():
            if ally is None:
                continue
            if ally not in allies:
                raise ValueError(f"{f}'s ally {ally} has no seat")
            if ally == f or allies.get(ally) not in (f, None):
                raise ValueError(f"alliance of {f} and {ally} is not reciprocal")
        return self


def parse_layout(raw: Any) -> Layout:
    try:
        return Layout.model_validate(raw)
    except ValidationError as e:
        where = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'layout'}: {err['msg']}"
            for err in e.errors()[:5]
        )
        raise LayoutError(f"invalid layout: {where}") from None


def build_room(layout: Layout, room: str, randomness: Randomness) -> RoomCreated:
    """Check that every physical card appears exactly once, and fill the deck."""
    expansions = sorted(set(layout.expansions), key=EXPANSIONS.index)
    physical = room_cards(tuple(expansions))
    known = {cd.id for cd in physical}
    seated = {s.faction for s in layout.seats}

    placed: list[str] = []
    for s in layout.seats:
        placed += s.hand
    placed += layout.discard + layout.removed
    placed += layout.deck or []
    placed += layout.richese_cache or []

    unknown = sorted({cid for cid in placed if cid not in known})
    if unknown:
        raise LayoutError(f"cards not in this room's catalog: {', '.join(unknown)}")
    twice = sorted(cid for cid, n in Counter(placed).items() if n > 1)
    if twice:
        raise LayoutError(f"cards placed more than once: {', '.join(twice)}")

    unplaced = [cd for cd in physical if cd.id not in set(placed)]
    cache = list(layout.richese_cache or [])
    if layout.richese_cache is None:
        cache = [cd.id for cd in unplaced if cd.zone == "cache"]
    deck_rest = [cd.id for cd in unplaced if cd.id not in cache]
    if layout.deck is None:
        deck = randomness.shuffle(deck_rest) if deck_rest else []
    else:
        if deck_rest:
            raise LayoutError(f"cards missing from the layout: {', '.join(deck_rest)}")
        deck = list(layout.deck)

    every = set(placed) | set(cache) | set(deck)
    for who in [r.faction for r in layout.reservations] + [
        f for sc in layout.shipping_costs for f in (sc.creator, sc.beneficiary)
    ]:
        if who not in seated:
            raise LayoutError(f"{who} has no seat")
    for ref in [cm.card for cm in layout.commitments] + [sc.card for sc in layout.shipping_costs]:
        if ref not in every:
            raise LayoutError(f"cards not in this room's catalog: {ref}")

    state = RoomState(
        room=room,
        mode=layout.mode,
        expansions=list(expansions),
        seed=layout.seed,
        turn=layout.turn,
        phase=layout.phase,
        bank=layout.bank,
        seats=[
            Seat(faction=s.faction, spice=s.spice, hand=list(s.hand), ally=s.ally)
            for s in layout.seats
        ],
        deck=deck,
        discard=list(layout.discard),
        cache=cache,
        removed=list(layout.removed),
        reservations=[Reservation(**r.model_dump()) for r in layout.reservations],
        commitments=list(layout.commitments),
        shipping_costs=[ShippingCost(**sc.model_dump()) for sc in layout.shipping_costs],
        ambassadors=_ambassadors(layout, randomness),
        control=layout.control or Control(),
        response_seconds=layout.response_seconds,
    )
    # Fill in reciprocal alliances named on one side only.
    for seat in state.seats:
        if seat.ally is not None:
            state.seat(seat.ally).ally = seat.faction
    return RoomCreated(state=state.model_dump(mode="json"))


def _ambassadors(layout: Layout, randomness: Randomness) -> AmbassadorState | None:
    """Validate Ecaz's tokens (RULES 4): required exactly when Ecaz is seated."""
    # Local: the ambassador rules import the rules core, which a layout must not need first.
    from domain.ambassador import BG, COHORT_SIZE, ECAZ, TOKENS

    amb = layout.ambassadors
    ecaz = any(s.faction == ECAZ for s in layout.seats)
    if amb is None:
        if ecaz:
            raise LayoutError("ecaz is seated: the layout needs its ambassadors")
        return None
    if not ecaz:
        raise LayoutError("ambassadors are in play only when ecaz is seated")
    placed = [p.token for p in amb.placed]
    territories = [p.territory for p in amb.placed]
    cohort = amb.cohort
    named = placed + amb.used + amb.removed + (cohort or []) + (amb.copy_pool or [])
    unknown = sorted({t for t in named if t not in TOKENS})
    if unknown:
        raise LayoutError(f"unknown ambassador tokens: {', '.join(unknown)}")
    for what, ids in (("territories", territories), ("placed tokens", placed),
                      ("cohort tokens", cohort or []), ("used tokens", amb.used),
                      ("removed tokens", amb.removed), ("copy pool tokens", amb.copy_pool or [])):
        twice = sorted(t for t, n in Counter(ids).items() if n > 1)
        if twice:
            raise LayoutError(f"{what} named more than once: {', '.join(twice)}")
    problems = []
    if ECAZ in (cohort or []) + amb.used + amb.removed + (amb.copy_pool or []):
        problems.append("the ecaz token is Ecaz's own: it can only be placed")
    if cohort is not None and len(cohort) > COHORT_SIZE:
        problems.append(f"a cohort holds at most {COHORT_SIZE} tokens")
    if cohort is not None and set(amb.used) - set(cohort):
        problems.append(f"used tokens outside the cohort: {sorted(set(amb.used) - set(cohort))}")
    if set(amb.removed) - {BG}:
        problems.append("only a BG token leaves the game")
    spent_placed = sorted(set(placed) & (set(amb.used) | set(amb.removed)))
    if spent_placed:
        problems.append(f"placed tokens already spent: {spent_placed}")
    if set(amb.used) & set(amb.removed):
        problems.append("a token is both used and removed")
    if cohort is not None and set(amb.copy_pool or []) & set(cohort):
        problems.append("the copy pool holds only tokens outside Ecaz's cohort")
    if problems:
        raise LayoutError("invalid ambassadors: " + "; ".join(problems))
    taken = {ECAZ, *placed, *amb.used, *amb.removed, *(cohort or [])}
    supply = [t for t in TOKENS if t not in taken]
    if cohort is None:
        # The draw is part of RoomCreated's state, so replay never draws it again.
        cohort = randomness.sample(supply, min(COHORT_SIZE, len(supply))) if supply else []
        supply = [t for t in supply if t not in cohort]
        if set(amb.copy_pool or []) & set(cohort):
            raise LayoutError("invalid ambassadors: the copy pool holds only tokens "
                              "outside Ecaz's cohort")
    copy_pool = amb.copy_pool
    if copy_pool is None:
        copy_pool = [t for t in supply if t != BG]
    return AmbassadorState(
        placed={p.territory: p.token for p in amb.placed},
        cohort=list(cohort),
        own=None if ECAZ in placed else ECAZ,
        used=list(amb.used),
        removed=list(amb.removed),
        copy_pool=list(copy_pool),
        supply=supply,
    )
