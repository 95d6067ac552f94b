"""Truthtrance: a public yes/no question that must be answered first (RULES 5, 3.1).

Asking discards the Truthtrance card (a single-seat discard: Semuta may react)
and opens the question in `state.truthtrance`. Until the target answers, the
game does not go on: every command but the answer and seat control is refused
with `truthtrance_pending`, and no Box search may begin (answer-first: a
search never suspends an unanswered question).

The answer may carry a promise. A spice promise reserves that amount: it
reduces what the seat can pay from then on. A Box promise reserves the Box
fee for a named future Box activation; it does not block that activation's
own fee, and paying the fee fulfils it (`nullentropy.begin_search` emits
`PromiseFulfilled`). Interpretation: a spice promise has no command that
releases it in this slice, so it stays reserved.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import Field

from dune_ledger.domain import commands as c
from dune_ledger.domain import words
from dune_ledger.domain.catalog import CARDS, Faction, card, is_box
from dune_ledger.domain.commands import CardId, Command, EventId, Promise
from dune_ledger.domain.custody import check_own_card, discard_card
from dune_ledger.domain.effect import HOUSE, Effect, Offer
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.events import Event
from dune_ledger.domain.nullentropy import FEE
from dune_ledger.domain.rules import Tx
from dune_ledger.domain.state import Question, QuestionFacts, Reservation, RoomState
from dune_ledger.domain.words import faction

REASON = "truthtrance"


class AskTruthtrance(Command):
    type: Literal["ask_truthtrance"]
    card: CardId
    target: Faction
    question: Annotated[str, Field(min_length=1, max_length=500)]


class AnswerTruthtrance(Command):
    type: Literal["answer_truthtrance"]
    event: EventId
    answer: Literal["yes", "no"]
    promise: Promise | None = None


def is_truthtrance(card_id: str) -> bool:
    return card_id in CARDS and CARDS[card_id].effect == "truthtrance"


# --- events -------------------------------------------------------------------


class TruthtranceAsked(Event):
    event: str  # this event's own id: the answer quotes it
    asker: str
    target: str
    card: str
    question: str
    turn: int
    phase: int

    def apply(self, state: RoomState) -> None:
        public = QuestionFacts(event=self.event, asker=self.asker, target=self.target,
                               question=self.question, card=self.card)
        state.truthtrance = Question(**dict(public), turn=self.turn, phase=self.phase,
                                     public=public)

    def public(self) -> dict[str, Any]:
        return {"event": self.event, "asker": self.asker, "target": self.target,
                "card": self.card, "question": self.question}

    def text(self) -> str:
        return (f"{faction(self.asker)} asked {faction(self.target)} under Truthtrance: "
                f"{self.question}")


class TruthtranceAnswered(Event):
    event: str
    target: str
    answer: str
    promise: dict[str, Any] | None  # {"spice": N} or {"box": CARD}: public, like the answer

    def apply(self, state: RoomState) -> None:
        state.truthtrance = None
        if self.promise is None:
            return
        if "box" in self.promise:
            state.reservations.append(Reservation(
                faction=self.target, amount=FEE, reason=REASON, box=self.promise["box"]))
        else:
            state.reservations.append(Reservation(
                faction=self.target, amount=int(self.promise["spice"]), reason=REASON))

    def public(self) -> dict[str, Any]:
        return {"event": self.event, "target": self.target, "answer": self.answer,
                "promise": self.promise}

    def text(self) -> str:
        line = f"{faction(self.target)} answered {self.answer}"
        if self.promise is not None and "box" in self.promise:
            line += f", promising to activate {words.card(self.promise['box'])}"
        elif self.promise is not None:
            line += f", promising {self.promise['spice']} spice"
        return line


# --- the answer-first gate ------------------------------------------------------


def answer_first(state: RoomState, actor: str, command: Command) -> None:
    """While a question waits, only its answer and what is accepted at any time."""
    if state.truthtrance is not None and \
            not isinstance(command, (AnswerTruthtrance, *HOUSE.any_time)):
        raise Rejection(
            "truthtrance_pending",
            f"{state.truthtrance.target} must answer the Truthtrance question first",
        )



# --- commands -------------------------------------------------------------------


def ask_truthtrance(tx: Tx, actor: str, cmd: AskTruthtrance) -> None:
    state = tx.state
    check_own_card(state, actor, cmd.card)
    if not is_truthtrance(cmd.card):
        raise Rejection("not_a_truthtrance", "that card is not a Truthtrance card")
    if not state.has_seat(cmd.target):
        raise Rejection("unknown_seat", "that faction has no seat in this room")
    if cmd.target == actor:
        raise Rejection("invalid_target", "a Truthtrance question is asked of another seat")
    discard_card(tx, actor, cmd.card)
    tx.emit(TruthtranceAsked(
        event=tx.next_event_id(), asker=actor, target=cmd.target, card=cmd.card,
        question=cmd.question, turn=state.turn, phase=state.phase))


def answer_truthtrance(tx: Tx, actor: str, cmd: AnswerTruthtrance) -> None:
    state = tx.state
    pending = state.truthtrance
    if pending is None or pending.event != cmd.event:
        raise Rejection("stale_event", "that Truthtrance question is not awaiting an answer")
    if pending.target != actor:
        raise Rejection("not_your_decision", "only the seat asked answers the question")
    if (pending.turn, pending.phase) != (state.turn, state.phase):
        raise Rejection("stale_event", "that question belongs to another turn or phase")
    promise: dict[str, Any] | None = None
    if isinstance(cmd.promise, c.SpicePromise):
        if state.free_spice(actor) < cmd.promise.spice:
            raise Rejection("insufficient_spice",
                            "you cannot promise more spice than you hold free of reservations")
        promise = {"spice": cmd.promise.spice}
    elif isinstance(cmd.promise, c.BoxPromise):
        box = cmd.promise.box
        if box not in CARDS:
            raise Rejection("unknown_card", "no card has that id")
        if not card(box).is_box:
            raise Rejection("not_a_box", "that card is not a Nullentropy Box")
        check_own_card(state, actor, box)
        if any(r.faction == actor and r.box == box for r in state.reservations):
            raise Rejection("already_promised", "that Box is already promised")
        # The promised fee shares the purse with every other obligation.
        if state.free_spice(actor) < FEE:
            raise Rejection("insufficient_spice",
                            f"the promised Box fee of {FEE} exceeds your free spice")
        promise = {"box": box}
    tx.emit(TruthtranceAnswered(event=cmd.event, target=actor, answer=cmd.answer,
                                promise=promise))


# --- the view ----------------------------------------------------------------------

SAYS = (
    "A promise binds you: promised spice stays reserved, so you cannot spend it elsewhere; "
    "a promised Box fee is paid by that Box's next search."
)


def view_part(state: RoomState, seat: str | None) -> dict[str, Any]:
    """The open question, public like its asking."""
    q = state.truthtrance
    return {"truthtrance": None if q is None else {**q.public.model_dump(), "says": SAYS}}


# --- the actions (domain/actions.py keeps those the rules accept) ---------------------

QUESTION = {"kind": "text", "min_length": 1, "max_length": 500}


def answer_candidates(state: RoomState, seat: str) -> Iterator[c.Candidate]:
    question = state.truthtrance
    if question is None or question.target != seat:
        return
    event = question.event
    free_spice = state.free_spice(seat)
    for answer in ("yes", "no"):
        yield {"type": "answer_truthtrance", "event": event, "answer": answer}, {}
        for cid in state.seat(seat).hand:
            if is_box(cid):
                yield ({"type": "answer_truthtrance", "event": event, "answer": answer,
                        "promise": {"box": cid}}, {})
        if free_spice >= 1:
            yield ({"type": "answer_truthtrance", "event": event, "answer": answer},
                   {"promise": {"kind": "spice_promise", "min": 1, "max": free_spice}})


def action_candidates(state: RoomState, seat: str) -> Iterator[c.Candidate]:
    others = [s.faction for s in state.seats if s.faction != seat]
    for cid in state.seat(seat).hand:
        if is_truthtrance(cid):
            for target in others:
                yield ({"type": "ask_truthtrance", "card": cid, "target": target},
                       {"question": QUESTION})


EFFECT = Effect(
    name="truthtrance",
    order=50,
    commands=(AskTruthtrance, AnswerTruthtrance),
    handlers={AskTruthtrance: ask_truthtrance, AnswerTruthtrance: answer_truthtrance},
    events=(TruthtranceAsked, TruthtranceAnswered),
    view=view_part,
    offers=(Offer("question", answer_candidates), Offer("move", action_candidates)),
    gates=(answer_first,),
)
