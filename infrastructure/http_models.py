"""The shapes the HTTP API answers with, for `/openapi.json` (INTERFACE "HTTP").

The routes build their JSON from `domain.views` and `application/` as they
always did and return it as it is; these models describe it for clients
(typed OpenAPI, the `/docs` page). Every model that mirrors a view allows
more fields than it names, so a rules module adding a field to a view never
breaks a response.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


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


class ErrorBody(BaseModel):
    code: ErrorCode
    message: str


class Failure(BaseModel):
    """Every error, of every route: the command result shape with `ok: false`."""

    ok: Literal[False] = False
    version: int = Field(description="the room's version, 0 when there is no room to speak of")
    error: ErrorBody


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class PublicEvent(Open):
    """A stored event's public fields, under its stored type name."""

    type: str
    version: int


class CommandResult(BaseModel):
    ok: Literal[True] = True
    version: int
    events: list[PublicEvent]


class CreatedRoom(BaseModel):
    room: str
    version: int
    seats: dict[str, str] = Field(description="faction -> seat token, shown this once")
    spectator: str = Field(description="the room's spectator token (GET .../public)")


class Card(BaseModel):
    id: str
    name: str
    category: str


class Me(Open):
    faction: str
    spice: int
    hand: list[Card]
    reserved: int
    autopilot: str | None


class OtherSeat(Open):
    faction: str
    hand_count: int
    ally: str | None
    autopilot: str | None


class Count(Open):
    count: int


class Action(Open):
    """A command the seat may send now: `type` and its bound fields. Fields under
    `free` are for the sender to fill in, within the bounds described there
    (`kind`: text, choice with `options`, spice_promise with `min`/`max`, card)."""

    type: str
    free: dict[str, dict[str, Any]] | None = None


class PublicView(Open):
    room: str
    version: int
    mode: str | None = None
    turn: int | None = None
    phase: int | None = None
    seats: list[OtherSeat] | None = None
    fairness: Fairness | None = None
    ended: int | bool | None = Field(None, description="false, or the version of the end")
    deck: Count | None = None
    discard: dict[str, Any] | None = None
    decision: dict[str, Any] | None = None
    response: dict[str, Any] | None = None
    withheld: str | None = Field(None, description="set when the view could not be shown")


class Fairness(BaseModel):
    """RULES 9: how the room's outcomes are made, and what lets anyone check them."""

    mode: Literal["committed", "seeded", "layout"]
    algorithm: str | None
    commitment: str | None = Field(description="sha256 of the secret, 64 hex (committed)")
    seeds: dict[str, str | None]
    secret: str | None = Field(description="published once the room has ended")


class EndRoom(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    command_id: str | None = Field(None, min_length=1, max_length=128)


class SeatView(PublicView):
    seat: str | None = None
    me: Me | None = None
    nullentropy: dict[str, Any] | None = None
    receipts: list[dict[str, Any]] | None = None
    actions: list[Action] | None = None


class LogEntry(Open):
    seq: int
    version: int
    append: int = Field(description="the version of the first event of its append: the "
                        "entries of one command share it")
    type: str
    text: str


class Check(Open):
    ok: bool


class AuditReport(Open):
    room: str
    ok: bool
    events: int | None = None
    version: int | None = None
    state_hash: str | None = None
    checks: dict[str, Check] = Field(default_factory=dict)


class LastCommand(BaseModel):
    """The room's last append made by a command (a token reissue is none)."""

    at: str
    seat: str = Field(description="the seat that sent it, or `system` (a deadline, the end)")
    event: str = Field(description="the type of its first event")
    text: str = Field(description="its first event in words, as the public log says it")


class RoomSummary(BaseModel):
    room: str
    version: int | None = Field(description="null for a damaged room")
    seats: list[str]
    ended: int | None = Field(description="the version of the room's end, null while it runs")
    created: str | None
    last_command: LastCommand | None
    damaged: str | None = Field(None, description="a damaged room only (its stored stream "
                                "does not verify): what is wrong, for the operator")


class NewToken(BaseModel):
    room: str
    seat: str
    token: str = Field(description="the seat's new token, shown this once")
    version: int


class Health(BaseModel):
    ok: bool


class PublicKey(BaseModel):
    """The server's public signing key (INTERFACE "Audit"), as `keys show` prints it."""

    algorithm: str
    public_key: str  # base64 of the raw Ed25519 public key
    pem: str
    retired_public_keys: list[str]
    encryption_at_rest: bool
    signs: str


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
