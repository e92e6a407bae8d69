"""docs/ci/nightly.yml is an example users copy into a repository that holds only their
fabric's topologies and configs: it must parse, install rocelab as a package, call commands
and options the rocelab command has, and its labs must resolve from that repository's
working directory (not from this one's topologies/)."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from rocelab.labs.topology import resolve
from rocelab.cli.program import dotted, program
from tests import unseen_lab

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "docs" / "ci" / "nightly.yml"


def job() -> dict:
    (only,) = yaml.safe_load(WORKFLOW.read_text())["jobs"].values()
    return only


def commands() -> list[list[str]]:
    """Every ``rocelab ...`` command of the job, its ``${{ }}`` expressions as one word."""
    out = []
    for step in job()["steps"]:
        text = re.sub(r"\$\{\{[^}]*\}\}", "X", step.get("run", ""))
        for line in text.replace("\\\n", " ").splitlines():
            words = shlex.split(line.strip(), comments=True) if line.strip() else []
            if "rocelab" in words:
                out.append(words[words.index("rocelab"):])
    return out


def test_the_example_installs_rocelab_as_a_package_not_from_a_checkout():
    doc = yaml.safe_load(WORKFLOW.read_text())
    script = "\n".join(s.get("run", "") for s in job()["steps"])
    assert 'pip install "$ROCELAB"' in script and doc["env"]["ROCELAB"].startswith("rocelab")
    assert "invoke" not in script and "scripts/" not in script and ".venv" not in script


def test_the_example_calls_commands_and_options_that_exist():
    called = commands()
    assert {c[1] for c in called} == {"lint", "diff", "check"}
    for argv in called:
        argv = dotted(argv)
        task = program.namespace[argv[1]]
        options = {f"--{name}" for arg in task.get_arguments() for name in arg.names
                   if len(name) > 1}
        given = {w for w in argv[2:] if w.startswith("--")}
        assert given <= options, (argv, given - options)


def test_the_example_publishes_junit_for_lint_and_checks_and_the_summaries():
    script = "\n".join(s.get("run", "") for s in job()["steps"])
    assert "--junit results/lint-" in script and "--results results/check-" in script
    assert "summary.md" in script and "GITHUB_STEP_SUMMARY" in script
    junit = next(s for s in job()["steps"] if "junit" in s.get("uses", ""))
    assert junit["with"]["report_paths"] == "results/**/*.xml"  # lint-*.xml, check-*/junit.xml
    checkout = next(s for s in job()["steps"] if s.get("uses", "").startswith("actions/checkout"))
    assert checkout["with"]["fetch-depth"] == 0  # diff needs the base revision


def test_the_examples_labs_resolve_in_a_config_repository(tmp_path, monkeypatch):
    for lab in job()["strategy"]["matrix"]["lab"]:
        unseen_lab.make(tmp_path / "topologies", lab)
    monkeypatch.chdir(tmp_path)
    for lab in job()["strategy"]["matrix"]["lab"]:
        path = resolve(lab).resolve()
        assert path == (tmp_path / "topologies" / lab / f"{lab}.clab.yml").resolve()
        assert resolve(f"topologies/{lab}").resolve() == path  # the diff step's --lab


def test_the_nightly_example_runs_no_pull_request_from_a_fork():
    """Labs run as root: a fork's topology must not reach the runner (lab-guide 4.5)."""
    doc = yaml.safe_load(WORKFLOW.read_text())
    triggers = doc[True]  # YAML 1.1 reads the key "on" as true
    assert "pull_request_target" not in triggers  # would run a fork's code with secrets
    if "pull_request" in triggers:
        condition = " ".join(job()["if"].split())
        assert condition == ("github.event_name != 'pull_request' || "
                             "github.event.pull_request.head.repo.full_name == "
                             "github.repository")
    assert doc["permissions"] == {"contents": "read"}
    assert job()["permissions"] == {"contents": "read", "checks": "write"}


@pytest.mark.parametrize("argv", [["rocelab", "lab", "up", "x"], ["rocelab", "lab.up", "x"]])
def test_both_forms_name_the_same_task(argv):
    assert program.namespace[dotted(argv)[1]] is program.namespace["lab.up"]
