"""Mutation testing of the verdicts: each known config defect (tests/mutations.py), seeded
into the shipped leaf-spine and every corpus lab whose files are here, must be caught by
its config.lint rule and, where one exists, by its check run in virtual time; the lab
without the defect gives neither (docs/real-configs.md, "Mutation testing").

A defect is judged by what it adds: findings and failures the unmutated lab already has
(a corpus platform's own true findings) are subtracted first.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocelab.checks import lint
from rocelab.checks import run as checks
from tests import mutations, real_labs
from tests.conftest import copy_lab

SHIPPED = "roce-v2-leafspine"
LABS = [SHIPPED, *real_labs.platforms()]
# defect -> (severity, rule) config.lint must add
LINT = {
    "pfc-off": ("error", "lossless-chain"),
    "dscp-to-lossy-tc": ("error", "lossless-chain"),
    "tc-to-lossy-queue": ("error", "lossless-chain"),
    "cnp-into-lossless": ("error", "cnp-queue"),
    "no-watchdog": ("warning", "pfcwd-coverage"),
    "headroom-short": ("error", "headroom"),
    "ecn-off": ("error", "lossless-chain"),
}
# defects the classification check must FAIL on, naming the switch
CHECKED = ["pfc-off", "dscp-to-lossy-tc"]
STORM = "storm"


def make(dest: Path, name: str) -> Path:
    """A fresh copy of lab ``name`` under ``dest``; a corpus lab skips where its files are not."""
    if name == SHIPPED:
        return copy_lab(dest, SHIPPED)
    if (reason := real_labs.Platform(name).missing()) is not None:
        pytest.skip(reason)
    return real_labs.make(dest, name)


def findings(clab: Path) -> dict[tuple[str, str, str, str], lint.Finding]:
    """Lint's findings above info, by (severity, rule, file in the lab, where)."""
    return {(f.severity, f.rule, str(Path(f.file).relative_to(clab.parent)), f.where): f
            for f in lint.lint(lint.load_lab(clab)) if f.severity != "info"}


def roce_cases(t: mutations.Target) -> str:
    """The -k selection of the classification check's lossless case for the hosts' RoCE DSCP."""
    return f"dscp_lands and dscp{t.roce_dscp}-lossless]"


def outcomes(clab: Path, k: str, results: Path) -> dict[str, dict]:
    """The selected checks' summary entries, by name, run in virtual time."""
    _, folder = checks.run(str(clab), k=k, results=results, runtime="sim",
                           say=lambda line: None)
    return {c["name"]: c for c in json.loads((folder / "summary.json").read_text())["checks"]}


class _Baselines(dict):
    """Each unmutated lab's lint findings and RoCE check outcomes, computed once."""

    def __init__(self, dest: Path) -> None:
        super().__init__()
        self.dest = dest

    def __missing__(self, name: str) -> dict:
        clab = make(self.dest / name, name)
        t = mutations.target(clab)
        self[name] = {"clab": clab, "lint": findings(clab),
                      "checks": outcomes(clab, roce_cases(t), self.dest / name / "results")}
        return self[name]


@pytest.fixture(scope="module")
def baselines(tmp_path_factory) -> _Baselines:
    return _Baselines(tmp_path_factory.mktemp("baselines"))


@pytest.mark.parametrize("name", LABS)
def test_the_unmutated_lab_gives_no_lint_error_and_no_fail(baselines, name):
    base = baselines[name]
    errors = [f"{f.rule} {k[2]} {f.where}" for k, f in base["lint"].items() if k[0] == "error"]
    if errors and name != SHIPPED:
        pytest.skip(f"{name}'s own files cause {len(errors)} lint errors, true findings that "
                    "tests/unit/test_real_configs.py holds to the ports without a PG lookup "
                    "row; a defect seeded here is judged by what it adds")
    assert errors == []
    assert base["checks"] and all(c["outcome"] == "passed" for c in base["checks"].values()), \
        {n: c["outcome"] for n, c in base["checks"].items()}


def test_the_shipped_lab_passes_the_storm_check(tmp_path):
    clab = copy_lab(tmp_path, SHIPPED)
    got = outcomes(clab, STORM, tmp_path / "results")
    assert got and all(c["outcome"] == "passed" for c in got.values()), got


@pytest.mark.parametrize("name", LABS)
@pytest.mark.parametrize("defect", list(LINT))
def test_lint_catches_the_defect(baselines, tmp_path, name, defect):
    base = baselines[name]
    clab = make(tmp_path, name)
    t = mutations.seed(clab, defect)
    added = {k: f for k, f in findings(clab).items() if k not in base["lint"]}
    if defect == "headroom-short" and _no_lossless_pg(base["lint"], t):
        pytest.skip(f"{name}: {t.switch} {t.port} has no lossless PG before the defect "
                    "(lint's lossless-chain error): there is no headroom to judge")
    severity, rule = LINT[defect]
    own = str(t.config_path.relative_to(clab.parent))
    caught = [f for k, f in added.items() if k[:2] == (severity, rule) and k[2] == own]
    assert caught, (f"{defect} on {t.switch} {t.port}: no {severity} {rule} in {own}; "
                    f"added: {sorted({k[:2] for k in added})}")


def _no_lossless_pg(base: dict, t: mutations.Target) -> bool:
    return any(k[1] == "lossless-chain" and k[3].startswith(f"BUFFER_PG|{t.port}|")
               for k in base if k[0] == "error")


@pytest.mark.parametrize("name", LABS)
@pytest.mark.parametrize("defect", CHECKED)
def test_the_classification_check_fails_naming_the_switch(baselines, tmp_path, name, defect):
    base = baselines[name]
    if any(c["outcome"] != "passed" for c in base["checks"].values()):
        pytest.skip(f"{name}'s RoCE class already FAILs the check without the defect "
                    "(the platform's own lossy ports): the defect cannot show")
    clab = make(tmp_path, name)
    t = mutations.seed(clab, defect)
    got = outcomes(clab, roce_cases(t), tmp_path / "results")
    failed = [c["reason"] for c in got.values() if c["outcome"] == "failed"]
    assert any(t.switch in reason for reason in failed), \
        (defect, {n: (c["outcome"], c["reason"]) for n, c in got.items()})


def test_the_classification_check_fails_on_a_lossless_tc_in_a_lossy_queue(tmp_path):
    """A pause of the RoCE priority stops another queue (MAP_PFC_PRIORITY_TO_QUEUE) than the
    one its TC is sent to: that queue is never paused."""
    clab = copy_lab(tmp_path, SHIPPED)
    t = mutations.seed(clab, "tc-to-lossy-queue")
    got = outcomes(clab, roce_cases(t), tmp_path / "results")
    assert any(c["outcome"] == "failed" and t.switch in c["reason"] for c in got.values()), got


def test_the_storm_check_fails_without_a_watchdog(tmp_path):
    """A storm on a port that pauses and has no watchdog stops it for good: a FAIL, not a
    SKIP."""
    clab = copy_lab(tmp_path, SHIPPED)
    mutations.seed(clab, "no-watchdog")
    got = outcomes(clab, STORM, tmp_path / "results")
    assert got and all(c["outcome"] == "failed" for c in got.values()), got
