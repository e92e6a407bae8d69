"""checks.run: a fresh results folder per run, a non-empty one refused, a provisional
summary that says "incomplete", an interrupt forwarded to pytest and its teardown awaited;
checks.variants.variant_name: a variant never takes its lab's name."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rocelab.checks import report
from rocelab.checks import run as runs
from rocelab.checks.variants import variant_name
from rocelab.labs import state as states
from rocelab.labs.errors import LabError
from rocelab.labs.state import LabState
from rocelab.labs.topology import NAME_RE

ROOT = Path(__file__).resolve().parents[2]


def test_two_runs_in_the_same_second_get_two_folders(tmp_path, monkeypatch):
    monkeypatch.setattr(runs.time, "strftime", lambda fmt: "20260101-120000")
    first = runs.fresh_results("lab1", tmp_path)
    second = runs.fresh_results("lab1", tmp_path)
    third = runs.fresh_results("lab1", tmp_path)
    assert [p.name for p in (first, second, third)] == [
        "lab1-20260101-120000", "lab1-20260101-120000-2", "lab1-20260101-120000-3"]
    assert all(p.is_dir() for p in (first, second, third))


def test_a_non_empty_results_folder_is_refused_unless_overwrite(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert runs.given_results(empty, overwrite=False) == empty
    assert runs.given_results(tmp_path / "new", overwrite=False) == tmp_path / "new"
    used = tmp_path / "used"
    used.mkdir()
    (used / "summary.json").write_text("{}")
    with pytest.raises(LabError, match=r"--results .*/used is not empty: name a new folder, "
                                       r"or pass --overwrite"):
        runs.given_results(used, overwrite=False)
    assert runs.given_results(used, overwrite=True) == used


def test_overwrite_replaces_only_a_previous_runs_results(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(LabError, match="replaces only a previous run's results"):
        runs.given_results(tmp_path, overwrite=True)
    (tmp_path / "file").write_text("x")
    with pytest.raises(LabError, match="not a folder"):
        runs.given_results(tmp_path / "file", overwrite=True)


def test_the_provisional_summary_says_incomplete_and_names_what_was_deployed(tmp_path,
                                                                            monkeypatch):
    monkeypatch.setenv(states.STATE_ENV, str(tmp_path / "state"))
    clab = tmp_path / "lab1.clab.yml"
    clab.write_text("name: lab1\n")
    state = LabState.new("lab1", str(clab))
    state.fingerprint = {str(clab): "0" * 64}
    state.save()
    md = report.provisional(tmp_path / "results", "lab1", "netns", 3000.0)
    summary = json.loads((tmp_path / "results" / "summary.json").read_text())
    assert summary["status"] == "incomplete" and summary["checks"] == []
    assert summary["topology"] == str(clab) and summary["fingerprint"] == state.fingerprint
    assert summary["changed_since_up"] == [str(clab)]  # its hash is not really 0...0
    assert "Incomplete run" in md.read_text() and "killed or crashed" in md.read_text()
    assert sorted(p.name for p in md.parent.iterdir()) == ["summary.json", "summary.md"]


INTERRUPTED_CHECKS = '''
import os, signal

def test_first():
    pass

def test_interrupted():
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even where it starts ignored
    os.kill(os.getpid(), signal.SIGINT)

def test_never_runs():
    pass
'''


def test_an_interrupted_pytest_writes_an_incomplete_summary(tmp_path):
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "test_x.py").write_text(INTERRUPTED_CHECKS)
    subprocess.run([sys.executable, "-m", "pytest", str(tmp_path / "checks"), "-p",
                    "rocelab.checks.report", "-p", "no:cacheprovider", "--results",
                    str(tmp_path / "res"), "-q", "--rootdir", str(tmp_path)],
                   cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                   capture_output=True, text=True, timeout=60)
    summary = json.loads((tmp_path / "res" / "summary.json").read_text())
    assert summary["status"] == "incomplete"
    assert "interrupted" in summary["status_reason"]
    outcomes = {c["name"]: (c["outcome"], c["reason"]) for c in summary["checks"]}
    assert outcomes == {"test_first": ("passed", ""),
                        "test_interrupted": ("error", "interrupted before it finished")}


FAKE_PYTEST = """
import sys, time
try:
    print("ready", flush=True)
    time.sleep(60)
