"""The switch model's IPv6 routing: neighbour discovery, forwarding, ECMP, ICMPv6.

leaf1 of an IPv6 leaf-spine built from fabric.config's dataclasses: two routed /127s to the
spines, Vlan100 2001:db8:1:1::1/64 with the hosts untagged, 2001:db8:1:2::/64 by ECMP
over both spines. Frames are crafted and checked with scapy (checksums included), the
switch runs unpaced (``time_scale=None``), time is an argument.
"""
from __future__ import annotations

from ipaddress import IPv6Address, IPv6Interface, IPv6Network

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import (
    ICMPv6EchoReply, ICMPv6EchoRequest, ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6NDOptDstLLAddr,
    ICMPv6NDOptSrcLLAddr, ICMPv6TimeExceeded, IPv6, in6_getnsma, in6_getnsmac,
)
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from rocelab.fabric.config import Port, PortQos, Qos, StaticRoute, SwitchConfig, Vlan
from rocelab.fabric.config_load import parse
from rocelab.fabric.model import Switch
from rocelab.fabric.model.frames import link_local6, mac_bytes
from rocelab.fabric.model.ecmp import flow_hash6

RMAC = "02:52:4c:00:01:01"
H1, H1_IP = "02:00:00:00:00:11", "2001:db8:1:1::11"  # Ethernet8
H2, H2_IP = "02:00:00:00:00:12", "2001:db8:1:1::12"  # Ethernet12
GW = "2001:db8:1:1::1"
H3_IP = "2001:db8:1:2::13"  # behind the spines
SPINE1, SPINE1_IP = "02:52:4c:00:00:01", "2001:db8:ff::"  # Ethernet0
SPINE2, SPINE2_IP = "02:52:4c:00:00:02", "2001:db8:ff::2"  # Ethernet4
SPINE_PORT = {SPINE1_IP: "Ethernet0", SPINE2_IP: "Ethernet4"}
SPINE_MAC = {SPINE1_IP: SPINE1, SPINE2_IP: SPINE2}
RMAC_LL = str(IPv6Address(link_local6(mac_bytes(RMAC))))


def leaf1(extra_routes: tuple = (), dscp_map: bool = False) -> Switch:
    """``dscp_map``: DSCP 26 -> TC 3 -> PG 3 on every port, the rest in TC/PG 0."""
    ports = {f"Ethernet{4 * i}": Port(f"Ethernet{4 * i}", 100000, 9100) for i in range(4)}
    qos = Qos(dscp_to_tc={"D": {26: 3}}, tc_to_pg={"P": {3: 3}},
              port_qos={"global": PortQos(dscp_to_tc_map="D", tc_to_pg_map="P")}) \
        if dscp_map else Qos()
    return Switch(SwitchConfig(qos=qos,
        path="leaf1/config_db.json", hostname="leaf1", mac=RMAC, ports=ports,
        vlans={"Vlan100": Vlan("Vlan100", 100, {"Ethernet8": "untagged",
                                                "Ethernet12": "untagged"},
                               (IPv6Interface(f"{GW}/64"),))},
        interfaces={"Ethernet0": (IPv6Interface("2001:db8:ff::1/127"),),
                    "Ethernet4": (IPv6Interface("2001:db8:ff::3/127"),)},
        loopbacks={"Loopback0": (IPv6Interface("2001:db8:255::1/128"),)},
        static_routes=(StaticRoute(IPv6Network("2001:db8:1:2::/64"),
                                   (IPv6Address(SPINE1_IP), IPv6Address(SPINE2_IP))),)
        + extra_routes))


def ns(src_mac: str, src_ip: str, target: str) -> bytes:
    """A host's NS for ``target`` to its solicited-node group."""
    group = in6_getnsma(IPv6Address(target).packed)
    return bytes(Ether(src=src_mac, dst=in6_getnsmac(group))
                 / IPv6(src=src_ip, dst=str(IPv6Address(group)), hlim=255)
                 / ICMPv6ND_NS(tgt=target) / ICMPv6NDOptSrcLLAddr(lladdr=src_mac))


