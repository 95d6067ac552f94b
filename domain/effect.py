"""An effect in one declaration, and the house that collects them.

An effect module (the Box, Truthtrance, the Ambassador, custody, ...) declares
everything it adds to the rules in one `EFFECT = Effect(...)`: its commands and their
handlers, its events, its part of the room state and of the views, the actions it
offers, its response window kinds, the room-wide gates and automatic steps it adds, the
zones of cards it keeps, the random outcomes a verifier re-derives, what it discloses
to whom, and the shapes the OpenAPI describes what it shows with (`shapes.py`).
`domain/game.py` finds every module of this package that declares one and collects
them, once, into `HOUSE`; the rules, the views, the actions, the leak guard and the
OpenAPI read the collected tables from there. Adding an effect is adding its module
(and its cards to the catalog): no other file names it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Generic, Literal, TypeVar, Union, cast

from pydantic import BaseModel, Field, TypeAdapter, ValidationError, create_model

from dune_ledger.domain.commands import Candidate, Command, describe_errors
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.events import Event, RoomCreated
from dune_ledger.domain.shapes import Shape
from dune_ledger.domain.state import RoomState, absent

if TYPE_CHECKING:
    from dune_ledger.domain.responses import WindowKind
    from dune_ledger.domain.rules import Tx

M = TypeVar("M", bound=BaseModel)

# A command's handler: it checks, then emits on the Tx (RULES 7: validate first, emit after).
Handler = Callable[["Tx", str, Any], None]
# A room-wide refusal every command meets before its handler, by its type and the state
# only (the actions ask it once per command type): raises a Rejection or returns.
Gate = Callable[[RoomState, str, Command], None]
# An automatic step after every command: True when it emitted something.
Continuation = Callable[["Tx"], bool]
# What a single-seat discard sets off: the discarder, the cards, the discard's event id.
AfterDiscard = Callable[["Tx", str, list[str], str], None]
# An effect's keys of every view: (state, the seat, or None for the public view).
ViewPart = Callable[[RoomState, str | None], dict[str, Any]]
# A past view, as far as it is still the seat's to see now (`seat_view_at`).
PastView = Callable[[dict[str, Any], RoomState], None]
# The commands worth asking about for a seat; `domain.actions` keeps those accepted.
Source = Callable[[RoomState, str], Iterator[Candidate]]
# For an event carrying a random outcome: the list it must have drawn from (by the state
# before it; None before the first event), what it recorded, and whether that is a
# sample (a prefix of the shuffle) rather than the whole shuffle.
Outcome = Callable[[Any, RoomState | None], tuple[list[str], list[str], bool]]

# When a view offers an action, in the order a view lists them (the pages and the
# autopilot read it in this order): what is accepted at any time, an open search's
# selection included (RULES 3.3); then, with no search open, the answers to the open
# response window, to the seat's own decision, to a question, to an offer recorded
# before gifts were responses; then the seat's own moves. Within a stage, by the
# effects' `order`.
Stage = Literal["any_time", "window", "decision", "question", "offer", "move"]
STAGES: tuple[Stage, ...] = ("any_time", "window", "decision", "question", "offer", "move")


@dataclass(frozen=True, slots=True)
class Offer:
    """Action candidates of one stage."""

    stage: Stage
    source: Source


@dataclass(frozen=True, slots=True)
class Part(Generic[M]):
    """An effect's own part of the room state: the field `name` of type `model`, None
    until the effect sets it, and left out of the state's JSON while None, so that a
    room that never used the effect keeps the state (and state hash) it had. The room
    state's class gains the field when `game` collects the effect."""

    name: str
    model: type[M]

    def of(self, state: RoomState) -> M | None:
        return cast("M | None", getattr(state, self.name))

    def set(self, state: RoomState, value: M | None) -> None:
        setattr(state, self.name, value)


@dataclass(frozen=True, slots=True)
class Disclosure:
    """What an effect lets be named, and to whom (RULES 7), for the leak guard
    (projections/guard.py), which withholds a row that names more."""

    # The cards this seat may see named beyond the public facts and its own hand.
    seat: Callable[[RoomState, str], Iterable[str]] | None = None
    # Whether this card is secret to everyone: no public row may name it.
    hidden: Callable[[RoomState, str], bool] | None = None
    # The cards this event's public log entry must not name, wherever they are now.
    log: Callable[[Event], Iterable[str]] | None = None


