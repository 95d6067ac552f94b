"""Use cases: load a room, decide, save; views and audit as queries. No SQL, no HTTP."""
