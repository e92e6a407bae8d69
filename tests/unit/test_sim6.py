"""IPv6 hosts in the virtual-time runtime: their exec lines (dual stack included), neighbour
discovery both ways, ICMPv6 echo and time exceeded across the simulated fabric with the hop
counts a live lab shows, and RoCEv2 over IPv6. No root: it is one process."""
from __future__ import annotations

import ipaddress

import pytest

from rocelab.fabric.model.frames import (ETH_P_IPV6, ICMPV6_ECHO_REPLY, ICMPV6_ECHO_REQUEST,
                                         IPPROTO_ICMPV6, NA_SOLICITED, NDP_NA, NDP_NS,
                                         ethernet_frame, icmpv6_message, icmpv6_valid,
                                         ipv6_packet, multicast_mac6, neighbor_advertisement,
                                         neighbor_solicitation, parse_ndp, solicited_node6)
from rocelab.labs.runtimes.sim import simulated
from rocelab.labs import topology
from rocelab.labs.sim.engine import Engine
from rocelab.labs.sim.host import ARP_TRIES, SimHost
from rocelab.labs.sim.hostconfig import SimError, host_config
from rocelab.labs.sim.link import Wire
from tests.conftest import TOPOLOGIES
from rocelab.traffic import patterns
from rocelab.nic import codec as roce_wire

V6 = TOPOLOGIES / "roce-v6-leafspine" / "roce-v6-leafspine.clab.yml"
PEER_MAC = bytes.fromhex("020000000099")


def test_the_ipv6_labs_exec_lines_are_read_from_its_file():
    topo = topology.load(str(V6))
    for host in topo.hosts:
        config = host_config(host.name, tuple(host.exec), topo.interfaces(host.name))
        (address,) = config.interfaces()
        assert address.version == 6 and address.network.prefixlen == 64
        assert config.gateways[6] in address.network and 4 not in config.gateways


def test_ipv4_and_ipv6_side_by_side_on_one_interface():
    config = host_config("h1", ("ip addr add 10.1.1.11/24 dev eth1",
                                "ip -6 addr add 2001:db8:1::11/64 dev eth1 nodad",
                                "ip -4 route add default via 10.1.1.1",
                                "ip -6 route replace default via 2001:db8:1::1",
                                "ip link set eth1 up"), ["eth1"])
    assert [str(a) for a in config.interfaces()] == ["10.1.1.11/24", "2001:db8:1::11/64"]
    assert {v: str(g) for v, g in config.gateways.items()} == {4: "10.1.1.1",
                                                               6: "2001:db8:1::1"}


@pytest.mark.parametrize("line, says", [
    ("ip addr add 2001:db8::1/64 dev eth1", "add nodad"),
    ("ip -6 addr add 10.1.1.1/24 dev eth1", "not an IPv6 address"),
    ("ip -6 route replace default via 10.1.1.1", "not an IPv6 address"),
    ("ip addr add 2001:db8::1/64 dev eth1 nodad preferred_lft 0", "'preferred_lft' is not"),
    ("ip addr add 10.1.1.1/24 dev eth1 nodad", "'nodad' is not"),
    ("ip addr add 2001:db8::1/64 dev eth9 nodad", "wired: eth1"),
    ("ip -6 neigh add 2001:db8::2 lladdr 02:00:00:00:00:02 dev eth1", "not modelled"),
    ("ip -6 route add 2001:db8:2::/64 via 2001:db8::1", "not modelled"),
])
def test_ipv6_lines_it_does_not_model_are_refused_in_one_line(line, says):
    with pytest.raises(SimError) as e:
        host_config("h1", (line,), ["eth1"])
    assert str(e.value).startswith(f"node h1: exec[1] {line!r}: ") and says in str(e.value)
    assert "\n" not in str(e.value)


def test_a_second_ipv6_address_on_an_interface_is_refused():
    with pytest.raises(SimError, match=r"exec\[2\].*one IPv6 address per interface"):
        host_config("h1", ("ip addr add 2001:db8::1/64 dev eth1 nodad",
                           "ip addr add 2001:db8::2/64 dev eth1 nodad"), ["eth1"])


