"""checks.drawing through checks.report: figures drawn in a worker process in virtual time
(the next check runs meanwhile), in the check itself live, and either way a figure that
cannot be drawn is an error of the check that asked for it, in summary.json and JUnit.

Runs pytest in a subprocess on a tiny fake checks folder, as ``invoke check`` does.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rocelab.checks import outcome

ROOT = Path(__file__).resolve().parents[2]

FIGURES = '''
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

class Unpicklable(Exception):
    def __init__(self, text):
        super().__init__(text)
        self.lock = threading.Lock()

@dataclass(frozen=True)
class Figures:
    out: Path
    how: str = "draw"  # or "fail", "die", "unpicklable", "hang"

    def outputs(self):
        return [self.out]

    def draw(self):
        if self.how == "fail":
            raise ValueError("no trace for leaf9\\nits second line")
        if self.how == "unpicklable":
            raise Unpicklable("leaf9's trace is locked")
        if self.how == "die":
            os._exit(3)
        self.out.write_text(str(os.getpid()))
        if self.how == "hang":
            time.sleep(3600)
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
    record_figures(request, Figures(OUT / "pauses.png", "fail"))

def test_not_drawn_and_failed(request):
    record_figures(request, Figures(OUT / "flows.png", "fail"))
    assert False, "lossless class lost frames"
'''

WORKER_TROUBLE = '''
from pathlib import Path
from figs import Figures
from rocelab.checks.report import record_figures

OUT = Path(__file__).parent / "out"

def test_worker_dies(request):
    OUT.mkdir(exist_ok=True)
    record_figures(request, Figures(OUT / "queues.png", "die"))

def test_after_the_death(request):
    record_figures(request, Figures(OUT / "pauses.png"))

def test_unpicklable_error(request):
    record_figures(request, Figures(OUT / "flows.png", "unpicklable"))
'''


def run_checks(base: Path, runtime: str, checks: str = CHECKS
               ) -> tuple[subprocess.CompletedProcess, Path]:
    folder = base / "checks"
    folder.mkdir()
    (folder / "figs.py").write_text(FIGURES)
    (folder / "test_figures.py").write_text(checks)
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
    and JUnit say error (a failure moved, a pass given an <error>)."""
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


def test_a_dead_worker_or_an_odd_error_costs_only_its_own_checks_figures(tmp_path):
    """A worker that dies fails the figures it held, and the next ones get a fresh worker;
    an exception that cannot travel back still says what it was, with its traceback (in
    the terminal and JUnit). Only figures failed, and still the run is not 0, pytest's own
    exit code included."""
    proc, results = run_checks(tmp_path, "sim", WORKER_TROUBLE)
    lines = verdicts(proc)
    assert lines[:3] == ["[PASS] test_worker_dies", "[PASS] test_after_the_death",
                         "[PASS] test_unpicklable_error"], proc.stdout + proc.stderr
    assert lines[3].startswith("[ERROR] test_worker_dies: figures not drawn: "
                               "BrokenProcessPool: ")
    assert lines[4:] == ["[ERROR] test_unpicklable_error: figures not drawn: Unpicklable: "
                         "leaf9's trace is locked (it had passed)"]
    assert (tmp_path / "checks" / "out" / "pauses.png").is_file()
    assert "raise Unpicklable(" in proc.stdout
    assert proc.returncode == 1
    assert outcome.verdict_code(proc.returncode, results) == outcome.FAILED
    suite = ET.parse(results / "junit.xml").getroot().find("testsuite")
    errors = {c.get("name"): c.find("error") for c in suite.iter("testcase")}
    assert errors["test_after_the_death"] is None
    assert "raise Unpicklable(" in errors["test_unpicklable_error"].text
    assert (suite.get("errors"), suite.get("failures")) == ("2", "0")


INTERRUPTED = '''
import os, signal
from pathlib import Path
from figs import Figures
from rocelab.checks.report import record_figures

def test_interrupted(request):
    record_figures(request, Figures(Path(__file__).parent / "pauses.png", "fail"))
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even where it starts ignored
    os.kill(os.getpid(), signal.SIGINT)
'''


def test_an_interrupted_check_stays_interrupted_whatever_became_of_its_figures(tmp_path):
    proc, results = run_checks(tmp_path, "sim", INTERRUPTED)
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"] == "incomplete", proc.stdout + proc.stderr
    assert [(c["name"], c["outcome"], c["reason"]) for c in summary["checks"]] == [
        ("test_interrupted", "error", "interrupted before it finished")]


HANGING = """
import os, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from figs import Figures
from rocelab.checks.drawing import Drawer

if __name__ == "__main__":
    Drawer(background=True).draw("check", Figures(Path(sys.argv[2]), "hang"))
    time.sleep(3600)  # killed by the test
"""


def test_the_worker_dies_with_the_checks_process_even_killed_outright(tmp_path):
    """A checks' process killed with SIGKILL (``invoke check``'s last resort) takes its
    drawing worker with it: nothing is left waiting on its queue."""
    folder = tmp_path / "checks"
    folder.mkdir()
    (folder / "figs.py").write_text(FIGURES)
    (tmp_path / "hang.py").write_text(HANGING)
    drawn = tmp_path / "drawn"
    parent = subprocess.Popen([sys.executable, str(tmp_path / "hang.py"), str(folder),
                               str(drawn)], env={**os.environ, "PYTHONPATH": str(ROOT)},
                              stderr=subprocess.DEVNULL)  # its leaked semaphores, reported
    worker = None
    try:
        assert wait_until(lambda: drawn.is_file() and drawn.read_text(), 60), "never drew"
        worker = int(drawn.read_text())
        parent.kill()
        parent.wait()
        assert wait_until(lambda: gone(worker), 10), "the worker outlived its parent"
    finally:
        parent.kill()
        parent.wait()
        if worker is not None and not gone(worker):  # left behind: not by this test
            os.kill(worker, signal.SIGKILL)


def gone(pid: int) -> bool:
    """No such process, or only its zombie (its parent was killed, init reaps it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def wait_until(condition, seconds: float) -> bool:
    """``condition`` held within ``seconds`` (looked at every 50 ms)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()
