"""BGP without root: config tables, the FRR renderer, netlink route decoding, the switch's
learned routes, and the sim runtime's eBGP computation."""
from __future__ import annotations

import json
import socket
from ipaddress import IPv4Address, IPv4Network, ip_address
from pathlib import Path

import pytest
import yaml
from pyroute2.netlink.rtnl.rtmsg import rtmsg

from rocelab.fabric.config import ConfigError
from rocelab.fabric.config_load import parse
from rocelab.fabric.frrconfig import render
from rocelab.fabric.model.routes import LearnedRoute
from rocelab.fabric.model.switch import Switch
from rocelab.fabric.routesync import decode, switch_interface
from rocelab.labs import topology
from rocelab.labs.sim import bgp as simbgp
from rocelab.labs.sim.hostconfig import SimError

LAB = Path(__file__).resolve().parents[2] / "topologies" / "roce-v2-bgp"


def config(node: str) -> dict:
    return json.loads((LAB / "configs" / node / "config_db.json").read_text())


def first_neighbor(data: dict) -> tuple[str, dict]:
    return next(iter(data["BGP_NEIGHBOR"].items()))


# --- config_db.json ------------------------------------------------------------------------

def test_bgp_tables_are_read():
    data = config("leaf1")
    cfg = parse(data, "leaf1.json")
    assert cfg.bgp.asn == int(data["DEVICE_METADATA"]["localhost"]["bgp_asn"])
    loopback = next(k for k in data["LOOPBACK_INTERFACE"] if "|" in k).split("|")[1]
    assert str(cfg.bgp.router_id) == loopback.split("/")[0]
    address, fields = first_neighbor(data)
    nb = cfg.bgp.neighbors[IPv4Address(address)]
    assert (nb.asn, nb.name, nb.holdtime, nb.keepalive) == (
        int(fields["asn"]), fields["name"], int(fields["holdtime"]), int(fields["keepalive"]))
    assert "DEVICE_NEIGHBOR" in cfg.not_emulated and cfg.skipped == ()


def test_no_bgp_tables_no_speaker():
    data = config("leaf1")
    del data["BGP_NEIGHBOR"]
    assert parse(data, "x").bgp is None


def bad(edit) -> str:
    data = config("leaf1")
    edit(data)
    with pytest.raises(ConfigError) as error:
        parse(data, "leaf1.json")
    message = str(error.value)
    assert "\n" not in message and message.startswith("leaf1.json: ")
    return message


def test_neighbor_without_interface_is_refused():
    def edit(data):
        data["BGP_NEIGHBOR"]["192.0.2.9"] = {"asn": "65100"}
    assert bad(edit) == ("leaf1.json: BGP_NEIGHBOR|192.0.2.9: 192.0.2.9 is in no subnet of "
                         "INTERFACE or VLAN_INTERFACE: no interface leads to this neighbour "
                         "(sessions must be directly connected)")


@pytest.mark.parametrize("asn", ["0", "4294967296"])
def test_asn_out_of_range_is_refused(asn):
    def edit(data):
        first_neighbor(data)[1]["asn"] = asn
    address = first_neighbor(config("leaf1"))[0]
    assert bad(edit) == (f"leaf1.json: BGP_NEIGHBOR|{address}: asn: must be between 1 and "
                         f"4294967295 (got {asn})")


def test_switch_asn_out_of_range_is_refused():
    def edit(data):
        data["DEVICE_METADATA"]["localhost"]["bgp_asn"] = "-1"
    assert bad(edit).startswith("leaf1.json: DEVICE_METADATA|localhost: bgp_asn: must be between")


def test_missing_bgp_asn_is_refused():
    def edit(data):
        del data["DEVICE_METADATA"]["localhost"]["bgp_asn"]
    assert bad(edit).startswith("leaf1.json: DEVICE_METADATA|localhost: bgp_asn: required field "
                                "is missing (BGP_NEIGHBOR")


def test_local_addr_must_be_ours_on_that_link():
    def edit(data):
        first_neighbor(data)[1]["local_addr"] = "10.1.1.1"
    assert ": local_addr: 10.1.1.1 is not this switch's address on the subnet of" in bad(edit)


