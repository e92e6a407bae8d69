"""checks.report: [PASS]/[FAIL] lines with a person's reason, summary.json, a count line.

Runs pytest in a subprocess on a tiny fake checks folder with the plugin loaded, as
``invoke check`` does, and reads what it printed and wrote.
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
from rocelab.checks.run import pytest_argv

ROOT = Path(__file__).resolve().parents[2]

FAKE_CHECKS = '''
import pytest
from rocelab.checks.report import record_evidence, record_fidelity

@pytest.fixture
def broken():
    raise RuntimeError("agent leaf9 is dead")

def test_passes(request, tmp_path):
    path = tmp_path / "probe.json"
    path.write_text("{}")
    record_evidence(request, path)

def test_fails_with_a_reason():
    seen = ["spine1:eth1"]
    assert not seen, ("v1 from h1 appeared on spine1:eth1 (outside Vlan100 domain {h1,h2})"
                      "\\nsecond line of detail")

def test_fails_without_a_message():
    assert 1 == 2

@pytest.mark.parametrize("sender", ["h1", "h3"])
def test_parametrized(sender):
    assert sender == "h1", f"{sender} is not h1"

def test_skipped():
    pytest.skip("no host outside the domain")

def test_setup_error(broken):
    pass

def test_lost_fidelity_and_passed(request):
    record_fidelity(request, {"ok": False, "problems": ["leaf1: p99 lateness 5.8 ms"]})

def test_lost_fidelity_and_failed(request):
    record_fidelity(request, {"ok": False, "problems": ["leaf1: 3 frames dropped"]})
    assert False, "lossless class lost frames"

def test_kept_fidelity_and_failed(request):
    record_fidelity(request, {"ok": True, "problems": []})
    assert False, "a real failure"

def test_crashes_inside():
    pools = []
    max(p for p in pools)

def test_crashes_and_lost_fidelity(request):
    record_fidelity(request, {"ok": False, "problems": ["leaf1: 3 frames dropped"]})
    raise KeyError("Ethernet8")
'''


@pytest.fixture(scope="module")
def fake_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("report")
    (base / "checks").mkdir()
    (base / "checks" / "test_fake.py").write_text(FAKE_CHECKS)
    results = base / "results"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(base / "checks"), "-p", "rocelab.checks.report",
         "-p", "no:cacheprovider", "--results", str(results), "-q",
         f"--junitxml={results / 'junit.xml'}", "-o", "junit_family=xunit1",
         "--rootdir", str(base)],
        cwd=base, env=env, capture_output=True, text=True, timeout=60)
    return proc, results


def lines(proc) -> list[str]:
    return [line for line in proc.stdout.splitlines() if line.startswith("[")]


def test_prints_one_verdict_line_per_check_with_the_first_line_of_the_reason(fake_run):
    proc, _ = fake_run
    assert lines(proc) == [
        "[PASS] test_passes",
        "[FAIL] test_fails_with_a_reason: v1 from h1 appeared on spine1:eth1 "
        "(outside Vlan100 domain {h1,h2})",
        "[FAIL] test_fails_without_a_message: assert 1 == 2",  # pytest's own words
        "[PASS] test_parametrized[h1]",
        "[FAIL] test_parametrized[h3]: h3 is not h1",
        "[SKIP] test_skipped: no host outside the domain",
        "[ERROR] test_setup_error: setup: RuntimeError: agent leaf9 is dead",
        "[INCONCLUSIVE] test_lost_fidelity_and_passed: INCONCLUSIVE: the emulation lost "
        "fidelity (leaf1: p99 lateness 5.8 ms); the check would have passed; rerun with "
        "--runtime sim (virtual time) or a larger time scale S",
        "[INCONCLUSIVE] test_lost_fidelity_and_failed: INCONCLUSIVE: the emulation lost "
        "fidelity (leaf1: 3 frames dropped); the check would have failed: lossless class "
        "lost frames; rerun with --runtime sim (virtual time) or a larger time scale S",
        "[FAIL] test_kept_fidelity_and_failed: a real failure",
        "[ERROR] test_crashes_inside: crashed: ValueError: max() arg is an empty sequence",
        "[ERROR] test_crashes_and_lost_fidelity: crashed: KeyError: 'Ethernet8'",
    ], proc.stdout


def test_ends_with_a_count_line_and_fails_the_run(fake_run):
    proc, results = fake_run
    assert proc.returncode == 1
    assert f"checks: 2 passed, 4 failed, 3 error, 2 inconclusive, 1 skipped (results in " \
           f"{results})" \
        in proc.stdout
    assert "\n.F" not in proc.stdout  # pytest's progress dots are replaced by the lines


def test_writes_a_summary_with_outcomes_reasons_and_evidence(fake_run):
    _, results = fake_run
    summary = json.loads((results / "summary.json").read_text())
    assert set(summary) >= {"lab", "runtime", "started", "duration", "counts", "checks",
                            "topology", "fingerprint"}
    assert summary["status"] == "complete" and summary["status_reason"] == ""
    assert summary["counts"] == {"passed": 2, "failed": 4, "skipped": 1, "error": 3,
                                 "inconclusive": 2}
    by_name = {c["name"]: c for c in summary["checks"]}
    assert by_name["test_parametrized[h3]"]["outcome"] == "failed"
    assert by_name["test_parametrized[h3]"]["reason"] == "h3 is not h1"
    assert by_name["test_setup_error"]["outcome"] == "error"
    assert by_name["test_passes"]["reason"] == ""
    (evidence,) = by_name["test_passes"]["evidence"]
    assert evidence.endswith("probe.json") and Path(evidence).is_file()
    assert all(c["duration"] >= 0 for c in summary["checks"])


def test_junit_xml_has_every_check(fake_run):
    _, results = fake_run
    cases = {c.get("name"): c for c in ET.parse(results / "junit.xml").getroot().iter("testcase")}
    assert len(cases) == 12
    for name in ("test_lost_fidelity_and_passed", "test_lost_fidelity_and_failed"):
        (skipped,) = cases[name].iter("skipped")  # no verdict: skipped, with the reason
        assert skipped.get("message").startswith("INCONCLUSIVE: the emulation lost fidelity")


def test_a_check_that_crashes_is_an_error_never_a_failure_skip_or_pass(fake_run):
    """An exception inside a check says nothing about the fabric: ERROR in the summary,
    summary.md and JUnit, and the run's exit code is not 0 (checks.outcome)."""
    _, results = fake_run
    summary = json.loads((results / "summary.json").read_text())
    by_name = {c["name"]: c for c in summary["checks"]}
    for name in ("test_crashes_inside", "test_crashes_and_lost_fidelity"):
        assert by_name[name]["outcome"] == "error", by_name[name]
    assert by_name["test_crashes_inside"]["reason"] == \
        "crashed: ValueError: max() arg is an empty sequence"
    assert outcome.verdict_code(0, results) == outcome.FAILED
    assert "| ⚠️ ERROR | test_crashes_inside | crashed: ValueError" \
        in (results / "summary.md").read_text()
    suite = ET.parse(results / "junit.xml").getroot().find("testsuite")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    for name in ("test_crashes_inside", "test_crashes_and_lost_fidelity"):
        assert [e.tag for e in cases[name] if e.tag != "properties"] == ["error"], name
    assert [e.tag for e in cases["test_kept_fidelity_and_failed"]
            if e.tag != "properties"] == ["failure"]
    assert (suite.get("errors"), suite.get("failures")) == ("3", "4")