def na(src_mac: str, src_ip: str, dst_ip: str) -> bytes:
    """A solicited NA answering the router's NS for ``src_ip``."""
    return bytes(Ether(src=src_mac, dst=RMAC) / IPv6(src=src_ip, dst=dst_ip, hlim=255)
                 / ICMPv6ND_NA(tgt=src_ip, R=0, S=1, O=1) / ICMPv6NDOptDstLLAddr(lladdr=src_mac))


def udp6(src: str, dst: str, sport: int = 50000, hlim: int = 64, tc: int = 0,
         src_mac: str = H1) -> bytes:
    return bytes(Ether(src=src_mac, dst=RMAC) / IPv6(src=src, dst=dst, hlim=hlim, tc=tc)
                 / UDP(sport=sport, dport=4791) / Raw(b"x" * 64))


def checksums_valid(frame: bytes) -> bool:
    """scapy recomputes the ICMPv6/UDP checksum: equal means the switch got it right."""
    pkt = Ether(frame)
    layer = pkt[IPv6].payload
    sent = layer.cksum
    del layer.cksum
    return Ether(bytes(pkt))[IPv6].payload.cksum == sent


def resolve_spines(sw: Switch, now: float = 0.0) -> None:
    """Send one packet to trigger NS on both spine ports and answer them."""
    for sport in range(50000, 50064):
        sw.receive("Ethernet8", udp6(H1_IP, H3_IP, sport), now)
    for ip in (SPINE1_IP, SPINE2_IP):
        sw.receive(SPINE_PORT[ip], na(SPINE_MAC[ip], ip, "2001:db8:ff::1" if ip == SPINE1_IP
                                      else "2001:db8:ff::3"), now)


def test_ns_for_the_gateway_is_answered_with_a_router_na():
    sw = leaf1()
    out = sw.receive("Ethernet8", ns(H1, H1_IP, GW), 0.0)
    replies = [(p, Ether(f)) for p, f in out if ICMPv6ND_NA in Ether(f)]
    assert len(replies) == 1
    port, reply = replies[0]
    assert port == "Ethernet8" and reply.dst == H1 and reply.src == RMAC
    assert reply[IPv6].src == GW and reply[IPv6].dst == H1_IP and reply[IPv6].hlim == 255
    assert (reply[ICMPv6ND_NA].R, reply[ICMPv6ND_NA].S, reply[ICMPv6ND_NA].O) == (1, 1, 1)
    assert reply[ICMPv6ND_NA].tgt == GW and reply[ICMPv6NDOptDstLLAddr].lladdr == RMAC
    assert checksums_valid(bytes(reply))
    assert {"ip": H1_IP, "interface": "Vlan100", "mac": H1}.items() <= \
        sw.counters()["ndp"][0].items()


def test_ns_for_the_link_local_address_is_answered_and_others_are_not():
    sw = leaf1()
    out = sw.receive("Ethernet0", ns(SPINE1, "fe80::1", RMAC_LL), 0.0)
    (reply,) = [Ether(f) for _, f in out]
    assert reply[ICMPv6ND_NA].tgt == RMAC_LL and reply[IPv6].src == RMAC_LL
    assert sw.receive("Ethernet0", ns(SPINE1, "fe80::1", "2001:db8:ff::7"), 0.0) == []
    assert sw.counters()["ports"]["Ethernet0"]["drops"] == {"ndp_not_for_us": 1}


@pytest.mark.parametrize("offset, value", [(14 + 7, 64), (-1, 0x10)],
                         ids=["hop limit not 255", "bad checksum"])
def test_forged_or_corrupt_ns_is_neither_answered_nor_learned(offset, value):
    sw = leaf1()
    frame = bytearray(ns(H1, H1_IP, GW))
    frame[offset] = value
    out = sw.receive("Ethernet8", bytes(frame), 0.0)
    assert not [f for _, f in out if ICMPv6ND_NA in Ether(f)]  # only the flood to h2
    assert sw.counters()["ndp"] == []


