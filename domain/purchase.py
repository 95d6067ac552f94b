"""A purchase's child stages (RULES 4.3, 10.3): one mechanism, two sources.

A card bought through the Richese ambassador (domain/ambassador.py) or in the
Bidding round (domain/bidding.py) is paid for, then goes through the same stages
in this order, each only when it applies:

    income       an Emperor seat is in the room and is not the buyer: a Karama
                 window; if allowed, the price moves from the Bank to the Emperor
    bonus        a Harkonnen buyer below its hand limit when the stage is reached: a
                 Karama window; if allowed, one card from the top of the deck
    replacement  (the source says when: the Ixians' ally in advanced Bidding) the
                 buyer may discard the card just bought and draw the top card
    finish       the source's own last step

The receipt (`state.receipts`) records where the purchase stands; its stage is
advanced in the same append that opens the next window or decision, so a reload or
a repeated command can never reopen one. Each source names its window kinds, the
receipt being paid now and what finishing does (`Source`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from dune_ledger.domain import commands as c
from dune_ledger.domain.catalog import Faction
from dune_ledger.domain.custody import can_draw, discard_card, draw_card
from dune_ledger.domain.effect import Effect, Offer
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.events import Event
from dune_ledger.domain.responses import WindowKind, open_window
from dune_ledger.domain.rules import Tx
from dune_ledger.domain.shapes import DecisionShape
from dune_ledger.domain.state import Decision, Receipt, ResponseWindow, RoomState
from dune_ledger.domain.words import faction, stage

REPLACE = "ix_replace"


def _never(state: RoomState, receipt: Receipt) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class Source:
    """Where purchases come from: its window kinds, the receipt being paid now, and its
    last step."""

    name: str
    income: str  # the income window's kind
    bonus: str  # the bonus window's kind
    current: Callable[[RoomState], Receipt | None]
    finish: Callable[[Tx], None]
    replaces: Callable[[RoomState, Receipt], bool] = _never
    # The refusal when a window no longer matches the purchase being paid.
    invalid: tuple[str, str] = ("stale_event", "that purchase is no longer being paid")
    income_says: str = ("The Emperor is due the price from the Spice Bank for this "
                        "purchase. A Karama played now cancels that income: the spice "
                        "stays in the Bank. The purchase stands.")
    bonus_says: str = ("Harkonnen may draw one more card for this purchase. A Karama "
                       "played now cancels that bonus card. The purchase stands.")


def receipt_of(state: RoomState, event: str) -> Receipt | None:
    return next((r for r in state.receipts if r.event == event), None)


def emperor_for(state: RoomState, buyer: str) -> str | None:
    return "emperor" if state.has_seat("emperor") and buyer != "emperor" else None


def next_stage(state: RoomState, buyer: str, emperor: str | None, after: str,
               replacement: bool = False) -> str:
    """The next child stage after `after` (purchase, income, bonus or replacement)."""
    if after == "purchase" and emperor is not None:
        return "income"
    if after in ("purchase", "income") and buyer == "harkonnen":
        seat = state.seat(buyer)
        # Capacity is read when the stage is reached, not when the purchase was made.
        if len(seat.hand) < seat.limit:
            return "bonus"
    if after in ("purchase", "income", "bonus") and replacement:
        return "replacement"
    return "finish"


def advance(tx: Tx, source: Source, after: str) -> None:
    receipt = source.current(tx.state)
    assert receipt is not None
    nxt = next_stage(tx.state, receipt.buyer, receipt.emperor, after,
                     source.replaces(tx.state, receipt))
    if nxt != "finish":
        tx.emit(ReceiptAdvanced(event=receipt.event, stage=nxt))
    enter(tx, source, nxt)


def enter(tx: Tx, source: Source, name: str) -> None:
    if name == "finish":
        source.finish(tx)
        return
    receipt = source.current(tx.state)
    assert receipt is not None
    if name == "income":
        open_window(tx, source.income, {
            "entry": receipt.event, "stage": "income", "excluded": [receipt.emperor],
            "public": {"stage": "income", "payer": receipt.buyer,
                       "beneficiary": receipt.emperor, "amount": receipt.amount},
        })
    elif name == "bonus":
        open_window(tx, source.bonus, {
            "entry": receipt.event, "stage": "bonus", "excluded": [receipt.buyer],
            "public": {"stage": "bonus", "payer": receipt.buyer,
                       "beneficiary": receipt.buyer},
        })
    else:
        tx.emit(ReplacementOffered(event=receipt.event, decision=tx.next_event_id(),
                                   player=receipt.buyer, turn=tx.state.turn,
                                   phase=tx.state.phase))


def _bound(source: Source, state: RoomState, window: ResponseWindow) -> Receipt:
    """The receipt a closing window belongs to: its event and stage must match."""
    receipt = source.current(state)
    if (receipt is None or window.data.get("entry") != receipt.event
            or window.data.get("stage") != receipt.stage):
        raise Rejection(*source.invalid)
    return receipt


def windows(source: Source) -> tuple[WindowKind, WindowKind]:
    """The income and bonus window kinds of a source, for its effect to declare."""

    def resolve_income(tx: Tx, window: ResponseWindow, cancelled_by: str | None) -> None:
        receipt = _bound(source, tx.state, window)
        if cancelled_by is None and receipt.emperor is not None:
            # The buyer already paid the Bank; the income comes from there, never twice.
            amount = min(receipt.amount, tx.state.bank)
            tx.emit(EmperorIncomePaid(event=receipt.event, emperor=receipt.emperor,
                                      amount=amount))
        advance(tx, source, "income")

    def resolve_bonus(tx: Tx, window: ResponseWindow, cancelled_by: str | None) -> None:
        receipt = _bound(source, tx.state, window)
        if cancelled_by is None:
            seat = tx.state.seat(receipt.buyer)
            card = None
            # Capacity and pool are rechecked now: the income window may have changed both.
            if len(seat.hand) < seat.limit and can_draw(tx.state):
                card = draw_card(tx, receipt.buyer)
            tx.emit(HarkonnenBonusResolved(event=receipt.event, seat=receipt.buyer,
                                           card=card))
        advance(tx, source, "bonus")

    return (
        WindowKind(source.income, resolve_income, says=source.income_says,
                   public={"stage": Literal["income"], "payer": Faction,
                           "beneficiary": Faction | None, "amount": int}),
        WindowKind(source.bonus, resolve_bonus, says=source.bonus_says,
                   public={"stage": Literal["bonus"], "payer": Faction,
                           "beneficiary": Faction}),
    )


def replace(tx: Tx, source: Source, actor: str, event: str, accept: bool) -> None:
    """RULES 10.3: the buyer discards the card just bought and draws the top card, or
    keeps it."""
    state = tx.state
    d = state.control.decision
    if d is None or d.kind != REPLACE or d.event != event:
        raise Rejection("stale_event", "that decision is not open")
    if d.player != actor:
        raise Rejection("not_your_decision", f"this decision belongs to {d.player}")
    if (state.turn, state.phase) != (d.turn, d.phase) or state.control.response is not None:
        raise Rejection("stale_event", "that decision belongs to another moment")
    receipt = source.current(state)
    if receipt is None or receipt.event != d.data.get("receipt"):
        raise Rejection(*source.invalid)
    if accept and receipt.card not in state.seat(actor).hand:
        raise Rejection("not_in_hand", "the card you bought is no longer in your hand")
    tx.emit(ReplacementDecided(event=receipt.event, decision=d.event, seat=actor,
                               accept=accept))
    if accept:
        discard_card(tx, actor, receipt.card)
        if can_draw(tx.state):
            draw_card(tx, actor)
    advance(tx, source, "replacement")


# --- events -------------------------------------------------------------------------


class ReceiptAdvanced(Event):
    shown = ("event", "stage")

    event: str
    stage: str

    def apply(self, state: RoomState) -> None:
        receipt = receipt_of(state, self.event)
        assert receipt is not None
        receipt.stage = self.stage
        # An Ambassador entry shows its receipt's stage (RULES 4.4).
        amb = state.ambassadors
        if amb is not None and amb.entry is not None and amb.entry.event == self.event:
            amb.entry.stage = self.stage

    def text(self) -> str:
        if self.stage == "finish":
            return "The purchase is complete"
        return f"The purchase moves on to {stage(self.stage)}"


class EmperorIncomePaid(Event):
    shown = ("event", "emperor", "amount")

    event: str
    emperor: str
    amount: int

    def apply(self, state: RoomState) -> None:
        state.bank -= self.amount
        state.seat(self.emperor).spice += self.amount

    def text(self) -> str:
        return f"The Spice Bank paid {self.amount} spice to the {faction(self.emperor)}"


class HarkonnenBonusResolved(Event):
    shown_as = {"event": str, "seat": str, "drawn": bool}

    event: str
    seat: str
    card: str | None  # private to the buyer

    def apply(self, state: RoomState) -> None:
        receipt = receipt_of(state, self.event)
        assert receipt is not None
        receipt.bonus = self.card

    def public(self) -> dict[str, Any]:
        return {"event": self.event, "seat": self.seat, "drawn": self.card is not None}

    def text(self) -> str:
        if self.card is None:
            return f"{faction(self.seat)}'s bonus card: none could be drawn"
        return f"That card is {faction(self.seat)}'s bonus card"


class ReplacementOffered(Event):
    shown = ("event", "decision", "player")

    event: str  # the receipt
    decision: str
    player: str
    turn: int
    phase: int

    def apply(self, state: RoomState) -> None:
        state.control.decision = Decision(
            kind=REPLACE, event=self.decision, player=self.player,
            turn=self.turn, phase=self.phase, data={"receipt": self.event})

    def text(self) -> str:
        return (f"{faction(self.player)}, the Ixians' ally, may discard the card it bought "
                "and draw the top card of the deck")


class ReplacementDecided(Event):
    shown = ("event", "seat", "accept")

    event: str
    decision: str
    seat: str
    accept: bool

    def apply(self, state: RoomState) -> None:
        state.control.decision = None

    def text(self) -> str:
        if self.accept:
            return f"{faction(self.seat)} replaces the card it bought"
        return f"{faction(self.seat)} keeps the card it bought"


class ReplacementDecision(DecisionShape):
    kind: Literal["ix_replace"]


def answer_candidates(state: RoomState, seat: str) -> Iterator[c.Candidate]:
    d = state.control.decision
    if d is not None and d.kind == REPLACE and d.player == seat:
        for accept in (True, False):
            yield {"type": REPLACE, "event": d.event, "accept": accept}, {}


EFFECT = Effect(
    name="purchase",
    order=55,
    events=(ReceiptAdvanced, EmperorIncomePaid, HarkonnenBonusResolved, ReplacementOffered,
            ReplacementDecided),
    decisions=(ReplacementDecision,),
    offers=(Offer("decision", answer_candidates),),
)