INCAST_CHECKS = {"conftest.py": '''
import pytest
from rocelab.checks import incast as ic

@pytest.fixture(scope="session")
def lab():
    return None

def incast_of(lab):
    raise RAISED
ic.incast_of = incast_of
''', "test_congests.py": '''
def test_congests(incast):
    pass
'''}


@pytest.mark.parametrize("raised, line", [
    ("ic.NoIncast('lab x: no host is reached by two others, no incast')",
     "[SKIP] test_congests: lab x: no host is reached by two others, no incast"),
    ("ValueError('max() arg is an empty sequence')",
     "[ERROR] test_congests: setup: ValueError: max() arg is an empty sequence")],
    ids=["no-incast", "crash"])
def test_the_incast_fixture_skips_only_a_lab_without_an_incast(tmp_path, raised, line):
    """The checks' ``incast`` fixture (checks/conftest.py) skips a lab that carries no
    incast, with the reason; anything else finding it raises is an error, not a skip."""
    (tmp_path / "checks").mkdir()
    for name, text in INCAST_CHECKS.items():
        (tmp_path / "checks" / name).write_text(text.replace("RAISED", raised))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(tmp_path / "checks"), "-p", "rocelab.checks.report",
         "-p", "rocelab.checks.conftest", "-p", "no:cacheprovider",
         "--results", str(tmp_path / "res"), "-q", "--rootdir", str(tmp_path)],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=60)
    assert lines(proc) == [line], proc.stdout + proc.stderr


def test_a_check_file_that_does_not_import_is_reported(tmp_path):
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "test_broken.py").write_text("import no_such_module\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(tmp_path / "checks"), "-p", "rocelab.checks.report",
         "-p", "no:cacheprovider", "--results", str(tmp_path / "res"), "-q",
         "--rootdir", str(tmp_path)],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert any(line.startswith("[ERROR] checks/test_broken.py: collection:")
               or line.startswith("[ERROR] test_broken.py: collection:")
               for line in lines(proc)), proc.stdout
    summary = json.loads((tmp_path / "res" / "summary.json").read_text())
    assert summary["counts"]["error"] == 1


def test_invoke_check_command_line(tmp_path):
    argv = pytest_argv("roce-v2-leafspine", tmp_path, k="v1")
    assert argv[1:3] == ["-m", "pytest"]
    assert argv[argv.index("-p") + 1] == "rocelab.checks.report"
    assert argv[argv.index("--lab") + 1] == "roce-v2-leafspine"
    assert argv[argv.index("--results") + 1] == str(tmp_path)
    assert f"--junitxml={tmp_path / 'junit.xml'}" in argv
    assert argv[-2:] == ["-k", "v1"]
