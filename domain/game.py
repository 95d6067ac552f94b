"""The face of the rules: what the rest of the code uses of them.

Importing this module collects the effects: every module of this package that
declares an `EFFECT` (`domain/effect.py`) is found and loaded here, and its
declaration goes into `effect.HOUSE`, from which the command union, the event types,
the room state's class and the rules' tables are derived. Adding an effect adds its
module, and nothing here. Outside `domain/`, code imports the rules from here and
from no other domain module.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

from dune_ledger.domain.actions import action_shapes, actions
from dune_ledger.domain.ambassador import AmbassadorCohortDrawn
from dune_ledger.domain.catalog import (
    CARDS,
    EXPANSIONS,
    FACTIONS,
    FIRST_CATALOG,
    NEWEST_CATALOG,
    is_box,
    room_cards,
)
from dune_ledger.domain.commands import Command, describe_errors
from dune_ledger.domain.custody import CardDrawn, DeckShuffled, DiscardReshuffled
from dune_ledger.domain.effect import HOUSE, Effect
from dune_ledger.domain.errors import LayoutError, Rejection
from dune_ledger.domain.events import Event, RoomCreated
from dune_ledger.domain.fairness import (
    BEFORE_THE_DEAL,
    Dealt,
    EndRoom,
    RoomEnded,
    SeatKeyRegistered,
    SeedCommitted,
    SeedRevealed,
    committed,
    derived,
    kept_state,
    outcome,
    port,
    seed_hash,
    state_digest,
    v2,
)
from dune_ledger.domain.gifts import offer_of
from dune_ledger.domain.layout import Layout, build_room, committed_layout, parse_layout
from dune_ledger.domain.nullentropy import CardRetrieved, PileShuffled, candidates
from dune_ledger.domain.randomness import (
    ALGORITHM,
    ALGORITHM_V2,
    Counted,
    Randomness,
    Rng,
    commitment,
    counted_words,
    derived_shuffle,
    mix,
    words,
)
from dune_ledger.domain.responses import WindowDeadline, expired
from dune_ledger.domain.rules import OPERATOR, SYSTEM, Tx, apply, decide, initial_state, replay
from dune_ledger.domain.shapes import Shape, one_of, shape
from dune_ledger.domain.views import (
    public_entry,
    public_view,
    seat_view,
    seat_view_at,
    view_shapes,
)
from dune_ledger.domain.words import PAGE_WORDS
from dune_ledger.domain.words import faction as faction_name


def declared() -> list[Effect]:
    """Every effect this package declares: one `EFFECT` per module that has one."""
    package = importlib.import_module(__name__.rpartition(".")[0])
    effects = []
    for info in pkgutil.iter_modules(package.__path__):
        if info.name == __name__.rpartition(".")[2]:
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        found = getattr(module, "EFFECT", None)
        if isinstance(found, Effect):
            _all_declared(module, found)
            effects.append(found)
    return effects


def _all_declared(module: ModuleType, effect: Effect) -> None:
    """A command or an event defined in an effect's module and left out of its
    declaration would be parsed or stored by nobody: refuse to start without it."""
    named = {*effect.commands, *effect.operator, *effect.system, *effect.events}
    for value in vars(module).values():
        if isinstance(value, type) and issubclass(value, Command | Event) \
                and value.__module__ == module.__name__ and value not in named:
            raise TypeError(f"{module.__name__} defines {value.__name__} and its EFFECT "
                            "does not declare it")


HOUSE.collect(declared(), home=__name__)

# A seat's commands, one JSON object each, told apart by `type` (INTERFACE "Commands").
AnyCommand: Any = HOUSE.union
COMMANDS = HOUSE.commands  # each command a seat may send, by its `type`
COMMAND_TYPES = frozenset(COMMANDS)
parse_command = HOUSE.parse_command
EVENT_TYPES = HOUSE.events  # every stored event type of the rules, by its name
OPERATOR_COMMANDS = HOUSE.operator  # what the operator may send, by its `type`
AnyOperatorCommand: Any = HOUSE.operator_union  # one of them, told apart by `type`
parse_operator_command = HOUSE.parse_operator_command
if TYPE_CHECKING:
    from dune_ledger.domain.state import RoomState
else:
    # The room state's class with every effect's part (`effect.Part`): what a stored
    # state or a snapshot is read back as.
    RoomState = HOUSE.state


EFFECT_ZONES = HOUSE.zones  # the zones of cards an effect's own part keeps


@cache
def shapes() -> tuple[Any, type[Shape], type[Shape]]:
    """The shapes the OpenAPI describes what a seat is shown with (domain/shapes.py),
    made of those every effect declares: an action (one per command), the public view
    and a seat's. Made once, when first asked: only the HTTP API's schema reads them."""
    action = action_shapes()
    return (action, *view_shapes(action))


def zones(state: RoomState) -> dict[str, list[str]]:
    """Every zone of physical cards, the effects' own included: each card is in one."""
    found = state.zones()
    for more in EFFECT_ZONES:
        found.update(more(state))
    return found


def disclosed(state: RoomState, seat: str) -> set[str]:
    """The cards `seat` may see named beyond the public facts and its own hand."""
    return {cid for shown in HOUSE.shown_to_seat for cid in shown(state, seat)}


def hidden(state: RoomState, card_id: str) -> bool:
    """Whether no public row may name this card (RULES 7)."""
    return any(hides(state, card_id) for hides in HOUSE.hidden_from_all)


def kept_from_log(event: Event) -> set[str]:
    """The cards this event's public log entry must not name."""
    return {cid for kept in HOUSE.kept_from_log for cid in kept(event)}


__all__ = [
    # setting up a room
    "Layout", "parse_layout", "build_room", "committed_layout", "LayoutError",
    # deciding a command
    "Command", "AnyCommand", "COMMANDS", "COMMAND_TYPES", "parse_command", "describe_errors",
    "Rejection", "decide", "Tx", "OPERATOR", "SYSTEM", "OPERATOR_COMMANDS", "AnyOperatorCommand",
    "parse_operator_command", "EndRoom", "WindowDeadline",
    "expired",
    # applying events
    "Event", "EVENT_TYPES", "RoomCreated", "initial_state", "apply", "replay", "RoomState",
    "zones", "EFFECT_ZONES",
    # a seat's view, its actions, and what it may see
    "seat_view", "seat_view_at", "public_view", "public_entry", "actions",
    "candidates", "offer_of", "disclosed", "hidden", "kept_from_log",
    # their shapes, for the OpenAPI
    "shapes", "Shape", "one_of", "shape",
    # the catalog and the game's words
    "CARDS", "EXPANSIONS", "FACTIONS", "PAGE_WORDS", "faction_name", "is_box", "room_cards",
    "FIRST_CATALOG", "NEWEST_CATALOG",
    # fair dealing and its verifier
    "ALGORITHM", "Randomness", "Rng", "commitment", "derived_shuffle", "mix", "words", "committed",
    "derived", "port", "kept_state", "state_digest", "outcome", "RoomEnded",
    "DeckShuffled", "DiscardReshuffled", "PileShuffled", "AmbassadorCohortDrawn",
    "CardDrawn", "CardRetrieved", "ALGORITHM_V2", "Counted", "counted_words", "seed_hash",
    "v2", "Dealt", "SeatKeyRegistered", "SeedCommitted", "SeedRevealed", "BEFORE_THE_DEAL",
]
