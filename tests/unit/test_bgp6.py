"""IPv6 BGP without root: FRR's ipv6 unicast family, IPv6 route notifications, the switch's
learned IPv6 routes and the sim runtime's IPv6 eBGP. Expectations are read from the shipped
dual-stack lab topologies/roce-v6-bgp (and roce-v2-bgp, its IPv4-only twin)."""
from __future__ import annotations

import json
import socket
from ipaddress import IPv6Address, IPv6Network, ip_address
from pathlib import Path

import pytest
from pyroute2.netlink.rtnl.rtmsg import rtmsg
from scapy.layers.inet import TCP, UDP
from scapy.layers.inet6 import ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6NDOptDstLLAddr, IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from rocelab.fabric.config import ConfigError
from rocelab.fabric.config_load import parse
from rocelab.fabric.frrconfig import FROM_PEER_V6, render
from rocelab.fabric.model.routes import LearnedRoute
from rocelab.fabric.model.switch import Switch
from rocelab.fabric.routesync import decode, switch_interface
from rocelab.labs import topology
from rocelab.labs.runtimes import netns_bgp
from rocelab.labs.sim import bgp as simbgp
from tests.conftest import TOPOLOGIES

V6 = TOPOLOGIES / "roce-v6-bgp"
V4 = TOPOLOGIES / "roce-v2-bgp"
HOST_MAC = "02:00:00:00:00:99"


def config(lab: Path, node: str) -> dict:
    return json.loads((lab / "configs" / node / "config_db.json").read_text())


def blocks(text: str) -> dict[str, list[str]]:
    """The lines of each ``address-family`` block of a rendered netns_bgp.conf, by family."""
    out: dict[str, list[str]] = {}
    family = None
    for line in (line.strip() for line in text.splitlines()):
        if line.startswith("address-family "):
            family = line.removeprefix("address-family ")
            out[family] = []
        elif line == "exit-address-family":
            family = None
        elif family is not None:
            out[family].append(line)
    return out


# --- FRR's configuration -------------------------------------------------------------------

def test_each_neighbour_is_activated_in_the_family_of_its_address():
    cfg = parse(config(V6, "leaf1"), "leaf1.json")
    text = render(cfg, Path("/run/x/frr.log"))
    families = blocks(text)
    assert set(families) == {"ipv4 unicast", "ipv6 unicast"}
    by_version = {4: families["ipv4 unicast"], 6: families["ipv6 unicast"]}
    for address, nb in cfg.bgp.neighbors.items():
        mine, other = by_version[address.version], by_version[10 - address.version]
        assert f"neighbor {address} activate" in mine
        assert not [line for line in other if f" {address} " in f"{line} "]
        assert f" neighbor {address} remote-as {nb.asn}" in text.splitlines()
        assert (f"neighbor {address} route-map {FROM_PEER_V6} in" in mine) == (
            address.version == 6)
    for version, lines in by_version.items():
        loopbacks = {a.network for addrs in cfg.loopbacks.values() for a in addrs
                     if a.version == version}
        assert loopbacks and {f"network {n}" for n in loopbacks} == {
            line for line in lines if line.startswith("network ")}
        assert {"redistribute connected", "maximum-paths 64"} <= set(lines)
    # route-maps apply at once: bgpd holds every session until its route-map timer has run
    assert text.index("bgp route-map delay-timer 0") < text.index("router bgp")
    tail = text.split("exit\n!\n", 1)[1].splitlines()
    assert tail[:2] == [f"route-map {FROM_PEER_V6} permit 100",
                        " set ipv6 next-hop prefer-global"]


def test_an_ipv4_only_switch_renders_no_ipv6_family():
    text = render(parse(config(V4, "leaf1"), "x"), Path("/l"))
    assert set(blocks(text)) == {"ipv4 unicast"} and "route-map" not in text  # nor its timer


def test_a_peer_range_is_activated_in_the_families_of_its_prefixes():
    data = config(V6, "leaf1")
    svi6 = next(k.split("|")[1] for k in data["VLAN_INTERFACE"] if ":" in k)
    data["BGP_PEER_RANGE"] = {"SERVERS6": {"ip_range": str(IPv6Network(svi6, strict=False)),
                                           "peer_asn": "64600"}}
    families = blocks(render(parse(data, "x"), Path("/l")))
    assert "neighbor SERVERS6 activate" in families["ipv6 unicast"]
    assert f"neighbor SERVERS6 route-map {FROM_PEER_V6} in" in families["ipv6 unicast"]
    assert "neighbor SERVERS6 activate" not in families["ipv4 unicast"]


# --- bgpd's sessions -----------------------------------------------------------------------

