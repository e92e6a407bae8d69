"""Ingress classification (fabric.model.classify) and the per-PG / per-queue counters.

RoCEv2 is classified by DSCP, RoCEv1 (EtherType 0x8915, no IP header) by the PCP of its
802.1Q or priority tag, as PORT_QOS_MAP binds the maps: per port, falling back field by
field to PORT_QOS_MAP|global. Uses the lab's real leaf1 config_db.json (DSCP d -> TC d//8,
TC3 -> PG3, every other TC -> PG0, TC -> queue identity) and hand-written config_db
content run through fabric.config_load.parse.
"""
from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Dot1Q, Ether

from rocelab.fabric.config_load import load, parse
from rocelab.fabric.model import Switch
from rocelab.fabric.model.classify import (CPU_CLASS, CPU_QUEUE, NUM_TCS, PortClassifier,
                                           resolve_maps)
from tests.unit.test_forwarding import (
    BCAST, H1, H1_IP, H2, H2_IP, H3_IP, LEAF1_JSON, RMAC, SPINE1, SPINE_PORT, arp,
    expected_spine, learn_h1, pfc, raw_frame, resolve_spines, rocev1, udp,
)

H2_PORT = "Ethernet12"
ROCE_V2_DSCP = 26  # RoCEv2 data on the lossless class (TC3 in leaf1's DSCP/8 map)
CNP_DSCP = 48


def leaf1() -> Switch:
    return Switch(load(LEAF1_JSON))


def roce_v2(dscp: int, src_mac: str = H1, dst_mac: str = RMAC, src: str = H1_IP,
            dst: str = H3_IP, sport: int = 50000, ecn: int = 0b10, **kw) -> bytes:
    """A RoCEv2-shaped frame: UDP to 4791 with the given DSCP (ECT(0) by default)."""
    return udp(dst_mac, src_mac, src, dst, sport=sport, tos=dscp << 2 | ecn, size=1000, **kw)


def pgs(sw: Switch, port: str) -> dict[int, tuple[int, int]]:
    """Non-zero PG counters of a port: {pg: (packets, bytes)}."""
    c = sw.counters()["ports"][port]["pgs"]
    return {int(k): (v["rx_packets"], v["rx_bytes"]) for k, v in c.items() if v["rx_packets"]}


def queues(sw: Switch, port: str) -> dict[int, tuple[int, int]]:
    """Non-zero queue counters of a port: {queue: (packets, bytes)}."""
    c = sw.counters()["ports"][port]["queues"]
    return {int(k): (v["tx_packets"], v["tx_bytes"]) for k, v in c.items() if v["tx_packets"]}


def diff(after: dict[int, tuple[int, int]], before: dict[int, tuple[int, int]]) -> dict:
    keys = set(after) | set(before)
    moved = {k: (after.get(k, (0, 0))[0] - before.get(k, (0, 0))[0],
                 after.get(k, (0, 0))[1] - before.get(k, (0, 0))[1]) for k in keys}
    return {k: v for k, v in moved.items() if v != (0, 0)}


# --- hand-written configurations --------------------------------------------------------------

IDENTITY = {str(i): str(i) for i in range(8)}


def l2_config(port_qos: dict | None = None, **maps: dict) -> Switch:
    """Four ports in Vlan100 (Ethernet0 untagged, Ethernet4 tagged, Ethernet8 priority-
    tagged, Ethernet12 untagged) with the given QoS tables (``DSCP_TO_TC_MAP={...}``...)."""
    ports = {f"Ethernet{4 * i}": {"speed": "100000", "mtu": "9100", "admin_status": "up"}
             for i in range(4)}
    modes = {"Ethernet0": "untagged", "Ethernet4": "tagged", "Ethernet8": "priority_tagged",
             "Ethernet12": "untagged"}
    data = {"DEVICE_METADATA": {"localhost": {"hostname": "qos", "mac": "02:52:4c:00:0a:0a"}},
            "PORT": ports, "VLAN": {"Vlan100": {"vlanid": "100"}},
            "VLAN_MEMBER": {f"Vlan100|{p}": {"tagging_mode": m} for p, m in modes.items()},
            **maps}
    if port_qos is not None:
        data["PORT_QOS_MAP"] = port_qos
    return Switch(parse(data, "qos/config_db.json"))


# === the real leaf1 configuration =============================================================

