"""A last line of defence for hidden information, applied before a row is stored.

The views come from `domain.views`; this module does not shape them, it only
refuses to store one that names a card its reader may not know:

- the public view and public log entries never name a card an effect keeps
  hidden from all (the deck; an open search's inventory below the top of the
  pile: the candidates and the pile order), nor one an event's entry must not
  name (the card a search retrieved);
- a seat's view names nothing beyond the public view except that seat's own
  hand and what the effects disclose to it (its own open search's candidates,
  its own receipts, a gift offered by or to it);
- no row carries a committed room's secret before the room has ended (RULES 9).

A refused row is replaced by a withheld marker (fail closed) rather than
stopping the projection, so one bad rule module cannot blind every room. What
each effect discloses to whom is its own declaration (`Effect.discloses`).
"""

from __future__ import annotations

import re
from typing import Any

from dune_ledger.domain.game import CARDS, Event, RoomState, disclosed, hidden, kept_from_log, zones

TOKEN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
# Every byte that cannot be part of a TOKEN (non-ASCII UTF-8 bytes included) as a space.
SEPARATORS = bytes(b if chr(b) in "abcdefghijklmnopqrstuvwxyz0123456789-" else 0x20
                   for b in range(256))
CARD_BYTES = {cid.encode(): cid for cid in CARDS}
CARD_KEYS = frozenset(CARD_BYTES)


def card_ids(text: str) -> set[str]:
    """Every card id named in a stored JSON text: in keys, values or free text.

    The TOKEN regex runs on every stored row, where it was a fifth of an audit;
    splitting on separators gives the same tokens in C whenever every hyphen
    stands between two token characters (a negative number, say, does not).
    """
    words = text.encode().translate(SEPARATORS)
    if b"-" in words and (b"--" in words or b" -" in words or b"- " in words
                          or words[:1] == b"-" or words[-1:] == b"-"):
        return {t for t in TOKEN.findall(text) if t in CARDS}
    return {CARD_BYTES[w] for w in CARD_KEYS.intersection(words.split())}


# A card nobody may see named, by the effects: in the deck, in an open search's inventory.
is_secret_to_all = hidden


def secret_to_all(state: RoomState) -> set[str]:
    return {cid for zone in zones(state).values() for cid in zone
            if is_secret_to_all(state, cid)}


SECRET = "the room's secret"  # what a leak of it is reported as, among card ids


def secret_leaks(state: RoomState, text: str) -> set[str]:
    """RULES 9: a committed room's secret is in no outbound row until the room ends."""
    f = state.fairness
    # A read model's state folded from its own row holds no secret ("") to leak.
    leaked = f is not None and state.ended is None and f.secret and f.secret in text
    return {SECRET} if leaked else set()


def public_leaks(state: RoomState, text: str, event: Event | None = None,
                 named: frozenset[str] | None = None) -> set[str]:
    """The cards `text` names (`named`, when the caller knows them) that are secret to
    all, or the card a search just took; asked of each named card, not of a set of the
    deck for every stored row. And the room's secret before its end."""
    if state.fairness is not None and secret_leaks(state, text):
        return {SECRET}
    if named is None:
        named = frozenset(card_ids(text))
    if not named:
        return set()
    kept = kept_from_log(event) if event is not None else set()
    return {cid for cid in named if cid in kept or is_secret_to_all(state, cid)}


def seat_leaks(state: RoomState, seat: str, text: str, public_ids: set[str]) -> set[str]:
    if state.fairness is not None and secret_leaks(state, text):
        return {SECRET}
    named = card_ids(text) - public_ids
    if not named:
        return named
    return named - set(state.seat(seat).hand) - disclosed(state, seat)


def withheld_view(state: RoomState, seat: str | None) -> dict[str, Any]:
    return {"room": state.room, "version": state.version, "seat": seat,
            "withheld": "this view was withheld: it would have shown hidden cards"}


def withheld_entry(entry: dict[str, Any]) -> dict[str, Any]:
    return {"seq": entry["seq"], "version": entry["version"], "append": entry["append"],
            "type": entry["type"],
            "text": "(withheld: this entry would have shown hidden cards)"}
