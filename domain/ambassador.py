"""Ecaz's ambassadors and the Richese Ambassador purchase (RULES 4).

The flow of one entry, every step an event:

    enter_territory -> AmbassadorOffered (Ecaz's decision)
      decline -> finish
      trigger Richese -> purchase
      trigger BG -> AmbassadorCopyOffered (the beneficiary's decision)
                    -> ambassador_copy Richese -> purchase
    purchase -> (PurchasePaid, the draw, ReceiptStaged) or AmbassadorNoEffect
      -> income window (Emperor seated, not the buyer)
      -> bonus window (Harkonnen buyer below its limit when the stage is reached)
      -> finish: entry cleared, worm resumed once, cohort replenished

Where the flow stands lives in `state.ambassadors.entry`, the receipt's
stage and `state.control` (the open decision or response window), so a Box
search suspends and restores it exactly. The receipt's stage is advanced in
the same append that opens the next window: a reload or a repeated command
finds the stage already moved and cannot reopen a window or buy twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import Field

from dune_ledger.domain import commands as c
from dune_ledger.domain.catalog import Faction
from dune_ledger.domain.commands import Command, EventId
from dune_ledger.domain.custody import can_draw, draw_card
from dune_ledger.domain.effect import Disclosure, Effect, Offer, ViewShapes
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.events import RNG_SHOWN, Event, RngField, RoomCreated, rng_public
from dune_ledger.domain.purchase import (
    ReceiptAdvanced,
    Source,
    emperor_for,
    enter,
    next_stage,
    receipt_of,
    windows,
)
from dune_ledger.domain.rules import Tx
from dune_ledger.domain.shapes import DecisionShape, FreeChoice, Shape
from dune_ledger.domain.state import (
    AmbassadorEntry,
    AmbassadorState,
    Decision,
    Receipt,
    RoomState,
)
from dune_ledger.domain.territories import TERRITORIES, Territory
from dune_ledger.domain.words import faction, place, via

ECAZ = "ecaz"
RICHESE = "richese"
BG = "bene_gesserit"
TOKENS: tuple[str, ...] = (
    "ecaz", "atreides", "bene_gesserit", "choam", "emperor", "fremen", "harkonnen",
    "ixians", "richese", "guild", "tleilaxu",
)
COHORT_SIZE = 5
PRICE = 3
INCOME = "ambassador_income"
BONUS = "ambassador_bonus"
# The effects this module resolves; any other token is refused when triggered.
IMPLEMENTED = (RICHESE, BG)


# --- reading the state --------------------------------------------------------------


def entry_of(state: RoomState) -> AmbassadorEntry | None:
    amb = state.ambassadors
    return None if amb is None else amb.entry


def cohort_complete(amb: AmbassadorState) -> bool:
    spent = set(amb.used) | set(amb.removed)
    return bool(amb.cohort) and all(t in spent for t in amb.cohort)


def copy_options(amb: AmbassadorState) -> list[str]:
    return sorted(t for t in amb.copy_pool if t not in (ECAZ, BG))


def _bound_decision(state: RoomState, actor: str, event: str, kind: str) -> Decision:
    d = state.control.decision
    if d is None or d.kind != kind or d.event != event:
        raise Rejection("stale_event", "that decision is not open")
    if d.player != actor:
        raise Rejection("not_your_decision", f"this decision belongs to {d.player}")
    if (state.turn, state.phase) != (d.turn, d.phase):
        raise Rejection("stale_event", "that decision belongs to another turn or phase")
    if state.control.response is not None:
        raise Rejection("response_pending", "a response window is open: it closes first")
    entry = entry_of(state)
    if entry is None or entry.event != d.data.get("entry"):
        raise Rejection("ambassador_invalid", "the ambassador entry no longer matches; "
                        "ask an operator")
    return d


# --- commands -----------------------------------------------------------------------


class EnterTerritory(Command):
    written = {"territory": FreeChoice, "via": FreeChoice}
    type: Literal["enter_territory"]
    territory: Territory
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


def enter_territory(tx: Tx, actor: str, cmd: EnterTerritory) -> None:
    state = tx.state
    if entry_of(state) is not None:
        raise Rejection("decision_pending", "an ambassador entry is still being resolved")
    if state.control.decision is not None or state.control.response is not None:
        raise Rejection("decision_pending", "the game is waiting for another decision")
    if state.truthtrance is not None:
        raise Rejection("truthtrance_pending", "a Truthtrance question awaits its answer")
    tx.emit(TerritoryEntered(seat=actor, territory=cmd.territory, via=cmd.via))
    amb = state.ambassadors
    token = None if amb is None else amb.placed.get(cmd.territory)
    if token is None or not state.has_seat(ECAZ):
        return
    # Ecaz, its ally and the token's own faction cannot set a token off.
    if actor in (ECAZ, state.seat(ECAZ).ally, token):
        return
    tx.emit(AmbassadorOffered(
        event=tx.next_event_id(), owner=ECAZ, entrant=actor, token=token,
        territory=cmd.territory, via=cmd.via, turn=state.turn, phase=state.phase,
    ))


def ambassador_decide(tx: Tx, actor: str, cmd: AmbassadorDecide) -> None:
    state = tx.state
    _bound_decision(state, actor, cmd.event, "ambassador")
    entry = entry_of(state)
    assert entry is not None
    if not cmd.trigger:
        if cmd.beneficiary is not None:
            raise Rejection("invalid_command", "a declined token has no beneficiary")
        tx.emit(AmbassadorDeclined(event=entry.event))
        finish(tx)
        return
    if cmd.beneficiary is None:
        raise Rejection("invalid_command", "name the beneficiary: ecaz or its ally")
    ally = state.seat(ECAZ).ally
    if cmd.beneficiary not in (ECAZ, ally) or not state.has_seat(cmd.beneficiary):
        raise Rejection("not_eligible", "the beneficiary is Ecaz or its current ally")
    token = entry.token
    if token not in IMPLEMENTED:
        raise Rejection("not_implemented",
                        f"the {token} ambassador's effect is not implemented yet")
    tx.emit(AmbassadorTriggered(event=entry.event, token=token,
                                territory=entry.territory, beneficiary=cmd.beneficiary))
    if token == RICHESE:
        purchase(tx, cmd.beneficiary)
        return
    amb = tx.state.ambassadors
    assert amb is not None
    options = copy_options(amb)
    if not options:
        tx.emit(AmbassadorNoEffect(event=entry.event))
        finish(tx)
        return
    tx.emit(AmbassadorCopyOffered(
        event=entry.event, decision=tx.next_event_id(), player=cmd.beneficiary,
        options=options, turn=state.turn, phase=state.phase,
    ))


def ambassador_copy(tx: Tx, actor: str, cmd: AmbassadorCopy) -> None:
    state = tx.state
    d = _bound_decision(state, actor, cmd.event, "ambassador_copy")
    if cmd.token not in d.data.get("options", []):
        raise Rejection("not_eligible", "that token is not in the copy pool")
    if cmd.token != RICHESE:
        raise Rejection("not_implemented",
                        "that ambassador's effect is not implemented yet")
    tx.emit(AmbassadorCopied(event=d.data["entry"], decision=d.event, token=cmd.token))
    purchase(tx, actor)


# --- the purchase and its child stages ---------------------------------------------------


def purchase(tx: Tx, buyer: str) -> None:
    """RULES 4.2: buy automatically when possible; otherwise one generic no-op.

    Only the buyer's own free spice counts: no ally payment, no auction aid,
    and spice reserved elsewhere is not free.

    Public by the rules themselves (RULES 7): the purchase is automatic, so whether it
    happened (PurchasePaid or AmbassadorNoEffect) shows that the buyer could pay; which
    condition failed is never said.
    """
    state = tx.state
    entry = entry_of(state)
    assert entry is not None
    seat = state.seat(buyer)
    able = (state.free_spice(buyer) >= PRICE and len(seat.hand) < seat.limit
            and can_draw(state))
    if not able:
        tx.emit(AmbassadorNoEffect(event=entry.event))
        finish(tx)
        return
    tx.emit(PurchasePaid(event=entry.event, buyer=buyer, amount=PRICE))
    card = draw_card(tx, buyer)
    assert card is not None
    emperor = emperor_for(tx.state, buyer)
    stage = next_stage(tx.state, buyer, emperor, "purchase")
    tx.emit(ReceiptStaged(event=entry.event, buyer=buyer, card=card, amount=PRICE,
                          emperor=emperor, stage=stage))
    enter(tx, SOURCE, stage)


def current_receipt(state: RoomState) -> Receipt | None:
    """The receipt of the entry being resolved."""
    entry = entry_of(state)
    return None if entry is None else receipt_of(state, entry.event)


SOURCE = Source(
    name="ambassador", income=INCOME, bonus=BONUS, current=current_receipt,
    finish=lambda tx: finish(tx),
    invalid=("ambassador_invalid", "the response window no longer matches its ambassador "
             "purchase; ask an operator"),
    income_says=(f"The Emperor is due {PRICE} spice from the Spice Bank for this purchase. "
                 "A Karama played now cancels that income: the spice stays in the Bank. "
                 "The purchase stands."))


def finish(tx: Tx) -> None:
    """The only terminal step: clear the entry, resume a worm once, replenish a cohort."""
    entry = entry_of(tx.state)
    assert entry is not None
    event = entry.event
    receipt = receipt_of(tx.state, event)
    if receipt is not None and receipt.stage != "finish":
        tx.emit(ReceiptAdvanced(event=event, stage="finish"))
    tx.emit(AmbassadorEntryClosed(event=event))
    if entry.via == "worm":
        tx.emit(WormResumed(event=event, seat=entry.entrant,
                            territory=entry.territory))
    amb = tx.state.ambassadors
    assert amb is not None
    if cohort_complete(amb):
        pool = sorted(set(amb.supply) | set(amb.used))
        cohort = tx.sample(pool, min(COHORT_SIZE, len(pool))) if pool else []
        rest = [t for t in pool if t not in cohort]
        tx.emit(AmbassadorCohortDrawn(cohort=cohort, supply=rest,
                                      copy_pool=[t for t in rest if t != BG],
                                      rng=tx.drawn() if pool else None))


# --- events -------------------------------------------------------------------------


def _amb(state: RoomState) -> AmbassadorState:
    assert state.ambassadors is not None
    return state.ambassadors


def _entry(state: RoomState, event: str) -> AmbassadorEntry:
    entry = _amb(state).entry
    assert entry is not None and entry.event == event
    return entry


class TerritoryEntered(Event):
    """Forces entered a territory; the entry itself is never replayed."""

    shown = ("seat", "territory", "via")

    seat: str
    territory: str
    via: str

    def apply(self, state: RoomState) -> None:
        pass

    def text(self) -> str:
        return f"{faction(self.seat)} entered {place(self.territory)} {via(self.via)}"


class AmbassadorOffered(Event):
    shown = ("event", "owner", "entrant", "token", "territory", "via")

    event: str
    owner: str
    entrant: str
    token: str
    territory: str
    via: str
    turn: int
    phase: int

    def apply(self, state: RoomState) -> None:
        _amb(state).entry = AmbassadorEntry(
            event=self.event, owner=self.owner, entrant=self.entrant, token=self.token,
            territory=self.territory, via=self.via, turn=self.turn, phase=self.phase,
            stage="offer", beneficiary=None, effect=None)
        state.control.decision = Decision(
            kind="ambassador", event=self.event, player=self.owner,
            turn=self.turn, phase=self.phase,
            data={"entry": self.event, "public": {
                "territory": self.territory, "token": self.token, "entrant": self.entrant}},
        )

    def text(self) -> str:
        return (f"{faction(self.entrant)} entered {place(self.territory)}, which holds the "
                f"{faction(self.token)} ambassador: {faction(self.owner)} may trigger it")


class AmbassadorDeclined(Event):
    shown = ("event",)

    event: str

    def apply(self, state: RoomState) -> None:
        _entry(state, self.event).stage = "declined"
        state.control.decision = None

    def text(self) -> str:
        return "Ecaz declined to trigger the ambassador"


class AmbassadorTriggered(Event):
    """The physical token is committed: a BG token leaves the game, others are used."""

    shown = ("event", "token", "territory", "beneficiary")

    event: str
    token: str
    territory: str
    beneficiary: str

    def apply(self, state: RoomState) -> None:
        amb = _amb(state)
        entry = _entry(state, self.event)
        amb.placed.pop(self.territory, None)
        if self.token == BG:
            amb.removed.append(self.token)
        else:
            amb.used.append(self.token)
        entry.stage, entry.beneficiary, entry.committed = "cards", self.beneficiary, self.token
        entry.effect = self.token if self.token != BG else None
        state.control.decision = None

    def text(self) -> str:
        return (f"Ecaz triggered the {faction(self.token)} ambassador for "
                f"{faction(self.beneficiary)}")


class AmbassadorCopyOffered(Event):
    shown = ("event", "decision", "player")

    event: str  # the entry
    decision: str  # the id the copy decision binds to
    player: str
    options: list[str]  # the recorded copy pool: private to the player
    turn: int
    phase: int

    def apply(self, state: RoomState) -> None:
        _entry(state, self.event).stage = "copy"
        state.control.decision = Decision(
            kind="ambassador_copy", event=self.decision, player=self.player,
            turn=self.turn, phase=self.phase,
            data={"entry": self.event, "options": list(self.options),
                  "private": {"options": list(self.options)}},
        )

    def text(self) -> str:
        return f"{faction(self.player)} may copy an ambassador with the {faction(BG)} token"


class AmbassadorCopied(Event):
    shown = ("event", "token")

    event: str
    decision: str
    token: str

    def apply(self, state: RoomState) -> None:
        entry = _entry(state, self.event)
        entry.stage, entry.effect = "cards", self.token
        state.control.decision = None

    def text(self) -> str:
        return f"The {faction(BG)} ambassador copies the {faction(self.token)} ambassador"


class AmbassadorNoEffect(Event):
    """The committed effect had no result. Deliberately says nothing about why."""

    shown = ("event",)

    event: str

    def apply(self, state: RoomState) -> None:
        _entry(state, self.event).stage = "no_effect"

    def text(self) -> str:
        return "The ambassador's effect completed with no result"


class PurchasePaid(Event):
    shown = ("event", "buyer", "amount")

    event: str
    buyer: str
    amount: int

    def apply(self, state: RoomState) -> None:
        state.seat(self.buyer).spice -= self.amount
        state.bank += self.amount

    def text(self) -> str:
        return (f"{faction(self.buyer)} paid {self.amount} spice to the Spice Bank for a "
                "Treachery card")


class ReceiptStaged(Event):
    shown = ("event", "buyer", "amount", "emperor", "stage")

    event: str
    buyer: str
    card: str  # private to the buyer
    amount: int
    emperor: str | None
    stage: str

    def apply(self, state: RoomState) -> None:
        state.receipts.append(Receipt(
            event=self.event, buyer=self.buyer, card=self.card,
            amount=self.amount, emperor=self.emperor, stage=self.stage,
        ))
        entry = _entry(state, self.event)
        entry.stage, entry.receipt = self.stage, self.event

    def text(self) -> str:
        return f"{faction(self.buyer)} bought a Treachery card through the Richese ambassador"


class AmbassadorEntryClosed(Event):
    shown = ("event",)

    event: str

    def apply(self, state: RoomState) -> None:
        _entry(state, self.event)
        _amb(state).entry = None

    def text(self) -> str:
        return "The ambassador's effect is over"


class WormResumed(Event):
    """The worm's continuation resumes, once; the entry itself is not replayed."""

    shown = ("event", "seat", "territory")

    event: str
    seat: str
    territory: str

    def apply(self, state: RoomState) -> None:
        pass

    def text(self) -> str:
        return f"The worm carrying {faction(self.seat)} resumes from {place(self.territory)}"


