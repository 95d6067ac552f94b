"""The errors the outside layer raises for what a user gave it: one module every
adapter (storage, keys, the CLI, HTTP) can import without importing another."""


class UsageError(ValueError):
    """Bad configuration given by the user (exit 2)."""


class StoreUnavailable(UsageError):
    """The store cannot be reached now (a worker tries again later)."""
