"""The face of the rules: what the rest of the code uses of them.

Importing this module loads every effect module once; each registers on import its
command handlers, continuations and gates (`rules`), its response windows
(`responses`) and its events (`events.EVENT_TYPES`). Outside `domain/`, code imports
the rules from here and from no other domain module. Adding an effect adds its
module to the imports below.
"""

from __future__ import annotations

# The effects: imported for their registrations, whatever else is named from them.
from dune_ledger.domain import (  # noqa: F401
    ambassador,
    custody,
    distrans,
    fairness,
    gifts,
    guild,
    nullentropy,
    responses,
    semuta,
    truthtrance,
)
from dune_ledger.domain.actions import actions
from dune_ledger.domain.ambassador import AmbassadorCohortDrawn
from dune_ledger.domain.catalog import CARDS, EXPANSIONS, FACTIONS, is_box, room_cards
from dune_ledger.domain.commands import AnyCommand, Command, describe_errors, parse_command
from dune_ledger.domain.custody import CardDrawn, DeckShuffled, DiscardReshuffled
from dune_ledger.domain.errors import LayoutError, Rejection
from dune_ledger.domain.events import EVENT_TYPES, Event, RoomCreated
from dune_ledger.domain.fairness import (
    EndRoom,
    RoomEnded,
    committed,
    derived,
    kept_state,
    outcome,
    port,
    state_digest,
)
from dune_ledger.domain.gifts import offer_of
from dune_ledger.domain.layout import Layout, build_room, committed_layout, parse_layout
from dune_ledger.domain.nullentropy import CardRetrieved, PileShuffled, candidates
from dune_ledger.domain.randomness import Randomness, Rng, commitment, derived_shuffle, mix, words
from dune_ledger.domain.responses import WindowDeadline, expired
from dune_ledger.domain.rules import (
    SYSTEM,
    SYSTEM_COMMANDS,
    Tx,
    apply,
    decide,
    initial_state,
    replay,
)
from dune_ledger.domain.state import RoomState
from dune_ledger.domain.views import public_entry, public_view, seat_view, seat_view_at
from dune_ledger.domain.words import PAGE_WORDS
from dune_ledger.domain.words import faction as faction_name

__all__ = [
    # setting up a room
    "Layout", "parse_layout", "build_room", "committed_layout", "LayoutError",
    # deciding a command
    "Command", "AnyCommand", "parse_command", "describe_errors", "Rejection", "decide", "Tx",
    "SYSTEM", "SYSTEM_COMMANDS", "EndRoom", "WindowDeadline", "expired",
    # applying events
    "Event", "EVENT_TYPES", "RoomCreated", "initial_state", "apply", "replay", "RoomState",
    # a seat's view and its actions
    "seat_view", "seat_view_at", "public_view", "public_entry", "actions",
    "candidates", "offer_of",
    # the catalog and the game's words
    "CARDS", "EXPANSIONS", "FACTIONS", "PAGE_WORDS", "faction_name", "is_box", "room_cards",
    # fair dealing and its verifier
    "Randomness", "Rng", "commitment", "derived_shuffle", "mix", "words", "committed",
    "derived", "port", "kept_state", "state_digest", "outcome", "RoomEnded",
    "DeckShuffled", "DiscardReshuffled", "PileShuffled", "AmbassadorCohortDrawn",
    "CardDrawn", "CardRetrieved",
]