class AmbassadorCohortDrawn(Event):
    """Ecaz's five were all spent: five new ones, drawn from the returned and unused tokens."""

    shown_as = {"count": int, "rng": RNG_SHOWN}

    cohort: list[str]
    supply: list[str]
    copy_pool: list[str]
    rng: dict[str, Any] | None = RngField

    def apply(self, state: RoomState) -> None:
        amb = _amb(state)
        amb.cohort = list(self.cohort)
        amb.supply = list(self.supply)
        amb.copy_pool = list(self.copy_pool)
        amb.used = []

    def public(self) -> dict[str, Any]:
        return {"count": len(self.cohort), **rng_public(self.rng)}

    def text(self) -> str:
        return f"Ecaz drew {len(self.cohort)} new ambassadors"


# --- the view ----------------------------------------------------------------------


def decision_says(kind: str, public: dict[str, Any]) -> str | None:
    """What an Ambassador choice does, from public facts only."""
    if kind == "ambassador" and public.get("token") == "richese":
        return (f"Triggering the Richese ambassador lets its beneficiary (Ecaz, or Ecaz's ally) "
                f"buy the top Treachery card for {PRICE} spice of its own, if it has "
                "the spice, room in hand and a card to draw. Declining leaves the token.")
    if kind == "ambassador" and public.get("token") == "bene_gesserit":
        return ("Triggering the Bene Gesserit ambassador lets its beneficiary use the effect "
                "of a token from the copy pool. Declining leaves the token.")
    if kind == "ambassador":
        return "Triggering commits the ambassador token; declining leaves it where it is."
    if kind == "ambassador_copy":
        return "Choose the token whose effect the Bene Gesserit ambassador copies."
    return None


