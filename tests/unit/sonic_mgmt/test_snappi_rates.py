"""The rate cases of the sonic-mgmt suite (``checks.sonic_mgmt.waterfill``): the water-fill
itself, and each case passing on the default lab's switch and failing once a defect is
seeded in the model's scheduler."""
import pytest

from rocelab.checks.sonic_mgmt import cases, rocev2, waterfill
from rocelab.checks.sonic_mgmt.dut import Dut

FRAME = 1024


def test_water_fill_serves_strict_first_then_shares_by_weight_and_redistributes():
    got = waterfill.water_fill(100.0, {7: 10.0, 0: 5.0, 1: 80.0, 2: 80.0},
                               {0: 1, 1: 1, 2: 2}, strict={7})
    # strict 10; 90 left: 0 asks 5 < 22.5 (its share); 85 left over weights 1:2
    assert got == pytest.approx({7: 10.0, 0: 5.0, 1: 85 / 3, 2: 170 / 3})
    assert waterfill.water_fill(10.0, {0: 2.0, 1: 3.0}, {0: 1, 1: 1}, set()) == \
        {0: 2.0, 1: 3.0}
    assert waterfill.water_fill(10.0, {6: 20.0, 0: 5.0}, {0: 1}, {6}) == {6: 10.0, 0: 0.0}


def swap_quanta(dut, port, a, b):
    """The defect: two queues' DWRR weights swapped in the model's scheduler."""
    queues = dut.switch._ports[port].egress.scheduler.queues
    queues[a].quantum, queues[b].quantum = queues[b].quantum, queues[a].quantum


def lightest(config, port):
    weight_of, _ = waterfill.weights(config, port)
    return min(weight_of, key=weight_of.get)


def test_m2o_lossy_passes_and_fails_with_weights_swapped(node):
    ports = cases.wired(node)
    plan = waterfill.m2o_lossy_plan(node.config, "leaf1", ports[0], ports[1], ports, FRAME)
    lines = waterfill.m2o_lossy(Dut(node), plan)
    assert any("water-fill" in line for line in lines)
    heavy = max(plan.expected, key=plan.expected.get)
    dut = Dut(node)
    swap_quanta(dut, ports[1], heavy, lightest(node.config, ports[1]))
    with pytest.raises(AssertionError, match="off the DWRR water-fill"):
        waterfill.m2o_lossy(dut, plan)


def test_m2o_cases_skip_with_two_ports(lab):
    spine = lab.nodes["spine1"]
    ports = cases.wired(spine)
    with pytest.raises(waterfill.Unsupported, match="needs a second src"):
        waterfill.m2o_lossy_plan(spine.config, "spine1", ports[0], ports[1], ports, FRAME)


def test_rocev2_basic_passes_and_fails_with_the_control_class_on_another_queue(node):
    ports = cases.wired(node)
    plan = rocev2.basic_plan(node.config, "leaf1", ports[0], ports[1], FRAME)
    rocev2.basic(Dut(node), plan)
    control = next(f for f in plan.flows if not f.lossless)
    dut = Dut(node)
    queue_of = dut.switch._ports[ports[1]].queue_of  # one DSCP's class remapped
    queue_of[control.priority] = (control.queue + 1) % 8
    with pytest.raises(AssertionError, match="per-queue TX"):
        rocev2.basic(dut, plan)


def test_rocev2_congestion_passes_and_fails_with_weights_swapped(node):
    ports = cases.wired(node)
    plan = rocev2.congestion_plan(node.config, "leaf1", ports[0], ports[1], ports, FRAME)
    rocev2.congestion(Dut(node), plan)
    dut = Dut(node)
    lossless = next(f.queue for f in plan.flows if f.lossless)
    swap_quanta(dut, ports[1], lossless, lightest(node.config, ports[1]))
    with pytest.raises(AssertionError, match="expected loss under the incast|off the DWRR water-fill"):
        rocev2.congestion(dut, plan)


def test_rocev2_congestion_skips_with_two_ports(lab):
    spine = lab.nodes["spine1"]
    ports = cases.wired(spine)
    with pytest.raises(waterfill.Unsupported, match="needs a lossless sender besides src"):
        rocev2.congestion_plan(spine.config, "spine1", ports[0], ports[1], ports, FRAME)