@dataclass(frozen=True, slots=True)
class ViewShapes:
    """The shape of each key an effect's view part adds (`shapes.py`): in the public
    view, and in a seat's own (the keys only a seat sees, and a key whose shape there
    differs from the public one). A bare type: always there; `(type, None)`: at times
    left out."""

    public: Mapping[str, Any] = field(default_factory=dict)
    seat: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Effect:
    name: str
    # Its place among the effects: the order the command union lists commands, the
    # views join their parts, the actions of one stage are offered, and the gates,
    # continuations and reactions to a discard run.
    order: int
    commands: tuple[type[Command], ...] = ()  # what a seat sends: the union is derived
    operator: tuple[type[Command], ...] = ()  # what the operator sends (never a seat)
    system: tuple[type[Command], ...] = ()  # what the worker sends (never a seat)
    # What the autopilot sends for a seat (RULES 3.7), so what it may send in the name of
    # a seat with a key (RULES 9.3): each command with the test a raw one must pass, or
    # None for any. Anything else in a keyed seat's name would be the operator's choice.
    autopilot: Mapping[type[Command], Callable[[dict[str, Any]], bool] | None] = field(
        default_factory=dict)
    # Accepted at any time, an open search and a question awaiting its answer included.
    any_time: tuple[type[Command], ...] = ()
    handlers: Mapping[type[Command], Handler] = field(default_factory=dict)
    events: tuple[type[Event], ...] = ()
    part: Part[Any] | None = None
    view: ViewPart | None = None
    view_shapes: ViewShapes = ViewShapes()  # the shapes of the keys `view` adds
    # The shape of each kind of decision it opens (`state.Control.decision`), as the
    # views show it: a `shapes.DecisionShape` with its `kind` a Literal.
    decisions: tuple[type[Shape], ...] = ()
    past_view: PastView | None = None
    offers: tuple[Offer, ...] = ()
    windows: tuple[WindowKind, ...] = ()
    gates: tuple[Gate, ...] = ()
    continuations: tuple[Continuation, ...] = ()
    after_discard: tuple[AfterDiscard, ...] = ()
    # Cards the effect's part holds, by zone name: every physical card is in one zone.
    zones: Callable[[RoomState], dict[str, list[str]]] | None = None
    outcomes: Mapping[type[Event], Outcome] = field(default_factory=dict)
    discloses: Disclosure = Disclosure()