def view_part(state: RoomState, seat: str | None) -> dict[str, Any]:
    """The open decision and the entry being resolved, public; in a seat's view also its
    own decision's private facts (a BG copy pool) and its own receipts."""
    part: dict[str, Any] = {"decision": _decision_view(state.control.decision, seat),
                            "ambassador": _ambassador_view(state)}
    if seat is not None:
        part["receipts"] = [r.model_dump(mode="json") for r in state.receipts if r.buyer == seat]
    return part


def _decision_view(d: Decision | None, seat: str | None) -> dict[str, Any] | None:
    if d is None:
        return None
    public = d.data.get("public", {})
    says = decision_says(d.kind, public)
    view = {"kind": d.kind, "event": d.event, "player": d.player, **public,
            **({"says": says} if says else {})}
    if d.player == seat:
        view.update(d.data.get("private", {}))
    return view


def _ambassador_view(state: RoomState) -> dict[str, Any] | None:
    amb = state.ambassadors
    if amb is None:
        return None
    return {
        "placed": dict(sorted(amb.placed.items())),
        "used": list(amb.used),
        "removed": list(amb.removed),
        "cohort_count": len(amb.cohort),
        "entry": _entry_view(state, amb.entry),
    }


def _entry_view(state: RoomState, entry: AmbassadorEntry | None) -> dict[str, Any] | None:
    """RULES 4.4: the stage, the payer and counts; never a card or a reason."""
    if entry is None:
        return None
    receipt = receipt_of(state, entry.event)
    return {
        "event": entry.event, "entrant": entry.entrant, "token": entry.token,
        "territory": entry.territory, "via": entry.via, "stage": entry.stage,
        "beneficiary": entry.beneficiary,
        "payer": None if receipt is None else receipt.buyer,
        "amount": 0 if receipt is None else receipt.amount,
        "cards": 0 if receipt is None else 1 + (receipt.bonus is not None),
    }


