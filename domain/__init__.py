"""The rules of dune-ledger: pure Python and pydantic, no I/O, no clock, no randomness."""

# Load the decision core first, whichever domain module is imported first: its
# bottom import registers every rules module, and a rules module imported
# half-way through `custody` (as `views -> gifts -> custody` would) cannot
# import names from it.
from dune_ledger.domain import rules as _rules  # noqa: E402, F401
