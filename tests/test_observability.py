"""Logs and metrics: one structured line per command, never a card id; the metrics
an operator scrapes."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from prometheus_client import REGISTRY, generate_latest

from dune_ledger.application.audit import audit_room
from dune_ledger.domain.catalog import room_cards
from dune_ledger.infrastructure import observability
from dune_ledger.infrastructure.settings import Settings
from dune_ledger.infrastructure.storage import open_rooms
from tests.support import layout


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Only this test's apps report their lag; the loggers as they were, afterwards."""
    import logging
    import weakref

    monkeypatch.setattr(observability, "_watched", weakref.WeakSet())
    logger = logging.getLogger("dune_ledger")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    yield
    logger.handlers[:], logger.propagate = handlers, propagate
    logger.setLevel(level)


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def logged(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    monkeypatch.setenv("DUNE_LEDGER_LOG_FORMAT", "json")
    out = io.StringIO()
    observability.configure_logging(Settings(), out, default_level="INFO")
    return out


def test_one_json_line_per_command_with_no_card_id(logged: io.StringIO, tmp_path: Path):
    with open_rooms(f"sqlite:///{tmp_path / 'rooms.db'}") as app:
        room = app.create_room(layout())["room"]
        begun = app.execute(room, "richese", {"type": "begin_search", "card": "nullentropy-box"})
        assert begun["ok"]
        refused = app.execute(room, "emperor", {"type": "discard", "card": "karama-1"})
        assert refused["error"]["code"] == "locked"
        app.execute(room, "emperor", {"type": "no_such_command", "card": "crysknife"})
    lines = [orjson.loads(line) for line in logged.getvalue().splitlines()]
    commands = [line for line in lines if line["logger"] == "dune_ledger.command"]
    assert [(c["seat"], c["type"], c["code"]) for c in commands] == [
        ("richese", "begin_search", "ok"), ("emperor", "discard", "locked"),
        ("emperor", "invalid", "invalid_command")]
    for line in commands:
        assert line["room"] == room and line["level"] == "info"
        assert isinstance(line["ms"], float) and line["ms"] >= 0
    text = logged.getvalue()
    for card in room_cards(("choam_richese",)):
        assert f'"{card.id}"' not in text and f"={card.id}" not in text, card.id


def test_text_logs_and_levels(monkeypatch: pytest.MonkeyPatch):
    out = io.StringIO()
    monkeypatch.setenv("DUNE_LEDGER_LOG_LEVEL", "warning")
    observability.configure_logging(Settings(), out)
    observability.command_done("r", "emperor", "draw", "ok", 0.001)
    observability.log.warning("something to see")
    assert out.getvalue() == "warning dune_ledger: something to see\n"
    monkeypatch.delenv("DUNE_LEDGER_LOG_LEVEL")
    observability.configure_logging(Settings(), out)
    observability.command_done("r", "emperor", "draw", "ok", 0.001)
    assert "info dune_ledger.command: command room=r seat=emperor type=draw code=ok ms=1.0" \
        in out.getvalue()


def test_the_metrics_count_commands_latency_lag_and_audits(tmp_path: Path):
    observability.configure_logging(Settings(), io.StringIO())
    before_ok = sample("dune_ledger_commands_total", type="draw", code="ok")
    before_locked = sample("dune_ledger_commands_total", type="draw", code="locked")
    before_latency = sample("dune_ledger_command_seconds_count", type="draw")
    before_audits = sample("dune_ledger_audits_total", result="ok")
    with open_rooms(f"sqlite:///{tmp_path / 'rooms.db'}") as app:
        room = app.create_room(layout())["room"]
        for _ in range(2):
            assert app.execute(room, "emperor", {"type": "draw"})["ok"]
        app.execute(room, "richese", {"type": "begin_search", "card": "nullentropy-box"})
        assert app.execute(room, "emperor", {"type": "draw"})["error"]["code"] == "locked"
        # Nothing read yet: the read models are behind by every event since creation.
        assert sample("dune_ledger_projection_lag_events") >= 4
        # Caught up (a read gives up catching up after a bounded time and folds its own
        # room instead, so it is not what empties the lag on a slow machine).
        app.read_models.catch_up()  # type: ignore[union-attr]
        assert sample("dune_ledger_projection_lag_events") == 0
        observability.audited(audit_room(app, room))
    assert sample("dune_ledger_commands_total", type="draw", code="ok") == before_ok + 2
    assert sample("dune_ledger_commands_total", type="draw", code="locked") == before_locked + 1
    assert sample("dune_ledger_command_seconds_count", type="draw") == before_latency + 3
    assert sample("dune_ledger_audits_total", result="ok") == before_audits + 1
    observability.stream_opened()
    opened = sample("dune_ledger_open_streams")
    observability.stream_closed()
    assert sample("dune_ledger_open_streams") == opened - 1
    exposed = generate_latest(REGISTRY).decode()
    for name in ("dune_ledger_commands_total", "dune_ledger_command_seconds_bucket",
                 "dune_ledger_projection_lag_events", "dune_ledger_audits_total",
                 "dune_ledger_open_streams"):
        assert name in exposed


def test_a_failed_audit_counts_its_checks():
    before = sample("dune_ledger_audit_failures_total", check="chain_intact")
    failed = sample("dune_ledger_audits_total", result="failed")
    observability.audited({"room": "r", "ok": False, "checks": {
        "chain_intact": {"ok": False, "details": ["version 2 ..."]},
        "cards_conserved": {"ok": True, "details": []}}})
    assert sample("dune_ledger_audit_failures_total", check="chain_intact") == before + 1
    assert sample("dune_ledger_audits_total", result="failed") == failed + 1