class AmbassadorEntryShown(Shape):
    event: str
    entrant: Faction
    token: str
    territory: str
    via: str
    stage: str
    beneficiary: Faction | None
    payer: Faction | None
    amount: int
    cards: int


class AmbassadorsShown(Shape):
    placed: dict[str, str]  # territory -> token
    used: list[str]
    removed: list[str]
    cohort_count: int
    entry: AmbassadorEntryShown | None


class ReceiptShown(Shape):
    event: str
    buyer: Faction
    card: str
    amount: int
    emperor: Faction | None
    stage: str
    bonus: str | None


class AmbassadorDecision(DecisionShape):
    kind: Literal["ambassador"]
    territory: str
    token: str
    entrant: Faction
    says: str


class AmbassadorCopyDecision(DecisionShape):
    kind: Literal["ambassador_copy"]
    says: str
    options: list[str] = []  # the copy pool: its player's view only


# --- the actions (domain/actions.py keeps those the rules accept) ---------------------

TERRITORY = {"kind": "choice", "options": list(TERRITORIES)}
VIA = {"kind": "choice", "options": ["shipment", "movement", "worm"]}


def answer_candidates(state: RoomState, seat: str) -> Iterator[c.Candidate]:
    """The answers to the seat's own open decision."""
    decision = state.control.decision
    if decision is None or decision.player != seat:
        return
    if decision.kind == "ambassador":
        yield {"type": "ambassador_decide", "event": decision.event, "trigger": False}, {}
        ally = state.seat(ECAZ).ally if state.has_seat(ECAZ) else None
        for beneficiary in (ECAZ, ally):
            if beneficiary is not None:
                yield ({"type": "ambassador_decide", "event": decision.event,
                        "trigger": True, "beneficiary": beneficiary}, {})
    elif decision.kind == "ambassador_copy":
        for token in decision.data.get("options", []):
            yield {"type": "ambassador_copy", "event": decision.event, "token": token}, {}


