"""The Nullentropy Box: a paid, private search of the discard pile (RULES 3).

Begin pays 2 spice to the Bank and opens the search; select moves one
non-Box card to the owner's hand, shuffles the rest once, discards the Box
on top and restores the control the search suspended. Everything about the
Box lives in this module.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any, Literal

from dune_ledger.domain import commands as c
from dune_ledger.domain import guild, semuta
from dune_ledger.domain.catalog import CARDS, Faction, card_objects, is_box
from dune_ledger.domain.commands import CardId, Command, EventId
from dune_ledger.domain.custody import check_own_card
from dune_ledger.domain.effect import HOUSE, Disclosure, Effect, Offer, ViewShapes
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.events import RNG_SHOWN, DeadlineSinceV2, Event, RngField, rng_public
from dune_ledger.domain.rules import Tx
from dune_ledger.domain.shapes import CardFace, DecisionShape, Shape
from dune_ledger.domain.state import Control, Decision, RoomState, Search
from dune_ledger.domain.words import card, faction


class BeginSearch(Command):
    type: Literal["begin_search"]
    card: CardId


class SelectCard(Command):
    type: Literal["select_card"]
    search: EventId
    card: CardId


class FeePaid(Event):
    shown = ("seat", "amount", "card")

    seat: str
    amount: int
    card: str  # the card whose effect costs the fee

    def apply(self, state: RoomState) -> None:
        state.seat(self.seat).spice -= self.amount
        state.bank += self.amount

    def text(self) -> str:
        return (f"{faction(self.seat)} paid {self.amount} spice to the Spice Bank for "
                f"{card(self.card)}")


class PromiseFulfilled(Event):
    """A Truthtrance promise of this Box activation was kept by paying its fee."""

    shown = ("seat", "box")

    seat: str
    box: str

    def apply(self, state: RoomState) -> None:
        state.reservations = [
            r for r in state.reservations if not (r.faction == self.seat and r.box == self.box)
        ]

    def text(self) -> str:
        return f"{faction(self.seat)} kept the promise to activate {card(self.box)}"


class SearchOpened(Event):
    shown = ("search", "owner", "box")

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
                              and not is_box(cid)]
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

    def text(self) -> str:
        return f"{faction(self.owner)} opened a paid Nullentropy Box search"


class CardRetrieved(Event):
    """v2: `claimed`, private like the card: the retrieved card was an unclaimed
    shipping cost, whose refund is now spent for ever (RULES 3.5). In v1 a
    `ShippingCostClaimed` event of its own followed, so the version numbers told
    everyone which card was taken."""

    shown = ("search", "seat")

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

    def text(self) -> str:
        return f"{faction(self.seat)} took a card from the discard pile"


class PileShuffled(Event):
    shown_as = {"search": str, "count": int, "rng": RNG_SHOWN}

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
    shown = ("search", "seat", "card")

    search: str
    seat: str
    card: str

    def apply(self, state: RoomState) -> None:
        state.seat(self.seat).hand.remove(self.card)
        state.discard.append(self.card)

    def text(self) -> str:
        return f"{faction(self.seat)} discarded {card(self.card)} on top of the discard pile"


class SearchClosed(DeadlineSinceV2, Event):
    """The search ended: the control it suspended is restored exactly. v2: a
    suspended window's new deadline, its remaining time from now (v1: none)."""

    shown = ("search",)

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

    def text(self) -> str:
        return "The search closed and the game resumed where it was"


FEE = 2


def eligible(state: RoomState, pile: list[str]) -> list[str]:
    """The cards a search may take: every card of the pile except a Box and the cards
    a Semuta window is bound to (RULES 3.6: public, since the window is)."""
    bound = semuta.bound_cards(state)
    return [cid for cid in pile if not is_box(cid) and cid not in bound]


def display_order(ids: list[str]) -> list[str]:
    """A stable order that says nothing about the physical pile order."""
    return sorted(ids, key=lambda cid: (CARDS[cid].category, CARDS[cid].name, cid))


def check_begin(state: RoomState, actor: str, box: str) -> None:
    """Every condition of RULES 3.1, pure; raises the first Rejection that applies.

    The view calls this too, so `blocked` is null exactly when a begin would
    be accepted. No reason depends on another seat's hidden cards, and none
    names or counts the discard pile.
    """
    if box not in CARDS:
        raise Rejection("unknown_card", "no card has that id")
    if not is_box(box):
        raise Rejection("not_a_box", "that card is not a Nullentropy Box")
    # One message whether the Box is in the cache or another hand: where it is is not
    # the sender's business.
    check_own_card(state, actor, box)
    if state.search is not None:
        raise Rejection("locked", "a Nullentropy Box search is already open")
    if state.truthtrance is not None:
        raise Rejection("truthtrance_pending", "a Truthtrance question awaits its answer")
    if state.free_spice(actor, activating=box) < FEE:
        raise Rejection(
            "insufficient_spice", f"the Box costs {FEE} spice free of your reservations"
        )
    seat = state.seat(actor)
    if len(seat.hand) > seat.limit:
        raise Rejection("hand_over_limit", f"your hand is above its limit of {seat.limit}")
    if not eligible(state, state.discard):
        raise Rejection("no_eligible_card", "the discard pile holds no card a Box may take")


