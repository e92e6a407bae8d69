"""The cable's timing, shared by the simulator's wires and the live shells' delay lines."""
from __future__ import annotations

import pytest

from rocelab.fabric.agent import delay_line
from rocelab.fabric.model.cable import Cable, DelayLine, propagation_s
from rocelab.labs import topology

RATE = 8e6  # 1 byte per microsecond: times below are easy to read


def test_propagation_is_five_ns_a_metre_stretched_by_s():
    assert propagation_s(40, 1.0) == pytest.approx(200e-9)
    assert propagation_s(40, 3000.0) == pytest.approx(600e-6)
    assert propagation_s(0, 3000.0) == 0


def test_frames_serialise_one_after_another_and_arrive_last_bit_first():
    cable = Cable(8 / RATE, 5e-6)
    assert cable.send(100, 0.0) == pytest.approx(105e-6)
    assert cable.start == 0.0
    # offered while the first is on the wire: it waits for it
    assert cable.send(10, 50e-6) == pytest.approx(115e-6)
    assert cable.start == pytest.approx(100e-6)
    # offered after the wire went idle: it starts at once
    assert cable.send(10, 1e-3) == pytest.approx(1e-3 + 15e-6)
    assert cable.start == 1e-3


def test_whole_time_rounds_each_frame_halves_to_even():
    cable = Cable(2.5, 7, whole=True)  # picoseconds a byte, as the simulator keeps them
    assert cable.send(3, 0) == 8 + 7  # 7.5 rounds to 8
    assert cable.start == 0
    assert cable.send(1, 0) == 10 + 7  # behind it; 2.5 rounds to 2, not 3
    assert cable.start == 8


def test_delay_line_releases_frames_in_order_when_they_have_arrived():
    line = DelayLine(RATE, 5e-6)
    line.push(b"a" * 100, 0.0)  # arrives at 105 us
    line.push(b"b" * 10, 1e-6)  # behind it: 115 us
    assert line.next_due() == pytest.approx(105e-6)
    assert line.due(104e-6) == []
    assert line.due(110e-6) == [(pytest.approx(105e-6), b"a" * 100)]
    assert line.next_due() == pytest.approx(115e-6)
    assert line.due(1.0) == [(pytest.approx(115e-6), b"b" * 10)]
    assert line.next_due() is None


def test_the_line_records_how_late_each_release_came_after_its_first_arrival():
    line = DelayLine(RATE, 5e-6)
    line.push(b"a" * 100, 0.0)  # arrives at 105 us
    line.push(b"b" * 10, 0.0)  # 115 us
    assert [frame for _, frame in line.due(300e-6)] == [b"a" * 100, b"b" * 10]
    assert line.lateness.count == 1  # once per release, for the frame that waited longest
    assert line.lateness.max == pytest.approx(195e-6)
    assert line.due(400e-6) == [] and line.lateness.count == 1


def test_a_late_read_is_absorbed_by_the_cable_when_shorter_than_it():
    """Pushed with the kernel's stamp, a frame read late still arrives on time."""
    on_time, late = DelayLine(RATE, 5e-6), DelayLine(RATE, 5e-6)
    on_time.push(b"x" * 100, 0.0)
    late.push(b"x" * 100, 0.0)  # read 50 us after the stamp, pushed with the stamp
    assert late.next_due() == on_time.next_due()


def test_cable_lengths_come_from_the_receiving_switch_port_or_the_hosts_switch():
    topo = topology.load("roce-v2-leafspine")
    assert topo.links
    for link in topo.links:
        for dst, src in ((link.a, link.b), (link.b, link.a)):
            at = topo.nodes[dst.node].config or topo.nodes[src.node].config
            port = dst if topo.nodes[dst.node].config else src
            want = at.qos.cable_length_m.get(topo.port(port.node, port.iface), 0) if at else 0
            assert topo.cable_m(dst.node, dst.iface) == want


def test_the_agents_delay_line_runs_at_the_ports_speed_over_its_cable():
    topo = topology.load("roce-v2-leafspine")
    switch = topo.switches[0]
    config = switch.config
    port = next(p for p in config.ports if config.qos.cable_length_m.get(p))
    line = delay_line(config, port, 3000.0)
    assert line.cable.per_byte == pytest.approx(8 * 3000.0 / (config.ports[port].speed_mbps * 1e6))
    assert line.cable.delay == pytest.approx(propagation_s(config.qos.cable_length_m[port], 3000))
    assert delay_line(config, port, None) is None  # unpaced: frames go straight in
