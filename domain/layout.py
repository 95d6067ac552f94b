"""Layouts: the position a room starts from, validated before anything is stored.

Validation is strict (RULES 8): a number given as a string or a boolean is
refused, spice, the Bank, prices and reservations lie in 0..SPICE_MAX, and
every list and string is bounded, so that no stored room can hold a value the
store or the read models cannot encode. Then the records must agree with
each other (`_records_agree`, and `build_room` for what needs the catalog).
Each interpretation of what "contradict" means is written where it is checked.
"""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dune_ledger.domain import fairness
from dune_ledger.domain.ambassador import BG, COHORT_SIZE, ECAZ, TOKENS
from dune_ledger.domain.catalog import (
    CARDS,
    EXPANSIONS,
    NEWEST_CATALOG,
    Expansion,
    Faction,
    room_cards,
)
from dune_ledger.domain.commands import COUNT_MAX, Amount, CardId, Count, describe_errors
from dune_ledger.domain.errors import LayoutError
from dune_ledger.domain.events import RoomCreated
from dune_ledger.domain.nullentropy import FEE
from dune_ledger.domain.randomness import Randomness
from dune_ledger.domain.state import (
    AmbassadorState,
    Commitment,
    Control,
    Mode,
    Reservation,
    RoomState,
    Seat,
    ShippingCost,
)
from dune_ledger.domain.territories import Stronghold

# No zone holds more cards than the whole catalog; a longer list repeats or invents ids.
Cards = Annotated[list[CardId], Field(max_length=len(CARDS))]
Token = Annotated[str, Field(min_length=1, max_length=32)]
Tokens = Annotated[list[Token], Field(max_length=16)]
Name = Annotated[str, Field(min_length=1, max_length=64)]
CommitmentKind = Literal["battle_plan", "prescience", "ixian_replacement", "black_market",
                         "retained_loser", "truthtrance"]  # state.COMMITMENT_KINDS
# A staged control is free-form JSON (`data`): it is bounded by depth and size of
# numbers only, since its shape belongs to the rules module of its kind.
MAX_DEPTH = 32


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class SeatLayout(Strict):
    faction: Faction
    spice: Amount = 0
    hand: Cards = Field(default_factory=list)
    ally: Faction | None = None


class PlacedToken(Strict):
    token: Token
    territory: Stronghold


class AmbassadorLayout(Strict):
    """Ecaz's tokens. `cohort` null draws five at random from the supply; `copy_pool`
    null is every supply token a BG token may copy; `removed` holds spent BG tokens."""

    placed: Annotated[list[PlacedToken], Field(max_length=16)] = Field(default_factory=list)
    cohort: Tokens | None = None
    used: Tokens = Field(default_factory=list)
    removed: Tokens = Field(default_factory=list)
    copy_pool: Tokens | None = None


class ReservationLayout(Strict):
    faction: Faction
    amount: Amount
    reason: Name
    box: CardId | None = None


class CommitmentLayout(Strict):
    card: CardId
    kind: CommitmentKind


class ShippingCostLayout(Strict):
    card: CardId
    creator: Faction
    beneficiary: Faction
    price: Amount
    claimed: bool = False


class Layout(Strict):
    mode: Mode = "advanced"
    expansions: Annotated[list[Expansion], Field(max_length=len(EXPANSIONS))] = Field(
        default_factory=list)
    seed: Count | None = None
    bank: Amount = 1000
    turn: Annotated[int, Field(ge=1, le=COUNT_MAX)] = 1
    phase: Annotated[int, Field(ge=1, le=9)] = 1
    seats: Annotated[list[SeatLayout], Field(min_length=1, max_length=12)]
    discard: Cards = Field(default_factory=list)
    deck: Cards | None = None
    richese_cache: Cards | None = None
    removed: Cards = Field(default_factory=list)
    reservations: Annotated[list[ReservationLayout], Field(max_length=len(CARDS))] = Field(
        default_factory=list)
    commitments: Annotated[list[CommitmentLayout], Field(max_length=len(CARDS))] = Field(
        default_factory=list)
    shipping_costs: Annotated[list[ShippingCostLayout], Field(max_length=len(CARDS))] = Field(
        default_factory=list)
    ambassadors: AmbassadorLayout | None = None
    response_seconds: Annotated[int, Field(ge=0, le=1_000_000)] = 30
    # Extension: stage what the game is waiting for, to reproduce a position.
    control: Control | None = None


def parse_layout(raw: Any) -> Layout:
    """Validate a decoded JSON layout: fields, bounds, then the records' agreement."""
    if not isinstance(raw, dict):
        raise LayoutError("invalid layout: a layout must be a JSON object")
    if "control" in raw:
        _bounded(raw["control"], "control", 0)
    try:
        # Strict throughout, the staged control's state models included.
        layout = Layout.model_validate(raw, strict=True)
    except ValidationError as e:
        raise LayoutError(f"invalid layout: {describe_errors(e)}") from None
    _records_agree(layout)
    return layout


