"""The switch model's forwarding: bridging, routing, ARP, ICMP, counters.

Configurations are built from fabric.config's dataclasses directly (leaf1 of the
roce-v2-leafspine lab, plus a bridging-only switch), frames with scapy. Time is an
argument everywhere, so timers are tested with exact instants.
"""
from __future__ import annotations

import json
import struct
from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from pathlib import Path

from scapy.layers.inet import ICMP, IP, UDP
from scapy.layers.l2 import ARP, Dot1Q, Ether
from scapy.packet import Raw

from rocelab.fabric.config import Port, StaticRoute, SwitchConfig, Vlan
from rocelab.fabric.config_load import load
from rocelab.fabric.model import Switch
from rocelab.fabric.model.frames import ip_int
from rocelab.fabric.model.ecmp import ecmp_index

RMAC = "02:52:4c:00:01:01"  # leaf1's system MAC, on every L3 interface
H1, H1_IP = "02:00:00:00:00:11", "10.1.1.11"  # leaf1 Ethernet8 (eth3)
H2, H2_IP = "02:00:00:00:00:12", "10.1.1.12"  # leaf1 Ethernet12 (eth4)
H3_IP = "10.1.2.13"  # behind leaf2
SPINE1, SPINE1_IP = "02:52:4c:00:00:01", "10.0.0.0"  # leaf1 Ethernet0
SPINE2, SPINE2_IP = "02:52:4c:00:00:02", "10.0.0.2"  # leaf1 Ethernet4
SPINE_PORT = {SPINE1_IP: "Ethernet0", SPINE2_IP: "Ethernet4"}
SPINE_MAC = {SPINE1_IP: SPINE1, SPINE2_IP: SPINE2}
NEXTHOPS = (SPINE1_IP, SPINE2_IP)  # configured order: ECMP index 0, 1
BCAST = "ff:ff:ff:ff:ff:ff"
PFC_DST = "01:80:c2:00:00:01"
LEAF1_JSON = (Path(__file__).resolve().parents[2] /
              "topologies/roce-v2-leafspine/configs/leaf1/config_db.json")


# --- configurations ------------------------------------------------------------------------

def ports(n: int, mtu: dict[str, int] | None = None) -> dict[str, Port]:
    names = [f"Ethernet{4 * i}" for i in range(n)]
    return {p: Port(p, 100000, (mtu or {}).get(p, 9100), alias=f"eth{i + 1}")
            for i, p in enumerate(names)}


def leaf1(vlan_members: dict[str, str] | None = None, extra_routes: tuple = (),
          loopback: bool = False) -> Switch:
    """leaf1 as in topologies/roce-v2-leafspine: two routed /31s to the spines, Vlan100
    (10.1.1.1/24) with the hosts untagged, 10.1.2.0/24 by ECMP over both spines."""
    members = vlan_members or {"Ethernet8": "untagged", "Ethernet12": "untagged"}
    return Switch(SwitchConfig(
        path="leaf1/config_db.json", hostname="leaf1", mac=RMAC, ports=ports(4),
        vlans={"Vlan100": Vlan("Vlan100", 100, members, (IPv4Interface("10.1.1.1/24"),))},
        interfaces={"Ethernet0": (IPv4Interface("10.0.0.1/31"),),
                    "Ethernet4": (IPv4Interface("10.0.0.3/31"),)},
        loopbacks={"Loopback0": (IPv4Interface("10.255.0.1/32"),)} if loopback else {},
        static_routes=(StaticRoute(IPv4Network("10.1.2.0/24"),
                                   (IPv4Address(SPINE1_IP), IPv4Address(SPINE2_IP))),)
        + extra_routes))


def l2switch() -> Switch:
    """A bridging-only switch: Vlan100 with every tagging mode, Vlan200, a spare port.

    Ethernet8/12 untagged in 100, Ethernet16 tagged in 100 and 200, Ethernet20
    priority-tagged in 100, Ethernet24 untagged in 200 (MTU 1500), Ethernet28 nothing.
    """
    return Switch(SwitchConfig(
        path="l2/config_db.json", hostname="l2", mac="02:52:4c:00:09:09",
        ports=ports(8, mtu={"Ethernet24": 1500}),
        vlans={"Vlan100": Vlan("Vlan100", 100, {"Ethernet8": "untagged",
                                                "Ethernet12": "untagged",
                                                "Ethernet16": "tagged",
                                                "Ethernet20": "priority_tagged"}),
               "Vlan200": Vlan("Vlan200", 200, {"Ethernet16": "tagged",
                                                "Ethernet24": "untagged"})}))


# --- frames ---------------------------------------------------------------------------------