def test_leaf1_dscp_classes_on_every_port():
    sw = leaf1()
    for port in ("Ethernet0", "Ethernet4", "Ethernet8", "Ethernet12"):
        for dscp in range(64):
            tc = dscp // 8
            assert sw.classify(port, roce_v2(dscp)) == (tc, 3 if tc == 3 else 0, tc), (port, dscp)


def test_leaf1_rocev2_cnp_and_best_effort():
    sw = leaf1()
    assert sw.classify("Ethernet8", roce_v2(ROCE_V2_DSCP)) == (3, 3, 3)
    assert sw.classify("Ethernet8", roce_v2(CNP_DSCP)) == (6, 0, 6)
    assert sw.classify("Ethernet8", roce_v2(0)) == (0, 0, 0)
    assert sw.classify("Ethernet8", roce_v2(ROCE_V2_DSCP, ecn=0b11)) == (3, 3, 3)  # ECN bits


def test_leaf1_rocev1_by_pcp():
    sw = leaf1()
    assert sw.classify("Ethernet8", rocev1(H2, H1, vlan=0, pcp=3)) == (3, 3, 3)
    assert sw.classify("Ethernet8", rocev1(H2, H1, vlan=0, pcp=0)) == (0, 0, 0)
    assert sw.classify("Ethernet8", rocev1(H2, H1, vlan=0, pcp=4)) == (4, 0, 4)
    assert sw.classify("Ethernet8", rocev1(H2, H1)) == (0, 0, 0)  # untagged: PCP 0


def test_leaf1_ip_uses_dscp_even_when_tagged():
    """With a DSCP map bound, an IP frame's PCP does not matter (RoCEv2 from a NIC that
    also sets PCP): DSCP 0 in a PCP 3 tag is best effort."""
    sw = leaf1()
    assert sw.classify("Ethernet8", roce_v2(0, vlan=0, pcp=3)) == (0, 0, 0)
    assert sw.classify("Ethernet8", roce_v2(ROCE_V2_DSCP, vlan=0, pcp=0)) == (3, 3, 3)


def test_leaf1_ipv6_uses_its_traffic_class_dscp():
    sw = leaf1()
    for dscp in (0, ROCE_V2_DSCP, CNP_DSCP, 63):
        frame = bytes(Ether(dst=H2, src=H1) / IPv6(tc=dscp << 2 | 1) / UDP(dport=4791))
        tc = dscp // 8
        assert sw.classify("Ethernet8", frame) == (tc, 3 if tc == 3 else 0, tc)


