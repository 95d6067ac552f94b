"""What a seat may send now (INTERFACE "Views": `actions`), by the checks that accept it.

Each candidate command is built from what the seat itself may know (its own
hand, its own search's candidates, the open windows and decisions, public
counts) and then put to the rules: `rules.admit` (the search lock, the
Truthtrance answer-first gate) and the command's own handler, run on a
`Probe` that stops at the handler's first event. Handlers validate before
they emit (see `rules.Tx`), so reaching that first event is acceptance, and
nothing is copied, applied or drawn on the way: the probe's randomness
hands back its input unshuffled, and no draw reaches an event.

A listed action is the command itself, `{"type", ...bound fields}`. Fields
the seat writes freely (a question's text, a spice amount, a territory) are
not enumerated: they are described under `"free"` (`{field: {"kind",
...bounds}}`), and the command is the action without `"free"` plus those
fields. The seat may send the action with any value the description admits.

Hidden information: every card an action names is in the seat's own hand,
among its own search's candidates, in an open Semuta window (discarded face
up) or a gift offered by or to it; whether an action is listed depends on
what the rules check, which already depends only on what the seat may know
(RULES 7). A shipping-cost card is not named (it may since have gone where
the seat cannot see): `guild_stop` describes its card.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dune_ledger.domain import commands as c
from dune_ledger.domain.ambassador import ECAZ
from dune_ledger.domain.catalog import CARDS, is_box
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.gifts import GIVER
from dune_ledger.domain.guild import GUILD
from dune_ledger.domain.nullentropy import candidates
from dune_ledger.domain.responses import KINDS, karama_cards
from dune_ledger.domain.rules import Handler, Tx, admit
from dune_ledger.domain.semuta import free_semuta, takeable
from dune_ledger.domain.semuta import open_window as semuta_window
from dune_ledger.domain.state import RoomState
from dune_ledger.domain.truthtrance import is_truthtrance

Action = dict[str, Any]
PROFILES: tuple[str, ...] = ("easy", "medium", "hard", "brutal")
QUESTION = {"kind": "text", "min_length": 1, "max_length": 500}
TERRITORY = {"kind": "text", "min_length": 1, "max_length": 64}
SEED = {"kind": "text", "min_length": 1, "max_length": 64, "of": "printable ASCII"}
# The profiles a seat may switch to, by its current one (None: off).
PROFILE_CHOICES: dict[str | None, dict[str, Any]] = {
    current: {"kind": "choice", "options": [p for p in PROFILES if p != current]}
    for current in (None, *PROFILES)}
VIA = {"kind": "choice", "options": ["shipment", "movement", "worm"]}
COST_CARD = {"kind": "card", "of": "an unstopped shipping-cost record"}


class Accepted(Exception):
    """The handler reached its first event: every check passed."""


class Unshuffled:
    """The probe's randomness: hands back its input, draws nothing. A probe never
    keeps what it decided, so the order it gets is never stored or shown."""

    def shuffle(self, ids: list[str]) -> list[str]:
        return list(ids)

    def sample(self, ids: list[str], k: int) -> list[str]:
        return list(ids[:k])

    def last_draw(self) -> None:
        return None


class Probe(Tx):
    """A Tx that stops at the first event, before the state is copied or changed."""

    def __init__(self, state: RoomState) -> None:
        super().__init__(state, Unshuffled())

    def emit(self, event: Any) -> None:
        raise Accepted


def accepted(state: RoomState, actor: str, command: c.Command,
             probe: Probe | None = None) -> bool:
    """Whether `decide` would accept `command` from `actor` now, without deciding it."""
    try:
        handler = admit(state, actor, command)
        handler(probe or Probe(state), actor, command)
    except Accepted:
        return True
    except Rejection:
        return False
    return False  # a handler that emits nothing is not an action worth listing


def actions(state: RoomState, faction: str) -> list[Action]:
    """The commands `faction` may send now, each with its bound fields."""
    out: list[Action] = []
    probe = Probe(state)
    # `admit`'s refusals are room-wide, by command type (the seat, the search lock,
    # the GATES): asked once per type, then only the handlers per candidate.
    admitted: dict[str, Handler | None] = {}
    for action, free in _candidates(state, faction):
        kind = action["type"]
        if "card" in free:
            # guild_stop's free card was already asked of each record it may name.
            out.append({**action, "free": free})
            continue
        command = _command(action, free)
        if kind not in admitted:
            try:
                admitted[kind] = admit(state, faction, command)
            except Rejection:
                admitted[kind] = None
        handler = admitted[kind]
        if handler is not None and _passes(handler, probe, faction, command):
            out.append({**action, "free": free} if free else action)
    return out


def _passes(handler: Handler, probe: Probe, actor: str, command: c.Command) -> bool:
    try:
        handler(probe, actor, command)
    except Accepted:
        return True
    except Rejection:
        return False
    return False


# Commands are frozen: one object per distinct action serves every view that lists it
# (a view is rendered for every seat after every append, and most actions repeat).
_BUILT: dict[Any, c.Command] = {}
_BUILT_LIMIT = 8_192


def _command(action: Action, free: dict[str, Any]) -> c.Command:
    """The command an action stands for. Built without validation: every field comes
    from the state or from `_sample`, and the handler reads only those fields."""
    values = tuple(action.values())
    key = (values if "promise" not in action else repr(values),
           tuple((name, _probe_value(spec)) for name, spec in free.items()) if free else None)
    built = _BUILT.get(key)
    if built is not None:
        return built
    fields = dict(action)
    if isinstance(fields.get("promise"), dict):
        fields["promise"] = c.BoxPromise.model_construct(**fields["promise"])
    fields.update(_sample(free))
    built = _COMMANDS[action["type"]].model_construct(**fields)
    if len(_BUILT) >= _BUILT_LIMIT:
        _BUILT.clear()
    _BUILT[key] = built
    return built


def _probe_value(spec: dict[str, Any]) -> Any:
    """What `_sample` makes of a free field, as a key: its kind and what it varies by."""
    kind = spec["kind"]
    if kind == "choice":
        return kind, spec["options"][0]
    return kind, spec.get("max")


def _sample(free: dict[str, Any]) -> dict[str, Any]:
    """A value each free field admits, for the probe: the checks never read the text, and
    a spice promise is checked at its upper bound (any lower amount is then accepted)."""
    out: dict[str, Any] = {}
    for name, spec in free.items():
        if spec["kind"] == "text":
            out[name] = "?"
        elif spec["kind"] == "card":
            continue  # guild_stop: asked of each record by `_cost_stoppable`
        elif spec["kind"] == "choice":
            out[name] = spec["options"][0]  # the options are alike to the rules
        elif spec["kind"] == "spice_promise":
            out[name] = c.SpicePromise.model_construct(spice=spec["max"])
    return out


_COMMANDS = c.COMMANDS

Candidate = tuple[Action, dict[str, Any]]


def _candidates(state: RoomState, me: str) -> Iterator[Candidate]:
    """Every command worth asking about, from what `me` may know; the rules then decide."""
    seat = state.seat(me)
    hand = list(seat.hand)
    others = [s.faction for s in state.seats if s.faction != me]
    none: dict[str, Any] = {}

    # The open search: its owner's one bound selection, one entry per candidate.
    search = state.search
    if search is not None and search.owner == me:
        for cid in candidates(state, me) or ():
            yield {"type": "select_card", "search": search.event, "card": cid}, none

    # Seat control: accepted at any time (RULES 3.7).
    if seat.autopilot is not None:
        yield {"type": "set_autopilot", "enabled": False}, none
    yield {"type": "set_autopilot", "enabled": True}, {"profile": PROFILE_CHOICES[seat.autopilot]}
    yield {"type": "seed"}, {"value": SEED}  # a committed room's only (RULES 9)
    if search is not None:
        return  # the search lock refuses everything else (RULES 3.3)

    yield from _answers(state, me, hand)

    for cid in hand:
        if is_box(cid):
            yield {"type": "begin_search", "card": cid}, none
    yield {"type": "draw"}, none
    for cid in hand:
        yield {"type": "discard", "card": cid}, none
    for cid in hand:
        if CARDS[cid].effect == "distrans":
            for give in hand:
                if give != cid:
                    for to in others:
                        yield {"type": "distrans", "card": cid, "give": give, "to": to}, none
    if me == GIVER and seat.ally is not None:
        for cid in hand:
            yield {"type": "offer_gift", "card": cid, "to": seat.ally}, none
    for cid in hand:
        if is_truthtrance(cid):
            for target in others:
                yield ({"type": "ask_truthtrance", "card": cid, "target": target},
                       {"question": QUESTION})
    yield {"type": "enter_territory"}, {"territory": TERRITORY, "via": VIA}
    if me == GUILD and state.mode == "advanced":
        # Whether some record can be stopped is public (the costs were paid face up and
        # every stop is public); which card it is may not be any more.
        for rec in state.shipping_costs:
            if not rec.stopped and _cost_stoppable(state, me, rec.card):
                yield {"type": "guild_stop"}, {"card": COST_CARD}
                break


def _cost_stoppable(state: RoomState, me: str, card_id: str) -> bool:
    return accepted(state, me, c.GuildStop.model_construct(type="guild_stop", card=card_id))


def _answers(state: RoomState, me: str, hand: list[str]) -> Iterator[Candidate]:
    """The answers to what is waiting for `me`: windows, decisions, questions, offers."""
    none: dict[str, Any] = {}
    window = state.control.response
    if window is not None:
        kind = KINDS.get(window.kind)
        gift = state.gift
        offered = gift is not None and gift.get("event") == window.event
        if kind is not None and kind.command == "answer_gift" and not offered:
            for accept in (True, False):
                yield {"type": "answer_gift", "event": window.event, "accept": accept}, none
        if kind is not None and kind.command == "respond":
            yield {"type": "respond", "event": window.event, "action": "pass"}, none
            for cid in karama_cards(state, me):
                yield ({"type": "respond", "event": window.event, "action": "karama",
                        "card": cid}, none)
    semuta = semuta_window(state)
    if semuta is not None:
        yield {"type": "semuta", "event": semuta.event, "action": "pass"}, none
        if free_semuta(state, me) is not None:
            for cid in takeable(state, semuta):
                yield {"type": "semuta", "event": semuta.event, "action": "take",
                       "card": cid}, none

    decision = state.control.decision
    if decision is not None and decision.player == me:
        if decision.kind == "ambassador":
            yield ({"type": "ambassador_decide", "event": decision.event, "trigger": False},
                   none)
            ally = state.seat(ECAZ).ally if state.has_seat(ECAZ) else None
            for beneficiary in (ECAZ, ally):
                if beneficiary is not None:
                    yield ({"type": "ambassador_decide", "event": decision.event,
                            "trigger": True, "beneficiary": beneficiary}, none)
        elif decision.kind == "ambassador_copy":
            for token in decision.data.get("options", []):
                yield {"type": "ambassador_copy", "event": decision.event, "token": token}, none

    question = state.truthtrance
    if question is not None and question.get("target") == me:
        event = question["event"]
        free_spice = state.free_spice(me)
        for answer in ("yes", "no"):
            yield {"type": "answer_truthtrance", "event": event, "answer": answer}, none
            for cid in hand:
                if is_box(cid):
                    yield ({"type": "answer_truthtrance", "event": event, "answer": answer,
                            "promise": {"box": cid}}, none)
            if free_spice >= 1:
                yield ({"type": "answer_truthtrance", "event": event, "answer": answer},
                       {"promise": {"kind": "spice_promise", "min": 1, "max": free_spice}})

    gift = state.gift
    if gift is not None and gift.get("to") == me:
        for accept in (True, False):
            yield {"type": "answer_gift", "event": gift["event"], "accept": accept}, none
