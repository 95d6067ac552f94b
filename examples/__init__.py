"""The layouts of the quick start, shipped as package data of `dune_ledger.examples`: the
demo plays them, the host page offers them."""