except KeyboardInterrupt:
    print("teardown done", file=sys.stderr, flush=True)
    sys.exit(2)
"""
RUNNER = """
import signal, sys
from rocelab.checks.run import _pytest
if sys.argv[2] == "ignored":  # as a script's background job starts: pytest must not inherit it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
from rocelab.labs.interrupt import Interrupted
try:
    _pytest([sys.executable, "-c", sys.argv[1]], lambda line: print(line, flush=True))
except Interrupted as e:
    print(f"interrupted by {e.signum}", flush=True)
"""


@pytest.mark.parametrize("sigint", ["default", "ignored"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_is_forwarded_once_and_the_teardown_awaited(sig, sigint):
    # the stand-in pytest's teardown speaks on stderr, the runner on stdout: two processes
    # writing one pipe would interleave their lines in any order
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, FAKE_PYTEST, sigint], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    lines = out.splitlines()
    assert lines[0].startswith(f"{sig.name}: stopping the checks, waiting for their teardown")
    assert lines[1:] == [f"interrupted by {int(sig)}"]  # only once pytest has exited
    assert err.splitlines() == ["teardown done"]


def test_variant_names_are_valid_distinct_and_never_the_labs_own():
    for lab in ("a", "roce-v2-leafspine", "x" * 32, "x" * 31 + "y", "lab-nopfc"):
        for suffix in ("nopfc", "headroom"):
            name = variant_name(lab, suffix)
            assert NAME_RE.match(name) and len(name) <= 32 and name != lab, (lab, name)
            assert re.search(rf"-{suffix}-[0-9a-f]{{6}}$", name)
            assert variant_name(lab, suffix) == name  # a killed run's copy is found again
    assert variant_name("x" * 32, "nopfc") != variant_name("x" * 31 + "y", "nopfc")
    assert variant_name("lab", "nopfc") != variant_name("lab", "headroom")
    with pytest.raises(ValueError, match="variant suffix"):
        variant_name("lab", "no pfc")


@pytest.mark.parametrize("pytest_code, counts, code", [
    (0, {"passed": 3, "inconclusive": 0}, 0),
    (0, {"passed": 2, "inconclusive": 1}, 3),  # no failure, but one check has no verdict
    (1, {"failed": 1, "inconclusive": 1}, 1),  # a real failure wins
    (0, None, 0),  # no summary: pytest's word
])
def test_inconclusive_runs_exit_3(tmp_path, pytest_code, counts, code):
    from rocelab.checks.outcome import verdict_code
    if counts is not None:
        (tmp_path / "summary.json").write_text(json.dumps({"counts": counts}))
    assert verdict_code(pytest_code, tmp_path) == code


def test_closing_lines_say_what_was_decided_where_and_how_to_decide_the_rest(tmp_path):
    from rocelab.checks.outcome import closing
    summary = {"checks": [
        {"name": "test_a", "outcome": "passed"},
        {"name": "test_b[x]", "outcome": "skipped", "reason": "INCONCLUSIVE: h2 late"},
        {"name": "test_c", "outcome": "passed", "fidelity": {"ok": False, "problems": ["p"]}},
        {"name": "test_d", "outcome": "skipped", "reason": "no deadlock scenario"}]}
    lines = closing(summary, tmp_path, "lab1")
    assert lines[0] == (f"decided: 1 passed, 2 inconclusive, 1 skipped (lab lab1); report: "
                        f"{tmp_path / 'summary.md'}")
    assert lines[1:] == [
        "undecided: test_b[x]: INCONCLUSIVE: h2 late",
        "  decide it: invoke check lab1 --runtime sim -k test_b",
        "undecided: test_c: passed, but the emulation lost fidelity: p",
        "  decide it: invoke check lab1 --runtime sim -k test_c"]
    assert closing(None, tmp_path, "lab1")[0].startswith("no summary")
