"""docs/ci/nightly.yml is an example users copy: it must parse, name labs that exist, and
call tasks and options the project has."""
from __future__ import annotations

import re
from pathlib import Path

import yaml
from invoke import Program

import tasks

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "docs" / "ci" / "nightly.yml"


def test_the_nightly_example_names_real_labs_and_tasks():
    doc = yaml.safe_load(WORKFLOW.read_text())
    (job,) = doc["jobs"].values()
    for lab in job["strategy"]["matrix"]["lab"]:
        assert (ROOT / "topologies" / lab / f"{lab}.clab.yml").is_file(), lab
    script = "\n".join(step.get("run", "") for step in job["steps"])
    called = set(re.findall(r"invoke ([a-z][\w.-]*)", script))
    assert called == {"config.lint", "check"}
    names = set(Program(namespace=tasks.ns).namespace.task_names)
    assert called <= names
    assert "--results results/check-" in script and "summary.md" in script


def test_the_nightly_example_runs_no_pull_request_from_a_fork():
    """Labs run as root: a fork's topology must not reach the runner (lab-guide 4.5)."""
    doc = yaml.safe_load(WORKFLOW.read_text())
    triggers = doc[True]  # YAML 1.1 reads the key "on" as true
    (job,) = doc["jobs"].values()
    assert "pull_request_target" not in triggers  # would run a fork's code with secrets
    if "pull_request" in triggers:
        condition = " ".join(job["if"].split())
        assert condition == ("github.event_name != 'pull_request' || "
                             "github.event.pull_request.head.repo.full_name == "
                             "github.repository")
    assert doc["permissions"] == {"contents": "read"}
