"""The shapes the HTTP API answers with, for `/openapi.json` (INTERFACE "HTTP").

The routes build their JSON from `domain.views` and `application/` and return it as
it is; these models describe it for clients (typed OpenAPI, the `/docs` page, the
generated clients of clients/). The views' shapes are the rules' own (`domain/shapes.py`,
declared beside each effect), the public events' each event's `shown`; here they are
joined with the answers of the routes. Every shape names exactly the fields sent
(`additionalProperties: false`), each required unless it is left out at times.

`components` writes the JSON schema of every model without `default`: generators such
as openapi-typescript read a default as "always there" and would make an optional field
of a request required (and `ok` of a result optional without one).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, RootModel, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue
from pydantic_core import core_schema

from dune_ledger.application.stream import STORED_TYPES
from dune_ledger.domain.game import (
    AnyCommand,
    AnyOperatorCommand,
    Event,
    Layout,
    Shape,
    one_of,
    shape,
    shapes,
)

REF = "#/components/schemas/{model}"
Action, PublicView, SeatView = shapes()
FairnessPart: Any = PublicView.model_fields["fairness"].annotation  # a view's `fairness`


class ErrorCode(StrEnum):
    """Every `error.code` an answer may carry (INTERFACE "Commands" and "HTTP")."""

    # malformed input (400)
    invalid_command = "invalid_command"
    invalid_layout = "invalid_layout"
    body_too_large = "body_too_large"
    # tokens (401, 403, 429)
    unauthorized = "unauthorized"
    forbidden = "forbidden"
    too_many_attempts = "too_many_attempts"
    too_many_streams = "too_many_streams"
    # not there (404, 405)
    unknown_room = "unknown_room"
    unknown_seat = "unknown_seat"
    unknown_version = "unknown_version"
    not_found = "not_found"
    method_not_allowed = "method_not_allowed"
    # the room moved on (409)
    conflict = "conflict"
    stale_event = "stale_event"
    room_not_ended = "room_not_ended"  # a transcript asked for before the end (RULES 9)
    # the rules refused (422)
    unknown_card = "unknown_card"
    not_in_hand = "not_in_hand"
    not_a_box = "not_a_box"
    not_a_distrans = "not_a_distrans"
    not_a_truthtrance = "not_a_truthtrance"
    card_committed = "card_committed"
    locked = "locked"
    truthtrance_pending = "truthtrance_pending"
    decision_pending = "decision_pending"
    response_pending = "response_pending"
    gift_pending = "gift_pending"
    insufficient_spice = "insufficient_spice"
    hand_over_limit = "hand_over_limit"
    no_eligible_card = "no_eligible_card"
    no_card = "no_card"
    not_your_decision = "not_your_decision"
    not_eligible = "not_eligible"
    not_ally = "not_ally"
    not_advanced = "not_advanced"
    invalid_target = "invalid_target"
    already_promised = "already_promised"
    already_stopped = "already_stopped"
    unchanged = "unchanged"
    not_implemented = "not_implemented"
    search_invalid = "search_invalid"
    gift_invalid = "gift_invalid"
    ambassador_invalid = "ambassador_invalid"
    room_damaged = "room_damaged"
    room_ended = "room_ended"
    room_unavailable = "room_unavailable"
    # the server (500, 503)
    busy = "busy"
    unavailable = "unavailable"
    not_configured = "not_configured"
    internal = "internal"


class ErrorBody(Shape):
    code: ErrorCode
    message: str


class Failure(Shape):
    """Every error, of every route: the command result shape with `ok: false`."""

    ok: Literal[False]
    version: int = Field(description="the room's version, 0 when there is no room to speak of")
    error: ErrorBody


def event_shape(event: type[Event], entry: bool) -> type[Shape]:
    """A public event as a result lists it (`type`, `version`, its public fields), or
    (`entry`) as the public log does."""
    name = event.__name__
    kind: Any = Literal[name]
    head = {"seq": int, "append": int, "text": str} if entry else {}
    return shape(name + ("Entry" if entry else ""), {
        "type": kind, "version": int, **head, **event.public_fields()})


def events_union(name: str, entry: bool) -> Any:
    """Every stored event type shown publicly, the room's own among them, told apart
    by `type`."""
    shown = [e for _, e in sorted(STORED_TYPES.items()) if e.shown is not None]
    return one_of(name, [event_shape(e, entry) for e in shown], "type")


PublicEvent = events_union("PublicEvent", entry=False)
LogEntry = events_union("LogEntry", entry=True)


class WithheldEntry(Shape):
    """A log entry the projection guard withheld (it would have shown a hidden card)."""

    seq: int
    version: int
    append: int
    type: str
    text: str
    withheld: Literal[True]


class WithheldView(Shape):
    """A view the projection guard withheld (it would have shown a hidden card)."""

    room: str
    version: int
    seat: str | None
    withheld: str


class CommandResult(Shape):
    ok: Literal[True]
    version: int
    events: list[PublicEvent]  # type: ignore[valid-type]


class CreatedRoom(Shape):
    room: str
    version: int
    seats: dict[str, str] = Field(description="faction -> seat token, shown this once")
    spectator: str = Field(description="the room's spectator token (GET .../public)")


class Check(Shape):
    ok: bool | None = Field(description="null: not checked")
    details: list[str]


class AuditReport(Shape):
    room: str
    ok: bool
    events: int | None
    version: int | None
    state_hash: str | None
    checks: dict[str, Check]


class LastCommand(Shape):
    """The room's last append made by a command (a token reissue is none)."""

    at: str
    seat: str = Field(description="the seat that sent it, or `system` (a deadline, the end)")
    event: str = Field(description="the type of its first event")
    text: str = Field(description="its first event in words, as the public log says it")


