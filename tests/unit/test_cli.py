"""The rocelab command: the same tasks as invoke, a spaced form, the exit-code
contract (0 passed, 1 failed, 3 inconclusive, 2 usage or input error), lint's JUnit, and
diff on folders and git revisions. Everything runs through ``rocelab.cli.program`` as the
console script does, from another directory than the repository."""
from __future__ import annotations

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import tasks
from rocelab.checks import outcome
from rocelab.cli.program import dotted, program
from tests import unseen_lab


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A config repository's working directory: ./topologies/<lab> and nothing of rocelab."""
    repo = tmp_path / "configs-repo"
    clab = unseen_lab.make(repo / "topologies", "fabric-a")
    monkeypatch.chdir(repo)
    return clab


def rocelab(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        program.run(["rocelab", *argv])
        code = 0
    except SystemExit as done:
        code = done.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line(err: str) -> str:
    (line,) = err.strip().splitlines()
    assert line.startswith("rocelab: ") and "Traceback" not in err
    return line


def test_one_implementation_the_command_has_every_user_task_of_invoke():
    names = set(program.namespace.task_names)
    assert set(tasks.ns.task_names) - names == {"test", "bench"}
    assert {"lab.up", "lab.down", "lab.status", "check", "lint", "config.lint", "diff",
            "traffic.probe", "traffic.incast"} <= names


def test_the_spaced_form_is_the_dotted_one():
    assert dotted(["rocelab", "lab", "up", "x"]) == ["rocelab", "lab.up", "x"]
    assert dotted(["rocelab", "traffic", "tcp-incast", "x"]) == ["rocelab", "traffic.tcp-incast",
                                                                 "x"]
    assert dotted(["rocelab", "lint", "lab"]) == ["rocelab", "lint", "lab"]
    assert dotted(["rocelab", "lab", "lab"]) == ["rocelab", "lab", "lab"]  # not a task of lab


def test_a_parse_error_is_a_usage_error(capsys):
    code, _, err = rocelab(capsys, "lint", "x", "--no-such-option")
    assert code == outcome.USAGE and "--no-such-option" in one_line(err)
    code, _, err = rocelab(capsys, "frobnicate")
    assert code == outcome.USAGE and "frobnicate" in one_line(err)


def test_lint_from_a_config_repository_by_name_and_in_both_forms(elsewhere, capsys):
    for argv in (["lint", "fabric-a"], ["config", "lint", "fabric-a"],
                 ["config.lint", str(elsewhere.parent)]):
        code, out, err = rocelab(capsys, *argv)
        assert (code, err) == (0, ""), out + err
        assert "fabric-a: 0 errors, 0 warnings" in out and "DSCP 3" in out
        assert "also lossless: priority 4 (DSCP 4)" in " ".join(out.split())


def test_not_a_lab_is_one_line_exit_2(elsewhere, capsys):
    code, _, err = rocelab(capsys, "lint", "no-such-lab")
    line = one_line(err)
    assert code == 2 and "no-such-lab" in line and "topologies" in line
    code, _, err = rocelab(capsys, "lint", str(elsewhere.parent.parent))  # no clab file in it
    assert code == 2 and "expected exactly one *.clab.yml" in one_line(err)


def broken(clab: Path, switch: str = "tor1", field: str = "3", tc: str = "0") -> Path:
    path = clab.parent / "configs" / switch / "config_db.json"
    config = json.loads(path.read_text())
    config["DSCP_TO_TC_MAP"]["AZURE"][field] = tc
    path.write_text(json.dumps(config))
    return path


def test_lint_exit_codes_strict_and_junit(elsewhere, capsys, tmp_path):
    path = broken(elsewhere)
    junit = tmp_path / "out" / "lint.xml"
    code, out, _ = rocelab(capsys, "lint", "fabric-a", "--junit", str(junit))
    assert code == 1 and "lossless-chain" in out
    suite = ET.parse(junit).getroot().find("testsuite")
    failed = [c for c in suite.iter("testcase") if c.find("failure") is not None]
    assert int(suite.get("failures")) == len(failed) >= 1
    assert any(c.get("file") == str(path.relative_to(elsewhere.parent)) for c in failed)
    assert any("DSCP_TO_TC_MAP|AZURE|3" in c.find("failure").get("message") for c in failed)
    # a warning alone passes, and fails with --strict
    config = json.loads(path.read_text())
    config["DSCP_TO_TC_MAP"]["AZURE"]["3"] = "3"
    del config["PFC_WD"]["Ethernet0"]
    path.write_text(json.dumps(config))
    code, out, _ = rocelab(capsys, "lint", "fabric-a")
    assert code == 0 and "1 warnings" in out
    code, _, _ = rocelab(capsys, "lint", "fabric-a", "--strict", "--junit", str(junit))
    assert code == 1
    warned = [c for c in ET.parse(junit).getroot().iter("testcase")
              if c.find("failure") is not None]
    assert [c.find("failure").get("type") for c in warned] == ["warning"]


# ---------------------------------------------------------------- the exit-code contract

def summary(*checks: dict, status: str = "complete") -> dict:
    return {"status": status, "checks": list(checks)}


@pytest.mark.parametrize("pytest_code, checks, status, expected", [
    (0, [{"outcome": "passed"}], "complete", 0),
    (0, [{"outcome": "passed"}, {"outcome": "skipped", "reason": "h1 has no other host"}],
     "complete", 0),
    (1, [{"outcome": "failed"}, {"outcome": "skipped", "reason": "INCONCLUSIVE: lost"}],
     "complete", 1),
    (1, [{"outcome": "error"}], "complete", 1),
    (0, [{"outcome": "skipped", "reason": "INCONCLUSIVE: the emulation fell behind"}],
     "complete", 3),
    (0, [{"outcome": "skipped", "reason": "MISSING CAPABILITY: no rdma_rxe"}], "complete", 3),
    (0, [{"outcome": "inconclusive", "reason": "fidelity"}], "complete", 3),
    (0, [{"outcome": "passed", "fidelity": {"ok": False, "problems": ["s1: late"]}}],
     "complete", 3),
    (0, [{"outcome": "passed"}], "incomplete", 1),
    (4, [], "complete", 2),
    (5, [], "complete", 2),
])
def test_the_exit_code_of_a_check_run(pytest_code, checks, status, expected):
    assert outcome.exit_code(pytest_code, summary(*checks, status=status)) == expected


def test_a_run_without_summary_takes_pytests_word_and_an_unreadable_one_is_not_a_pass(
        tmp_path):
    assert outcome.exit_code(0, None) == outcome.PASSED
    assert outcome.exit_code(1, None) == outcome.FAILED
    assert outcome.verdict_code(0, tmp_path) == outcome.PASSED  # no summary.json at all
    (tmp_path / "summary.json").write_text("{not json")
    assert outcome.verdict_code(0, tmp_path) == outcome.FAILED
    (tmp_path / "summary.json").write_text(json.dumps({"status": "incomplete", "checks": []}))
    assert outcome.verdict_code(0, tmp_path) == outcome.FAILED  # checks.run's provisional one


def test_check_on_a_path_that_is_not_a_lab_is_exit_2(elsewhere, capsys):
    code, _, err = rocelab(capsys, "check", "nowhere/at-all", "--runtime", "sim")
    assert code == 2 and "nowhere/at-all" in one_line(err)
    code, _, err = rocelab(capsys, "check", "fabric-a", "--runtime", "bogus")
    assert code == 2 and "--runtime" in one_line(err)
    code, _, err = rocelab(capsys, "check", "fabric-a", "--runtime", "sim", "--jitter-ns", "-5")
    assert code == 2 and "--jitter-ns -5: timing jitter cannot be negative" in one_line(err)
    assert not (elsewhere.parent.parent.parent / "results").exists()  # nothing was made


# ---------------------------------------------------------------- diff

def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c",
                           "user.email=t@example.org", *args], check=True,
                          capture_output=True, text=True).stdout