def test_refused_table_names_table_and_reason_unless_skipped():
    def edit(data):
        data["PORTCHANNEL"] = {"PortChannel1": {"admin_status": "up"}}
    assert bad(edit) == ("leaf1.json: PORTCHANNEL: not emulated (link aggregation (LAG) is not "
                         "emulated); the topology label rocelab.unemulated-tables: skip runs "
                         "the lab without it")
    data = config("leaf1")
    edit(data)
    assert parse(data, "x", unemulated="skip").skipped == ("PORTCHANNEL",)


def test_topology_label_skips_refused_tables(tmp_path):
    from tests.conftest import copy_lab

    def edit(doc):
        doc["topology"]["nodes"]["leaf1"].setdefault("labels", {})[
            "rocelab.unemulated-tables"] = "skip"
    path = copy_lab(tmp_path, lab="roce-v2-bgp", edit=edit)
    conf = path.parent / "configs" / "leaf1" / "config_db.json"
    data = json.loads(conf.read_text())
    data["ACL_TABLE"] = {"DATAACL": {"type": "L3"}}
    conf.write_text(json.dumps(data))
    topo = topology.load(path)
    assert topo.nodes["leaf1"].config.skipped == ("ACL_TABLE",)
    doc = yaml.safe_load(path.read_text())
    doc["topology"]["nodes"]["leaf1"]["labels"]["rocelab.unemulated-tables"] = "maybe"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(topology.TopologyError, match="rocelab.unemulated-tables: 'maybe' must"):
        topology.load(path)


def with_ipv6(data: dict) -> tuple[str, str]:
    """leaf1 with an IPv6 address beside IPv4 on its first routed port, an IPv6 loopback
    and an IPv6 neighbour on that /126 (ASN of the first neighbour); (peer, our address)."""
    port = next(k for k in data["INTERFACE"] if "|" not in k)
    data["INTERFACE"][f"{port}|fc00:0:0:1::1/126"] = {}
    data["LOOPBACK_INTERFACE"]["Loopback0|fc00:ff::1/128"] = {}
    data["BGP_NEIGHBOR"]["fc00:0:0:1::2"] = {"asn": first_neighbor(data)[1]["asn"],
                                              "local_addr": "fc00:0:0:1::1", "name": "v6"}
    return "fc00:0:0:1::2", "fc00:0:0:1::1"


def test_ipv6_neighbours_and_loopbacks_are_config_too():
    data = config("leaf1")
    peer, ours = with_ipv6(data)
    cfg = parse(data, "leaf1.json")
    nb = cfg.bgp.neighbors[ip_address(peer)]
    assert (nb.local_addr, nb.name) == (ip_address(ours), "v6")
    v4_loopback = next(a for a in cfg.loopbacks["Loopback0"] if a.version == 4)
    assert cfg.bgp.router_id == v4_loopback.ip  # a router id is 32 bits: never the IPv6 one


def test_ipv6_neighbour_is_checked_like_an_ipv4_one():
    def off_link(data):
        with_ipv6(data)
        data["BGP_NEIGHBOR"]["fc00:9::2"] = {"asn": "65100"}
    assert "BGP_NEIGHBOR|fc00:9::2: fc00:9::2 is in no subnet" in bad(off_link)

    def wrong_family(data):
        peer, _ = with_ipv6(data)
        data["BGP_NEIGHBOR"][peer]["local_addr"] = first_neighbor(data)[1]["local_addr"]
    assert "local_addr" in bad(wrong_family)

    def router_id(data):
        data["DEVICE_METADATA"]["localhost"]["bgp_router_id"] = "fc00::1"
    assert "bgp_router_id" in bad(router_id) and "32 bits" in bad(router_id)


# --- FRR's configuration -------------------------------------------------------------------

def test_render_follows_bgpcfgd():
    data = config("leaf1")
    address, fields = first_neighbor(data)
    fields["admin_status"] = "down"
    cfg = parse(data, "x")
    text = render(cfg, Path("/run/x/frr.log"))
    lines = [line.strip() for line in text.splitlines()]
    assert f"router bgp {cfg.bgp.asn}" in lines
    assert f"bgp router-id {cfg.bgp.router_id}" in lines
    assert f"neighbor {address} remote-as {fields['asn']}" in lines
    assert f"neighbor {address} timers {fields['keepalive']} {fields['holdtime']}" in lines
    assert f"neighbor {address} update-source {fields['local_addr']}" in lines
    assert f"neighbor {address} shutdown" in lines
    assert f"neighbor {address} activate" in lines
    for loopback in cfg.loopbacks["Loopback0"]:
        assert f"network {loopback.network}" in lines
    assert {"redistribute connected", "maximum-paths 64", "bgp bestpath as-path multipath-relax",
            "no zebra nexthop kernel enable", "log file /run/x/frr.log informational"} <= set(lines)
    # one address-family block, closed, after the neighbours it activates
    assert lines.index("address-family ipv4 unicast") > lines.index(
        f"neighbor {address} remote-as {fields['asn']}")
    assert lines.count("exit-address-family") == 1