def _bounded(data: Any, where: str, depth: int) -> None:
    """Free-form JSON the store can always encode: bounded depth and 64-bit-safe integers."""
    if depth > MAX_DEPTH:
        raise LayoutError(f"invalid layout: {where}: nested deeper than {MAX_DEPTH} levels")
    if isinstance(data, bool) or data is None or isinstance(data, str | float):
        return
    if isinstance(data, int):
        if not -COUNT_MAX <= data <= COUNT_MAX:
            raise LayoutError(f"invalid layout: {where}: a number out of range "
                              f"(-{COUNT_MAX}..{COUNT_MAX})")
        return
    items = data.items() if isinstance(data, dict) else enumerate(data) \
        if isinstance(data, list) else ()
    for key, value in items:
        _bounded(value, f"{where}.{str(key)[:40]}", depth + 1)


def _records_agree(layout: Layout) -> None:
    """Records that contradict each other (RULES 8), before the catalog is consulted.

    - Each faction is seated once.
    - Alliances (RULES 1, 8: reciprocal): an ally must be seated and not the seat
      itself, and it names the seat back. A one-sided ally (the other side's
      `ally` null or another faction), or two seats naming the same ally,
      contradict.
    - Reservations name seated factions, and a seat's reservations add up to at
      most its spice: a reservation is spice of its own promised elsewhere.
    - One shipping-cost record per card (INTERFACE: records are identified by
      their card id); its creator and beneficiary are seated.
    - One commitment per card: a card is committed to one thing at a time.
    A staged `control` is left as staged (tests stage decisions of seats a
    layout leaves out, to watch them saved and restored); only its size is bounded.
    """
    problems: list[str] = []
    seated = {s.faction for s in layout.seats}
    twice = sorted(f for f, n in Counter(s.faction for s in layout.seats).items() if n > 1)
    if twice:
        problems.append(f"seats: factions seated twice: {', '.join(twice)}")
    allies = {s.faction: s.ally for s in layout.seats}
    for f, ally in allies.items():
        if ally is None:
            continue
        if ally == f:
            problems.append(f"seats: {f} is named as its own ally")
        elif ally not in seated:
            problems.append(f"seats: {f}'s ally {ally} has no seat")
        elif allies.get(ally) != f:
            problems.append(f"seats: the alliance of {f} and {ally} is not reciprocal: "
                            f"each seat's ally names the other")
    named = Counter(a for a in allies.values() if a is not None)
    for ally, n in sorted(named.items()):
        if n > 1:
            problems.append(f"seats: {ally} is named as the ally of {n} seats")
    reserved: Counter[str] = Counter()
    for r in layout.reservations:
        if r.faction not in seated:
            problems.append(f"reservations: {r.faction} has no seat")
        reserved[r.faction] += r.amount
    for s in layout.seats:
        if reserved[s.faction] > s.spice:
            problems.append(f"reservations: {s.faction}'s reservations add up to more "
                            f"than its spice")
    promised = Counter((r.faction, r.box) for r in layout.reservations if r.box is not None)
    for (f, box), n in sorted(promised.items()):
        if n > 1:
            problems.append(f"reservations: {f} promises {box} more than once")
    for cid, n in sorted(Counter(sc.card for sc in layout.shipping_costs).items()):
        if n > 1:
            problems.append(f"shipping_costs: {n} records for {cid}")
    for sc in layout.shipping_costs:
        for who in (sc.creator, sc.beneficiary):
            if who not in seated:
                problems.append(f"shipping_costs: {who} has no seat")
    for cid, n in sorted(Counter(cm.card for cm in layout.commitments).items()):
        if n > 1:
            problems.append(f"commitments: {cid} is committed {n} times")
    if problems:
        raise LayoutError("invalid layout: " + "; ".join(dict.fromkeys(problems)))


def committed_layout(layout: Layout) -> bool:
    """RULES 9: no `seed` and `deck: null` make a committed room."""
    return layout.seed is None and layout.deck is None


