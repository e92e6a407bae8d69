"""IPv6 across the emulated fabric: the roce-v6-leafspine lab (IPv6 only: routed /127s,
SVIs, loopbacks, IPv6 static routes). Hosts' kernels resolve their gateway with neighbour
discovery, which the switches answer; ping6 and traceroute cross the fabric; RoCEv2 over
IPv6 is routed (hop limit down one per router, ECMP over both spines, ICRC intact) and the
RoCE endpoints complete RC transfers over it.

Needs root. One copy of the lab serves the module and is taken down even on failure.
"""
from __future__ import annotations

import json
import os
from ipaddress import IPv6Address

import pytest

from rocelab.labs import live
from tests.conftest import copy_lab
from tests.integration.test_lab import NOTHING, traces
from rocelab.traffic import patterns
from rocelab.traffic.probe import probe

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: network namespaces and veth"),
]

LAB = "roce-v6-leafspine"
COUNT = 6


@pytest.fixture(scope="module")
def lab6(tmp_path_factory):
    lab = live.up(str(copy_lab(tmp_path_factory.mktemp("lab6"), lab=LAB)))
    try:
        yield lab
    finally:
        lab.down()
    assert traces(lab.name) == NOTHING


def switch_addresses(lab, version: int = 6) -> dict[str, str]:
    """Every IPv6 address of every switch config -> its switch."""
    out = {}
    for node in lab.topology.switches:
        cfg = node.config
        groups = [*cfg.interfaces.values(), *cfg.loopbacks.values(),
                  *(v.addresses for v in cfg.vlans.values())]
        out |= {str(a.ip): node.name for group in groups for a in group if a.version == version}
    return out


def test_hosts_have_only_ipv6_and_every_pair_pings(lab6):
    addrs = lab6.host_addresses()
    assert set(addrs) == {h.name for h in lab6.topology.hosts}
    assert all(IPv6Address(a) for a in addrs.values())
    pings = lab6.ping_all()
    assert [p for p in pings if not p.ok] == []
    hops = {(p.src, p.dst): p.hops for p in pings}
    subnet = {h: a for h, addrs_ in lab6.host_interfaces().items() for a in addrs_}
    for (src, dst), n in hops.items():
        # the same /64: bridged (0 routers); across racks leaf, spine, leaf
        assert n == (0 if subnet[src].network == subnet[dst].network else 3), (src, dst)


def test_switch_loopbacks_answer_ping6_from_every_host(lab6):
    loopbacks = [str(a.ip) for n in lab6.topology.switches
                 for addrs in n.config.loopbacks.values() for a in addrs if a.version == 6]
    assert loopbacks
    for host in [h.name for h in lab6.topology.hosts]:
        for ip in loopbacks:
            assert lab6.ping(host, "loopback", ip, count=1).ok, (host, ip)


def test_trace_names_each_router_by_its_ingress_address(lab6):
    addrs = lab6.host_addresses()
    owners = switch_addresses(lab6)
    hops = lab6.trace("h1", addrs["h3"])
    assert hops[-1] == addrs["h3"] and len(hops) == 4, hops
    routers = [owners.get(hop) for hop in hops[:-1]]
    assert routers[0] == "leaf1" and routers[2] == "leaf2", hops
    assert routers[1] in {"spine1", "spine2"}, hops


def test_rocev2_over_ipv6_is_routed_over_both_spines_hop_limit_down_one_per_router(lab6):
    result = probe(lab6, "h1", "h3", "v2", count=COUNT, sport=None)
    assert result.capture_drops == 0
    at_h3 = [s for s in result.sightings if s.node == "h3" and s.direction == "in"]
    assert len(at_h3) == COUNT, result.verdict()
    assert all(s.frame[12:14] == b"\x86\xdd" or s.frame[16:18] == b"\x86\xdd"
               for s in result.sightings)
    assert {(s.info.ttl, s.info.dscp, s.info.ecn, s.info.icrc_ok) for s in at_h3} == {
        (61, 26, 2, True)}
    assert all(s.info.icrc_ok for s in result.sightings)
    spines = {s.node for s in result.sightings if s.node.startswith("spine")}
    assert spines == {"spine1", "spine2"}  # 6 source ports: both ECMP members used


def test_switches_learned_neighbours_and_hold_ipv6_routes(lab6):
    counters = lab6.agent("leaf1").counters()
    ndp = {e["ip"]: e for e in counters["ndp"]}
    addrs = lab6.host_addresses()
    assert ndp[addrs["h1"]]["state"] == "reachable" and ndp[addrs["h1"]]["interface"] == "Vlan100"
    assert {e["interface"] for e in ndp.values()} >= {"Ethernet0", "Ethernet4"}
    prefixes = {r["prefix"]: r for r in counters["routes"]}
    static = [r for r in prefixes.values() if r["source"] == "static" and ":" in r["prefix"]]
    assert any(len(r["nexthops"]) == 2 for r in static)


def test_rc_transfers_over_ipv6_complete_without_retransmission(lab6):
    before = icmp6(lab6, "h4")
    flows = patterns.incast("h4", ["h1", "h3"], size=128 * 1024, count=4)
    result = patterns.run(lab6, flows, pattern="incast", timeout_s=60)
    assert result["complete"], [f["name"] for f in result["flows"] if not f["complete"]]
    for flow in result["flows"]:
        assert flow["delivered_bytes"] == 128 * 1024 * 4, flow["name"]
        assert flow["retransmitted"] == 0 and flow["timeouts"] == 0, flow
    # the receiver's kernel took no RoCE for a port it answers with an ICMPv6 error
    assert icmp6(lab6, "h4")["Icmp6OutDestUnreachs"] == before["Icmp6OutDestUnreachs"]


def icmp6(lab, host: str) -> dict[str, int]:
    proc = lab.exec(host, ["cat", "/proc/net/snmp6"], timeout=10)
    return {k: int(v) for k, v in (line.split() for line in proc.stdout.splitlines() if line)}


def test_lab_status_is_json_ready(lab6):
    """The IPv6 views (ndp, routes) survive the agent's JSON control channel."""
    nodes, _ = lab6.status()
    leaf = next(n for n in nodes if n.name == "leaf1")
    assert json.loads(json.dumps(leaf.counters))["ndp"]
