"""What the autopilot may send in a keyed seat's name is what the effects declare it sends
for a seat (`Effect.autopilot`, RULES 3.7 and 9.3)."""

from __future__ import annotations

from typing import Literal

import pytest

from dune_ledger.domain.commands import Command
from dune_ledger.domain.effect import Effect, House
from dune_ledger.domain.game import HOUSE


class Look(Command):
    type: Literal["look"]


class Peek(Command):
    type: Literal["peek"]


def test_the_autopilot_sends_what_the_effects_declare_and_nothing_else() -> None:
    sends = HOUSE.autopilot_may_send
    for raw in ({"type": "select_card"}, {"type": "semuta"}, {"type": "bid"},
                {"type": "pass_bid"}, {"type": "sealed_bid"}, {"type": "ix_set_aside"},
                {"type": "ix_replace"}, {"type": "richese_sale"},
                {"type": "respond", "action": "pass"}):
        assert sends(raw), raw
    for raw in ({"type": "respond", "action": "karama"}, {"type": "seed_commit"},
                {"type": "seed_reveal"}, {"type": "seat_key"}, {"type": "set_autopilot"},
                {"type": "draw"}, {"type": "discard"}, {"type": "begin_search"},
                {"type": "karama_buy"}, {"type": "deal"}, {}, "select_card", None):
        assert not sends(raw), raw


def test_an_effect_whose_autopilot_sends_another_command_does_not_start() -> None:
    effect = Effect(name="look", order=999, commands=(Look,), autopilot={Peek: None})
    with pytest.raises(TypeError, match="the autopilot of look sends only its seats' commands"):
        House().collect([effect], home=__name__)
    house = House()
    house.collect([Effect(name="look", order=999, commands=(Look, Peek),
                          autopilot={Look: lambda raw: raw.get("card") is None})],
                  home=__name__)
    assert house.autopilot_may_send({"type": "look"})
    assert not house.autopilot_may_send({"type": "look", "card": "karama-1"})
    assert not house.autopilot_may_send({"type": "peek"})
