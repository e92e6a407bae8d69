"""The exit-code contract of ``rocelab check`` (docs/ci.md), from a run's summary.json.

- 0: every check ran and passed (a check skipped because the lab has nothing for it to
  check, e.g. no PFC watchdog configured, does not change that);
- 1: a check failed or could not run (error): the fabric, or the lab, is wrong;
- 3: nothing failed, but some verdict is inconclusive: a check skipped with a reason that
  starts with ``INCONCLUSIVE`` (the emulation lost fidelity) or ``MISSING CAPABILITY`` (the
  runtime or host cannot do what it needs), or one that passed while its emulation lost
  fidelity;
- 2: usage or input error (pytest's usage error, or no check matched ``-k``).

Checks report the two inconclusive kinds with ``inconclusive(reason)`` and
``missing_capability(reason)``, so their skips carry the prefix.
"""
from __future__ import annotations

import pytest

PASSED, FAILED, USAGE, INCONCLUSIVE = 0, 1, 2, 3
INCONCLUSIVE_PREFIX = "INCONCLUSIVE"
CAPABILITY_PREFIX = "MISSING CAPABILITY"
PYTEST_USAGE = (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.NO_TESTS_COLLECTED)


def inconclusive(reason: str) -> None:
    """Skip the running check as inconclusive: it ran, but its evidence cannot decide."""
    pytest.skip(f"{INCONCLUSIVE_PREFIX}: {reason}")


def missing_capability(reason: str) -> None:
    """Skip the running check because the runtime or host lacks something it needs."""
    pytest.skip(f"{CAPABILITY_PREFIX}: {reason}")


def undecided(check: dict) -> str | None:
    """Why one check of summary.json is inconclusive, or None."""
    reason = str(check.get("reason") or "")
    if check.get("outcome") == "inconclusive":
        return reason or "inconclusive"
    if check.get("outcome") == "skipped" and reason.startswith((INCONCLUSIVE_PREFIX,
                                                                 CAPABILITY_PREFIX)):
        return reason
    fidelity = check.get("fidelity") or {}
    if check.get("outcome") == "passed" and (fidelity.get("ok") is False
                                             or fidelity.get("problems")):
        problems = "; ".join(map(str, fidelity.get("problems") or [])) or "no details"
        return f"passed, but the emulation lost fidelity: {problems}"
    return None


def exit_code(pytest_code: int, summary: dict | None) -> int:
    """The run's exit code from pytest's and the summary's checks."""
    if pytest_code in PYTEST_USAGE:
        return USAGE
    checks = (summary or {}).get("checks") or []
    if pytest_code != 0 or any(c.get("outcome") in ("failed", "error") for c in checks):
        return FAILED
    if summary is None or summary.get("status", "complete") != "complete":
        return FAILED  # no summary, or a partial one: nothing can be concluded as passed
    return INCONCLUSIVE if any(undecided(c) for c in checks) else PASSED
