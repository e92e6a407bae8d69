"""Checks run against a live lab (pytest, sonic-mgmt style); see docs/checks.md."""