def lone_host(line: str) -> tuple[Engine, SimHost, list[bytes]]:
    """A host whose wire ends in a list of the frames it sent."""
    engine, sent = Engine(), []
    config = host_config("h1", (line,), ["eth1"])
    host = SimHost(engine, "h1", config, {"eth1": bytes.fromhex("020000000001")}, 1.0)
    host.wires["eth1"] = Wire(engine, 100e9, 0, sent.append)
    return engine, host, sent


def test_a_host_answers_a_solicitation_for_its_address_and_learns_the_asker():
    engine, host, sent = lone_host("ip addr add 2001:db8::11/64 dev eth1 nodad")
    me, peer = int(ipaddress.IPv6Address("2001:db8::11")), int(ipaddress.IPv6Address(
        "2001:db8::1"))
    ns = neighbor_solicitation(peer, me, PEER_MAC)
    host.arrive("eth1", ethernet_frame(multicast_mac6(solicited_node6(me)), PEER_MAC,
                                       ETH_P_IPV6, ns))
    engine.run(10**9)
    (na,) = sent
    assert na[0:6] == PEER_MAC and na[21] == 255  # unicast back, hop limit 255
    assert icmpv6_valid(na, 54, len(na) - 54)
    ndp = parse_ndp(na, 54, len(na) - 54)
    assert ndp.type == NDP_NA and ndp.target == me and ndp.flags & NA_SOLICITED
    assert ndp.lladdr == host.macs["eth1"]
    assert host.neighbours[ipaddress.IPv6Address(peer)] == PEER_MAC
    other = neighbor_solicitation(peer, me + 1, PEER_MAC)  # not ours: no answer
    host.arrive("eth1", ethernet_frame(multicast_mac6(solicited_node6(me + 1)), PEER_MAC,
                                       ETH_P_IPV6, other))
    engine.run(2 * 10**9)
    assert len(sent) == 1


def test_an_unanswered_next_hop_is_solicited_three_times_then_given_up():
    engine, host, sent = lone_host("ip addr add 2001:db8::11/64 dev eth1 nodad")
    assert host.ping("2001:db8::99", 1, 1)
    engine.run(engine.now_ps + 10 * host.arp_retry_ps)
    target = int(ipaddress.IPv6Address("2001:db8::99"))
    assert len(sent) == ARP_TRIES and not host._waiting  # the echo is dropped
    for frame in sent:
        assert frame[0:6] == multicast_mac6(solicited_node6(target))
        ndp = parse_ndp(frame, 54, len(frame) - 54)
        assert ndp.type == NDP_NS and ndp.target == target and ndp.lladdr == host.macs["eth1"]


def test_a_solicited_next_hop_gets_the_waiting_echo_once_it_answers():
    engine, host, sent = lone_host("ip addr add 2001:db8::11/64 dev eth1 nodad")
    me, peer = (int(ipaddress.IPv6Address(a)) for a in ("2001:db8::11", "2001:db8::99"))
    host.ping("2001:db8::99", 7, 1)
    engine.run(engine.now_ps + 1)
    na = neighbor_advertisement(peer, me, peer, PEER_MAC, NA_SOLICITED)
    host.arrive("eth1", ethernet_frame(host.macs["eth1"], PEER_MAC, ETH_P_IPV6, na))
    engine.run(engine.now_ps + 10**9)
    echo = sent[-1]
    assert echo[0:6] == PEER_MAC and echo[20] == IPPROTO_ICMPV6 and echo[54] == \
        ICMPV6_ECHO_REQUEST and len(sent) == 2


def test_a_host_answers_an_echo_request_to_it():
    engine, host, sent = lone_host("ip addr add 2001:db8::11/64 dev eth1 nodad")
    me, peer = (int(ipaddress.IPv6Address(a)) for a in ("2001:db8::11", "2001:db8::99"))
    host.neighbours[ipaddress.IPv6Address(peer)] = PEER_MAC
    echo = icmpv6_message(peer, me, ICMPV6_ECHO_REQUEST, 0, bytes((0, 5, 0, 9)) + b"data")
    host.arrive("eth1", ethernet_frame(host.macs["eth1"], PEER_MAC, ETH_P_IPV6,
                                       ipv6_packet(peer, me, IPPROTO_ICMPV6, echo)))
    engine.run(10**9)
    (reply,) = sent
    assert reply[54] == ICMPV6_ECHO_REPLY and reply[58:66] == bytes((0, 5, 0, 9)) + b"data"
    assert icmpv6_valid(reply, 54, len(reply) - 54)