def test_routed_packet_waits_for_ndp_then_leaves_with_hop_limit_decremented():
    sw = leaf1()
    frame = udp6(H1_IP, H3_IP, hlim=9, tc=26 << 2 | 2)
    out = sw.receive("Ethernet8", frame, 0.0)
    solicits = [(p, Ether(f)) for p, f in out]
    assert solicits and all(ICMPv6ND_NS in s for _, s in solicits)
    port, solicit = solicits[0]
    spine = next(ip for ip, p in SPINE_PORT.items() if p == port)
    assert solicit[ICMPv6ND_NS].tgt == spine
    assert solicit.dst == in6_getnsmac(in6_getnsma(IPv6Address(spine).packed))
    assert solicit[ICMPv6NDOptSrcLLAddr].lladdr == RMAC and checksums_valid(bytes(solicit))
    assert sw.counters()["ports"]["Ethernet8"]["held"] == 1
    local = "2001:db8:ff::1" if port == "Ethernet0" else "2001:db8:ff::3"
    (released,) = sw.receive(port, na(SPINE_MAC[spine], spine, local), 0.1)
    assert released[0] == port
    got = Ether(released[1])
    assert got.dst == SPINE_MAC[spine] and got.src == RMAC
    assert got[IPv6].hlim == 8 and got[IPv6].tc == 26 << 2 | 2
    assert bytes(got[IPv6])[8:] == Ether(frame)[IPv6].build()[8:]
    assert sw.counters()["ports"]["Ethernet8"]["forwarded"] == 1


def test_ecmp_spreads_flows_by_udp_source_port_and_keeps_each_flow_on_one_path():
    sw = leaf1()
    resolve_spines(sw)
    seen: dict[int, set[str]] = {}
    for sport in range(49152, 49152 + 64):
        for _ in range(2):
            frame = udp6(H1_IP, H3_IP, sport)
            (out,) = sw.receive("Ethernet8", frame, 1.0)
            seen.setdefault(sport, set()).add(out[0])
            expected = ("Ethernet0", "Ethernet4")[flow_hash6(frame, 14) % 2]
            assert out[0] == expected
    assert all(len(ports) == 1 for ports in seen.values())
    assert {p for ports in seen.values() for p in ports} == {"Ethernet0", "Ethernet4"}


def test_flow_label_enters_the_hash_only_when_asked():
    a = udp6(H1_IP, H3_IP)
    b = bytearray(a)
    b[15] |= 0x0A  # flow label bits
    assert flow_hash6(a, 14) == flow_hash6(bytes(b), 14)
    assert flow_hash6(a, 14, flow_label=True) != flow_hash6(bytes(b), 14, flow_label=True)


def test_hop_limit_one_gets_time_exceeded_from_the_ingress_interface():
    sw = leaf1()
    sw.receive("Ethernet8", ns(H1, H1_IP, GW), 0.0)  # the switch learns h1
    frame = udp6(H1_IP, H3_IP, hlim=1)
    out = sw.receive("Ethernet8", frame, 0.0)
    (error,) = [Ether(f) for p, f in out if p == "Ethernet8"]
    assert error[IPv6].src == GW and error[IPv6].dst == H1_IP
    assert error[ICMPv6TimeExceeded].code == 0 and checksums_valid(bytes(error))
    assert bytes(error[ICMPv6TimeExceeded].payload)[:48] == bytes(Ether(frame)[IPv6])[:48]
    assert sw.counters()["ports"]["Ethernet8"]["drops"] == {"ttl_expired": 1}


@pytest.mark.parametrize("target", [GW, "2001:db8:255::1", "2001:db8:ff::1"])
def test_echo_to_any_switch_address_is_answered_from_that_address(target):
    sw = leaf1()
    sw.receive("Ethernet8", ns(H1, H1_IP, GW), 0.0)
    request = bytes(Ether(src=H1, dst=RMAC) / IPv6(src=H1_IP, dst=target, tc=26 << 2 | 1)
                    / ICMPv6EchoRequest(id=7, seq=3, data=b"ping6"))
    (out,) = sw.receive("Ethernet8", request, 0.0)
    reply = Ether(out[1])
    assert out[0] == "Ethernet8" and reply.dst == H1
    assert reply[IPv6].src == target and reply[IPv6].dst == H1_IP
    assert reply[IPv6].tc == 26 << 2  # DSCP kept, ECN cleared
    echo = reply[ICMPv6EchoReply]
    assert (echo.id, echo.seq, echo.data) == (7, 3, b"ping6") and checksums_valid(out[1])