def test_diff_of_two_folders_shows_the_chain_and_lint_changes(elsewhere, capsys, tmp_path):
    head = tmp_path / "head"
    shutil.copytree(elsewhere.parent, head)
    broken(head / elsewhere.name, "tor2", "4", "0")
    code, out, err = rocelab(capsys, "diff", str(elsewhere.parent), str(head), "--format",
                             "json")
    assert (code, err) == (0, "")
    diff = json.loads(out)
    changed = {(r["switch"], r["fact"], r["before"], r["after"]) for r in diff["chain"]}
    assert ("tor2", "dscp->tc", "4->4", "4->0") in changed
    assert {r["switch"] for r in diff["chain"]} == {"tor2"}
    assert all(r["where"].endswith("dscp4-p4") for r in diff["chain"])
    added = diff["lint"]["added"]
    assert added and all(f["file"] == "configs/tor2/config_db.json" for f in added)
    assert diff["lint"]["removed"] == [] and diff["results"] is None
    code, out, _ = rocelab(capsys, "diff", str(elsewhere.parent), str(head), "--format",
                           "markdown")
    assert code == 0 and "| tor2 |" in out and "| 4->4 | 4->0 |" in out
    code, out, _ = rocelab(capsys, "diff", str(elsewhere.parent), str(head))
    assert code == 0 and "dscp->tc" in out and "4->4  ->  4->0" in out


