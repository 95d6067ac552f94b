"""The rules of dune-ledger: pure Python and pydantic, no I/O, no clock, no randomness."""