def full_hand_exchange(state: RoomState, faction: str) -> bool:
    seat = state.seat(faction)
    return len(seat.hand) == seat.limit


def begin_search(tx: Tx, actor: str, cmd: BeginSearch) -> None:
    state = tx.state
    check_begin(state, actor, cmd.card)
    promised = any(r.faction == actor and r.box == cmd.card for r in state.reservations)
    parent = state.control.model_dump(mode="json")
    suspended = state.control.response
    if suspended is not None and suspended.deadline is not None and tx.now is not None:
        # RULES 4.4: the window keeps its remaining time; the close stamps a new deadline.
        left = (datetime.fromisoformat(suspended.deadline) - tx.now).total_seconds()
        parent["response"]["remaining"] = max(0.0, left)
    tx.emit(FeePaid(seat=actor, amount=FEE, card=cmd.card))
    if promised:
        tx.emit(PromiseFulfilled(seat=actor, box=cmd.card))
    search = tx.next_event_id()
    tx.emit(
        SearchOpened(
            search=search,
            owner=actor,
            box=cmd.card,
            turn=state.turn,
            phase=state.phase,
            discard=list(state.discard),
            parent=parent,
        )
    )
    # One eligible card: nothing to choose, so the selection happens now.
    only = eligible(tx.state, tx.state.discard)
    if len(only) == 1:
        settle_search(tx, actor, search, only[0])


def select_card(tx: Tx, actor: str, cmd: SelectCard) -> None:
    settle_search(tx, actor, cmd.search, cmd.card)


def check_select(state: RoomState, actor: str, search_id: str, card_id: str) -> Search:
    search = state.search
    if search is None or search.event != search_id:
        raise Rejection("stale_event", "that search is not open")
    if search.owner != actor:
        raise Rejection("not_your_decision", "only the search's owner selects")
    if (state.turn, state.phase) != (search.turn, search.phase):
        raise Rejection("stale_event", "that search belongs to another turn or phase")
    check_custody(state, search)
    if card_id not in search.discard:
        raise Rejection("unknown_card", "that card is not in the discard pile")
    if is_box(card_id):
        raise Rejection("not_eligible", "a Box may not take another Box")
    if card_id in semuta.bound_cards(state):
        raise Rejection("not_eligible", "that card is bound to a Semuta window")
    return search


def check_custody(state: RoomState, search: Search) -> None:
    """Fail closed when the paid search no longer matches what was paid for."""
    if search.box not in state.seat(search.owner).hand or state.discard != search.discard:
        raise Rejection(
            "search_invalid", "the search no longer matches its paid inventory; ask an operator"
        )


def search_lock(state: RoomState, actor: str, command: Command) -> None:
    """RULES 3.3: while a search is open only its selection and what is accepted at any
    time are; everything else is refused before any handler runs."""
    if state.search is not None and not isinstance(command, (SelectCard, *HOUSE.any_time)):
        raise Rejection(
            "locked",
            "a Nullentropy Box search is open: only its owner's selection is accepted",
        )


def settle_search(tx: Tx, actor: str, search_id: str, card_id: str) -> None:
    search = check_select(tx.state, actor, search_id, card_id)
    # RULES 3.5: retrieving the exact shipping-cost card claims its refund for ever
    # (a different card leaves every record alone); a private field, so that the
    # events of every selection are the same in number and type (RULES 7).
    tx.emit(CardRetrieved(search=search.event, seat=actor, card=card_id,
                          claimed=guild.claims(tx.state, card_id)))
    remaining = list(tx.state.discard)
    order = tx.shuffle(remaining)
    tx.emit(PileShuffled(search=search.event, order=order, rng=tx.drawn()))
    discarded = tx.next_event_id()
    tx.emit(BoxDiscarded(search=search.event, seat=actor, card=search.box))
    restored = search.parent.response
    tx.emit(SearchClosed(search=search.event, deadline=None if restored is None
                         or restored.remaining is None else tx.deadline(restored.remaining)))
    # RULES 3.6: the Box's final discard (never the retrieved card, never the
    # shuffle) sets off what any discard does (a Semuta window), after the parent is
    # restored.
    for follow in HOUSE.after_discard:
        follow(tx, actor, [search.box], discarded)


def candidates(state: RoomState, faction: str) -> list[str] | None:
    """The owner's private candidate list while its search is open, else None."""
    search = state.search
    if search is None or search.owner != faction:
        return None
    try:
        check_custody(state, search)
    except Rejection:
        return None
    return display_order(eligible(state, search.discard))


# --- the view ----------------------------------------------------------------------

