"""The userspace RoCEv2 endpoint through the emulated fabric. Needs root.

An incast and a ring all-reduce deliver every message; what the endpoints count agrees with
what the switches counted (data frames, CE marks, CNPs); the hosts' kernels never answer
RoCE with ICMP.
"""
from __future__ import annotations

import os
import subprocess

import pytest

from rocelab.fabric import realtime
from rocelab.traffic import patterns
from rocelab.nic import roce
from rocelab.labs.capture import Capture

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: network namespaces and veth"),
]

SWITCHES = ("leaf1", "leaf2", "spine1", "spine2")
BOTTLENECK = ("leaf1", "Ethernet8")  # leaf1's port to h1
ROCE_QUEUE = "3"
CNP_QUEUE = "6"


def snapshot(lab) -> dict[str, dict]:
    return {node: lab.agent(node).counters() for node in SWITCHES}


def queue_tx(counters: dict, node: str, port: str, queue: str) -> int:
    return counters[node]["ports"][port]["queues"][queue]["tx_packets"]


def marks(counters: dict) -> int:
    return sum(port["ecn_marked"] for c in counters.values() for port in c["ports"].values())


def snmp(lab, host: str) -> dict[str, int]:
    """The host kernel's Icmp and Udp counters (/proc/net/snmp is per namespace)."""
    lines = lab.exec(host, ["cat", "/proc/net/snmp"], timeout=5).stdout.splitlines()
    out = {}
    for names, values in zip(lines[::2], lines[1::2]):
        proto = names.split(":")[0]
        for name, value in zip(names.split()[1:], values.split()[1:]):
            out[f"{proto}.{name}"] = int(value)
    return out


def test_incast_delivers_every_message_and_agrees_with_the_switches(lab):
    flows = patterns.incast("h1", ["h2", "h3", "h4"], size=256 * 1024, count=4)
    before, icmp_before = snapshot(lab), snmp(lab, "h1")
    result = patterns.run(lab, flows, pattern="incast", timeout_s=60)
    after, icmp_after = snapshot(lab), snmp(lab, "h1")

    assert result["complete"], [f["name"] for f in result["flows"] if not f["complete"]]
    for flow in result["flows"]:
        assert flow["delivered_bytes"] == 256 * 1024 * 4, flow["name"]
        assert flow["receiver"]["messages"] == 4
        assert flow["retransmitted"] == 0 and flow["timeouts"] == 0, flow
        assert flow["goodput_bps"] > 0 and flow["completion_s"]["p99"] is not None

    # every data frame the senders sent left leaf1 toward h1 in the RoCE queue, once
    sent = sum(f["packets_sent"] for f in result["flows"])
    node, port = BOTTLENECK
    assert queue_tx(after, node, port, ROCE_QUEUE) - queue_tx(before, node, port, ROCE_QUEUE) \
        == sent == sum(f["receiver"]["packets"] for f in result["flows"])
    # CE marks the receiver saw were made by the switches (a marked frame may be re-marked)
    ce = sum(f["receiver"]["ce_marked"] for f in result["flows"])
    switch_marks = marks(after) - marks(before)
    assert ce <= switch_marks and (ce > 0) == (switch_marks > 0)
    # every CNP h1 sent reached its sender, through the CNP queue of h1's leaf
    cnps = sum(f["receiver"]["cnps_sent"] for f in result["flows"])
    assert cnps == sum(f["cnps_received"] for f in result["flows"])
    assert queue_tx(after, "leaf1", "Ethernet8", CNP_QUEUE) == \
        queue_tx(before, "leaf1", "Ethernet8", CNP_QUEUE)  # CNPs leave h1, not toward it
    # h1's kernel saw RoCE for a port it holds: no ICMP port unreachable, no UDP errors
    for key in ("Icmp.OutDestUnreachs", "Udp.NoPorts"):
        assert icmp_after[key] == icmp_before[key], key
    # as root, on a kernel that throttles real-time tasks, every endpoint ran SCHED_FIFO
    expected = f"SCHED_FIFO priority {realtime.PRIORITY}"
    if int(realtime.RT_RUNTIME.read_text()) >= 0:
        assert {h: r["scheduling"] for h, r in result["hosts"].items()} == \
            dict.fromkeys(result["hosts"], expected)


def test_the_frames_on_the_wire_are_roce_wireshark_decodes_with_valid_icrcs(lab, tmp_path):
    """What the endpoints put on h1's wire, captured and decoded by tshark: RDMA WRITEs
    first/middle/last with RETH on the first, ACKs with AETH, DSCP 26 and ECT(0) on data;
    every ICRC valid (checked by ours, which Wireshark's agrees with in test_packets)."""
    flows = [patterns.FlowSpec("h2", "h1", 3 * 4096 + 100, 2)]
    with Capture(lab, where=[("h1", "eth1")], pcap_dir=tmp_path,
                 match=lambda f: roce.classify(f) is not None) as capture:
        assert patterns.run(lab, flows, pattern="incast", timeout_s=30)["complete"]
        capture.wait_quiet(0.2, 2.0)
        frames = [s.frame for s in capture.frames()]
    assert frames and all(roce.verify_icrc(f) for f in frames)
    (pcap,) = tmp_path.glob("*.pcapng")
    argv = ["tshark", "-r", str(pcap), "-o", "infiniband.rroce.port:4791",
            "--disable-protocol", "rpcordma", "-T", "fields", "-E", "separator=/t",
            "-e", "frame.protocols", "-e", "infiniband.bth.opcode",
            "-e", "infiniband.reth.dmalen", "-e", "infiniband.aeth.syndrome",
            "-e", "ip.dsfield.dscp", "-e", "ip.dsfield.ecn"]
    rows = [line.split("\t") for line in
            subprocess.run(argv, check=True, capture_output=True, text=True,
                           timeout=60).stdout.splitlines()]
    assert rows and all("udp:infiniband" in r[0] for r in rows)
    data = [r for r in rows if int(r[1]) in (0x06, 0x07, 0x08)]
    acks = [r for r in rows if int(r[1]) == 0x11]
    assert [int(r[1]) for r in data] == [0x06, 0x07, 0x07, 0x08] * 2
    assert [r[2] for r in data if int(r[1]) == 0x06] == [str(3 * 4096 + 100)] * 2
    assert all((r[4], r[5]) == ("26", "2") for r in data)  # the NIC's DSCP, ECT(0)
    assert acks and all(int(r[3]) == 0x1F for r in acks)  # ACK, credits not given


def test_ring_allreduce_delivers_every_chunk(lab):
    hosts = ["h1", "h2", "h3", "h4"]
    flows = patterns.ring_allreduce(hosts, size=1 << 20)
    result = patterns.run(lab, flows, pattern="allreduce", timeout_s=60)
    assert result["complete"]
    chunk = (1 << 20) // len(hosts)
    for flow in result["flows"]:
        assert flow["receiver"]["messages"] == 2 * (len(hosts) - 1)
        assert flow["delivered_bytes"] == chunk * 2 * (len(hosts) - 1)


def test_a_missing_host_is_one_line_and_starts_nothing(lab):
    with pytest.raises(patterns.PatternError, match="no host 'h9'"):
        patterns.run(lab, patterns.incast("h1", ["h9"], 1024, 1), pattern="incast")