def build_room(layout: Layout, room: str, randomness: Randomness,
               secret: bytes | None = None, catalog: int = NEWEST_CATALOG) -> RoomCreated:
    """Check that every physical card of the room's `catalog` appears exactly once, and
    fill the deck.

    A committed layout needs the room's `secret` (32 bytes from the operating
    system): its deck stays in the catalog's order and Ecaz's cohort undrawn until the
    deal (RULES 9.4); `randomness` is then not used."""
    commit = None
    if committed_layout(layout):
        if secret is None or len(secret) != 32:
            raise ValueError("a committed room needs a 32-byte secret")
        commit = fairness.committed([s.faction for s in layout.seats], secret)
        commit.cohort_at_deal = layout.ambassadors is not None and \
            layout.ambassadors.cohort is None
    expansions = sorted(set(layout.expansions), key=EXPANSIONS.index)
    physical = room_cards(tuple(expansions), catalog)
    known = {cd.id for cd in physical}

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

    _cards_agree(layout, known)

    unplaced = [cd for cd in physical if cd.id not in set(placed)]
    cache = list(layout.richese_cache or [])
    if layout.richese_cache is None:
        cache = [cd.id for cd in unplaced if cd.zone == "cache"]
    deck_rest = [cd.id for cd in unplaced if cd.id not in cache]
    if layout.deck is not None and deck_rest:
        raise LayoutError(f"cards missing from the layout: {', '.join(deck_rest)}")
    # Drawn last: a refused layout draws no randomness.
    if committed_layout(layout):
        deck = deck_rest  # in the catalog's order: shuffled at the deal
    elif layout.deck is None:
        deck = randomness.shuffle(deck_rest) if deck_rest else []
    else:
        deck = list(layout.deck)

    state = RoomState(
        room=room,
        mode=layout.mode,
        expansions=list(expansions),
        catalog=catalog,
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
        # RULES 7: a layout's initial pile is unseen below its top (nobody saw it
        # discarded face up), so Semuta there is not publicly out of reach.
        pile_unseen=list(layout.discard[:-1]),
        cache=cache,
        removed=list(layout.removed),
        reservations=[Reservation(**r.model_dump()) for r in layout.reservations],
        commitments=[Commitment(**cm.model_dump()) for cm in layout.commitments],
        shipping_costs=[ShippingCost(**sc.model_dump()) for sc in layout.shipping_costs],
        ambassadors=_ambassadors(layout, None if commit else randomness),
        control=layout.control or Control(),
        response_seconds=layout.response_seconds,
        fairness=commit,
    )
    drawn = randomness.last_draw()
    return RoomCreated(state=state.model_dump(mode="json"),
                       rng=None if drawn is None else drawn.model_dump())


def _cards_agree(layout: Layout, known: set[str]) -> None:
    """Records that contradict where the cards are (RULES 8), by the catalog.

    Interpretations (RULES and INTERFACE imply them; the seeds are silent):
    - The Richese cache holds only cache cards: no rule moves a deck card into it.
    - A commitment (RULES 3.1: an accepted Ixian replacement, an unsold Black
      Market offer, a committed battle plan or prescience card, retained loser
      cards, a queued Truthtrance card) is of a card in a seat's hand: every
      kind is a card its holder has set aside, and the rules refuse it only to
      its holder, so a committed card elsewhere would stay committed unseen.
    - A Box promise (a reservation with `box`) is what a Truthtrance answer
      records: the promiser holds that Box, uncommitted, and the amount is the
      Box fee.
    - A shipping cost is a Karama spent to pay for a shipment (RULES 3.5), or,
      in advanced mode, a worthless card the Bene Gesserit spent as Karama
      (RULES 4.4). Its card may be anywhere: a reshuffle or a draw takes an
      unclaimed cost out of the pile, and the Guild's stop then refunds nothing
      (domain/guild.py), so a cost card outside the pile contradicts nothing.
    """
    problems: list[str] = []
    not_cache = sorted(cid for cid in layout.richese_cache or []
                       if cid in known and CARDS[cid].zone != "cache")
    if not_cache:
        problems.append(f"richese_cache: not cache cards: {', '.join(not_cache)}")
    holder = {cid: s.faction for s in layout.seats for cid in s.hand}
    committed = {cm.card for cm in layout.commitments}
    for cm in layout.commitments:
        if cm.card not in known:
            problems.append(f"commitments: {cm.card} is not in this room's catalog")
        elif cm.card not in holder:
            problems.append(f"commitments: {cm.card} is in no seat's hand")
    for r in layout.reservations:
        if r.box is None:
            continue
        if r.box not in known or not CARDS[r.box].is_box:
            problems.append(f"reservations: {r.box} is not a Nullentropy Box of this room")
        elif holder.get(r.box) != r.faction:
            problems.append(f"reservations: {r.faction} promises {r.box}, not in its hand")
        elif r.box in committed:
            problems.append(f"reservations: {r.faction} promises {r.box}, which is committed")
        if r.amount != FEE:
            problems.append(f"reservations: a Box promise reserves the fee of {FEE}")
    for sc in layout.shipping_costs:
        if sc.card not in known:
            problems.append(f"shipping_costs: {sc.card} is not in this room's catalog")
            continue
        cost = CARDS[sc.card]
        as_karama = (cost.is_worthless and sc.creator == "bene_gesserit"
                     and layout.mode == "advanced")
        if not (cost.is_karama or as_karama):
            problems.append(f"shipping_costs: {sc.card} is not a Karama its creator could spend")
    if problems:
        raise LayoutError("invalid layout: " + "; ".join(dict.fromkeys(problems)))


def _ambassadors(layout: Layout, randomness: Randomness | None) -> AmbassadorState | None:
    """Validate Ecaz's tokens (RULES 4): required exactly when Ecaz is seated. Without
    `randomness` (a committed room) a cohort the layout leaves to chance is drawn at
    the deal: none yet."""
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
    if cohort is not None and randomness is None:
        problems.append("a committed room (no seed, deck null) deals Ecaz's cohort at the "
                        "deal (RULES 9.2): leave cohort null")
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
    if cohort is None and randomness is None:
        cohort = []
    elif cohort is None:
        assert randomness is not None
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
