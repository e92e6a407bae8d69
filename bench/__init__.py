"""Benchmarks (`invoke bench`): every target is a ratio against a baseline measured in the
same run, never a timed assertion in the tests."""
