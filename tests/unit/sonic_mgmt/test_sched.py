"""The scheduling and dot1p cases of the sonic-mgmt suite (``checks.sonic_mgmt.sched``):
each passes on the default lab's switch and fails once a defect is seeded in the model."""
import dataclasses

import pytest

from rocelab.checks.sonic_mgmt import sched
from rocelab.checks.sonic_mgmt.cases import PortPair
from rocelab.checks.sonic_mgmt.dut import Dut

FRAME = 1024


def routed(node):
    return PortPair(node.name, "Ethernet0", "Ethernet4")


def bridged(node):
    return PortPair(node.name, "Ethernet8", "Ethernet12")


def port(dut, name):
    return dut.switch._ports[name]


def test_dwrr_passes_on_the_lab_as_configured(node):
    plan = sched.dwrr_plan(node.config, routed(node), FRAME)
    assert plan.limit < sum(plan.counts.values()) / 4  # a limit that can fail
    sched.dwrr(Dut(node), plan)


def test_dwrr_fails_when_a_queue_gets_more_than_its_weight(node):
    plan = sched.dwrr_plan(node.config, routed(node), FRAME)
    dut = Dut(node)
    port(dut, "Ethernet4").egress.scheduler.queues[0].quantum *= 2
    with pytest.raises(AssertionError, match=r"queues \[0\] finished early"):
        sched.dwrr(dut, plan)


def test_dwrr_counts_follow_the_weights_and_skip_without_two_weighted_queues(node):
    plan = sched.dwrr_plan(node.config, routed(node), FRAME)
    weights, _ = sched.weights(node.config, "Ethernet4")
    for q, count in plan.counts.items():
        assert count / plan.counts[0] == pytest.approx(weights[q] / weights[0], rel=0.01)
    strict = dataclasses.replace(node.config.qos, schedulers={
        name: dataclasses.replace(s, type="STRICT") for name, s in
        node.config.qos.schedulers.items()})
    strict = dataclasses.replace(strict, queues=strict.queues | {
        ("Ethernet4", 7): strict.queues[("Ethernet4", 6)]})  # queue 7 strict too
    config = dataclasses.replace(node.config, qos=strict)
    with pytest.raises(sched.Unsupported, match="SCHEDULER weights"):
        sched.dwrr_plan(config, routed(node), FRAME)


def test_weight_change_passes_when_the_switch_takes_the_new_weights(node):
    config, lines = sched.changed_weights(node.config, "Ethernet4")
    assert any("doubled" in line for line in lines) and any("halved" in line for line in lines)
    plan = sched.dwrr_plan(config, routed(node), FRAME)
    sched.dwrr(Dut(sched.with_config(node, config)), plan)


def test_weight_change_fails_when_the_switch_keeps_the_old_weights(node):
    config, _ = sched.changed_weights(node.config, "Ethernet4")
    plan = sched.dwrr_plan(config, routed(node), FRAME)
    with pytest.raises(AssertionError, match="finished early"):
        sched.dwrr(Dut(node), plan)


def test_weight_change_fails_when_two_queues_weights_are_swapped(node):
    config, _ = sched.changed_weights(node.config, "Ethernet4")
    plan = sched.dwrr_plan(config, routed(node), FRAME)
    dut = Dut(sched.with_config(node, config))
    queues = port(dut, "Ethernet4").egress.scheduler.queues
    queues[0].quantum, queues[3].quantum = queues[3].quantum, queues[0].quantum
    with pytest.raises(AssertionError, match="finished early"):
        sched.dwrr(dut, plan)


def remap_pcp(dut, src, pcp, to):
    prio = port(dut, src).by_prio
    prio[pcp << 1] = prio[pcp << 1 | 1] = prio[to << 1]


def test_dot1p_queue_mapping_passes_and_fails_with_a_pcp_remapped(node):
    plan = sched.dot1p_plan(node.config, bridged(node), FRAME, bridged_dst=True)
    assert plan.non_ip and plan.dst == "Ethernet12"
    sched.dot1p_queues(Dut(node), plan)
    dut = Dut(node)
    remap_pcp(dut, "Ethernet8", 3, 0)
    with pytest.raises(AssertionError, match="per-queue TX on Ethernet12"):
        sched.dot1p_queues(dut, plan)


def test_dot1p_pg_mapping_passes_and_fails_with_a_pcp_remapped(node):
    plan = sched.dot1p_plan(node.config, routed(node), FRAME)
    sched.dot1p_pgs(Dut(node), plan)
    dut = Dut(node)
    remap_pcp(dut, "Ethernet0", 3, 0)
    with pytest.raises(AssertionError, match="per-PG packets on Ethernet0"):
        sched.dot1p_pgs(dut, plan)


def test_dot1p_cases_skip_where_no_dot1p_map_is_bound(node):
    port_qos = {k: dataclasses.replace(v, dot1p_to_tc_map=None)
                for k, v in node.config.qos.port_qos.items()}
    config = dataclasses.replace(node.config, qos=dataclasses.replace(
        node.config.qos, port_qos=port_qos))
    with pytest.raises(sched.Unsupported, match="no DOT1P_TO_TC_MAP bound"):
        sched.dot1p_plan(config, routed(node), FRAME)
    with pytest.raises(sched.Unsupported, match="in no VLAN"):
        sched.dot1p_plan(node.config, routed(node), FRAME, bridged_dst=True)