class RoomSummary(Shape):
    room: str
    version: int | None = Field(description="null for a damaged room")
    seats: list[str]
    ended: int | None = Field(description="the version of the room's end, null while it runs")
    created: str | None
    last_command: LastCommand | None
    fairness: FairnessPart | None = Field(
        description="the room's public fair dealing (null for a damaged room)")
    damaged: str | None = Field(None, description="a damaged room only (its stored stream "
                                "does not verify): what is wrong, for the operator")


class NewToken(Shape):
    room: str
    seat: str
    token: str = Field(description="the seat's new token, shown this once")
    version: int


class Health(Shape):
    ok: bool


class PublicKey(Shape):
    """The server's public signing key (INTERFACE "Audit"), as `keys show` prints it."""

    algorithm: str
    public_key: str = Field(description="standard base64 of the raw Ed25519 public key")
    pem: str
    retired_public_keys: list[str]
    encryption_at_rest: bool
    signs: str


class EndBody(Shape):
    """The body of POST /rooms/{room}/end, which may be left out."""

    model_config = {"extra": "forbid", "strict": True}
    command_id: str | None = Field(None, min_length=1, max_length=128)


class Frame(RootModel[SeatView | PublicView | WithheldView]):  # type: ignore[valid-type]
    """The `data:` of a stream's `event: view` frame (its `id:` is the version): the
    seat's view for a seat token, the public view for the spectator's, or a view the
    projection guard withheld."""


class NoDefaults(GenerateJsonSchema):
    """JSON schemas without `default` (see the module's text); a request's default that
    says something is kept in the field's description."""

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        inner = self.generate_inner(schema["schema"])
        default = schema.get("default")
        if default is not None and not isinstance(default, bool | list | dict) \
                and self._mode == "validation":
            said = f"default {self.encode_default(default)!r}"
            inner = {**inner, "description": "; ".join(
                part for part in (inner.get("description"), said) if part)}
        return inner


# The named schemas of /openapi.json: what clients send (validated as such), and what
# the server answers.
REQUESTS: dict[str, Any] = {"SeatCommand": AnyCommand, "OperatorCommand": AnyOperatorCommand,
                            "Layout": Layout, "EndBody": EndBody}
ANSWERS: dict[str, Any] = {
    "SeatView": SeatView, "PublicView": PublicView, "WithheldView": WithheldView,
    "Action": Action, "PublicEvent": PublicEvent, "LogEntry": LogEntry,
    "WithheldEntry": WithheldEntry, "CommandResult": CommandResult, "Failure": Failure,
    "CreatedRoom": CreatedRoom, "AuditReport": AuditReport, "RoomSummary": RoomSummary,
    "NewToken": NewToken, "Health": Health, "PublicKey": PublicKey, "Frame": Frame}


def components() -> dict[str, Any]:
    """Every named schema, each model's under its name."""
    modes: list[tuple[str, JsonSchemaMode, TypeAdapter[Any]]] = [
        *((name, "validation", TypeAdapter(t)) for name, t in REQUESTS.items()),
        *((name, "serialization", TypeAdapter(t)) for name, t in ANSWERS.items())]
    named, defs = TypeAdapter.json_schemas(
        [(name, mode, adapter) for name, mode, adapter in modes],
        ref_template=REF, schema_generator=NoDefaults)
    out = dict(defs.get("$defs", {}))
    for (name, _), schema in named.items():
        ref = schema.get("$ref", "")
        if ref != REF.format(model=name):  # a union, or a model under another name
            out[name] = schema
    return {**out, "Command": sent_command(out["SeatCommand"], out["OperatorCommand"])}


def sent_command(seat: dict[str, Any], operator: dict[str, Any]) -> dict[str, Any]:
    """What POST /rooms/{room}/commands takes: a seat's command (with its seat token) or
    one of the operator's (with the operator token), in one union told apart by `type`."""
    return {"oneOf": [*seat["oneOf"], *operator["oneOf"]], "discriminator": {
        "propertyName": "type",
        "mapping": {**seat["discriminator"]["mapping"], **operator["discriminator"]["mapping"]}}}


def ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(model=name)}


# A layout and a command of each kind, for the /docs page.
LAYOUT_EXAMPLE: dict[str, Any] = {
    "expansions": ["choam_richese"], "seed": 7, "turn": 2, "phase": 6,
    "seats": [
        {"faction": "richese", "spice": 10, "hand": ["nullentropy-box", "crysknife"]},
        {"faction": "emperor", "spice": 10, "hand": ["karama-1"]},
    ],
    "discard": ["shield-1", "maula-pistol"],
}
COMMAND_EXAMPLES: dict[str, dict[str, Any]] = {
    "begin_search": {"summary": "pay 2 spice and open a Box search",
                     "value": {"type": "begin_search", "card": "nullentropy-box",
                               "command_id": "c-1"}},
    "select_card": {"summary": "take one candidate card",
                    "value": {"type": "select_card", "search": "e3", "card": "shield-1",
                              "command_id": "c-2"}},
    "respond": {"summary": "pass in a response window",
                "value": {"type": "respond", "event": "e7", "action": "pass"}},
    "draw": {"summary": "draw the top card", "value": {"type": "draw"}},
    "seed": {"summary": "set this seat's seed (a committed room)",
             "value": {"type": "seed", "value": "my seed 42"}},
}