@pytest.fixture(scope="module")
def lab6():
    return simulated(str(V6))


def test_ping6_crosses_the_simulated_fabric_with_the_live_hop_counts(lab6):
    addrs = lab6.host_addresses()
    assert all(ipaddress.ip_address(a).version == 6 for a in addrs.values())
    pings = {(p.src, p.dst): p for p in lab6.ping_all()}
    assert len(pings) == 12 and all(p.ok for p in pings.values())
    assert pings["h1", "h2"].hops == 0 and pings["h1", "h3"].hops == 3  # bridged / L-S-L
    assert lab6.route("h1", addrs["h2"]) == ("eth1", None)
    assert lab6.route("h1", addrs["h3"]) == ("eth1", lab6.default_gateway("h1"))
    hops = lab6.trace("h1", addrs["h3"])
    assert hops[0] == lab6.default_gateway("h1") and hops[-1] == addrs["h3"] and len(hops) == 4
    ndp = {e["ip"] for e in lab6.agent("leaf1").counters()["ndp"]}
    assert addrs["h1"] in ndp  # the leaf learned the host by NDP too


def test_the_host_views_of_an_ipv6_lab(lab6):
    addrs = lab6.host_addresses()
    gateway = lab6.default_gateway("h1")
    assert lab6.host_iface("h1", addrs["h1"]) == "eth1"
    assert lab6.neighbour("h1", "eth1", gateway) == lab6.next_hop_mac("h1", addrs["h3"])
    assert [str(a) for a in lab6.host_interfaces()["h3"]] == [f"{addrs['h3']}/64"]


def test_a_rocev2_incast_over_ipv6_completes_at_line_rate(lab6):
    frames = []
    with lab6.capture(where=[("h1", "eth1")], match=lambda f: roce_wire.parse(f) is not None) \
            as capture:
        flows = patterns.incast("h1", ["h2", "h3", "h4"], 256 * 1024, 1, 2)
        result = patterns.run(lab6, flows, pattern="incast", timeout_s=30,
                              nic={"*": {"dcqcn": {"enabled": False}}})
        frames = [s.frame for s in capture.frames()]
    assert result["complete"] and not any(f["retransmitted"] for f in result["flows"])
    total = sum(f["delivered_bytes"] for f in result["flows"]) * 8 / result["elapsed_s"]
    assert 80e9 < total <= 100e9  # one 100G port toward h1 carries all of it
    assert frames and all(f[12:14] == b"\x86\xdd" for f in frames)  # RoCEv2 over IPv6


def dual_stack(doc):
    """The IPv4 lab with an IPv6 address beside each host's IPv4 one (the switches route
    IPv4 only: IPv6 reaches the hosts of the same VLAN, bridged)."""
    for n, name in enumerate(("h1", "h2", "h3", "h4"), 1):
        doc["topology"]["nodes"][name]["exec"].append(
            f"ip -6 addr add 2001:db8:9::{n}/64 dev eth1 nodad")


def test_a_dual_stack_host_speaks_both_families_on_one_interface(lab_copy):
    lab = simulated(str(lab_copy(edit=dual_stack)))
    addrs = lab.host_addresses()
    assert ipaddress.ip_address(addrs["h1"]).version == 4  # IPv4 first, as live
    assert [a.version for a in lab.host_interfaces()["h1"]] == [4, 6]
    assert lab.ping("h1", "h2", addrs["h2"]).ok
    six = lab.ping("h1", "h2", "2001:db8:9::2")
    assert six.ok and six.hops == 0
    assert lab.host_iface("h2", "2001:db8:9::2") == "eth1"
