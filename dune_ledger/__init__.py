"""dune-ledger: the room engine. Its layers live in the repository's top-level folders
(`domain/`, `application/`, `infrastructure/`, `projections/`), linked here so that
they install and import as `dune_ledger.domain`, ... and no generic name reaches
site-packages; `examples/`, linked too, ships the layouts the demo plays."""
