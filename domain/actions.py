"""What a seat may send now (INTERFACE "Views": `actions`), by the checks that accept it.

Each candidate command is built from what the seat itself may know (its own
hand, its own search's candidates, the open windows and decisions, public
counts), each effect offering its own (its declared `offers`, by stage: see
`effect.STAGES`), and then put to the rules:
`rules.admit` (the search lock, the Truthtrance answer-first gate) and the
command's own handler, run on a `Probe` that stops at the handler's first
event. Handlers validate before they emit (see `rules.Tx`), so reaching that
first event is acceptance, and nothing is copied, applied or drawn on the
way: the probe's randomness hands back its input unshuffled, and no draw
reaches an event.

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
the seat cannot see): `guild_stop` describes its card, asked of each record.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import RootModel

from dune_ledger.domain import commands as c
from dune_ledger.domain.effect import HOUSE, STAGES
from dune_ledger.domain.errors import Rejection
from dune_ledger.domain.rules import Handler, Tx, admit
from dune_ledger.domain.shapes import Shape, one_of, shape
from dune_ledger.domain.state import RoomState


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


def actions(state: RoomState, faction: str) -> list[c.Action]:
    """The commands `faction` may send now, each with its bound fields."""
    out: list[c.Action] = []
    probe = Probe(state)
    # `admit`'s refusals are room-wide, by command type (the seat, the search lock,
    # the effects' gates): asked once per type, then only the handlers per candidate.
    admitted: dict[str, Handler | None] = {}
    for action, free in _candidates(state, faction):
        kind = action["type"]
        # A free field the candidate also binds (guild_stop's card) is asked with that
        # value and listed without it, once: the seat names it itself.
        entry = action
        if free:
            hidden = free.keys() & action.keys()
            entry = {**{k: v for k, v in action.items() if k not in hidden}, "free": free}
            if hidden and entry in out:
                continue
        command = _command(action, free)
        if kind not in admitted:
            try:
                admitted[kind] = admit(state, faction, command)
            except Rejection:
                admitted[kind] = None
        handler = admitted[kind]
        if handler is not None and _passes(handler, probe, faction, command):
            out.append(entry)
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


def _command(action: c.Action, free: dict[str, Any]) -> c.Command:
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
    built = HOUSE.commands[action["type"]].model_construct(**fields)
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
            continue  # guild_stop: the candidate binds each record's card
        elif spec["kind"] == "choice":
            out[name] = spec["options"][0]  # the options are alike to the rules
        elif spec["kind"] == "amount":
            out[name] = spec["max"]  # the upper bound: every amount from `min` up is alike
        elif spec["kind"] == "spice_promise":
            out[name] = c.SpicePromise.model_construct(spice=spec["max"])
    return out


def _candidates(state: RoomState, me: str) -> Iterator[c.Candidate]:
    """Every command worth asking about, from what `me` may know; the rules then decide.
    In the order a view lists them (the pages and the autopilot read it in this order)."""
    for stage in STAGES:
        if stage != "any_time" and state.search is not None:
            return  # the search lock refuses everything else (RULES 3.3)
        for source in HOUSE.offers[stage]:
            yield from source(state, me)


# --- the shapes (shapes.py) -------------------------------------------------------------


def action_shape(command: type[c.Command]) -> type[Shape]:
    """An action as a view lists it: the command's own fields without `command_id` and
    `expected_version`, those the seat may write itself (`Command.written`) not always
    there, and their descriptions under `free`."""
    fields: dict[str, Any] = {}
    for name, info in command.model_fields.items():
        if name in c.Command.model_fields:
            continue
        optional = name in command.written or not info.is_required()
        fields[name] = (info.annotation, None) if optional else info.annotation
    if command.written:
        fields["free"] = (shape(f"{command.__name__}Free", {
            name: (free, None) for name, free in command.written.items()}), None)
    return shape(f"Action{command.__name__}", fields)


def action_shapes() -> type[RootModel[Any]]:
    """Every action a view may list, told apart by `type`: one per command a seat sends
    (the effects collected)."""
    return one_of("Action", [action_shape(cmd) for cmd in HOUSE.commands.values()], "type")
