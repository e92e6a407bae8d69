"""Checks run against a lab in any runtime (pytest, sonic-mgmt style), and lint, reports and
diff; see docs/checks.md."""
