"""The rules of dune-ledger: pure Python and pydantic, no I/O, no clock, no randomness.

The rest of the code uses them through `domain/game.py`.
"""