def action_candidates(state: RoomState, seat: str) -> Iterator[c.Candidate]:
    yield {"type": "enter_territory"}, {"territory": TERRITORY, "via": VIA}


# --- what a verifier re-derives, and what a seat may see ------------------------------


def cohort_at_creation(event: RoomCreated,
                       before: RoomState | None) -> tuple[list[str], list[str], bool]:
    """The cohort a committed room drew at creation, from the supply in the catalog's
    order of tokens (domain/layout.py): the tokens drawn and those left in it."""
    amb = event.state.get("ambassadors") or {}
    drawn = list(amb.get("cohort", []))
    pool = set(drawn) | set(amb.get("supply", []))
    return [t for t in TOKENS if t in pool], drawn, True


def cohort_drawn(event: AmbassadorCohortDrawn,
                 before: RoomState | None) -> tuple[list[str], list[str], bool]:
    assert before is not None
    amb = before.ambassadors
    assert amb is not None
    return sorted(set(amb.supply) | set(amb.used)), list(event.cohort), True


def own_receipts(state: RoomState, seat: str) -> list[str]:
    """The cards a seat bought, and its bonus cards."""
    return [cid for r in state.receipts if r.buyer == seat
            for cid in (r.card, r.bonus) if cid is not None]


EFFECT = Effect(
    name="ambassador",
    order=60,
    commands=(EnterTerritory, AmbassadorDecide, AmbassadorCopy),
    handlers={EnterTerritory: enter_territory, AmbassadorDecide: ambassador_decide,
              AmbassadorCopy: ambassador_copy},
    events=(TerritoryEntered, AmbassadorOffered, AmbassadorDeclined, AmbassadorTriggered,
            AmbassadorCopyOffered, AmbassadorCopied, AmbassadorNoEffect, PurchasePaid,
            ReceiptStaged, AmbassadorEntryClosed, WormResumed, AmbassadorCohortDrawn),
    view=view_part,
    view_shapes=ViewShapes(public={"ambassador": AmbassadorsShown | None},
                           seat={"receipts": list[ReceiptShown]}),
    decisions=(AmbassadorDecision, AmbassadorCopyDecision),
    offers=(Offer("decision", answer_candidates), Offer("move", action_candidates)),
    windows=windows(SOURCE),
    outcomes={RoomCreated: cohort_at_creation, AmbassadorCohortDrawn: cohort_drawn},
    discloses=Disclosure(seat=own_receipts),
)
