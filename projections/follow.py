"""Following the event log as it grows.

- SQLite and memory: `ReadModels.catch_up` polled from the worker loop
  (SQLite has no `subscribe()`).
- PostgreSQL: the library's projection runner on a LISTEN/NOTIFY
  subscription (`subscribe(gt=position)`), started after a catch-up in
  batches so that a long backlog is not applied one event per transaction.

Either way a projector skips what it already applied, so a follower and a
reader catching up at the same time never apply an event twice.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.persistence import Tracking, TrackingRecorder
from eventsourcing.projection import BaseProjectionRunner, Projection

from dune_ledger.application.rooms import RoomsApp
from dune_ledger.application.stream import Recorded, Undecodable
from dune_ledger.projections.read_models import ReadModels


class EventLog(Application[UUID]):
    """The rooms' event log, read only: what the projection runner subscribes to."""

    name = RoomsApp.name


class Positions(TrackingRecorder):
    """The runner's view of where the read models are: the lowest projector position.

    Positions are written by the projectors inside their own transactions, so
    this recorder never inserts tracking by itself.
    """

    def __init__(self, models: ReadModels) -> None:
        self.models = models

    def insert_tracking(self, tracking: Tracking) -> None:
        raise NotImplementedError("projectors record their position with their rows")

    def max_tracking_id(self, application_name: str) -> int | None:
        return self.models.position() or None


class ReadModelProjection(Projection[Positions]):
    name = "dune_ledger_read_models"

    def __init__(self, view: Positions) -> None:
        super().__init__(view)
        self.models = view.models

    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        if isinstance(domain_event, Recorded | Undecodable):  # Undecodable: fenced off
            self.models.process_event(domain_event, tracking.notification_id)


def subscription_runner(app: RoomsApp, models: ReadModels,
                        *, catch_up: bool = True) -> BaseProjectionRunner[Any]:
    """Start following a PostgreSQL log by LISTEN/NOTIFY (stop it with `__exit__`).

    The subscription starts after the lowest projector position; `catch_up`
    first applies the backlog in batches rather than one event per transaction.
    """
    if catch_up:
        models.catch_up()
    positions = Positions(models)
    runner: BaseProjectionRunner[Any] = BaseProjectionRunner(
        projection=ReadModelProjection(positions),
        application_class=EventLog,
        tracking_recorder=positions,
        topics=(),
        env=dict(app.env),
    )
    return runner.__enter__()


def can_subscribe(app: RoomsApp) -> bool:
    from dune_ledger.projections.read_models import is_postgres

    return is_postgres(app)