class House:
    """Every effect's declaration, collected once (`collect`, by domain/game.py) into the
    tables the rules consult."""

    def __init__(self) -> None:
        self.effects: tuple[Effect, ...] = ()
        self.commands: dict[str, type[Command]] = {}  # a seat's, by `type`, union order
        self.parse_adapter: TypeAdapter[Any] | None = None
        self.union: Any = None
        # What the operator sends (by `type`, parsed apart from a seat's), and what the
        # worker sends: never a seat's.
        self.operator: dict[str, type[Command]] = {}
        self.operator_union: Any = None
        self.operator_adapter: TypeAdapter[Any] | None = None
        self.system: frozenset[type[Command]] = frozenset()
        self.autopilot: dict[str, Callable[[dict[str, Any]], bool] | None] = {}
        self.any_time: tuple[type[Command], ...] = ()
        self.handlers: dict[type[Command], Handler] = {}
        self.events: dict[str, type[Event]] = {}
        self.state: type[RoomState] = RoomState
        self.views: tuple[ViewPart, ...] = ()
        # The shapes of the effects' view keys (`ViewShapes`) and open decisions.
        self.view_public: dict[str, Any] = {}
        self.view_seat: dict[str, Any] = {}
        self.decisions: dict[str, type[Shape]] = {}
        self.past_views: tuple[PastView, ...] = ()
        self.offers: dict[Stage, tuple[Source, ...]] = {}
        self.windows: dict[str, WindowKind] = {}
        self.gates: tuple[Gate, ...] = ()
        self.continuations: tuple[Continuation, ...] = ()
        self.after_discard: tuple[AfterDiscard, ...] = ()
        self.zones: tuple[Callable[[RoomState], dict[str, list[str]]], ...] = ()
        self.outcomes: dict[type[Event], Outcome] = {}
        # What the effects disclose (`Disclosure`), each kind apart: the leak guard asks
        # them of every stored row.
        self.shown_to_seat: tuple[Callable[[RoomState, str], Iterable[str]], ...] = ()
        self.hidden_from_all: tuple[Callable[[RoomState, str], bool], ...] = ()
        self.kept_from_log: tuple[Callable[[Event], Iterable[str]], ...] = ()

    def collect(self, effects: Iterable[Effect], home: str) -> None:
        """Collect the declarations, once. `home`: the module whose `RoomState` is the
        room state's class with every effect's part (pickle finds it there)."""
        if self.effects:
            raise RuntimeError("the effects are collected once")
        ordered = tuple(sorted(effects, key=lambda e: (e.order, e.name)))
        self.effects = ordered
        self.commands = _unique("command type", [
            (_literal(cls, "type"), cls) for e in ordered for cls in e.commands])
        self.union = Annotated[Union[tuple(self.commands.values())],  # noqa: UP007
                               Field(discriminator="type")]
        self.parse_adapter = TypeAdapter(self.union)
        self.operator = _unique("operator command type", [
            (_literal(cls, "type"), cls) for e in ordered for cls in e.operator])
        if self.operator:
            self.operator_union = Annotated[Union[tuple(self.operator.values())],  # noqa: UP007
                                            Field(discriminator="type")]
            self.operator_adapter = TypeAdapter(self.operator_union)
        self.system = frozenset(cls for e in ordered for cls in e.system)
        for e in ordered:
            if set(e.autopilot) - set(e.commands):
                raise TypeError(f"the autopilot of {e.name} sends only its seats' commands")
        self.autopilot = _unique("autopilot command", [
            (_literal(cls, "type"), test) for e in ordered for cls, test in e.autopilot.items()])
        self.any_time = tuple(cls for e in ordered for cls in e.any_time)
        self.handlers = _unique("handler", [
            (cls, fn) for e in ordered for cls, fn in e.handlers.items()])
        events: list[type[Event]] = [RoomCreated, *(c for e in ordered for c in e.events)]
        self.events = _unique("event type", [(cls.__name__, cls) for cls in events])
        parts = [e.part for e in ordered if e.part is not None]
        _unique("state part", [(p.name, p) for p in parts])
        if parts:
            self.state = create_model(  # type: ignore[call-overload]
                RoomState.__name__, __base__=RoomState, __module__=home,
                **{p.name: (p.model | None, Field(default=None, exclude_if=absent))
                   for p in parts})
        self.views = tuple(e.view for e in ordered if e.view is not None)
        self.view_public = _unique("view key", [
            (key, shape) for e in ordered for key, shape in e.view_shapes.public.items()])
        self.view_seat = _unique("seat's view key", [
            (key, shape) for e in ordered for key, shape in e.view_shapes.seat.items()])
        self.decisions = _unique("decision kind", [
            (_literal(cls, "kind"), cls) for e in ordered for cls in e.decisions])
        self.past_views = tuple(e.past_view for e in ordered if e.past_view is not None)
        self.offers = {stage: tuple(o.source for e in ordered for o in e.offers
                                    if o.stage == stage) for stage in STAGES}
        self.windows = _unique("response window kind",
                               [(k.name, k) for e in ordered for k in e.windows])
        self.gates = tuple(g for e in ordered for g in e.gates)
        self.continuations = tuple(c for e in ordered for c in e.continuations)
        self.after_discard = tuple(f for e in ordered for f in e.after_discard)
        self.zones = tuple(e.zones for e in ordered if e.zones is not None)
        self.outcomes = _unique("outcome", [
            (cls, fn) for e in ordered for cls, fn in e.outcomes.items()])
        disclosures = [e.discloses for e in ordered]
        self.shown_to_seat = tuple(d.seat for d in disclosures if d.seat is not None)
        self.hidden_from_all = tuple(d.hidden for d in disclosures if d.hidden is not None)
        self.kept_from_log = tuple(d.log for d in disclosures if d.log is not None)

    def autopilot_may_send(self, raw: Any) -> bool:
        """Whether a raw command is one the autopilot sends for a seat (`autopilot`)."""
        if not isinstance(raw, dict) or raw.get("type") not in self.autopilot:
            return False
        test = self.autopilot[raw["type"]]
        return test is None or test(raw)

    def parse_command(self, raw: Any) -> Command:
        """Validate a decoded JSON object as a seat's command; a bad one is an
        `invalid_command` rejection."""
        assert self.parse_adapter is not None, "domain.game collects the effects"
        return _parse(self.parse_adapter, frozenset(self.commands), raw)

    def parse_operator_command(self, raw: Any) -> Command:
        """Validate a decoded JSON object as one of the operator's commands."""
        assert self.operator_adapter is not None, "domain.game collects the effects"
        return _parse(self.operator_adapter, frozenset(self.operator), raw)


def _parse(adapter: TypeAdapter[Any], types: frozenset[str], raw: Any) -> Command:
    if not isinstance(raw, dict):
        raise Rejection("invalid_command", "a command must be a JSON object")
    try:
        return cast(Command, adapter.validate_python(raw))
    except ValidationError as e:
        raise Rejection("invalid_command", describe_errors(e, skip=types)) from None


def _literal(cls: type[BaseModel], name: str) -> str:
    """The one value of the model's Literal field `name`."""
    return str(cls.model_fields[name].annotation.__args__[0])  # type: ignore[union-attr]


def _unique(what: str, pairs: Iterable[tuple[Any, Any]]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for key, value in pairs:
        if key in out:
            raise TypeError(f"{what} {getattr(key, '__name__', key)} declared twice")
        out[key] = value
    return out


HOUSE = House()