def test_sessions_are_read_from_every_address_family(monkeypatch):
    """``show bgp summary json`` (FRR 8.4) has one object per family with activated peers."""
    summary = {
        "ipv4Unicast": {"routerId": "10.255.0.1", "peers": {
            "10.0.0.0": {"remoteAs": 65100, "state": "Established", "pfxRcd": 6,
                         "peerUptimeMsec": 5000, "desc": "spine1"}}},
        "ipv6Unicast": {"routerId": "10.255.0.1", "peers": {
            "2001:db8:ff::1": {"remoteAs": 65100, "state": "Active", "pfxRcd": 0,
                               "peerUptimeMsec": 0, "desc": "spine1"}}},
    }
    asked = []
    monkeypatch.setattr(netns_bgp, "vtysh_json", lambda lab, node, command: asked.append(command)
                        or summary)
    got = netns_bgp.sessions("lab", "leaf1")
    assert asked == ["show bgp summary json"]
    assert {a: s["state"] for a, s in got.items()} == {"10.0.0.0": "Established",
                                                     "2001:db8:ff::1": "Active"}
    assert got["10.0.0.0"]["prefixes_received"] == 6


# --- netlink -> the switch's table ---------------------------------------------------------

NAMES = {2: "eth1", 3: "eth2", 1: "lo"}.get


def route6(event: str, dst: str, dst_len: int, attrs: list, proto: int = 186) -> rtmsg:
    msg = rtmsg()
    msg["family"], msg["dst_len"], msg["proto"], msg["table"], msg["type"] = (
        socket.AF_INET6, dst_len, proto, 254, 1)
    msg["attrs"] = [("RTA_TABLE", 254), ("RTA_DST", dst), *attrs]
    msg["event"] = event
    return msg


def test_decode_ipv6_multipath_route_withdrawal_and_skips():
    wires = {"eth1": "Ethernet0", "eth2": "Ethernet4"}
    iface_of = lambda i: switch_interface(NAMES(i), wires)  # noqa: E731
    msg = route6("RTM_NEWROUTE", "2001:db8:1:2::", 64, [("RTA_PRIORITY", 20), ("RTA_MULTIPATH", [
        {"oif": 2, "hops": 0, "attrs": [("RTA_GATEWAY", "2001:db8:ff::1")]},
        {"oif": 3, "hops": 0, "attrs": [("RTA_GATEWAY", "fe80::52:4cff:fe00:2")]}])])
    prefix, route = decode(msg, iface_of)
    assert prefix == IPv6Network("2001:db8:1:2::/64")
    assert route == LearnedRoute(20, "bgp", (
        (int(IPv6Address("2001:db8:ff::1")), "Ethernet0"),
        (int(IPv6Address("fe80::52:4cff:fe00:2")), "Ethernet4")))  # resolved on its port
    assert decode(route6("RTM_DELROUTE", "2001:db8:1:2::", 64, []), iface_of) == (prefix, None)
    default = decode(route6("RTM_NEWROUTE", None, 0, [("RTA_GATEWAY", "2001:db8:ff::1"),
                                                      ("RTA_OIF", 2)]), iface_of)
    assert default[0] == IPv6Network("::/0")
    for dst, plen in (("fe80::", 64), ("ff00::", 8), ("ff02::1:2", 128)):
        assert decode(route6("RTM_NEWROUTE", dst, plen, []), iface_of) is None
    assert decode(route6("RTM_NEWROUTE", "2001:db8:ff::", 126, [], proto=2), iface_of) is None


# --- the switch's IPv6 routes learned from BGP ----------------------------------------------

def fabric_peers(data: dict) -> list[tuple[str, str, str]]:
    """(peer address, our address, our port) of each IPv6 session of a config."""
    ours = {k.split("|")[1].split("/")[0]: k.split("|")[0] for k in data["INTERFACE"] if "|" in k}
    return [(peer, f["local_addr"], ours[f["local_addr"]])
            for peer, f in data["BGP_NEIGHBOR"].items() if ip_address(peer).version == 6]


def test_learned_ipv6_routes_forward_with_ecmp_and_follow_ports():
    data = config(V6, "leaf1")
    peers = fabric_peers(data)
    assert len(peers) > 1
    svi = next(k.split("|")[1] for k in data["VLAN_INTERFACE"] if ":" in k)
    host_ip = str(next(IPv6Network(svi, strict=False).hosts()) + 0x10)
    remote = IPv6Network("2001:db8:77::/64")  # any prefix BGP might bring
    sw = Switch(parse(data, "x"))
    hops = tuple((int(IPv6Address(peer)), port) for peer, _, port in peers)
    sw.update_routes({remote: LearnedRoute(20, "bgp", hops)})
    assert sw.learned_routes() == {remote: LearnedRoute(20, "bgp", hops)}
    host_port = next(k.split("|")[1] for k in data["VLAN_MEMBER"])
    mac = data["DEVICE_METADATA"]["localhost"]["mac"]

    def send(sport: int) -> list[tuple[str, Ether]]:
        frame = Ether(src=HOST_MAC, dst=mac) / IPv6(src=host_ip, dst=str(remote[5])) \
            / UDP(sport=sport, dport=4791) / Raw(b"x" * 32)
        return [(p, Ether(f)) for p, f in sw.receive(host_port, bytes(frame), 1.0)]

    solicited = {p: s[ICMPv6ND_NS].tgt for sport in range(49152, 49184)
                 for p, s in send(sport) if ICMPv6ND_NS in s}
    assert solicited == {port: peer for peer, _, port in peers}  # NDP for each next hop
    for i, (peer, ours, port) in enumerate(peers):
        answer = Ether(src=f"02:52:4c:00:0{i}:99", dst=mac) / IPv6(src=peer, dst=ours, hlim=255) \
            / ICMPv6ND_NA(tgt=peer, R=1, S=1, O=1) / ICMPv6NDOptDstLLAddr(
                lladdr=f"02:52:4c:00:0{i}:99")
        sw.receive(port, bytes(answer), 1.0)
    used = {p for sport in range(49152, 49216) for p, f in send(sport) if UDP in f}
    assert used == {port for _, _, port in peers}
    down = peers[0][2]
    sw.set_port_up(down, False)
    (route,) = [r for r in sw.counters()["routes"] if r["prefix"] == str(remote)]
    assert {h["interface"] for h in route["nexthops"]} == {p for _, _, p in peers[1:]}
    sw.update_routes({remote: None})
    assert sw.learned_routes() == {}
    assert all(r["prefix"] != str(remote) for r in sw.counters()["routes"])


