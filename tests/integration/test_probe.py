"""Probes through the real emulated fabric: where RoCEv2, RoCEv1 and PFC frames go.

Needs root. One copy of the default lab (two racks, two spines) serves the module and is
taken down even on failure. Every probe asserts the capture lost nothing, so an absent
sighting means the frame was not there.
"""
from __future__ import annotations

import os

import pytest
from scapy.utils import PcapNgReader

from tests.integration.test_lab import wait_for
from rocelab.traffic.probe import ProbeError, ProbeResult, probe

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: network namespaces and veth"),
]

SPINES = {"spine1", "spine2"}
COUNT = 6


def run(lab, src: str, dst: str, kind: str, **kw) -> ProbeResult:
    result = probe(lab, src, dst, kind, count=COUNT, **kw)
    assert result.capture_drops == 0
    sent = [s for s in result.sightings if s.node == src and s.direction == "out"]
    assert len(sent) == COUNT, result.verdict()
    return result


def arrivals(result: ProbeResult, node: str):
    return [s for s in result.sightings if s.node == node and s.direction == "in"]


def untagged(frame: bytes) -> bytes:
    return frame[:12] + frame[16:] if frame[12:14] == b"\x81\x00" else frame


def test_v2_across_racks_is_routed_by_three_hops_over_one_spine(lab):
    r = run(lab, "h1", "h3", "v2")
    assert r.hosts_reached() == {"h3"}  # not h1: the ICMP errors h3 sends back are not RoCE
    at_h3 = arrivals(r, "h3")
    assert len(at_h3) == COUNT
    sent = r.sent_values()
    assert sent["ttl"] == (64,)
    assert {s.info.ttl for s in at_h3} == {64 - 3}
    assert {(s.info.dscp, s.info.ecn) for s in at_h3} == {(26, 2)}
    assert all(s.info.icrc_ok for s in r.sightings)
    journeys = r.journeys()
    assert len(journeys) == COUNT
    for path in journeys.values():
        spines_in = {s.node for s in path if s.node in SPINES and s.direction == "in"}
        spines_out = {s.node for s in path if s.node in SPINES and s.direction == "out"}
        assert len(spines_in) == 1 and spines_out == spines_in, [s.port for s in path]
    assert r.verdict().startswith("v2 h1 -> h3: reached h3;")
    assert r.verdict().endswith("TTL 64 -> 61")


def test_v2_within_a_rack_is_bridged_and_keeps_its_ttl(lab):
    r = run(lab, "h1", "h2", "v2")
    assert r.hosts_reached() == {"h2"}
    at_h2 = arrivals(r, "h2")
    assert len(at_h2) == COUNT
    assert {(s.info.ttl, s.info.dscp, s.info.ecn, s.info.icrc_ok) for s in at_h2} == {
        (64, 26, 2, True)}
    assert not {node for node, _ in r.seen_on()} & SPINES


def test_v1_within_its_vlan_arrives_intact_and_nowhere_else(lab):
    r = run(lab, "h1", "h2", "v1")
    assert r.hosts_reached() == {"h2"}
    at_h2 = arrivals(r, "h2")
    assert len(at_h2) == COUNT
    sent = {untagged(f) for f in r.sent}
    # the access port drops the priority tag; every other byte, GRH and ICRC included, stays
    assert {untagged(s.frame) for s in at_h2} == sent
    assert all(s.info.icrc_ok and s.info.version == 1 for s in at_h2)
    nodes = {node for node, _ in r.seen_on()}
    assert nodes == {"h1", "leaf1", "h2"}
    assert r.seen_on() == {("h1", "eth1"), ("leaf1", "eth3"), ("leaf1", "eth4"), ("h2", "eth1")}


def test_v1_to_another_subnet_goes_to_the_gateway_and_is_refused(lab):
    before = lab.agent("leaf1").counters()["drops"].get("non_ip_to_router", 0)
    r = run(lab, "h1", "h3", "v1")
    gateway = lab.topology.nodes["leaf1"].config.mac
    assert {s.frame[:6] for s in r.sightings} == {bytes.fromhex(gateway.replace(":", ""))}
    assert r.hosts_reached() == set()
    assert r.seen_on() == {("h1", "eth1"), ("leaf1", "eth3")}
    assert r.stopped_at() == {"leaf1": COUNT}
    wait_for(lambda: lab.agent("leaf1").counters()["drops"].get("non_ip_to_router", 0)
             == before + COUNT)


def test_pfc_is_consumed_by_the_first_switch(lab):
    r = run(lab, "h1", "h3", "pfc", pcp=3)
    assert r.received_by() == {"leaf1"}
    assert {s.port for s in r.sightings if s.direction == "in"} == {"leaf1:eth3"}
    assert {s.port for s in r.sightings if s.direction == "out"} == {"h1:eth1"}
    assert len(arrivals(r, "leaf1")) == COUNT
    assert r.stopped_at() == {"leaf1": COUNT}


def test_evidence_files_hold_every_sighting(lab, tmp_path):
    r = run(lab, "h1", "h3", "v2", pcap_dir=tmp_path / "evidence")
    files = sorted(p.name for p in (tmp_path / "evidence").iterdir())
    assert files == sorted(f"{node}-{iface}.pcapng" for node, iface in r.seen_on())
    for node, iface in r.seen_on():
        packets = list(PcapNgReader(str(tmp_path / "evidence" / f"{node}-{iface}.pcapng")))
        ours = [s for s in r.sightings if (s.node, s.iface) == (node, iface)]
        assert sorted(bytes(p) for p in packets) == sorted(s.frame for s in ours)
        assert sorted(p.direction for p in packets) == sorted(
            1 if s.direction == "in" else 2 for s in ours)


def test_unknown_host_is_refused_before_sending(lab):
    with pytest.raises(ProbeError, match="no host 'h9'"):
        probe(lab, "h1", "h9", "v2")