def udp(dst_mac: str, src_mac: str, src: str, dst: str, sport: int = 49152, dport: int = 4791,
        ttl: int = 64, tos: int = 0, size: int = 64, vlan: int | None = None,
        pcp: int = 0) -> bytes:
    l2 = Ether(dst=dst_mac, src=src_mac)
    if vlan is not None:
        l2 = l2 / Dot1Q(vlan=vlan, prio=pcp)
    return bytes(l2 / IP(src=src, dst=dst, ttl=ttl, tos=tos) / UDP(sport=sport, dport=dport)
                 / Raw(bytes(range(256)) * (size // 256) + bytes(size % 256)))


def raw_frame(dst_mac: str, src_mac: str, ethertype: int = 0x88B5, size: int = 60,
              vlan: int | None = None, pcp: int = 0) -> bytes:
    l2 = Ether(dst=dst_mac, src=src_mac, type=ethertype if vlan is None else 0x8100)
    if vlan is not None:
        l2 = l2 / Dot1Q(vlan=vlan, prio=pcp, type=ethertype)
    frame = bytes(l2)
    return frame + bytes(max(0, size - len(frame)))


def arp(op: int, src_mac: str, psrc: str, pdst: str, dst_mac: str = BCAST,
        hwdst: str = "00:00:00:00:00:00") -> bytes:
    return bytes(Ether(dst=dst_mac, src=src_mac) /
                 ARP(op=op, hwsrc=src_mac, psrc=psrc, hwdst=hwdst, pdst=pdst))


def pfc(src_mac: str) -> bytes:
    body = struct.pack("!HH8H", 0x0101, 0x0008, 0, 0, 0, 0xFFFF, 0, 0, 0, 0)
    return raw_frame(PFC_DST, src_mac, 0x8808) [:14] + body + bytes(26)


def rocev1(dst_mac: str, src_mac: str, vlan: int | None = None, pcp: int = 3) -> bytes:
    grh = bytes([0x60]) + bytes(39)  # IB GRH (version 6), then a BTH-sized stub
    frame = raw_frame(dst_mac, src_mac, 0x8915, vlan=vlan, pcp=pcp, size=0)
    return frame + grh + bytes(12)


def ones_sum(data: bytes) -> int:
    """Independent full checksum (the checksum of a valid header over itself is 0)."""
    if len(data) % 2:
        data += b"\x00"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def by_port(out: list[tuple[str, bytes]]) -> dict[str, bytes]:
    result = dict(out)
    assert len(result) == len(out), f"two frames for one port: {out}"
    return result


def drops(sw: Switch, port: str | None = None) -> dict[str, int]:
    c = sw.counters()
    return c["drops"] if port is None else c["ports"][port]["drops"]


# --- helpers that drive leaf1 ----------------------------------------------------------------

def learn_h1(sw: Switch, now: float = 0.0) -> list:
    """h1 asks for its gateway: the switch learns h1 (ARP and FDB) and answers."""
    return sw.receive("Ethernet8", arp(1, H1, H1_IP, "10.1.1.1"), now)


def resolve_spines(sw: Switch, now: float = 0.0) -> None:
    """Both spines announce themselves to leaf1 by replying to it (as after an ARP)."""
    for ip in NEXTHOPS:
        our_ip = "10.0.0.1" if ip == SPINE1_IP else "10.0.0.3"
        assert sw.receive(SPINE_PORT[ip], arp(2, SPINE_MAC[ip], ip, our_ip, dst_mac=RMAC,
                                              hwdst=RMAC), now) == []


def expected_spine(src: str, dst: str, sport: int, dport: int = 4791) -> str:
    return NEXTHOPS[ecmp_index(ip_int(src), ip_int(dst), 17, sport, dport, 2)]


# === L2 =====================================================================================

def test_unknown_unicast_floods_then_learned_unicast_goes_to_one_port():
    sw = l2switch()
    a, b = "02:00:00:00:00:0a", "02:00:00:00:00:0b"
    out = by_port(sw.receive("Ethernet8", raw_frame(b, a), 1.0))
    assert set(out) == {"Ethernet12", "Ethernet16", "Ethernet20"}  # not the ingress, not Vlan200
    out = sw.receive("Ethernet12", raw_frame(a, b), 2.0)  # a was learned on Ethernet8
    assert [p for p, _ in out] == ["Ethernet8"]
    out = sw.receive("Ethernet8", raw_frame(b, a), 3.0)  # and now b on Ethernet12
    assert [p for p, _ in out] == ["Ethernet12"]
    fdb = {(e["vlan"], e["mac"]): e["port"] for e in sw.counters()["fdb"]}
    assert fdb == {("Vlan100", a): "Ethernet8", ("Vlan100", b): "Ethernet12"}


def test_fdb_entries_age_out_after_300_seconds():
    sw = l2switch()
    a, b = "02:00:00:00:00:0a", "02:00:00:00:00:0b"
    sw.receive("Ethernet12", raw_frame(BCAST, b), 0.0)
    assert [p for p, _ in sw.receive("Ethernet8", raw_frame(b, a), 300.0)] == ["Ethernet12"]
    assert len(sw.receive("Ethernet8", raw_frame(b, a), 300.5)) == 3  # b aged: flooded
    sw.tick(1000.0)  # the sweep also empties what counters() shows
    assert sw.counters()["fdb"] == []


def test_station_move_updates_the_fdb():
    sw = l2switch()
    a, b = "02:00:00:00:00:0a", "02:00:00:00:00:0b"
    sw.receive("Ethernet12", raw_frame(BCAST, b), 0.0)
    sw.receive("Ethernet20", raw_frame(BCAST, b), 1.0)  # b moved to Ethernet20
    assert [p for p, _ in sw.receive("Ethernet8", raw_frame(b, a), 2.0)] == ["Ethernet20"]


def test_broadcast_leaves_each_member_tagged_per_its_mode():
    sw = l2switch()
    frame = raw_frame(BCAST, "02:00:00:00:00:0a", size=100)
    out = by_port(sw.receive("Ethernet8", frame, 0.0))
    assert out["Ethernet12"] == frame  # untagged member: untouched
    tagged = Ether(out["Ethernet16"])
    assert (tagged[Dot1Q].vlan, tagged[Dot1Q].prio, tagged[Dot1Q].type) == (100, 0, 0x88B5)
    prio = Ether(out["Ethernet20"])
    assert (prio[Dot1Q].vlan, prio[Dot1Q].prio) == (0, 0)
    for egress in (out["Ethernet16"], out["Ethernet20"]):  # same frame, tag inserted
        assert egress[:12] + egress[16:] == frame


def test_ingress_pcp_is_carried_to_tagged_and_priority_tagged_members():
    sw = l2switch()
    frame = raw_frame(BCAST, "02:00:00:00:00:0c", vlan=100, pcp=3, size=100)
    out = by_port(sw.receive("Ethernet16", frame, 0.0))
    assert set(out) == {"Ethernet8", "Ethernet12", "Ethernet20"}
    assert out["Ethernet8"] == frame[:12] + frame[16:]  # untagged egress: tag removed
    assert (Ether(out["Ethernet20"])[Dot1Q].vlan, Ether(out["Ethernet20"])[Dot1Q].prio) == (0, 3)


def test_priority_tagged_ingress_belongs_to_the_untagged_vlan_and_keeps_pcp():
    sw = l2switch()
    frame = raw_frame(BCAST, "02:00:00:00:00:0d", vlan=0, pcp=5, size=100)
    out = by_port(sw.receive("Ethernet20", frame, 0.0))
    assert set(out) == {"Ethernet8", "Ethernet12", "Ethernet16"}
    tag = Ether(out["Ethernet16"])[Dot1Q]
    assert (tag.vlan, tag.prio) == (100, 5)
    assert Dot1Q not in Ether(out["Ethernet8"])


def test_untagging_pads_a_minimum_size_frame_back_to_60_bytes():
    sw = l2switch()
    frame = raw_frame(BCAST, "02:00:00:00:00:0c", vlan=100, size=60)
    out = by_port(sw.receive("Ethernet16", frame, 0.0))
    assert out["Ethernet8"] == frame[:12] + frame[16:] + bytes(4)


def test_flood_with_no_other_member_is_a_counted_drop():
    sw = l2switch()
    sw.set_port_up("Ethernet16", False)
    assert sw.receive("Ethernet24", raw_frame(BCAST, "02:00:00:00:00:0e"), 0.0) == []
    assert drops(sw) == {"no_egress": 1}


def test_vlans_are_separate_broadcast_domains():
    sw = l2switch()
    out = by_port(sw.receive("Ethernet24", raw_frame(BCAST, "02:00:00:00:00:0e"), 0.0))
    assert set(out) == {"Ethernet16"} and Ether(out["Ethernet16"])[Dot1Q].vlan == 200


def test_vlan_not_member():
    sw = l2switch()
    src = "02:00:00:00:00:0a"
    assert sw.receive("Ethernet8", raw_frame(BCAST, src, vlan=200), 0.0) == []
    assert sw.receive("Ethernet24", raw_frame(BCAST, src, vlan=100), 0.0) == []
    assert sw.receive("Ethernet16", raw_frame(BCAST, src), 0.0) == []  # tagged-only: no native
    assert sw.receive("Ethernet16", raw_frame(BCAST, src, vlan=300), 0.0) == []
    assert drops(sw) == {"vlan_not_member": 4}
    assert drops(sw, "Ethernet16") == {"vlan_not_member": 2}
    # a port's own VLAN is accepted tagged too (membership, whatever the egress mode)
    assert len(sw.receive("Ethernet8", raw_frame(BCAST, src, vlan=100), 0.0)) == 3


def test_known_unicast_back_to_its_ingress_port_is_filtered_and_counted():
    sw = l2switch()
    a, b = "02:00:00:00:00:0a", "02:00:00:00:00:0b"
    sw.receive("Ethernet8", raw_frame(BCAST, b), 0.0)  # a and b both behind Ethernet8
    assert sw.receive("Ethernet8", raw_frame(b, a), 1.0) == []
    assert drops(sw, "Ethernet8") == {"same_port": 1}


def test_port_with_no_role_drops_everything():
    sw = l2switch()
    assert sw.receive("Ethernet28", raw_frame(BCAST, "02:00:00:00:00:0a"), 0.0) == []
    assert drops(sw) == {"port_unconfigured": 1}


def test_bridged_frame_larger_than_egress_mtu_is_dropped():
    sw = l2switch()
    big = raw_frame(BCAST, "02:00:00:00:00:0a", vlan=200, size=18 + 1501)
    assert sw.receive("Ethernet16", big, 0.0) == []  # only Ethernet24 (MTU 1500) in Vlan200
    fits = raw_frame(BCAST, "02:00:00:00:00:0a", vlan=200, size=18 + 1500)
    assert [p for p, _ in sw.receive("Ethernet16", fits, 0.0)] == ["Ethernet24"]
    assert drops(sw) == {"mtu_exceeded": 1}


def test_mac_control_and_link_local_frames_are_never_forwarded():
    sw = leaf1()
    lldp = raw_frame("01:80:c2:00:00:0e", H1, 0x88CC)
    pause = raw_frame(PFC_DST, H1, 0x8808)
    unicast_pause = raw_frame(RMAC, H1, 0x8808)
    for port in ("Ethernet8", "Ethernet0"):  # a VLAN member and a routed port
        for frame in (pfc(H1), lldp, pause, unicast_pause):
            assert sw.receive(port, frame, 0.0) == []
    tagged_pfc = raw_frame(PFC_DST, H1, 0x8808, vlan=0, pcp=7)  # opcode 0: not PFC
    assert sw.receive("Ethernet12", tagged_pfc, 0.0) == []
    assert drops(sw) == {"mac_control": 7}  # the PFC frames are flow control, not drops
    ports = sw.counters()["ports"]
    assert [ports[p]["flow_control"] for p in ("Ethernet8", "Ethernet0", "Ethernet12")] == [1, 1, 0]
    assert sw.counters()["fdb"] == []  # nor learned from


def test_port_down_drops_rx_and_tx_and_flushes_its_stations():
    sw = l2switch()
    a, b = "02:00:00:00:00:0a", "02:00:00:00:00:0b"
    sw.receive("Ethernet12", raw_frame(BCAST, b), 0.0)
    sw.set_port_up("Ethernet12", False)
    assert sw.receive("Ethernet12", raw_frame(BCAST, b), 1.0) == []
    out = by_port(sw.receive("Ethernet8", raw_frame(b, a), 1.0))
    assert set(out) == {"Ethernet16", "Ethernet20"}  # b forgotten, flood skips the down port
    assert drops(sw, "Ethernet12") == {"port_down": 1}
    entry = sw.counters()["ports"]["Ethernet12"]
    assert (entry["admin_up"], entry["oper_up"]) == (False, False)
    sw.set_port_up("Ethernet12", True)
    assert "Ethernet12" in by_port(sw.receive("Ethernet8", raw_frame(b, a), 2.0))


def test_a_port_with_no_cable_is_down_whatever_its_admin_state():
    """A PORT entry with no wire (``Switch.wired``) is oper-down, as SONiC shows a port with
    no cable: a flood skips it, and an admin startup does not bring it up; its cable does."""
    sw = l2switch()
    b = "02:00:00:00:00:0b"
    sw.wired(["Ethernet8", "Ethernet16", "Ethernet20"])
    assert set(by_port(sw.receive("Ethernet8", raw_frame(BCAST, b), 0.0))) == {
        "Ethernet16", "Ethernet20"}
    entry = sw.counters()["ports"]["Ethernet12"]
    assert (entry["admin_up"], entry["oper_up"]) == (True, False)
    sw.set_port_up("Ethernet12", False)
    sw.set_port_up("Ethernet12", True)
    assert "Ethernet12" not in by_port(sw.receive("Ethernet8", raw_frame(BCAST, b), 1.0))
    sw.set_link_up("Ethernet12", True)
    assert "Ethernet12" in by_port(sw.receive("Ethernet8", raw_frame(BCAST, b), 2.0))
    assert sw.counters()["ports"]["Ethernet12"]["oper_up"] is True


def test_rocev1_stays_in_its_l2_domain():
    """RoCEv1 (EtherType 0x8915) has no IP header: it is bridged between hosts of one VLAN
    but the router drops it, so it never leaves the rack."""
    sw = leaf1()
    sw.receive("Ethernet12", raw_frame(BCAST, H2), 0.0)  # h2 learned on Ethernet12
    bridged = rocev1(H2, H1)
    assert sw.receive("Ethernet8", bridged, 1.0) == [("Ethernet12", bridged)]
    assert sw.receive("Ethernet8", rocev1(RMAC, H1), 1.0) == []
    assert sw.receive("Ethernet8", rocev1(RMAC, H1, vlan=0), 1.0) == []
    assert sw.receive("Ethernet0", rocev1(RMAC, SPINE1), 1.0) == []
    assert drops(sw) == {"non_ip_to_router": 3}
    ipv6_to_router = raw_frame(RMAC, H1, 0x86DD)
    assert sw.receive("Ethernet8", ipv6_to_router, 1.0) == []
    assert drops(sw)["non_ip_to_router"] == 4


# === ARP ====================================================================================

def test_arp_reply_for_the_svi_address():
    sw = leaf1()
    request = arp(1, H1, H1_IP, "10.1.1.1")
    out = sw.receive("Ethernet8", request, 5.0)
    frames = by_port(out)
    assert frames["Ethernet12"] == request  # the broadcast still reaches the VLAN
    reply = frames["Ethernet8"]
    assert len(reply) == 60
    p = Ether(reply)
    assert (p.dst, p.src, p.type) == (H1, RMAC, 0x0806)
    assert (p[ARP].op, p[ARP].hwsrc, p[ARP].psrc, p[ARP].hwdst, p[ARP].pdst) == (
        2, RMAC, "10.1.1.1", H1, H1_IP)
    arp_table = sw.counters()["arp"]
    assert [(e["ip"], e["interface"], e["mac"], e["state"]) for e in arp_table] == [
        (H1_IP, "Vlan100", H1, "reachable")]


def test_arp_reply_for_a_routed_port_address():
    sw = leaf1()
    out = sw.receive("Ethernet0", arp(1, SPINE1, SPINE1_IP, "10.0.0.1"), 0.0)
    assert len(out) == 1 and out[0][0] == "Ethernet0"
    p = Ether(out[0][1])
    assert (p.dst, p[ARP].op, p[ARP].psrc, p[ARP].hwsrc, p[ARP].pdst) == (
        SPINE1, 2, "10.0.0.1", RMAC, SPINE1_IP)
    assert sw.counters()["ports"]["Ethernet0"]["to_cpu"] == 1


def test_no_arp_reply_for_other_addresses():
    """No answer for another interface's address (no proxy ARP). Such an ARP teaches the
    switch nothing, unless its sender has an entry already, as spine1 has from the moment
    its route is installed: then it refreshes it, as Linux updates any entry it has."""
    sw = leaf1()
    request = arp(1, H1, H1_IP, "10.1.1.99")
    assert sw.receive("Ethernet8", request, 0.0) == [("Ethernet12", request)]  # bridged only
    assert sw.receive("Ethernet0", arp(1, SPINE1, SPINE1_IP, "10.0.0.3"), 0.0) == []  # not this if
    assert sw.receive("Ethernet0", arp(1, SPINE1, SPINE1_IP, "10.0.0.7"), 0.0) == []
    stranger = arp(1, "02:52:4c:00:00:09", "10.0.0.9", "10.0.0.1")  # no entry, not on-link
    assert sw.receive("Ethernet4", stranger, 0.0) == []
    request_other_if = arp(1, H1, H1_IP, "10.0.0.1")
    assert sw.receive("Ethernet8", request_other_if, 0.0) == [("Ethernet12", request_other_if)]
    assert drops(sw) == {"arp_not_for_us": 1}  # the stranger's; spine1's went to the CPU
    assert [e["ip"] for e in sw.counters()["arp"]] == [SPINE1_IP]  # not h1, not the stranger


def test_svi_answers_even_when_the_vlan_has_no_other_member_up():
    sw = leaf1()
    sw.set_port_up("Ethernet12", False)
    out = sw.receive("Ethernet8", arp(1, H1, H1_IP, "10.1.1.1"), 0.0)
    assert [p for p, _ in out] == ["Ethernet8"]
    assert sw.counters()["ports"]["Ethernet8"]["to_cpu"] == 1


def test_gratuitous_arp_updates_a_known_neighbor():
    sw = leaf1()
    learn_h1(sw)
    new_mac = "02:00:00:00:01:11"
    sw.receive("Ethernet8", arp(1, new_mac, H1_IP, H1_IP), 1.0)  # gratuitous
    assert [e["mac"] for e in sw.counters()["arp"]] == [new_mac]


# === routing =================================================================================

def test_routed_h1_to_h3_resolves_the_next_hop_holds_then_forwards():
    sw = leaf1()
    frame = udp(RMAC, H1, H1_IP, H3_IP, sport=50000, ttl=64, tos=0x6A, size=1000)
    spine = expected_spine(H1_IP, H3_IP, 50000)
    port = SPINE_PORT[spine]
    out = sw.receive("Ethernet8", frame, 10.0)
    assert len(out) == 1 and out[0][0] == port
    request = Ether(out[0][1])
    assert len(out[0][1]) == 60
    assert (request.dst, request.src, request[ARP].op, request[ARP].hwsrc) == (
        BCAST, RMAC, 1, RMAC)
    our_ip = "10.0.0.1" if port == "Ethernet0" else "10.0.0.3"
    assert (request[ARP].psrc, request[ARP].pdst) == (our_ip, spine)
    assert sw.counters()["ports"]["Ethernet8"]["held"] == 1

    reply = arp(2, SPINE_MAC[spine], spine, our_ip, dst_mac=RMAC, hwdst=RMAC)
    out = sw.receive(port, reply, 10.01)
    assert len(out) == 1 and out[0][0] == port
    routed = out[0][1]
    assert routed[0:6] == bytes.fromhex(SPINE_MAC[spine].replace(":", ""))
    assert routed[6:12] == bytes.fromhex(RMAC.replace(":", ""))
    assert routed[12:14] == b"\x08\x00"
    original_ip, routed_ip = frame[14:], routed[14:]
    assert len(routed_ip) == len(original_ip)
    assert routed_ip[8] == original_ip[8] - 1 == 63  # TTL
    assert routed_ip[1] == 0x6A  # DSCP/ECN untouched
    assert ones_sum(routed_ip[:20]) == 0  # the header verifies
    header = bytearray(routed_ip[:20])
    header[10:12] = b"\x00\x00"
    assert struct.unpack_from("!H", routed_ip, 10)[0] == ones_sum(bytes(header))
    assert routed_ip[:8] == original_ip[:8] and routed_ip[9] == original_ip[9]
    assert routed_ip[12:] == original_ip[12:]  # addresses, UDP header and payload
    assert IP(routed_ip).chksum == IP(bytes(IP(routed_ip)[IP].copy())).chksum
    c = sw.counters()["ports"]["Ethernet8"]
    assert (c["held"], c["forwarded"]) == (0, 1)

    again = sw.receive("Ethernet8", frame, 10.02)  # resolved now: straight through
    assert again == [(port, routed)]


def test_routed_packet_to_a_directly_connected_host_arps_for_the_host():
    sw = leaf1()
    resolve_spines(sw)
    frame = udp(RMAC, SPINE1, "10.1.2.13", H2_IP, ttl=10)
    out = by_port(sw.receive("Ethernet0", frame, 1.0))
    assert set(out) == {"Ethernet8", "Ethernet12"}  # who-has flooded in Vlan100
    who_has = Ether(out["Ethernet8"])
    assert (who_has[ARP].psrc, who_has[ARP].pdst, who_has.src) == ("10.1.1.1", H2_IP, RMAC)
    out = sw.receive("Ethernet12", arp(2, H2, H2_IP, "10.1.1.1", dst_mac=RMAC, hwdst=RMAC), 1.1)
    assert [p for p, _ in out] == ["Ethernet12"]
    delivered = Ether(out[0][1])
    assert (delivered.dst, delivered.src, delivered[IP].ttl, delivered[IP].dst) == (
        H2, RMAC, 9, H2_IP)


def test_routed_into_a_tagged_svi_member_gets_the_vlan_tag():
    sw = leaf1(vlan_members={"Ethernet8": "untagged", "Ethernet12": "tagged"})
    resolve_spines(sw)
    request = arp(1, H2, H2_IP, "10.1.1.1")
    out = by_port(sw.receive("Ethernet12", request[:12] + b"\x81\x00\x60\x64" + request[12:],
                             0.0))  # h2 speaks tagged (PCP 3): the answer comes back tagged
    reply = Ether(out["Ethernet12"])
    assert (reply[Dot1Q].vlan, reply[ARP].op, reply[ARP].pdst) == (100, 2, H2_IP)
    assert out["Ethernet8"] == request + bytes(18)  # untagged for that member, padded
    out = sw.receive("Ethernet0", udp(RMAC, SPINE1, "10.1.2.13", H2_IP), 1.0)
    assert [p for p, _ in out] == ["Ethernet12"]
    p = Ether(out[0][1])
    assert (p[Dot1Q].vlan, p.dst, p[IP].ttl) == (100, H2, 63)


def test_short_routed_frame_is_padded_to_60_bytes():
    sw = leaf1()
    resolve_spines(sw)
    learn_h1(sw)
    frame = udp(RMAC, SPINE1, H3_IP, H1_IP, size=0)  # 42 bytes of headers
    (port, routed), = sw.receive("Ethernet0", frame, 1.0)
    assert port == "Ethernet8" and len(routed) == 60 and routed[14:42] != frame[14:42]
    sw.receive("Ethernet12", raw_frame(BCAST, H2), 1.0)
    short = udp(RMAC, H1, H1_IP, H3_IP, size=0) + bytes(18)  # padded on the wire by h1
    (port, routed), = sw.receive("Ethernet8", short, 1.0)
    assert len(routed) == 60 and routed[14:42] != short[14:42] and routed[42:] == bytes(18)


def test_ecmp_hash_spreads_source_ports_and_is_deterministic():
    src, dst = ip_int(H1_IP), ip_int(H3_IP)
    picks = [ecmp_index(src, dst, 17, sport, 4791, 2) for sport in range(49152, 49152 + 256)]
    assert 96 <= picks.count(0) <= 160  # both next hops, roughly even
    assert picks == [ecmp_index(src, dst, 17, s, 4791, 2) for s in range(49152, 49152 + 256)]
    assert set(ecmp_index(src, dst, 17, s, 4791, 4) for s in range(49152, 49152 + 64)) == {
        0, 1, 2, 3}


def test_ecmp_flows_spread_over_both_spines_and_stick():
    sw = leaf1()
    resolve_spines(sw)
    learn_h1(sw)
    seen: dict[int, str] = {}
    for sport in range(49152, 49152 + 32):
        out = sw.receive("Ethernet8", udp(RMAC, H1, H1_IP, H3_IP, sport=sport), 1.0)
        assert len(out) == 1
        seen[sport] = out[0][0]
        assert out[0][0] == SPINE_PORT[expected_spine(H1_IP, H3_IP, sport)]
    assert set(seen.values()) == {"Ethernet0", "Ethernet4"}
    for sport, port in seen.items():  # same flow, same path, every time
        for _ in range(3):
            out = sw.receive("Ethernet8", udp(RMAC, H1, H1_IP, H3_IP, sport=sport), 2.0)
            assert out[0][0] == port


def test_port_down_withdraws_its_ecmp_member_and_restores_it():
    sw = leaf1()
    resolve_spines(sw)
    sw.set_port_up("Ethernet0", False)
    ports_used = {sw.receive("Ethernet8", udp(RMAC, H1, H1_IP, H3_IP, sport=s), 1.0)[0][0]
                  for s in range(49152, 49152 + 16)}
    assert ports_used == {"Ethernet4"}
    assert all(e["interface"] != "Ethernet0" for e in sw.counters()["arp"])
    sw.set_port_up("Ethernet0", True)
    out = sw.receive("Ethernet8", udp(RMAC, H1, H1_IP, H3_IP, sport=49152), 2.0)
    assert out[0][0] == SPINE_PORT[expected_spine(H1_IP, H3_IP, 49152)]


def test_ttl_expiry_sends_icmp_time_exceeded_from_the_ingress_interface():
    sw = leaf1()
    learn_h1(sw)
    frame = udp(RMAC, H1, H1_IP, H3_IP, ttl=1, sport=33434, dport=33435, size=32)
    out = sw.receive("Ethernet8", frame, 1.0)
    assert [p for p, _ in out] == ["Ethernet8"]
    p = Ether(out[0][1])
    assert (p.dst, p.src) == (H1, RMAC)
    assert (p[IP].src, p[IP].dst, p[IP].proto, p[IP].ttl) == ("10.1.1.1", H1_IP, 1, 64)
    assert (p[ICMP].type, p[ICMP].code) == (11, 0)
    icmp = bytes(p[IP])[20:]
    assert ones_sum(bytes(p[IP])[:20]) == 0 and ones_sum(icmp) == 0
    assert icmp[8:] == frame[14:]  # quotes the expired datagram (whole: it is small)
    assert drops(sw, "Ethernet8") == {"ttl_expired": 1}
    assert sw.counters()["cpu"]["originated"] == 2  # the ARP reply, then this

    # on a routed port, the source is that port's address; TTL 0 too
    resolve_spines(sw)
    out = sw.receive("Ethernet0", udp(RMAC, SPINE1, "10.1.2.13", H1_IP, ttl=0), 2.0)
    p = Ether(out[0][1])
    assert out[0][0] == "Ethernet0" and p.dst == SPINE1
    assert (p[IP].src, p[IP].dst, p[ICMP].type) == ("10.0.0.1", "10.1.2.13", 11)


def test_no_icmp_error_about_an_icmp_error():
    sw = leaf1()
    learn_h1(sw)
    error = bytes(Ether(dst=RMAC, src=H1) / IP(src=H1_IP, dst=H3_IP, ttl=1) /
                  ICMP(type=3, code=3) / Raw(bytes(28)))
    assert sw.receive("Ethernet8", error, 1.0) == []
    assert drops(sw) == {"ttl_expired": 1}


def test_icmp_echo_to_the_svi_is_answered():
    sw = leaf1()
    learn_h1(sw)
    ping = bytes(Ether(dst=RMAC, src=H1) / IP(src=H1_IP, dst="10.1.1.1", tos=0x02) /
                 ICMP(type=8, id=77, seq=3) / Raw(b"abcdefgh" * 8))
    out = sw.receive("Ethernet8", ping, 1.0)
    assert [p for p, _ in out] == ["Ethernet8"]
    p = Ether(out[0][1])
    assert (p.dst, p.src, p[IP].src, p[IP].dst) == (H1, RMAC, "10.1.1.1", H1_IP)
    assert (p[ICMP].type, p[ICMP].code, p[ICMP].id, p[ICMP].seq) == (0, 0, 77, 3)
    assert bytes(p[ICMP].payload) == b"abcdefgh" * 8
    assert ones_sum(bytes(p[IP])[:20]) == 0 and ones_sum(bytes(p[IP])[20:]) == 0
    c = sw.counters()["ports"]["Ethernet8"]
    assert (c["to_cpu"], c["forwarded"]) == (1, 1)  # the ping; the ARP was also flooded


def test_icmp_echo_to_other_local_addresses_is_answered_from_them():
    sw = leaf1(loopback=True)
    learn_h1(sw)
    for target in ("10.0.0.3", "10.255.0.1"):
        ping = bytes(Ether(dst=RMAC, src=H1) / IP(src=H1_IP, dst=target) / ICMP(id=1, seq=1))
        out = sw.receive("Ethernet8", ping, 1.0)
        assert len(out) == 1 and Ether(out[0][1])[IP].src == target


def test_a_local_address_resolved_is_not_cached_as_a_route():
    """The per-packet path asks the route cache before the local addresses, so a lookup of
    one of ours (a reply the switch originates to itself) must leave the cache without it."""
    sw = leaf1(loopback=True)
    learn_h1(sw)
    for target in ("10.1.1.1", "10.0.0.3", "10.255.0.1"):
        sw._router.resolve(ip_int(target))
        assert ip_int(target) not in sw._router._cache
        ping = bytes(Ether(dst=RMAC, src=H1) / IP(src=H1_IP, dst=target) / ICMP(id=1, seq=1))
        out = sw.receive("Ethernet8", ping, 1.0)
        assert len(out) == 1 and Ether(out[0][1])[ICMP].type == 0  # an echo reply


def test_small_generated_frames_are_padded_to_60_bytes():
    sw = leaf1()
    learn_h1(sw)
    ping = bytes(Ether(dst=RMAC, src=H1) / IP(src=H1_IP, dst="10.1.1.1") / ICMP())
    (_, reply), = sw.receive("Ethernet8", ping, 1.0)
    assert len(reply) == 60


def test_other_traffic_to_the_router_is_dropped():
    sw = leaf1()
    assert sw.receive("Ethernet8", udp(RMAC, H1, H1_IP, "10.1.1.1"), 0.0) == []
    echo_reply = bytes(Ether(dst=RMAC, src=H1) / IP(src=H1_IP, dst="10.0.0.1") / ICMP(type=0))
    assert sw.receive("Ethernet8", echo_reply, 0.0) == []
    assert drops(sw) == {"to_router_unsupported": 2}


def test_routed_port_accepts_only_the_router_mac():
    sw = leaf1()
    assert sw.receive("Ethernet0", udp(H1, SPINE1, SPINE1_IP, H1_IP), 0.0) == []
    assert sw.receive("Ethernet0", udp(BCAST, SPINE1, SPINE1_IP, H1_IP), 0.0) == []
    assert sw.receive("Ethernet0", udp(RMAC, SPINE1, SPINE1_IP, H1_IP, vlan=5), 0.0) == []
    assert drops(sw, "Ethernet0") == {"not_router_mac": 2, "vlan_not_member": 1}


def test_no_route_blackhole_longest_prefix_and_distance():
    extra = (
        StaticRoute(IPv4Network("10.9.0.0/16"), blackhole=True),
        StaticRoute(IPv4Network("10.1.2.128/25"), (IPv4Address(SPINE2_IP),)),
        StaticRoute(IPv4Network("10.8.0.0/16"), (IPv4Address(SPINE1_IP),), distance=10),
        StaticRoute(IPv4Network("10.8.0.0/16"), (IPv4Address(SPINE2_IP),), distance=5),
    )
    sw = leaf1(extra_routes=extra)
    resolve_spines(sw)
    assert sw.receive("Ethernet8", udp(RMAC, H1, H1_IP, "192.0.2.1"), 0.0) == []
    assert sw.receive("Ethernet8", udp(RMAC, H1, H1_IP, "10.9.1.1"), 0.0) == []
    assert drops(sw) == {"no_route": 1, "blackhole": 1}
    for sport in range(49152, 49152 + 8):  # the /25 beats the ECMP /24
        out = sw.receive("Ethernet8", udp(RMAC, H1, H1_IP, "10.1.2.200", sport=sport), 0.0)
        assert out[0][0] == "Ethernet4"
    assert sw.receive("Ethernet8", udp(RMAC, H1, H1_IP, "10.8.1.1"), 0.0)[0][0] == "Ethernet4"


def test_addresses_with_the_top_bit_set_route_and_answer_as_any_other():
    """The router reads addresses from the header's bytes (compiled: 64-bit arithmetic, where
    a C int would turn 128.0.0.0 and up negative)."""
    sw = leaf1(extra_routes=(
        StaticRoute(IPv4Network("198.51.100.0/24"), (IPv4Address(SPINE1_IP),)),
        StaticRoute(IPv4Network("203.0.113.0/24"), (IPv4Address(SPINE2_IP),))))
    resolve_spines(sw)
    out = sw.receive("Ethernet8", udp(RMAC, H1, H1_IP, "198.51.100.7"), 0.0)
    assert [p for p, _ in out] == ["Ethernet0"] and Ether(out[0][1])[IP].dst == "198.51.100.7"
    out = sw.receive("Ethernet8", udp(RMAC, H1, H1_IP, "203.0.113.9"), 0.0)
    assert [p for p, _ in out] == ["Ethernet4"]
    # a packet from 198.51.100.7 whose TTL runs out: time exceeded goes back to that source
    out = sw.receive("Ethernet0", udp(RMAC, SPINE1, "198.51.100.7", H1_IP, ttl=1), 0.0)
    assert [p for p, _ in out] == ["Ethernet0"]
    icmp = Ether(out[0][1])
    assert (icmp[IP].dst, icmp[ICMP].type) == ("198.51.100.7", 11)


def test_routed_packet_larger_than_egress_mtu_is_dropped():
    sw = Switch(SwitchConfig(
        path="x", hostname="x", mac=RMAC, ports=ports(2, mtu={"Ethernet4": 1500}),
        interfaces={"Ethernet0": (IPv4Interface("10.0.0.1/31"),),
                    "Ethernet4": (IPv4Interface("10.0.0.3/31"),)}))
    sw.receive("Ethernet4", arp(2, SPINE2, SPINE2_IP, "10.0.0.3", dst_mac=RMAC, hwdst=RMAC), 0.0)
    assert sw.receive("Ethernet0", udp(RMAC, SPINE1, "10.0.0.0", SPINE2_IP, size=1472), 0.0)
    assert sw.receive("Ethernet0", udp(RMAC, SPINE1, "10.0.0.0", SPINE2_IP, size=1473), 0.0) == []
    assert drops(sw) == {"mtu_exceeded": 1}


def test_malformed_ip_is_dropped():
    sw = leaf1()
    bad_version = bytearray(udp(RMAC, H1, H1_IP, H3_IP))
    bad_version[14] = 0x65
    truncated = udp(RMAC, H1, H1_IP, H3_IP, size=100)[:60]
    assert sw.receive("Ethernet8", bytes(bad_version), 0.0) == []
    assert sw.receive("Ethernet8", truncated, 0.0) == []
    assert sw.receive("Ethernet8", b"\x00" * 10, 0.0) == []
    assert drops(sw) == {"ip_header_error": 2, "malformed": 1}


# === ARP timers ===============================================================================

def test_route_next_hops_are_resolved_before_a_packet_needs_them():
    """SONiC asks for a route's next hops when it installs the route (routeorch ->
    ``NeighOrch::resolveNeighbor`` -> nbrmgrd -> the kernel's ARP), not when the first
    packet comes: the switch's first tick, due at once, asks both spines, so once they
    answered the first packet to 10.1.2.0/24 goes straight through."""
    sw = leaf1()
    assert sw.next_timer() == 0.0
    out = sw.tick(0.0)
    assert [(p, Ether(f)[ARP].op, Ether(f)[ARP].pdst) for p, f in out] == [
        ("Ethernet0", 1, SPINE1_IP), ("Ethernet4", 1, SPINE2_IP)]
    resolve_spines(sw, now=1e-6)
    frame = udp(RMAC, H1, H1_IP, H3_IP, sport=50000)
    out = sw.receive("Ethernet8", frame, 2e-6)
    assert [p for p, _ in out] == [SPINE_PORT[expected_spine(H1_IP, H3_IP, 50000)]]
    assert Ether(out[0][1])[IP].ttl == 63
    assert sw.counters()["ports"]["Ethernet8"]["forwarded"] == 1


def test_a_route_coming_back_asks_for_its_next_hop_at_once():
    """A link back up reinstalls the routes through it, whose next hop is asked for at the
    next tick, due at the switch's time (not at 0.0)."""
    sw = leaf1()
    sw.tick(0.0)
    resolve_spines(sw, now=0.5)
    sw.tick(5.0)
    sw.set_port_up("Ethernet0", False)  # spine1 forgotten
    sw.set_port_up("Ethernet0", True)
    assert sw.next_timer() == 5.0
    out = sw.tick(5.0)
    assert [(p, Ether(f)[ARP].pdst) for p, f in out] == [("Ethernet0", SPINE1_IP)]

def test_arp_retries_every_second_and_gives_up_after_three_requests():
    """The spines are asked for at the switch's first tick, again every second, and given
    up after three requests, dropping the packet that waited for one."""
    sw = leaf1()
    frame = udp(RMAC, H1, H1_IP, H3_IP, sport=50000)
    port = SPINE_PORT[expected_spine(H1_IP, H3_IP, 50000)]
    requests = []
    for now in [round(0.1 * i, 1) for i in range(60)]:
        out = sw.tick(now)
        if now == 0.0:
            assert sw.receive("Ethernet8", frame, now) == []  # held: its spine is asked for
        for p, f in out:
            assert Ether(f)[ARP].op == 1
            requests.append((now, p))
    assert requests == [(t, p) for t in (0.0, 1.0, 2.0) for p in ("Ethernet0", "Ethernet4")]
    c = sw.counters()
    assert c["ports"]["Ethernet8"]["held"] == 0
    assert c["ports"]["Ethernet8"]["drops"] == {"arp_unresolved": 1}
    assert c["arp"] == []
    assert sw.tick(10.0) == []
    out = sw.receive("Ethernet8", frame, 20.0)  # a new packet starts over
    assert [p for p, _ in out] == [port] and Ether(out[0][1])[ARP].op == 1


def test_ticks_at_next_timer_send_the_arp_retries_on_time():
    """A caller that ticks only when ``next_timer`` says retries ARP as one ticking every
    100 ms does, and the re-probe of a resolved entry is due when its lifetime ends."""
    sw = leaf1()
    frame = udp(RMAC, H1, H1_IP, H3_IP, sport=50000)
    requests_at = [0.0] * len(sw.receive("Ethernet8", frame, 0.0))
    while (due := sw.next_timer()) is not None and due < 5.0:
        requests_at += [due] * sum(Ether(f).haslayer(ARP) for _, f in sw.tick(due))
    # the packet's spine at once, the other at the tick due at once, then both retried
    assert requests_at == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0]
    assert sw.counters()["ports"]["Ethernet8"]["drops"] == {"arp_unresolved": 1}
    resolved = leaf1()
    resolve_spines(resolved, now=0.0)
    assert resolved._router.next_timer() == 600.0


def test_at_most_16_held_per_next_hop():
    sw = leaf1()
    spine = expected_spine(H1_IP, H3_IP, 50000)
    outs = [sw.receive("Ethernet8", udp(RMAC, H1, H1_IP, H3_IP, sport=50000, size=i), 0.0)
            for i in range(17)]
    assert len(outs[0]) == 1 and all(o == [] for o in outs[1:])  # one request only
    c = sw.counters()["ports"]["Ethernet8"]
    assert (c["held"], c["drops"]) == (16, {"arp_queue_full": 1})
    our_ip = "10.0.0.1" if spine == SPINE1_IP else "10.0.0.3"
    out = sw.receive(SPINE_PORT[spine], arp(2, SPINE_MAC[spine], spine, our_ip, dst_mac=RMAC,
                                            hwdst=RMAC), 0.5)
    assert [Ether(f)[UDP].len - 8 for _, f in out] == list(range(16))  # in order
    assert sw.counters()["ports"]["Ethernet8"]["forwarded"] == 16


def test_arp_entries_are_reprobed_after_600s_and_forgotten_if_silent():
    sw = leaf1()
    resolve_spines(sw, now=0.0)
    assert sw.tick(599.9) == []
    probes = sw.tick(600.0)
    assert sorted(p for p, _ in probes) == ["Ethernet0", "Ethernet4"]
    # meanwhile the old entry keeps forwarding
    out = sw.receive("Ethernet8", udp(RMAC, H1, H1_IP, H3_IP, sport=50000), 600.2)
    assert out and Ether(out[0][1])[IP].ttl == 63
    # spine1 answers, spine2 stays silent
    sw.receive("Ethernet0", arp(2, SPINE1, SPINE1_IP, "10.0.0.1", dst_mac=RMAC, hwdst=RMAC),
               600.3)
    assert [p for p, _ in sw.tick(601.0)] == ["Ethernet4"]
    assert [p for p, _ in sw.tick(602.0)] == ["Ethernet4"]
    assert sw.tick(603.0) == []
    table = {e["ip"]: e["state"] for e in sw.counters()["arp"]}
    assert table == {SPINE1_IP: "reachable"}
    assert sw.tick(1200.2) == [] and len(sw.tick(1200.3)) == 1  # spine1's next probe


# === counters ===================================================================================

def test_counters_add_up():
    sw = leaf1()
    sent: list[tuple[str, bytes]] = []
    received = {"Ethernet0": 0, "Ethernet4": 0, "Ethernet8": 0, "Ethernet12": 0}

    def rx(port: str, frame: bytes, now: float) -> None:
        received[port] += 1
        sent.extend(sw.receive(port, frame, now))

    rx("Ethernet8", arp(1, H1, H1_IP, "10.1.1.1"), 0.0)  # flooded + answered
    rx("Ethernet12", raw_frame(BCAST, H2), 0.0)  # flooded
    rx("Ethernet8", udp(H2, H1, H1_IP, H2_IP), 0.1)  # bridged
    rx("Ethernet8", rocev1(RMAC, H1), 0.2)  # non_ip_to_router
    rx("Ethernet8", pfc(H1), 0.2)  # flow_control
    rx("Ethernet8", udp(RMAC, H1, H1_IP, H3_IP, sport=50001), 0.3)  # held, then released
    rx("Ethernet8", udp(RMAC, H1, H1_IP, "10.7.7.7"), 0.3)  # no_route
    for ip in NEXTHOPS:  # replies from both spines (one resolves the held packet)
        our_ip = "10.0.0.1" if ip == SPINE1_IP else "10.0.0.3"
        rx(SPINE_PORT[ip], arp(2, SPINE_MAC[ip], ip, our_ip, dst_mac=RMAC, hwdst=RMAC), 0.4)
    rx("Ethernet0", udp(RMAC, SPINE1, "10.1.2.13", H1_IP, ttl=1), 0.5)  # ttl + ICMP
    rx("Ethernet0", udp(RMAC, SPINE1, "10.1.2.13", "10.1.1.77"), 0.5)  # held (never answered)
    rx("Ethernet4", udp(RMAC, SPINE2, "10.1.2.13", H1_IP), 0.6)  # routed to h1
    for t in range(1, 6):
        sent.extend(sw.tick(0.5 + t))  # who-has 10.1.1.77 x2 more, then give up

    c = sw.counters()
    json.dumps(c)  # JSON-able
    for name, port in c["ports"].items():
        assert port["rx_packets"] == received[name]
        assert port["rx_packets"] == (port["forwarded"] + port["to_cpu"] + port["held"]
                                      + port["flow_control"] + sum(port["drops"].values())), name
        assert port["tx_packets"] == sum(1 for p, _ in sent if p == name)
        assert port["tx_bytes"] == sum(len(f) for p, f in sent if p == name)
    assert c["drops"] == {"arp_unresolved": 1, "no_route": 1, "non_ip_to_router": 1,
                          "ttl_expired": 1}
    assert c["ports"]["Ethernet8"]["flow_control"] == 1
    # Ethernet8: ARP (flooded and answered), bridged, released; Ethernet4: routed to h1
    assert c["ports"]["Ethernet8"]["forwarded"] == 3 and c["ports"]["Ethernet4"]["forwarded"] == 1
    total_rx = sum(p["rx_bytes"] for p in c["ports"].values())
    assert total_rx > 0 and c["cpu"]["held"] == 0
    # originated: ARP reply to h1, who-has for the spine, ICMP, 3 who-has for 10.1.1.77
    assert c["cpu"] == {"originated": 6, "held": 0, "drops": {}}


def test_leaf1_config_json_loads_and_routes():
    """Uses fabric.config_load.load on the lab's real leaf1 config_db.json."""
    sw = Switch(load(LEAF1_JSON))
    out = sw.receive("Ethernet8", arp(1, H1, H1_IP, "10.1.1.1"), 0.0)
    assert ("Ethernet8" in dict(out)) and Ether(dict(out)["Ethernet8"])[ARP].op == 2
    resolve_spines(sw)
    ports_used = {sw.receive("Ethernet8", udp(RMAC, H1, H1_IP, H3_IP, sport=s), 1.0)[0][0]
                  for s in range(49152, 49152 + 32)}
    assert ports_used == {"Ethernet0", "Ethernet4"}
