"""The exit-code contract of ``rocelab check`` (docs/ci.md), from a run's summary.json.

- 0: every check ran and passed (a check skipped because the lab has nothing for it to
  check, e.g. no PFC watchdog configured, does not change that);
- 1: a check failed or could not run (error): the fabric, or the lab, is wrong;
- 3: nothing failed, but some verdict is inconclusive: a check the report plugin marked
  ``inconclusive`` (checks/report.py: its emulation lost fidelity, so whatever its
  assertions said it is a JUnit skip starting ``INCONCLUSIVE``), a check skipped with a
  reason that starts with ``INCONCLUSIVE`` or ``MISSING CAPABILITY`` (the runtime or host
  cannot do what it needs), or one that passed while its emulation lost fidelity;
- 2: usage or input error (pytest's usage error, or no check matched ``-k``).

A run that left no summary.json at all is judged by pytest's word alone (0 or 1): checks.run
writes a provisional one (status incomplete, so exit 1) before pytest starts, so this is
only the case of a folder someone emptied. One that cannot be read is not a pass.

Checks report the two inconclusive kinds with ``inconclusive(reason)`` and
``missing_capability(reason)``, so their skips carry the prefix.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

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
    """The run's exit code from pytest's and the summary's checks and counts."""
    if pytest_code in PYTEST_USAGE:
        return USAGE
    if summary is None:
        return PASSED if pytest_code == 0 else FAILED
    checks = summary.get("checks") or []
    counts = summary.get("counts") or {}
    if pytest_code != 0 or counts.get("failed") or counts.get("error") \
            or any(c.get("outcome") in ("failed", "error") for c in checks):
        return FAILED
    if summary.get("status", "complete") != "complete":
        return FAILED  # a partial summary: nothing can be concluded as passed
    if counts.get("inconclusive") or any(undecided(c) for c in checks):
        return INCONCLUSIVE
    return PASSED


def summary_of(folder: Path) -> dict | None:
    """A results folder's summary.json; None when there is none; one with status
    ``unreadable`` (not a pass) when it cannot be read as a summary."""
    path = folder / "summary.json"
    if not path.exists():
        return None
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return {"status": "unreadable", "status_reason": f"{path}: {e}", "checks": []}
    if not isinstance(found, dict):
        return {"status": "unreadable", "status_reason": f"{path}: not an object", "checks": []}
    return found


def closing(summary: dict | None, folder: Path, lab: str) -> list[str]:
    """A run's last lines: what was decided, where the report is, and for each check that
    could not decide, the command that decides it (in virtual time, where the emulation
    cannot fall behind)."""
    report = folder / "summary.md"
    if summary is None:
        return [f"no summary: the checks did not run to the end (evidence in {folder})"]
    checks = summary.get("checks") or []
    counts = Counter("inconclusive" if undecided(c) else c.get("outcome") for c in checks)
    parts = [f"{counts[k]} {k}" for k in ("passed", "failed", "error", "inconclusive",
                                          "skipped") if counts[k]]
    lines = [f"decided: {', '.join(parts) or 'nothing'} (lab {lab}); report: {report}"]
    for c in checks:
        why = undecided(c)
        if why:
            name = str(c.get("name", "")).split("[")[0]
            lines += [f"undecided: {c.get('name')}: {why}",
                      f"  decide it: invoke check {lab} --runtime sim -k {name}"]
    return lines


def verdict_code(pytest_code: int, folder: Path) -> int:
    """The exit code of a check run whose results are in ``folder`` (``exit_code``)."""
    return exit_code(pytest_code, summary_of(folder))
