"""Read models: the public log and every seat's view, projected from the event log
(`read_models.py`: `ReadModels`, `open_read_models`). This package's `__init__` imports
none of its modules: each of them runs it first, so an import here would be a circle."""
