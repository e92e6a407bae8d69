"""``check --suite sonic-mgmt``: its own folder of cases, virtual time only, the default
suite untouched, derivations in the reports."""
import json
import subprocess
import sys

import pytest

from rocelab.checks import run
from rocelab.labs.errors import LabError

ROOT = run.ROOT


def test_the_suite_runs_its_own_folder_and_says_so():
    argv = run.pytest_argv("lab", ROOT / "results", suite="sonic-mgmt")
    assert str(ROOT / "checks" / "sonic_mgmt") in argv
    assert argv[argv.index("--suite") + 1] == "sonic-mgmt"
    default = run.pytest_argv("lab", ROOT / "results")
    assert str(ROOT / "checks") in default and default[default.index("--suite") + 1] == "rocelab"


def test_the_suite_is_virtual_time_only_and_a_bad_suite_is_refused(tmp_path):
    with pytest.raises(LabError, match="virtual time only"):
        run.run("roce-v2-leafspine", runtime="netns", suite="sonic-mgmt", results=tmp_path)
    with pytest.raises(LabError, match="--suite 'sonic'"):
        run.run("roce-v2-leafspine", runtime="sim", suite="sonic", results=tmp_path)


def collected(*args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                          "-p", "no:cacheprovider", "-o", "addopts=", "--lab",
                          "roce-v2-leafspine", "--runtime", "sim", *args],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return [line for line in out.stdout.splitlines() if "::" in line]


def test_the_default_suite_does_not_collect_the_sonic_mgmt_cases():
    default = collected(str(ROOT / "checks"))
    assert default and not any("sonic_mgmt" in line for line in default)
    suite = collected(str(ROOT / "checks" / "sonic_mgmt"), "--suite", "sonic-mgmt")
    assert suite and all(line.startswith("checks/sonic_mgmt/") for line in suite)


def test_a_run_reports_each_case_with_its_derivation(tmp_path):
    code, folder = run.run("roce-v2-leafspine", k="PfcXoffLimit and leaf1-Ethernet0",
                           runtime="sim", suite="sonic-mgmt", results=tmp_path / "res",
                           say=lambda line: None)
    summary = json.loads((folder / "summary.json").read_text())
    assert code == 0 and summary["runtime"] == "sim"
    [case] = summary["checks"]
    assert case["name"].startswith("testQosSaiPfcXoffLimit[leaf1-Ethernet0-")
    assert case["outcome"] == "passed"
    assert any(line.startswith("-> pkts_num_trig_pfc ") for line in case["derivation"])
    assert "## Thresholds from the config" in (folder / "summary.md").read_text()