# What a search does, said before it is paid for (the pages show these words).
SAYS = (
    f"Pay {FEE} spice to the Spice Bank to search the discard in secret for one card other "
    "than a Box. The fee is spent as soon as the candidates are shown: a search cannot be "
    "called off. The rest of the discard is then shuffled and the Box goes on top."
)
FULL_HAND_NOTICE = (
    "Your hand is at its limit: the Box leaves as the card you take arrives "
    "(provisional full-hand exchange)."
)


def view_part(state: RoomState, seat: str | None) -> dict[str, Any]:
    """The open search, public (its event, owner and Box: never a card of the pile); in
    a seat's view also its own Box control."""
    s = state.search
    part: dict[str, Any] = {
        "search": None if s is None else {"event": s.event, "owner": s.owner, "box": s.box}}
    if seat is not None:
        part["nullentropy"] = _control(state, seat)
    return part


def _control(state: RoomState, faction: str) -> dict[str, Any] | None:
    """The owner's Box control: availability before payment, candidates after."""
    seat = state.seat(faction)
    search = state.search if state.search and state.search.owner == faction else None
    box = search.box if search else next((c for c in seat.hand if CARDS[c].is_box), None)
    if box is None:
        return None
    try:
        check_begin(state, faction, box)
        blocked = None
    except Rejection as r:
        blocked = r.code
    # The Box stays in hand while its owner chooses, so the flag holds throughout.
    exchange = full_hand_exchange(state, faction)
    cards = candidates(state, faction)
    control: dict[str, Any] = {
        "card": CARDS[box].public(),
        "blocked": blocked,
        "says": SAYS,
        "full_hand_exchange": exchange,
        "search": None if search is None else {
            "event": search.event,
            "cards": None if cards is None else card_objects(cards),
        },
    }
    if exchange:
        control["notice"] = FULL_HAND_NOTICE
    return control


class SearchShown(Shape):
    """The open search, public: never a card of the pile."""

    event: str
    owner: Faction
    box: str


class CandidatesShown(Shape):
    event: str
    cards: list[CardFace] | None


class BoxShown(Shape):
    """The owner's Box control."""

    card: CardFace
    blocked: str | None  # the code `begin_search` would be refused with now
    says: str
    full_hand_exchange: bool
    search: CandidatesShown | None
    notice: str = FULL_HAND_NOTICE  # with a full-hand exchange only


class SearchDecision(DecisionShape):
    kind: Literal["nullentropy"]


def forget_closed(view: dict[str, Any], now: RoomState) -> None:
    """A past view, seen now: a search's candidates vanish once that search has closed."""
    box = view.get("nullentropy")
    if box and box["search"] is not None:
        still_open = now.search is not None and now.search.event == box["search"]["event"]
        if not still_open:
            box["search"]["cards"] = None
            view["actions"] = [a for a in view["actions"] if a["type"] != "select_card"]


# --- the actions (domain/actions.py keeps those the rules accept) ---------------------


def selections(state: RoomState, seat: str) -> Iterator[c.Candidate]:
    """The open search: its owner's one bound selection, one entry per candidate."""
    search = state.search
    if search is not None and search.owner == seat:
        for cid in candidates(state, seat) or ():
            yield {"type": "select_card", "search": search.event, "card": cid}, {}


def action_candidates(state: RoomState, seat: str) -> Iterator[c.Candidate]:
    for cid in state.seat(seat).hand:
        if is_box(cid):
            yield {"type": "begin_search", "card": cid}, {}


# --- what the Box discloses (projections/guard.py withholds a row that names more) ------


def in_inventory(state: RoomState, card_id: str) -> bool:
    """A card of an open search's inventory below the top of the pile: where it is in
    the pile, or whether it is still there, is nobody's to see (RULES 3.4)."""
    search = state.search
    return search is not None and card_id in search.discard and card_id not in state.discard[-1:]


def retrieved(event: Event) -> list[str]:
    """The card a search took: never named in the public log."""
    return [event.card] if isinstance(event, CardRetrieved) else []


def shuffled(event: PileShuffled, before: RoomState | None) -> tuple[list[str], list[str], bool]:
    assert before is not None
    return list(before.discard), list(event.order), False


EFFECT = Effect(
    name="nullentropy",
    order=10,
    commands=(BeginSearch, SelectCard),
    autopilot={SelectCard: None},  # its one bound selection (RULES 3.7)
    handlers={BeginSearch: begin_search, SelectCard: select_card},
    events=(FeePaid, PromiseFulfilled, SearchOpened, CardRetrieved, PileShuffled, BoxDiscarded,
            SearchClosed),
    view=view_part,
    view_shapes=ViewShapes(public={"search": SearchShown | None},
                           seat={"nullentropy": BoxShown | None}),
    decisions=(SearchDecision,),
    past_view=forget_closed,
    offers=(Offer("any_time", selections), Offer("move", action_candidates)),
    gates=(search_lock,),
    outcomes={PileShuffled: shuffled},
    discloses=Disclosure(seat=lambda state, seat: candidates(state, seat) or (),
                         hidden=in_inventory, log=retrieved),
)