def test_diff_of_two_git_revisions(elsewhere, capsys):
    repo = elsewhere.parent.parent.parent
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    broken(elsewhere, "agg1", "3", "1")
    git(repo, "commit", "-qam", "change")
    code, out, err = rocelab(capsys, "diff", "main~1", "main", "--lab", "topologies/fabric-a",
                             "--format", "json")
    assert (code, err) == (0, "")
    diff = json.loads(out)
    assert (diff["base"]["label"], diff["head"]["label"]) == ("main~1", "main")
    assert {r["switch"] for r in diff["chain"]} == {"agg1"}
    assert any(f["rule"] == "lossless-chain" for f in diff["lint"]["added"])
    # the working tree against a revision: the change is already in both
    code, out, _ = rocelab(capsys, "diff", "main", "topologies/fabric-a", "--lab",
                           "topologies/fabric-a", "--format", "json")
    assert code == 0 and json.loads(out)["chain"] == []
    code, _, err = rocelab(capsys, "diff", "no-such-rev", "main", "--lab",
                           "topologies/fabric-a")
    assert code == 2 and "no-such-rev: no such git revision" in one_line(err)


def test_diff_refuses_two_fabrics_and_non_labs(elsewhere, capsys, tmp_path):
    other = unseen_lab.make(tmp_path / "other", "fabric-b")
    text = other.read_text().replace("agg2", "agg9")
    other.write_text(text)
    (other.parent / "configs" / "agg2").rename(other.parent / "configs" / "agg9")
    code, _, err = rocelab(capsys, "diff", str(elsewhere.parent), str(other.parent))
    assert code == 2 and "different topologies" in one_line(err)
    code, _, err = rocelab(capsys, "diff", str(elsewhere.parent), "missing-lab")
    assert code == 2 and "missing-lab" in one_line(err)
    code, _, err = rocelab(capsys, "diff", "a", "b", "--lab", str(elsewhere.parent))
    assert code == 2 and "not inside a git repository" in one_line(err)


def results(folder: Path, checks: list[dict], scenarios: dict[str, dict]) -> Path:
    """A results folder as checks.report and checks.congestion write one."""
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps({"status": "complete", "checks": checks}))
    for name, s in scenarios.items():
        (folder / "congestion" / name).mkdir(parents=True)
        flows = {"flows": [{"elapsed_s": t} for t in s.pop("fct")],
                 "hosts": {"gpu1": {"paused_s": 0.5}}}
        (folder / "congestion" / name / "flows.json").write_text(json.dumps(flows))
        port = {"ports": {"Ethernet0": {"paused_s": [0, 0, 0, s.pop("paused"), 0, 0, 0, 0]}}}
        (folder / "congestion" / name / "counters.json").write_text(json.dumps(
            {"before": {"tor1": {"ports": {"Ethernet0": {"paused_s": [0] * 8}}}},
             "after": {"tor1": port}}))
        (folder / "congestion" / name / "summary.json").write_text(json.dumps(s))
    return folder


def test_diff_with_two_results_says_which_metrics_moved(elsewhere, capsys, tmp_path):
    ok = {"ok": True, "problems": []}
    base = results(tmp_path / "base", [
        {"name": "test_lossless_incast", "outcome": "passed", "duration": 3.0, "fidelity": ok}],
        {"lossless": {"complete": True, "elapsed_s": 1.0, "cnps": 0, "ecn_marks": 10,
                      "drops": {}, "fidelity": ok, "fct": [1.0, 2.0, 3.0], "paused": 0.25}})
    head = results(tmp_path / "head", [
        {"name": "test_lossless_incast", "outcome": "failed", "duration": 9.0,
         "fidelity": {"ok": False, "problems": ["tor1: late"]}}],
        {"lossless": {"complete": True, "elapsed_s": 1.0, "cnps": 4, "ecn_marks": 10,
                      "drops": {"headroom_exhausted": 7}, "fidelity": ok,
                      "fct": [1.0, 2.0, 5.0], "paused": 0.75}})
    code, out, err = rocelab(capsys, "diff", "fabric-a", "fabric-a", "--base-results",
                             str(base), "--head-results", str(head), "--format", "json")
    assert (code, err) == (0, "")
    moved = {(m["subject"], m["metric"]): (m["before"], m["after"])
             for m in json.loads(out)["results"]["moved"]}
    assert moved == {
        ("check test_lossless_incast", "outcome"): ("passed", "failed"),
        ("check test_lossless_incast", "fidelity"): ("ok", "lost"),
        ("scenario lossless", "cnps"): (0, 4),
        ("scenario lossless", "drops"): (0, 7),
        ("scenario lossless", "drops headroom_exhausted"): (None, 7),
        ("scenario lossless", "completion max s"): (3.0, 5.0),
        ("scenario lossless", "paused s"): (0.75, 1.25)}
    code, out, _ = rocelab(capsys, "diff", "fabric-a", "fabric-a", "--base-results",
                           str(base), "--head-results", str(head))
    assert code == 0 and "cnps" in out and "0  ->  4 (+4)" in out
    code, _, err = rocelab(capsys, "diff", "fabric-a", "fabric-a", "--base-results",
                           str(base), "--head-results", str(tmp_path))
    assert code == 2 and "not a check results folder" in one_line(err)
