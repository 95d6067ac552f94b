"""Adapters: storage from a URL, the mapper and transcoder, randomness, CLI, HTTP."""