def test_render_without_timers_leaves_frr_defaults():
    data = config("leaf1")
    for fields in data["BGP_NEIGHBOR"].values():
        del fields["holdtime"]
    assert " timers " not in render(parse(data, "x"), Path("/tmp/l"))


def test_render_peer_range():
    data = config("leaf1")
    data["BGP_PEER_RANGE"] = {"SERVERS": {"ip_range": "10.1.1.0/24", "peer_asn": "64600"}}
    lines = [line.strip() for line in render(parse(data, "x"), Path("/l")).splitlines()]
    assert {"neighbor SERVERS peer-group", "neighbor SERVERS remote-as 64600",
            "bgp listen range 10.1.1.0/24 peer-group SERVERS",
            "neighbor SERVERS activate"} <= set(lines)


# --- netlink -> the switch's table ---------------------------------------------------------

def route_msg(event: str, attrs: list, proto: int = 186, table: int = 254) -> rtmsg:
    msg = rtmsg()
    msg["family"], msg["dst_len"], msg["proto"], msg["table"], msg["type"] = (
        socket.AF_INET, 24, proto, table, 1)
    msg["attrs"] = [("RTA_TABLE", table), ("RTA_DST", "10.1.2.0"), *attrs]
    msg["event"] = event
    return msg


NAMES = {2: "eth1", 3: "eth2", 9: "lo"}.get
WIRES = {"eth1": "Ethernet0", "eth2": "Ethernet8"}  # the agent's port map: 400G-style names


def test_decode_multipath_route():
    msg = route_msg("RTM_NEWROUTE", [("RTA_PRIORITY", 20), ("RTA_MULTIPATH", [
        {"oif": 2, "hops": 0, "attrs": [("RTA_GATEWAY", "10.0.0.0")]},
        {"oif": 3, "hops": 0, "attrs": [("RTA_GATEWAY", "10.0.0.2")]}])])
    prefix, route = decode(msg, lambda i: switch_interface(NAMES(i), WIRES))
    assert prefix == IPv4Network("10.1.2.0/24")
    assert route == LearnedRoute(20, "bgp", ((int(IPv4Address("10.0.0.0")), "Ethernet0"),
                                             (int(IPv4Address("10.0.0.2")), "Ethernet8")))


def test_decode_single_path_withdrawal_and_skips():
    single = route_msg("RTM_NEWROUTE", [("RTA_PRIORITY", 200), ("RTA_GATEWAY", "10.0.0.2"),
                                        ("RTA_OIF", 3)])
    assert decode(single, lambda i: switch_interface(NAMES(i), WIRES))[1].nexthops == (
        (int(IPv4Address("10.0.0.2")), "Ethernet8"),)
    assert decode(route_msg("RTM_DELROUTE", []), NAMES) == (IPv4Network("10.1.2.0/24"), None)
    assert decode(route_msg("RTM_NEWROUTE", [], proto=2), NAMES) is None  # connected
    assert decode(route_msg("RTM_NEWROUTE", [], table=255), NAMES) is None  # local table
    assert switch_interface("lo", WIRES) is None and switch_interface("Vlan100", WIRES) == "Vlan100"
    assert switch_interface("eth3", WIRES) is None  # not one of the agent's wires


