"""The userspace RoCEv2 endpoint through the emulated fabric (issue 5). Needs root.

An incast and a ring all-reduce deliver every message; what the endpoints count agrees with
what the switches counted (data frames, CE marks, CNPs); the hosts' kernels never answer
RoCE with ICMP.
"""
from __future__ import annotations

import os

import pytest

from traffic import patterns

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
