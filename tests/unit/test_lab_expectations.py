"""Every expectation from the lab itself: on a lab the project has never
seen (tests/unseen_lab.py: RoCE on DSCP 3, lossless priorities 3 and 4, DSCP 0 -> queue 1,
other node names), lint is clean, and the checks' classes and controls come out of its
files; both lossless priorities are checked; options still override."""
from __future__ import annotations

import json

import pytest

from rocelab.checks import classes, lint
from rocelab.checks.classes import RoceClass
from rocelab.fabric.qos import queue_of_tc, tc_of_dscp
from rocelab.labs.topology import load
from tests import unseen_lab
from tests.conftest import copy_lab


@pytest.fixture(scope="module")
def unseen(tmp_path_factory):
    return unseen_lab.make(tmp_path_factory.mktemp("unseen"))


def test_the_classes_come_from_the_nic_file_and_the_switch_maps(unseen):
    e = classes.of_topology(load(unseen))
    assert e.classes == (RoceClass(3, 3), RoceClass(4, 4))
    assert e.lossless == {3, 4} and e.cnp_dscp == 48
    assert "NIC" in e.source


def test_without_nic_files_the_switch_maps_say_it(tmp_path):
    clab = unseen_lab.make(tmp_path, nic=False)
    topo = load(clab)
    assert all(h.nic is None for h in topo.hosts)
    e = classes.of_topology(topo)
    assert e.classes == (RoceClass(3, 3), RoceClass(4, 4))
    assert "switches" in e.source


def test_the_unseen_lab_lints_clean_on_both_lossless_priorities(unseen):
    lab = lint.load_lab(unseen)
    assert (lab.settings.dscp, lab.settings.priority, lab.settings.cnp_dscp) == (3, 3, 48)
    assert lab.settings.lossless == {3, 4}
    assert sorted(lab.configs) == ["agg1", "agg2", "tor1", "tor2", "tor3"]
    assert [f for f in lint.lint(lab) if f.severity != "info"] == []


def test_the_second_lossless_priority_is_checked_too(tmp_path):
    """tor2 keeps PG 3 lossless but drops priority 4's PG: only the class on 4 breaks."""
    clab = unseen_lab.make(tmp_path)
    path = clab.parent / "configs" / "tor2" / "config_db.json"
    config = json.loads(path.read_text())
    config["BUFFER_PG"] = {k.replace("|3-4", "|3"): v for k, v in config["BUFFER_PG"].items()}
    path.write_text(json.dumps(config))
    errors = [f for f in lint.lint(lint.load_lab(clab)) if f.severity == "error"]
    assert errors and {f.rule for f in errors} == {"lossless-chain"}
    assert all(f.file == str(path) and f.where.endswith("|4|profile") for f in errors)
    assert "PG 4" in errors[0].why


def test_options_override_the_lab(unseen):
    """The shipped labs' class, forced by option, is wrong for this lab: lint says so."""
    lab = lint.load_lab(unseen, priority=3, dscp=26, cnp_dscp=48)
    assert lab.settings.classes[0] == RoceClass(26, 3)
    errors = [f for f in lint.lint(lab) if f.severity == "error"]
    assert any(f.where == "DSCP_TO_TC_MAP|AZURE|26" for f in errors)


def test_the_classification_cases_and_the_lossy_control(unseen):
    topo = load(unseen)
    e = classes.of_topology(topo)
    configs = [n.config for n in topo.switches]
    cases = classes.dscp_cases(e, configs)
    assert [(c.id, c.value, c.lossless) for c in cases] == [
        ("dscp3-lossless", 3, True), ("dscp4-lossless", 4, True),
        ("dscp0-control", 0, False)]
    assert [c.id for c in classes.pcp_cases(e)] == ["pcp3-lossless", "pcp4-lossless"]
    tor = topo.nodes["tor1"].config
    tc, _ = tc_of_dscp(tor, "Ethernet0", 0)
    assert queue_of_tc(tor, "Ethernet0", tc)[0] == 1  # the control's queue, not queue 0


def test_the_control_avoids_every_lossless_and_the_cnp_dscp(unseen):
    """With TCs 0 and 1 lossless too, every DSCP below 16 is lossless (DSCP 0 -> TC 1, the
    rest by DSCP // 8): the control is 16. The CNPs' DSCP is never the control."""
    topo = load(unseen)
    e = classes.of_topology(topo)
    configs = [n.config for n in topo.switches]
    assert classes.control_dscp(configs, frozenset({0, 1, 3, 4})) == 16
    assert classes.control_dscp(configs, e.lossless, avoid=[*range(48), e.cnp_dscp]) == 49


def test_classes_are_read_on_each_host_path_not_on_the_first_port(tmp_path):
    """Per-port-role maps: the leaves' host ports make DSCP 4 lossless on priority 4 with a
    map of their own, which the spines (the first switches, every port toward a leaf) do
    not bind. The class is read where the hosts' traffic meets it: DSCP 4, not the DSCP
    the spines' map sends to TC 4."""
    clab = copy_lab(tmp_path)
    for path in (clab.parent / "configs").glob("leaf*/config_db.json"):
        config = json.loads(path.read_text())
        hosts = {**config["DSCP_TO_TC_MAP"]["AZURE"], "4": "4"}
        hosts.update({str(d): "1" for d in range(32, 40)})
        config["DSCP_TO_TC_MAP"]["HOSTS"] = hosts
        for port in ("Ethernet8", "Ethernet12"):
            config["PORT_QOS_MAP"][port].update(dscp_to_tc_map="HOSTS", pfc_enable="3,4")
        path.write_text(json.dumps(config))
    topo = load(clab)
    assert topo.switches[0].name.startswith("spine")
    e = classes.of_topology(topo)
    assert e.classes == (RoceClass(26, 3), RoceClass(4, 4))
    assert e.lossless == {3, 4}