def test_learned_routes_combine_with_static_and_follow_ports():
    data = config("leaf1")
    other = IPv4Network("10.1.2.0/24")
    nexthops = [IPv4Address(a) for a in data["BGP_NEIGHBOR"]]
    data["STATIC_ROUTE"] = {"10.9.0.0/16": {"nexthop": str(nexthops[0])}}
    sw = Switch(parse(data, "x"))
    hops = tuple((int(a), name) for a, name in zip(nexthops, ("Ethernet0", "Ethernet4")))
    sw.update_routes({other: LearnedRoute(20, "bgp", hops),
                      IPv4Network("10.9.0.0/16"): LearnedRoute(20, "bgp", hops)})

    def route(prefix: str) -> dict:
        return next(r for r in sw.counters()["routes"] if r["prefix"] == prefix)
    assert [h["interface"] for h in route(str(other))["nexthops"]] == ["Ethernet0", "Ethernet4"]
    assert route("10.9.0.0/16")["source"] == "static"  # distance 1 beats eBGP's 20
    sw.set_port_up("Ethernet0", False)
    assert [h["interface"] for h in route(str(other))["nexthops"]] == ["Ethernet4"]
    sw.update_routes({other: None})
    assert all(r["prefix"] != str(other) for r in sw.counters()["routes"])


# --- the sim runtime's eBGP ----------------------------------------------------------------

def test_sim_ebgp_ecmp_and_loop_prevention():
    topo = topology.load(LAB)
    tables = simbgp.routes(topo)
    leaves = [n for n in tables if topo.nodes[n].config.vlans]
    spines = [n for n in tables if n not in leaves]
    for leaf in leaves:
        other = next(l for l in leaves if l != leaf)
        for vlan in topo.nodes[other].config.vlans.values():
            route = tables[leaf][vlan.addresses[0].network]
            assert len(route.nexthops) == len(spines)  # ECMP over every spine
            assert route.distance == 20 and route.source == "bgp"
    # spines share an AS: a spine never learns another spine's loopback through a leaf
    for spine in spines:
        for peer in spines:
            if peer != spine and topo.nodes[peer].config.bgp.asn == topo.nodes[spine].config.bgp.asn:
                for loopback in topo.nodes[peer].config.loopbacks["Loopback0"]:
                    assert loopback.network not in tables[spine]
    # nothing a switch has connected is learned
    for name, table in tables.items():
        config_ = topo.nodes[name].config
        own = {a.network for addrs in config_.interfaces.values() for a in addrs}
        assert not own & set(table)


def test_sim_refuses_ibgp(tmp_path):
    from tests.conftest import copy_lab
    path = copy_lab(tmp_path, lab="roce-v2-bgp")
    topo = topology.load(path)
    leaf = next(n for n in topo.switches if n.config.vlans)
    spine_address, fields = next(iter(json.loads(
        leaf.config_path.read_text())["BGP_NEIGHBOR"].items()))
    spine = next(n for n in topo.switches
                 if any(str(a.ip) == spine_address for addrs in n.config.interfaces.values()
                        for a in addrs))
    for node in (leaf, spine):
        data = json.loads(node.config_path.read_text())
        data["DEVICE_METADATA"]["localhost"]["bgp_asn"] = "65000"
        for nb in data["BGP_NEIGHBOR"].values():
            nb["asn"] = "65000" if nb["name"] in (leaf.name, spine.name) else nb["asn"]
        node.config_path.write_text(json.dumps(data))
    with pytest.raises(SimError, match="iBGP"):
        simbgp.routes(topology.load(path))


def test_generate_bgp_fabric_routes_every_rack(tmp_path):
    from rocelab.labs import generate as gen
    from rocelab.labs.generate_spec import GenerateError, Spec
    spec = Spec("gbgp", hosts_per_leaf=2, leaves=3, spines=2, routing="bgp")
    done = gen.write(spec, tmp_path / spec.name)
    topo = topology.load(done.path)
    tables = simbgp.routes(topo)
    for sw in topo.switches:
        bgp = sw.config.bgp
        fabric_ports = [p for p in sw.config.interfaces if sw.config.interfaces[p]]
        assert len(bgp.neighbors) == len(fabric_ports) and sw.config.static_routes == ()
        assert sw.config.loopbacks["Loopback0"]
    leaves = [sw for sw in topo.switches if sw.config.vlans]
    for leaf in leaves:
        for other in leaves:
            if other is not leaf:
                subnet = next(iter(other.config.vlans.values())).addresses[0].network
                assert len(tables[leaf.name][subnet].nexthops) == spec.spines
    assert "--routing bgp" in spec.command() and "--routing" not in Spec("x").command()
    with pytest.raises(GenerateError, match="routing"):
        gen.check(Spec("x", routing="ospf"))
