"""``invoke check``: run the checks against a lab, bringing it up (and down) if needed.

pytest runs in a subprocess, so a check that hangs or crashes the interpreter cannot take
the lab's teardown with it; the lab this brought up is always taken down again.
"""
from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from labs import lab as labs
from labs import state as states
from labs import topology

ROOT = Path(__file__).resolve().parent.parent


def default_results(lab_name: str) -> Path:
    return ROOT / "results" / f"{lab_name}-{time.strftime('%Y%m%d-%H%M%S')}"


def pytest_argv(lab: str, results: Path, k: str | None = None,
                extra: list[str] | None = None) -> list[str]:
    """``extra``: more pytest options, e.g. ``--runtime sim --seed 3``."""
    """The pytest command line: the checks, the report plugin, JUnit XML in ``results``."""
    argv = [sys.executable, "-m", "pytest", str(ROOT / "checks"),
            "-p", "checks.report", "-p", "no:cacheprovider",
            "--lab", lab, "--results", str(results),
            f"--junitxml={results / 'junit.xml'}", "-o", "junit_family=xunit1",
            "-q", "--tb=short", "--no-header", "-o", "addopts="]
    if k:
        argv += ["-k", k]
    return argv + list(extra or [])


def run(spec: str, k: str | None = None, results: str | Path | None = None,
        runtime: str = "netns", say: Callable[[str], None] = print,
        extra: list[str] | None = None) -> tuple[int, Path]:
    """Run the checks on lab ``spec`` (name or topology path); (pytest's exit code, results
    folder). A lab that is not running is brought up first and always taken down after."""
    name = labs.lab_name(spec)
    brought_up = None
    if states.load(name) is None:
        topology.load(spec)  # a bad topology is reported before anything is said or made
        say(f"lab {name} is not running: bringing it up for the checks")
        brought_up = labs.up(spec, runtime)
    try:
        lab = brought_up or labs.running(name)
        folder = Path(results).resolve() if results else default_results(lab.name)
        folder.mkdir(parents=True, exist_ok=True)
        code = subprocess.call(pytest_argv(lab.name, folder, k, extra), cwd=ROOT)
        return code, folder
    finally:
        if brought_up is not None:
            brought_up.down()
            say(f"lab {name} taken down")
