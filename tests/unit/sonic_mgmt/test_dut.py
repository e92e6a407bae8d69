"""The PTF-style DUT harness: frames reach the port they are built for, a port with TX
disabled holds them (charged to its buffers) and sends them all, in order, once enabled."""
import pytest

from rocelab.checks.sonic_mgmt.dut import Dut, DutError
from rocelab.fabric.model.switch import Switch
from rocelab.labs import topology


def leaf(lab, name="leaf1"):
    return Dut(lab.nodes[name])


def test_every_wired_port_reaches_every_other(lab):
    for node in lab.switches:
        dut = Dut(node)
        for src in dut.ports:
            for dst in dut.ports:
                if src == dst:
                    continue
                before = len(dut.captures[dst].frames)
                dut.send(src, dut.packet(src, dst, 0, 256, ident=7))
                got = dut.captures[dst].frames[before:]
                assert len(got) == 1, (node.name, src, dst)
                assert len(got[0][1]) == 256 - 4, (node.name, src, dst)  # no FCS


def test_a_tx_disabled_port_holds_its_frames_until_enabled(lab):
    dut = leaf(lab)
    src, dst = dut.ports[0], dut.ports[2]
    dut.set_tx(dst, False)
    for i in range(5):
        dut.send(src, dut.packet(src, dst, 0, 512, ident=i))
    dut.run(dut.now + 1.0)
    assert dut.captures[dst].frames == []
    held = dut.read()["ports"][dst]["queues"]
    assert sum(q["depth_packets"] for q in held.values()) == 5
    enabled = dut.now
    dut.set_tx(dst, True)
    dut.run(dut.now + 1.0)
    times = [at for at, _ in dut.captures[dst].frames]
    size = len(dut.captures[dst].frames[0][1])
    wire = size * 8 / (dut.config.ports[dst].speed_mbps * 1e6)  # the wire sends from now on
    assert times[0] >= enabled and times[-1] - times[0] >= 4 * wire * 0.999
    idents = [int.from_bytes(f[18 + (4 if f[12:14] == b"\x81\x00" else 0):][:2], "big")
              for _, f in dut.captures[dst].frames]
    assert idents == [0, 1, 2, 3, 4]


def test_a_held_frame_keeps_its_ingress_buffer(lab):
    dut = leaf(lab)
    src, dst = dut.ports[0], dut.ports[1]
    pg = dut.switch.classify(src, dut.packet(src, dst, 0, 512), dst)[1]
    dut.set_tx(dst, False)
    dut.send(src, dut.packet(src, dst, 0, 512), 10)
    assert dut.read()["ports"][src]["pgs"][str(pg)]["used"] == 10 * 508
    dut.set_tx(dst, True)
    dut.run(dut.now + 1.0)
    assert dut.read()["ports"][src]["pgs"][str(pg)]["used"] == 0


def test_tx_disable_needs_a_paced_switch(lab):
    switch = Switch(lab.nodes["leaf1"].config)
    with pytest.raises(ValueError, match="paced"):
        switch.set_tx_enabled("Ethernet0", False, 0.0)


def test_a_frame_too_small_for_its_headers_is_refused(lab):
    dut = leaf(lab)
    with pytest.raises(DutError, match="cannot hold the headers"):
        dut.packet(dut.ports[0], dut.ports[1], 0, 40)


def test_settle_drains_a_slower_port_between_packets():
    lab = topology.load("pfc-victim")
    node = lab.nodes["leaf1"]
    dut = Dut(node)
    speeds = {p: dut.config.ports[p].speed_mbps for p in dut.ports}
    fast, slow = max(speeds, key=speeds.get), min(speeds, key=speeds.get)
    assert speeds[fast] > speeds[slow]
    for n in range(64):
        dut.send(fast, dut.packet(fast, slow, 0, 1500, ident=n))
        dut.settle()
        assert dut.switch.backlogged() == []
    assert len(dut.captures[slow].frames) == 64
