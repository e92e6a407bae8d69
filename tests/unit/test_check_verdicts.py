"""Verdicts only from what a lab declares: the checks, run in simulation (``invoke check
--runtime sim``) on copies of the default lab edited as real configs come, skip what the
lab does not carry, with the reason, and judge what it does."""
from __future__ import annotations

import json

from rocelab.checks import outcome, run
from rocelab.checks.test_modes import slowest_p99
from tests.conftest import copy_lab


def edit_configs(clab, edit) -> None:
    for path in sorted((clab.parent / "configs").glob("*/config_db.json")):
        config = json.loads(path.read_text())
        edit(config)
        path.write_text(json.dumps(config, indent=1))


def checks(clab, k: str, tmp_path) -> tuple[int, dict[str, dict]]:
    code, folder = run.run(str(clab), k=k, runtime="sim", results=tmp_path / "results",
                           say=lambda line: None)
    return code, {c["name"]: c for c in outcome.summary_of(folder)["checks"]}


def trust_dscp(config: dict) -> None:
    """A RoCEv2 fabric that classifies by DSCP alone, as many real platforms render it."""
    config.pop("DOT1P_TO_TC_MAP", None)
    for entry in config["PORT_QOS_MAP"].values():
        entry.pop("dot1p_to_tc_map", None)


def test_v1_classification_is_skipped_where_no_port_classifies_pcp(tmp_path):
    clab = copy_lab(tmp_path)
    edit_configs(clab, trust_dscp)
    code, found = checks(clab, "v1_pcp_lands", tmp_path)
    assert found and all(c["outcome"] == "skipped" for c in found.values()), found
    reason = found["test_v1_pcp_lands_in_the_configured_pg_and_queue[h1@Vlan100-pcp3-lossless]"][
        "reason"]
    assert reason == ("leaf1 Ethernet8, h1's port, binds no DOT1P_TO_TC_MAP (PORT_QOS_MAP): the "
                      "lab does not classify PCP there, so it carries no RoCEv1 class")
    assert code == outcome.PASSED


def test_a_flow_cut_short_has_no_completion_p99_and_the_modes_check_skips_it():
    """A flow that finished no message within its time limit (a lossy mode's, retrying)
    reports p99 None: the modes check's figure takes the others', it does not crash."""
    flows = [{"completion_s": {"p50": 0.001, "p99": 0.002, "max": 0.002}},
             {"completion_s": {"p50": None, "p99": None, "max": None}},
             {"completion_s": {"p50": 0.003, "p99": 0.004, "max": 0.004}}]
    assert slowest_p99(flows) == 0.004
    assert slowest_p99(flows[1:2]) is None