def test_unanswered_solicitations_give_up_after_three_and_drop_the_held_packets():
    sw = leaf1(extra_routes=(StaticRoute(IPv6Network("2001:db8:9::/48"),
                                         (IPv6Address(SPINE1_IP),)),))
    assert len(sw.tick(0.0)) == 2  # the routes' next hops, both spines, solicited at once
    assert sw.receive("Ethernet8", udp6(H1_IP, "2001:db8:9::1"), 0.0) == []  # held
    sent = [len(sw.tick(t)) for t in (0.5, 1.0, 2.0, 3.0)]
    assert sent == [0, 2, 2, 0]  # NS at 0, 1, 2; given up at 3
    assert sw.counters()["ports"]["Ethernet8"]["drops"] == {"ndp_unresolved": 1}


def test_a_solicitation_retry_is_a_timer_the_switch_reports():
    """Whoever ticks the switch when ``next_timer`` says (the agent, the simulator) must
    be woken for NDP retries as for ARP's."""
    sw = leaf1()
    sw.tick(0.0)  # the first FDB sweep, then one a second; the spines solicited, again at 1
    packet = udp6("2001:db8:1:2::5", "2001:db8:1:1::99", src_mac=SPINE1)  # to a new host
    assert sw.receive("Ethernet0", packet, 0.25)  # solicited at once; retry at 1.25
    assert sw.next_timer() == 1.0
    sw.tick(1.0)
    assert sw.next_timer() == 1.25  # the retry, not the next sweep at 2.0


def test_link_local_and_unrouted_destinations_are_not_routed():
    sw = leaf1()
    sw.receive("Ethernet8", udp6(H1_IP, "fe80::99"), 0.0)
    sw.receive("Ethernet8", udp6(H1_IP, "2001:db8:7::1"), 0.0)
    assert sw.counters()["ports"]["Ethernet8"]["drops"] == {"no_route": 2}


def test_traffic_class_dscp_picks_the_class_and_survives_routing():
    sw = leaf1(dscp_map=True)
    resolve_spines(sw)
    assert sw.classify("Ethernet8", udp6(H1_IP, H3_IP, tc=26 << 2 | 2))[:2] == (3, 3)
    assert sw.classify("Ethernet8", udp6(H1_IP, H3_IP, tc=10 << 2))[:2] == (0, 0)
    before = sw.counters()["ports"]["Ethernet8"]["pgs"]["3"]["rx_packets"]
    (out,) = sw.receive("Ethernet8", udp6(H1_IP, H3_IP, tc=26 << 2 | 2), 2.0)
    assert sw.counters()["ports"]["Ethernet8"]["pgs"]["3"]["rx_packets"] == before + 1
    assert Ether(out[1])[IPv6].tc == 26 << 2 | 2


def test_routes_and_warnings_show_ipv6():
    sw = leaf1(extra_routes=(StaticRoute(IPv6Network("2001:db8:8::/48"),
                                         (IPv6Address("fe80::1"),)),))
    prefixes = {r["prefix"]: r for r in sw.counters()["routes"]}
    assert prefixes["2001:db8:1:2::/64"]["nexthops"] == [
        {"ip": SPINE1_IP, "interface": "Ethernet0"}, {"ip": SPINE2_IP, "interface": "Ethernet4"}]
    assert prefixes["2001:db8:1:1::/64"]["source"] == "connected"
    assert any("fe80::1 needs an ifname" in w for w in sw.warnings)


def test_ipv6_config_db_loads(tmp_path):
    data = {
        "DEVICE_METADATA": {"localhost": {"hostname": "s", "mac": RMAC}},
        "PORT": {"Ethernet0": {"speed": "100000"}},
        "INTERFACE": {"Ethernet0": {}, "Ethernet0|2001:db8:ff::1/127": {},
                      "Ethernet0|10.0.0.1/31": {}},
        "LOOPBACK_INTERFACE": {"Loopback0|2001:db8:255::1/128": {}},
        "STATIC_ROUTE": {"2001:db8:1:2::/64": {"nexthop": "2001:db8:ff::"},
                         "::/0": {"nexthop": "fe80::1", "ifname": "Ethernet0"}},
    }
    cfg = parse(data, "s/config_db.json")
    assert [str(a) for a in cfg.interfaces["Ethernet0"]] == ["2001:db8:ff::1/127",
                                                             "10.0.0.1/31"]
    assert {str(r.prefix) for r in cfg.static_routes} == {"2001:db8:1:2::/64", "::/0"}
    sw = Switch(cfg)
    assert sw.warnings == []
