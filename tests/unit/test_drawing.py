"""checks.drawing through checks.report: figures drawn in a worker process in virtual time
(the next check runs meanwhile), in the check itself live, and either way a figure that
cannot be drawn is an error of the check that asked for it, in summary.json and JUnit.

Runs pytest in a subprocess on a tiny fake checks folder, as ``invoke check`` does.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rocelab.checks import outcome

ROOT = Path(__file__).resolve().parents[2]

FIGURES = '''
import os
from dataclasses import dataclass
from pathlib import Path

@dataclass(frozen=True)
class Figures:
    out: Path
    fail: bool = False

    def outputs(self):
        return [self.out]

    def draw(self):
        if self.fail:
            raise ValueError("no trace for leaf9\\nits second line")
        self.out.write_text(str(os.getpid()))
        return [self.out]
'''

CHECKS = '''
import os
from pathlib import Path
from figs import Figures
from rocelab.checks.report import record_figures

OUT = Path(__file__).parent / "out"

def test_drawn(request):
    OUT.mkdir(exist_ok=True)
    (OUT / "checks.pid").write_text(str(os.getpid()))
    record_figures(request, Figures(OUT / "queues.png"))

def test_not_drawn(request):
    record_figures(request, Figures(OUT / "pauses.png", fail=True))

def test_not_drawn_and_failed(request):
    record_figures(request, Figures(OUT / "flows.png", fail=True))
    assert False, "lossless class lost frames"
'''


def run_checks(base: Path, runtime: str) -> tuple[subprocess.CompletedProcess, Path]:
    folder = base / "checks"
    folder.mkdir()
    (folder / "figs.py").write_text(FIGURES)
    (folder / "test_figures.py").write_text(CHECKS)
    results = base / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(folder), "-p", "rocelab.checks.report",
         "-p", "rocelab.checks.conftest", "-p", "no:cacheprovider", "--runtime", runtime,
         "--results", str(results), "-q", f"--junitxml={results / 'junit.xml'}",
         "-o", "junit_family=xunit1", "--rootdir", str(base)],
        cwd=base, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
        text=True, timeout=120)
    return proc, results


def verdicts(proc) -> list[str]:
    return [line for line in proc.stdout.splitlines() if line.startswith("[")]


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    return run_checks(tmp_path_factory.mktemp("drawn"), "sim")


def test_in_virtual_time_a_worker_process_draws_before_the_summary(simulated):
    proc, results = simulated
    summary = json.loads((results / "summary.json").read_text())
    drawn = next(c for c in summary["checks"] if c["name"] == "test_drawn")
    assert drawn["outcome"] == "passed"
    out = results.parent / "checks" / "out"
    assert drawn["plots"] == [str(out / "queues.png")]
    worker = (out / "queues.png").read_text()
    assert worker and worker != (out / "checks.pid").read_text(), "drawn in the checks' process"


def test_a_figure_drawn_in_the_background_that_fails_makes_its_check_an_error(simulated):
    """Its verdict was printed already; the error line follows, summary.json, summary.md
    and JUnit say error (a failure moved, a pass given an <error>), the run is not 0."""
    proc, results = simulated
    why = "figures not drawn: ValueError: no trace for leaf9"
    assert verdicts(proc) == [
        "[PASS] test_drawn", "[PASS] test_not_drawn",
        "[FAIL] test_not_drawn_and_failed: lossless class lost frames",
        f"[ERROR] test_not_drawn: {why} (it had passed)",
        f"[ERROR] test_not_drawn_and_failed: {why} (it had failed: lossless class lost "
        "frames)"], proc.stdout + proc.stderr
    summary = json.loads((results / "summary.json").read_text())
    assert summary["counts"]["error"] == 2 and summary["counts"]["failed"] == 0
    assert outcome.verdict_code(proc.returncode, results) == outcome.FAILED
    assert f"test_not_drawn | {why}" in (results / "summary.md").read_text()
    suite = ET.parse(results / "junit.xml").getroot().find("testsuite")
    cases = {c.get("name"): [e.tag for e in c if e.tag != "properties"]
             for c in suite.iter("testcase")}
    assert cases == {"test_drawn": [], "test_not_drawn": ["error"],
                     "test_not_drawn_and_failed": ["error"]}
    assert (suite.get("errors"), suite.get("failures")) == ("2", "0")


def test_live_the_check_draws_its_own_figures_and_a_failure_is_its_crash(tmp_path):
    """Live the figures are drawn in the check (a worker would take a core from the lab):
    a figure that cannot be drawn crashes the check, an error as any crash is."""
    proc, results = run_checks(tmp_path, "live")
    assert verdicts(proc) == [
        "[PASS] test_drawn",
        "[ERROR] test_not_drawn: crashed: ValueError: no trace for leaf9",
        "[ERROR] test_not_drawn_and_failed: crashed: ValueError: no trace for leaf9"
    ], proc.stdout + proc.stderr
    out = tmp_path / "checks" / "out"
    assert (out / "queues.png").read_text() == (out / "checks.pid").read_text()
