"""Read models: the public log and every seat's view, projected from the event log."""

from dune_ledger.projections.read_models import ReadModels, open_read_models

__all__ = ["ReadModels", "open_read_models"]
