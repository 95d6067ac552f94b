"""dune-ledger: the room engine. Its layers live in the repository's top-level folders
(`domain/`, `application/`, `infrastructure/`, `projections/`), which pyproject.toml's
package-dir installs as `dune_ledger.domain`, ..., so that no generic name reaches
site-packages; `examples/` ships the layouts the demo plays as `dune_ledger.examples`."""
