"""The snappi ECN cases of the sonic-mgmt suite (``checks.sonic_mgmt.ecn``): each passes on
the default lab's switch and fails once a defect is seeded in the model."""
import dataclasses

import pytest

from rocelab.checks.sonic_mgmt import cases, ecn
from rocelab.checks.sonic_mgmt.dut import Dut

FRAME = 1024


@pytest.fixture
def wred(lab):
    return next(c for c in cases.wred_cases(lab) if c.switch == "leaf1")


def egress(dut, port):
    return dut.switch._ports[port].egress


def test_wred_cases_are_the_queues_with_a_profile(lab, wred):
    found = cases.wred_cases(lab)
    assert all(c.flow is not None for c in found)
    config = lab.nodes["leaf1"].config
    assert config.qos.queues[(wred.flow.dst, wred.flow.queue)].wred_profile == wred.profile


def test_dequeue_ecn_passes_and_fails_when_the_switch_marks_at_enqueue(node, wred):
    plan = ecn.dequeue_plan(node.config, wred, FRAME, "dequeue")
    assert (plan.count - 1) * plan.egress_bytes >= plan.curve.max_threshold
    ecn.dequeue_ecn(Dut(node), plan)
    dut = Dut(node)
    egress(dut, wred.flow.dst).mark_at_dequeue = False
    with pytest.raises(AssertionError, match="the first of .* left unmarked"):
        ecn.dequeue_ecn(dut, plan)


def test_dequeue_ecn_skips_where_the_lab_marks_at_enqueue_or_the_profile_does_not_mark(
        node, wred):
    with pytest.raises(ecn.Unsupported, match="marks ECN at enqueue"):
        ecn.dequeue_plan(node.config, wred, FRAME, "enqueue")
    profile = node.config.qos.wred_profiles[wred.profile]
    qos = dataclasses.replace(node.config.qos, wred_profiles={
        wred.profile: dataclasses.replace(profile, ecn="ecn_none")})
    config = dataclasses.replace(node.config, qos=qos)
    with pytest.raises(ecn.Unsupported, match="ecn 'ecn_none'.*not marked"):
        ecn.dequeue_plan(config, wred, FRAME, "dequeue")
    with pytest.raises(ecn.Unsupported, match="no queue a DSCP reaches has a WRED"):
        ecn.dequeue_plan(node.config, cases.WredCase(
            "leaf1", missing="leaf1: no queue a DSCP reaches has a WRED profile"), FRAME,
            "dequeue")


def test_dut_marks_where_the_node_says(lab):
    node = dataclasses.replace(lab.nodes["leaf1"], ecn_marking="enqueue")
    assert Dut(node).switch.ecn_marking == "enqueue"


def test_red_accuracy_passes_and_fails_when_pmax_is_doubled(node, wred):
    plan = ecn.red_plan(node.config, wred, FRAME, "dequeue")
    assert plan.rounds >= 2 and len(plan.edges) == ecn.BUCKETS + 1
    ecn.red_accuracy(Dut(node), plan)
    dut = Dut(node)
    egress(dut, wred.flow.dst).wred[wred.flow.queue].max_probability *= 2
    with pytest.raises(AssertionError, match="mark counts off the WRED_PROFILE curve"):
        ecn.red_accuracy(dut, plan)


def test_red_accuracy_fails_when_marks_start_below_min(node, wred):
    plan = ecn.red_plan(node.config, wred, FRAME, "dequeue")
    dut = Dut(node)
    egress(dut, wred.flow.dst).wred[wred.flow.queue].min_bytes //= 2
    with pytest.raises(AssertionError, match="mark counts off"):
        ecn.red_accuracy(dut, plan)
