"""Helpers shipped for tests, benchmarks and the demo (real daemons, fakes)."""
