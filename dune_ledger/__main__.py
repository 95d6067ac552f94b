"""`python -m dune_ledger ...` is the `dune-ledger` command."""

from dune_ledger.infrastructure.cli import run

run()