def test_bgp_to_an_ipv6_address_of_a_bgp_switch_is_the_kernels_not_a_drop():
    """FRR's TCP terminates in the switch namespace's kernel: the agent counts it to_cpu."""
    for lab, counter in ((V6, "to_cpu"), (TOPOLOGIES / "roce-v6-leafspine",
                                          "to_router_unsupported")):
        data = config(lab, "leaf1")
        peer_mac = "02:52:4c:00:00:77"
        port, addr = next((k.split("|")[0], k.split("|")[1]) for k in data["INTERFACE"]
                          if "|" in k and ":" in k)
        ours = IPv6Network(addr, strict=False)
        mine = addr.split("/")[0]
        peer = str(next(h for h in ours.hosts() if str(h) != mine))
        sw = Switch(parse(data, "x"))
        syn = Ether(src=peer_mac, dst=data["DEVICE_METADATA"]["localhost"]["mac"]) \
            / IPv6(src=peer, dst=mine) / TCP(sport=40000, dport=179, flags="S")
        assert sw.receive(port, bytes(syn), 0.0) == []
        counters = sw.counters()["ports"][port]
        if counter == "to_cpu":
            assert counters["to_cpu"] == 1 and counters["drops"] == {}
        else:
            assert counters["drops"] == {counter: 1}


# --- the sim runtime's eBGP, both families -------------------------------------------------

def test_sim_computes_each_family_over_its_own_sessions():
    topo = topology.load(V6)
    tables = simbgp.routes(topo)
    leaves = [n for n in tables if topo.nodes[n].config.vlans]
    spines = [n for n in tables if n not in leaves]
    for leaf in leaves:
        config_ = topo.nodes[leaf].config
        v6_peers = {a for a in config_.bgp.neighbors if a.version == 6}
        for other in leaves:
            if other == leaf:
                continue
            for address in next(iter(topo.nodes[other].config.vlans.values())).addresses:
                route = tables[leaf][address.network]
                assert len(route.nexthops) == len(spines)  # ECMP over every spine
                assert {ip_address(ip).version for ip, _ in route.nexthops} == {address.version}
                if address.version == 6:  # the spines' global addresses (prefer-global)
                    assert {ip_address(ip) for ip, _ in route.nexthops} <= v6_peers
    # the IPv6 half added nothing to the IPv4 routes of the same fabric
    v4 = simbgp.routes(topology.load(V4))
    assert {n: {p: r for p, r in t.items() if p.version == 4} for n, t in tables.items()} == v4


def test_sim_without_ipv6_sessions_installs_no_ipv6_routes(tmp_path):
    from tests.conftest import copy_lab
    path = copy_lab(tmp_path, lab="roce-v6-bgp")
    for node in topology.load(path).switches:
        data = json.loads(node.config_path.read_text())
        data["BGP_NEIGHBOR"] = {a: f for a, f in data["BGP_NEIGHBOR"].items() if "." in a}
        node.config_path.write_text(json.dumps(data))
    tables = simbgp.routes(topology.load(path))
    assert tables and all(p.version == 4 for t in tables.values() for p in t)


def test_an_ipv6_only_bgp_switch_needs_a_router_id():
    """Its BGP identifier would be 0.0.0.0 (FRR takes an IPv4 address of the switch)."""
    data = config(V6, "leaf1")
    for table in ("INTERFACE", "VLAN_INTERFACE", "LOOPBACK_INTERFACE"):
        data[table] = {k: v for k, v in data[table].items() if "." not in k}
    data["BGP_NEIGHBOR"] = {a: f for a, f in data["BGP_NEIGHBOR"].items() if ":" in a}
    with pytest.raises(ConfigError) as error:
        parse(data, "leaf1.json")
    assert str(error.value).startswith("leaf1.json: DEVICE_METADATA|localhost: bgp_router_id: "
                                       "required field is missing (this switch has no IPv4")
    data["DEVICE_METADATA"]["localhost"]["bgp_router_id"] = "10.255.9.9"
    cfg = parse(data, "leaf1.json")
    assert str(cfg.bgp.router_id) == "10.255.9.9"
    assert set(blocks(render(cfg, Path("/l")))) == {"ipv6 unicast"}