def test_leaf1_qos_tables_show_the_bindings():
    tables = leaf1().qos_tables()
    e8 = tables["Ethernet8"]
    assert e8["maps"]["dscp_to_tc_map"] == {"name": "AZURE", "from": "Ethernet8"}
    assert e8["dscp_to_tc"] == [d // 8 for d in range(64)]
    assert e8["dot1p_to_tc"] == list(range(8))
    assert e8["tc_to_pg"] == [0, 0, 0, 3] + [0] * 12  # TCs 0..15, the map names 0..7
    assert e8["tc_to_queue"] == list(range(8)) + [0] * 8
    json.dumps(tables)


# === counters on leaf1 ========================================================================

def test_routed_rocev2_counts_in_pg3_on_ingress_and_queue3_on_egress():
    sw = leaf1()
    resolve_spines(sw)
    learn_h1(sw)
    frame = roce_v2(ROCE_V2_DSCP)
    egress = SPINE_PORT[expected_spine(H1_IP, H3_IP, 50000)]
    before = {p: (pgs(sw, p), queues(sw, p)) for p in sw.counters()["ports"]}
    n = 25
    sent = [sw.receive("Ethernet8", frame, 1.0) for _ in range(n)]
    assert all(len(out) == 1 and out[0][0] == egress for out in sent)
    size = len(sent[0][0][1])
    for port, (pg0, q0) in before.items():
        assert diff(pgs(sw, port), pg0) == ({3: (n, n * len(frame))} if port == "Ethernet8"
                                            else {}), port
        assert diff(queues(sw, port), q0) == ({3: (n, n * size)} if port == egress else {}), port
    routed = Ether(sent[0][0][1])
    assert routed[IP].tos == ROCE_V2_DSCP << 2 | 0b10  # DSCP and ECN untouched


def test_bridged_rocev1_counts_in_its_pcp_pg_and_queue():
    sw = leaf1()
    sw.receive(H2_PORT, raw_frame(BCAST, H2), 0.0)  # h2 learned on Ethernet12
    frame = rocev1(H2, H1, vlan=0, pcp=3)  # priority-tagged into an untagged member
    before = {p: (pgs(sw, p), queues(sw, p)) for p in sw.counters()["ports"]}
    n = 10
    out = [sw.receive("Ethernet8", frame, 1.0) for _ in range(n)]
    assert all(len(o) == 1 and o[0][0] == H2_PORT for o in out)
    egress_size = len(out[0][0][1])
    assert egress_size == len(frame) - 4  # untagged member: the priority tag came off
    for port, (pg0, q0) in before.items():
        assert diff(pgs(sw, port), pg0) == ({3: (n, n * len(frame))} if port == "Ethernet8"
                                            else {}), port
        assert diff(queues(sw, port), q0) == ({3: (n, n * egress_size)} if port == H2_PORT
                                              else {}), port


def test_originated_frames_leave_on_queue_7_and_are_in_no_pg():
    sw = leaf1()
    request = arp(1, SPINE1, "10.0.0.0", "10.0.0.1")
    (port, reply), = sw.receive("Ethernet0", request, 0.0)
    assert port == "Ethernet0" and Ether(reply)[ARP].op == 2
    assert pgs(sw, "Ethernet0") == {0: (1, len(request))}  # the request: PCP 0 -> PG0
    assert queues(sw, "Ethernet0") == {CPU_QUEUE: (1, len(reply))}
    assert CPU_CLASS == (7, None)


def test_a_held_packet_keeps_its_class_until_arp_resolves():
    sw = leaf1()
    learn_h1(sw)
    frame = roce_v2(ROCE_V2_DSCP)
    egress = SPINE_PORT[expected_spine(H1_IP, H3_IP, 50000)]
    (port, who_has), = sw.receive("Ethernet8", frame, 1.0)
    assert port == egress and Ether(who_has)[ARP].op == 1
    assert queues(sw, egress) == {CPU_QUEUE: (1, len(who_has))}
    spine_ip = "10.0.0.0" if egress == "Ethernet0" else "10.0.0.2"
    our_ip = "10.0.0.1" if egress == "Ethernet0" else "10.0.0.3"
    (port, routed), = sw.receive(egress, arp(2, SPINE1, spine_ip, our_ip, dst_mac=RMAC,
                                             hwdst=RMAC), 1.1)
    assert port == egress and Ether(routed)[IP].dst == H3_IP
    assert queues(sw, egress) == {3: (1, len(routed)), CPU_QUEUE: (1, len(who_has))}


def test_routed_into_a_tagged_member_keeps_the_ingress_pcp():
    """No TC_TO_DOT1P map in our tables: a routed frame's tag keeps the ingress PCP (0 when
    it came untagged); its queue follows its DSCP."""
    config = load(LEAF1_JSON)
    vlan = config.vlans["Vlan100"]
    sw = Switch(replace(config, vlans={"Vlan100": replace(
        vlan, members={"Ethernet8": "untagged", H2_PORT: "tagged"})}))
    resolve_spines(sw)
    request = arp(1, H2, H2_IP, "10.1.1.1")
    sw.receive(H2_PORT, request[:12] + b"\x81\x00\x00\x64" + request[12:], 0.0)  # VID 100
    for pcp, tag in ((5, {"vlan": 0, "pcp": 5}), (0, {})):
        frame = roce_v2(ROCE_V2_DSCP, src_mac=SPINE1, src="10.1.2.13", dst=H2_IP, **tag)
        (port, routed), = sw.receive("Ethernet0", frame, 1.0)
        assert port == H2_PORT
        p = Ether(routed)
        assert (p[Dot1Q].vlan, p[Dot1Q].prio, p[IP].tos) == (100, pcp, ROCE_V2_DSCP << 2 | 2)
    assert queues(sw, H2_PORT)[3][0] == 2


def test_port_totals_are_the_sums_of_pgs_and_queues():
    sw = leaf1()
    resolve_spines(sw)
    learn_h1(sw)
    sw.receive(H2_PORT, raw_frame(BCAST, H2), 0.0)
    frames = [roce_v2(d, sport=50000 + d) for d in range(0, 64, 3)]
    frames += [rocev1(H2, H1, vlan=0, pcp=p) for p in range(8)]
    frames += [pfc(H1), raw_frame("01:80:c2:00:00:0e", H1, 0x88CC), b"\x00" * 10]
    for i, frame in enumerate(frames):
        sw.receive("Ethernet8", frame, 1.0 + i / 100)
    sw.set_port_up("Ethernet4", False)
    sw.receive("Ethernet4", roce_v2(ROCE_V2_DSCP, src_mac=SPINE1), 2.0)  # port down
    c = sw.counters()
    json.dumps(c)
    for name, port in c["ports"].items():
        assert set(port["pgs"]) == set(port["queues"]) == {str(i) for i in range(8)}
        assert port["tx_packets"] == sum(q["tx_packets"] for q in port["queues"].values())
        assert port["tx_bytes"] == sum(q["tx_bytes"] for q in port["queues"].values())
        unclassified = port["flow_control"] + sum(port["drops"].get(r, 0)
                                                  for r in ("mac_control", "port_down"))
        if name == "Ethernet8":
            unclassified += 1  # the 10-byte runt (malformed before any header)
        assert port["rx_packets"] == sum(g["rx_packets"] for g in port["pgs"].values()) \
            + unclassified, name
        assert port["rx_packets"] == (port["forwarded"] + port["to_cpu"] + port["held"]
                                      + port["flow_control"] + sum(port["drops"].values())), name
    e8 = {int(k): v["rx_packets"] for k, v in c["ports"]["Ethernet8"]["pgs"].items()}
    # learn_h1's ARP (PG0), 22 RoCEv2 frames (DSCP 24/27/30 -> PG3), 8 RoCEv1 (PCP 3 -> PG3)
    assert e8[3] == 3 + 1 and sum(e8.values()) == 1 + 22 + 8


# === hand-written maps ========================================================================

def test_no_maps_means_everything_is_tc0_pg0_queue0():
    sw = l2_config()
    for frame in (roce_v2(ROCE_V2_DSCP, dst_mac=H2), rocev1(H2, H1, vlan=0, pcp=3),
                  rocev1(H2, H1), roce_v2(46, dst_mac=H2, vlan=100, pcp=7)):
        assert sw.classify("Ethernet4", frame) == (0, 0, 0)
    sw.receive("Ethernet4", rocev1(BCAST, H1, vlan=100, pcp=3), 0.0)
    assert pgs(sw, "Ethernet4") == {0: (1, len(rocev1(BCAST, H1, vlan=100, pcp=3)))}
    assert set(queues(sw, "Ethernet0")) == set(queues(sw, "Ethernet8")) == {0}


def test_untagged_rocev1_takes_the_dot1p_entry_of_pcp_0():
    sw = l2_config({"global": {"dot1p_to_tc_map": "D", "tc_to_pg_map": "PG",
                               "tc_to_queue_map": "Q"}},
                   DOT1P_TO_TC_MAP={"D": {"0": "3", "3": "4"}},
                   TC_TO_PRIORITY_GROUP_MAP={"PG": {"3": "3", "4": "4"}},
                   TC_TO_QUEUE_MAP={"Q": IDENTITY})
    assert sw.classify("Ethernet0", rocev1(H2, H1)) == (3, 3, 3)
    assert sw.classify("Ethernet0", rocev1(H2, H1, vlan=0, pcp=3)) == (4, 4, 4)
    assert sw.classify("Ethernet0", rocev1(H2, H1, vlan=0, pcp=5)) == (0, 0, 0)  # not in D
    # no DSCP map anywhere: IP is classified by its PCP like any frame
    assert sw.classify("Ethernet4", roce_v2(ROCE_V2_DSCP, dst_mac=H2, vlan=100, pcp=3)) \
        == (4, 4, 4)
    assert sw.classify("Ethernet0", roce_v2(ROCE_V2_DSCP, dst_mac=H2)) == (3, 3, 3)


def test_port_entry_overrides_global_field_by_field():
    maps = dict(DSCP_TO_TC_MAP={"G": {"26": "3", "48": "6"}, "P": {"26": "5"}},
                DOT1P_TO_TC_MAP={"G": {"3": "3"}},
                TC_TO_PRIORITY_GROUP_MAP={"G": {"3": "3"}, "P": {"5": "5", "3": "1"}},
                TC_TO_QUEUE_MAP={"G": IDENTITY})
    sw = l2_config({"global": {"dscp_to_tc_map": "G", "dot1p_to_tc_map": "G",
                               "tc_to_pg_map": "G", "tc_to_queue_map": "G"},
                    "Ethernet0": {"dscp_to_tc_map": "P", "pfc_enable": "5"},
                    "Ethernet4": {"tc_to_pg_map": "P"}}, **maps)
    v2 = roce_v2(ROCE_V2_DSCP, dst_mac=H2)
    assert sw.classify("Ethernet0", v2) == (5, 0, 5)  # its DSCP map, the global PG map
    assert sw.classify("Ethernet0", roce_v2(CNP_DSCP, dst_mac=H2)) == (0, 0, 0)  # not in P
    assert sw.classify("Ethernet0", rocev1(H2, H1, vlan=0, pcp=3)) == (3, 3, 3)  # global D
    assert sw.classify("Ethernet4", v2) == (3, 1, 3)  # global DSCP map, its PG map
    assert sw.classify("Ethernet8", v2) == (3, 3, 3)  # no entry: all global
    assert sw.classify("Ethernet12", roce_v2(CNP_DSCP, dst_mac=H2)) == (6, 0, 6)
    bound = sw.qos_tables()["Ethernet0"]["maps"]
    assert bound["dscp_to_tc_map"] == {"name": "P", "from": "Ethernet0"}
    assert bound["tc_to_pg_map"] == {"name": "G", "from": "global"}


def test_only_a_port_entry_and_no_global():
    sw = l2_config({"Ethernet8": {"dscp_to_tc_map": "A", "tc_to_queue_map": "Q"}},
                   DSCP_TO_TC_MAP={"A": {"26": "3"}}, TC_TO_QUEUE_MAP={"Q": IDENTITY})
    v2 = roce_v2(ROCE_V2_DSCP, dst_mac=H2)
    assert sw.classify("Ethernet8", v2) == (3, 0, 3)  # no PG map: PG 0
    assert sw.classify("Ethernet0", v2) == (0, 0, 0)
    assert sw.qos_tables()["Ethernet0"]["maps"] == {
        "dscp_to_tc_map": None, "dot1p_to_tc_map": None, "tc_to_pg_map": None,
        "tc_to_queue_map": None}


def test_unmapped_tc_goes_to_queue_0_not_queue_tc():
    """SAI: a TC the TC_TO_QUEUE map does not list (or no map) goes to queue 0."""
    sw = l2_config({"global": {"dscp_to_tc_map": "A", "tc_to_queue_map": "Q"}},
                   DSCP_TO_TC_MAP={"A": {str(d): str(d // 8) for d in range(64)}},
                   TC_TO_QUEUE_MAP={"Q": {"3": "3", "6": "7"}})
    assert sw.classify("Ethernet0", roce_v2(ROCE_V2_DSCP, dst_mac=H2)) == (3, 0, 3)
    assert sw.classify("Ethernet0", roce_v2(CNP_DSCP, dst_mac=H2)) == (6, 0, 7)
    assert sw.classify("Ethernet0", roce_v2(40, dst_mac=H2)) == (5, 0, 0)
    for dscp in (40, CNP_DSCP):
        sw.receive("Ethernet0", roce_v2(dscp, dst_mac=BCAST), 0.0)
    size = len(roce_v2(40, dst_mac=BCAST))
    assert queues(sw, "Ethernet12") == {0: (1, size), 7: (1, size)}


def test_the_egress_ports_tc_to_queue_map_picks_the_queue():
    sw = l2_config({"global": {"dscp_to_tc_map": "A", "tc_to_pg_map": "PG",
                               "tc_to_queue_map": "Q"},
                    "Ethernet12": {"tc_to_queue_map": "SWAP"}},
                   DSCP_TO_TC_MAP={"A": {"26": "3"}},
                   TC_TO_PRIORITY_GROUP_MAP={"PG": {"3": "3"}},
                   TC_TO_QUEUE_MAP={"Q": IDENTITY, "SWAP": {"3": "4", "4": "3"}})
    frame = roce_v2(ROCE_V2_DSCP, src_mac=H1, dst_mac=BCAST)
    assert sw.classify("Ethernet0", frame) == (3, 3, 3)
    assert sw.classify("Ethernet0", frame, egress="Ethernet12") == (3, 3, 4)
    out = dict(sw.receive("Ethernet0", frame, 0.0))  # flooded to the three others
    assert set(out) == {"Ethernet4", "Ethernet8", "Ethernet12"}
    assert pgs(sw, "Ethernet0") == {3: (1, len(frame))}
    assert queues(sw, "Ethernet4") == {3: (1, len(out["Ethernet4"]))}
    assert queues(sw, "Ethernet8") == {3: (1, len(out["Ethernet8"]))}
    assert queues(sw, "Ethernet12") == {4: (1, len(out["Ethernet12"]))}


def test_pcp_classes_through_tagged_and_priority_tagged_ports():
    sw = l2_config({"global": {"dot1p_to_tc_map": "D", "tc_to_pg_map": "PG",
                               "tc_to_queue_map": "Q"}},
                   DOT1P_TO_TC_MAP={"D": IDENTITY},
                   TC_TO_PRIORITY_GROUP_MAP={"PG": {"3": "3", "4": "4"}},
                   TC_TO_QUEUE_MAP={"Q": IDENTITY})
    for pcp in range(8):
        frame = rocev1(BCAST, H1, vlan=100, pcp=pcp)
        assert sw.classify("Ethernet4", frame) == (pcp, pcp if pcp in (3, 4) else 0, pcp)
        dei = bytearray(frame)
        dei[14] |= 0x10  # DEI set: the class is the PCP's
        assert sw.classify("Ethernet4", bytes(dei)) == sw.classify("Ethernet4", frame)
        out = dict(sw.receive("Ethernet4", frame, 0.0))
        assert Ether(out["Ethernet8"])[Dot1Q].prio == pcp  # priority-tagged member keeps it
    assert pgs(sw, "Ethernet4") == {0: (6, 6 * len(frame)), 3: (1, len(frame)),
                                    4: (1, len(frame))}
    assert queues(sw, "Ethernet8") == {q: (1, len(frame)) for q in range(8)}


def test_unbound_map_names_do_not_classify():
    """A map defined but bound to no port classifies nothing."""
    sw = l2_config(DSCP_TO_TC_MAP={"A": {"26": "3"}})
    assert sw.classify("Ethernet0", roce_v2(ROCE_V2_DSCP, dst_mac=H2)) == (0, 0, 0)


# === the hot path agrees with the written-out rule ============================================

@pytest.mark.parametrize("config", ["leaf1", "hand"])
def test_receive_counts_the_pg_that_classify_returns(config):
    """Frames of every shape (tags with DEI, IPv4/IPv6/RoCEv1/ARP, runts, VLANs the port is
    not in): the PG ``receive`` counts is the one ``PortClassifier.classify`` gives."""
    if config == "leaf1":
        sw, ports = leaf1(), ["Ethernet0", "Ethernet8", "Ethernet12"]
    else:
        sw = l2_config({"global": {"dot1p_to_tc_map": "D", "tc_to_pg_map": "PG"},
                        "Ethernet4": {"dscp_to_tc_map": "A"}},
                       DSCP_TO_TC_MAP={"A": {str(d): str(d % 8) for d in range(64)}},
                       DOT1P_TO_TC_MAP={"D": {str(p): str(7 - p) for p in range(8)}},
                       TC_TO_PRIORITY_GROUP_MAP={"PG": {str(t): str(t) for t in range(8)}})
        ports = ["Ethernet0", "Ethernet4", "Ethernet8"]
    rng = random.Random(7)
    for i in range(400):
        ethertype = rng.choice([0x0800, 0x86DD, 0x8915, 0x0806, 0x88B5])
        tag = b""
        if rng.random() < 0.5:
            tci = rng.randrange(8) << 13 | rng.randrange(2) << 12 | rng.choice([0, 100, 200])
            tag = b"\x81\x00" + tci.to_bytes(2, "big")
        body = bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 2, 30, 60])))
        frame = bytes.fromhex("020000000099") + bytes.fromhex("0200000000aa") + tag \
            + ethertype.to_bytes(2, "big") + body
        port = rng.choice(ports)
        expected = sw.classify(port, frame)[1]
        before = pgs(sw, port)
        sw.receive(port, frame, i / 1000)
        assert diff(pgs(sw, port), before) == {expected: (1, len(frame))}, frame.hex()


def test_classifier_tables_are_shared_tuples_and_resolve_cpu_frames():
    config = load(LEAF1_JSON)
    clf = PortClassifier.from_config(config.qos, "Ethernet8")
    assert len(clf.by_dscp) == 64 and len(clf.by_prio) == 16 and len(clf.queue_of) == NUM_TCS == 16
    assert clf.by_dscp[26] is clf.by_dscp[24] is clf.by_prio[3 << 1 | 1]
    assert clf.resolve(CPU_CLASS) == (7, None, CPU_QUEUE)
    assert clf.resolve(clf.by_dscp[48]) == (6, 0, 6)
    maps = resolve_maps(config.qos, "Ethernet8")
    assert maps.tc_to_pg.name == "AZURE" and maps.tc_to_pg.entries[3] == 3
