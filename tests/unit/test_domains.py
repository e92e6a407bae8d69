"""labs.domains: L2 domains computed from topology + switch configs, never from host names."""
from __future__ import annotations

from pathlib import Path

import pytest

from rocelab.fabric.config_load import parse
from rocelab.fabric.portmap import PortMap
from rocelab.labs import topology
from rocelab.labs.domains import domain_of, domains_of, l2_domains
from rocelab.labs.topology import Endpoint, Link, Node, Topology


# --------------------------------------------------------------------------- the project's labs


def test_default_lab_has_one_domain_per_rack_and_spines_in_none():
    topo = topology.load("roce-v2-leafspine")
    domains = l2_domains(topo)
    assert [(d.name, sorted(d.hosts)) for d in domains] == [
        ("Vlan100", ["h1", "h2"]), ("Vlan200", ["h3", "h4"])]
    rack1, rack2 = domains
    assert rack1.segments == {("leaf1", 100)}
    assert rack1.ports == {("leaf1", "eth3"), ("leaf1", "eth4"), ("h1", "eth1"), ("h2", "eth1")}
    assert rack2.ports == {("leaf2", "eth3"), ("leaf2", "eth4"), ("h3", "eth1"), ("h4", "eth1")}
    in_any = set().union(*(d.ports for d in domains))
    assert not {p for p in in_any if p[0].startswith("spine")}  # routed ports split domains
    assert ("leaf1", "eth1") not in in_any  # leaf uplinks are routed too
    assert {s: [str(a) for a in addrs] for s, addrs in rack1.gateways.items()} == {
        "leaf1": ["10.1.1.1/24"]}
    assert domain_of(topo, "h3") == rack2
    assert str(rack1) == "Vlan100 domain {h1,h2}"
    assert rack1.attachment("h1").port == "eth3" and not rack1.attachment("h1").tagged


def test_roce_v1_l2_lab_stretches_vlan100_over_three_switches():
    topo = topology.load("roce-v1-l2")
    vlan100, vlan200 = l2_domains(topo)
    assert vlan100.name == "Vlan100" and vlan100.hosts == {"h1", "h2", "h3"}
    assert vlan100.segments == {("leaf1", 100), ("spine1", 100), ("leaf2", 100)}
    assert {("leaf1", "eth1"), ("spine1", "eth1"), ("spine1", "eth2"),
            ("leaf2", "eth1")} <= vlan100.ports  # the trunks
    assert ("leaf2", "eth4") not in vlan100.ports and ("h4", "eth1") not in vlan100.ports
    assert set(vlan100.gateways) == {"leaf1", "leaf2"}
    assert vlan200.hosts == {"h4"} and vlan200.ports == {("leaf2", "eth4"), ("h4", "eth1")}
    assert domain_of(topo, "h4") == vlan200


def test_every_project_lab_puts_every_host_in_a_domain():
    for folder in sorted(Path(topology.__file__).resolve().parents[1].joinpath(
            "topologies").iterdir()):
        topo = topology.load(folder)
        in_a_domain = {h for d in l2_domains(topo) for h in d.hosts}  # once: labs of 1024 hosts
        assert {host.name for host in topo.hosts} <= in_a_domain, folder.name


# --------------------------------------------------------------------------- synthetic labs


def switch(name: str, mac: str, ports: int, *, vlans: dict[int, dict[int, str]] | None = None,
           routed: dict[int, str] | None = None, svis: dict[int, str] | None = None) -> Node:
    """A switch with ports eth1..ethN; ``vlans`` = {vid: {port number: mode}}."""
    config: dict = {
        "DEVICE_METADATA": {"localhost": {"hostname": name, "mac": mac}},
        "PORT": {f"Ethernet{4 * i}": {"speed": "100000"} for i in range(ports)},
    }
    if vlans:
        config["VLAN"] = {f"Vlan{v}": {"vlanid": str(v)} for v in vlans}
        config["VLAN_MEMBER"] = {f"Vlan{v}|Ethernet{4 * (n - 1)}": {"tagging_mode": mode}
                                 for v, members in vlans.items() for n, mode in members.items()}
    if routed:
        config["INTERFACE"] = {f"Ethernet{4 * (n - 1)}|{addr}": {} for n, addr in routed.items()}
    if svis:
        config["VLAN_INTERFACE"] = {f"Vlan{v}|{addr}": {} for v, addr in svis.items()}
    wires = PortMap({f"eth{i + 1}": f"Ethernet{4 * i}" for i in range(ports)})
    return Node(name, "sonic-vs", config=parse(config, f"{name}/config_db.json"), ports=wires)


def host(name: str) -> Node:
    return Node(name, "linux")


def lab(nodes: list[Node], links: list[str]) -> Topology:
    """``links``: "a:eth1-b:eth2" strings."""
    wires = []
    for text in links:
        a, b = text.split("-")
        wires.append(Link(Endpoint(*a.split(":")), Endpoint(*b.split(":"))))
    return Topology("synthetic", Path("/nowhere.clab.yml"), {n.name: n for n in nodes},
                    tuple(wires))


def names(topo: Topology) -> list[tuple[str, list[str]]]:
    return [(d.name, sorted(d.hosts)) for d in l2_domains(topo)]


def two_switches(a_trunk: dict[int, str], b_trunk: dict[int, str],
                 a_vid: int = 10, b_vid: int = 10) -> Topology:
    """s1:eth1 - s2:eth1 trunk; h1 untagged on s1:eth2 (VLAN a_vid), h2 on s2:eth2 (b_vid).
    ``*_trunk``: {vid: mode} of the trunk port."""
    s1 = switch("s1", "02:00:00:00:00:01", 2, vlans=_merge(a_trunk, a_vid))
    s2 = switch("s2", "02:00:00:00:00:02", 2, vlans=_merge(b_trunk, b_vid))
    return lab([s1, s2, host("h1"), host("h2")],
               ["s1:eth1-s2:eth1", "h1:eth1-s1:eth2", "h2:eth1-s2:eth2"])


def _merge(trunk: dict[int, str], access_vid: int) -> dict[int, dict[int, str]]:
    vlans: dict[int, dict[int, str]] = {vid: {1: mode} for vid, mode in trunk.items()}
    vlans.setdefault(access_vid, {})[2] = "untagged"
    return vlans


def test_tagged_trunk_joins_the_same_vid_on_both_switches():
    topo = two_switches({10: "tagged", 20: "tagged"}, {10: "tagged", 20: "tagged"})
    (d10, d20) = l2_domains(topo)
    assert (d10.name, d10.hosts) == ("Vlan10", {"h1", "h2"})
    assert d10.segments == {("s1", 10), ("s2", 10)}
    assert {("s1", "eth1"), ("s2", "eth1")} <= d10.ports
    # VLAN 20 has no host but is a domain of its own; the trunk ports are in both
    assert d20.segments == {("s1", 20), ("s2", 20)} and not d20.hosts
    assert ("s1", "eth1") in d20.ports


def test_vid_mismatch_across_a_tagged_link_does_not_join():
    topo = two_switches({10: "tagged"}, {20: "tagged"}, a_vid=10, b_vid=20)
    assert names(topo) == [("Vlan10", ["h1"]), ("Vlan20", ["h2"])]


def test_same_vid_on_both_ends_but_different_access_vlans_stays_apart():
    topo = two_switches({30: "tagged"}, {30: "tagged"}, a_vid=10, b_vid=20)
    assert names(topo) == [("Vlan10", ["h1"]), ("Vlan20", ["h2"]), ("Vlan30", [])]


def test_untagged_native_vlan_mismatch_leaks_and_the_domain_says_so():
    """Untagged frames carry no VID: s1's VLAN 10 lands in s2's VLAN 20, as on real gear."""
    topo = two_switches({10: "untagged"}, {20: "untagged"}, a_vid=10, b_vid=20)
    (domain,) = l2_domains(topo)
    assert domain.vids == {10, 20} and domain.name == "Vlan10+Vlan20"
    assert domain.hosts == {"h1", "h2"} and domain.vid is None


def test_priority_tagged_trunk_end_joins_an_untagged_one():
    topo = two_switches({10: "priority_tagged"}, {10: "untagged"})
    assert names(topo) == [("Vlan10", ["h1", "h2"])]


def test_routed_port_splits_the_domain():
    s1 = switch("s1", "02:00:00:00:00:01", 2, vlans={10: {2: "untagged"}},
                routed={1: "10.0.0.0/31"}, svis={10: "10.1.1.1/24"})
    s2 = switch("s2", "02:00:00:00:00:02", 2, vlans={10: {1: "tagged", 2: "untagged"}})
    topo = lab([s1, s2, host("h1"), host("h2")],
               ["s1:eth1-s2:eth1", "h1:eth1-s1:eth2", "h2:eth1-s2:eth2"])
    first, second = l2_domains(topo)
    assert (first.hosts, second.hosts) == ({"h1"}, {"h2"})
    assert ("s1", "eth1") not in first.ports | second.ports
    assert ("s2", "eth1") in second.ports  # still a member: it just leads nowhere
    assert first.gateways.keys() == {"s1"} and not second.gateways


def test_host_on_a_tagged_only_port_is_a_tagged_attachment():
    s1 = switch("s1", "02:00:00:00:00:01", 2,
                vlans={10: {1: "tagged", 2: "untagged"}, 20: {1: "tagged"}})
    topo = lab([s1, host("h1"), host("h2")], ["h1:eth1-s1:eth1", "h2:eth1-s1:eth2"])
    d10, d20 = l2_domains(topo)
    assert d10.hosts == {"h1", "h2"} and d10.untagged_hosts == {"h2"}
    assert d10.attachment("h1").tagged and d10.attachment("h1").vid == 10
    assert d20.hosts == {"h1"} and d20.untagged_hosts == set()
    assert [d.name for d in domains_of(topo, "h1")] == ["Vlan10", "Vlan20"]
    assert domain_of(topo, "h2") == d10


def test_hosts_on_a_routed_port_or_wired_together_get_a_domain_of_their_own_wire():
    s1 = switch("s1", "02:00:00:00:00:01", 1, routed={1: "10.0.0.0/31"})
    topo = lab([s1, host("h1"), host("h2"), host("h3")],
               ["h1:eth1-s1:eth1", "h2:eth1-h3:eth1"])
    routed, wire = sorted(l2_domains(topo), key=lambda d: sorted(d.hosts))
    assert routed.hosts == {"h1"} and routed.ports == {("h1", "eth1"), ("s1", "eth1")}
    assert not routed.vids and routed.name.startswith("wire ")
    assert wire.hosts == {"h2", "h3"} and wire.ports == {("h2", "eth1"), ("h3", "eth1")}
    assert domain_of(topo, "h3") == wire


def test_domain_of_refuses_a_switch_or_an_unknown_node():
    topo = topology.load("roce-v2-leafspine")
    with pytest.raises(ValueError, match="not a host"):
        domain_of(topo, "leaf1")
    with pytest.raises(ValueError, match="not a host"):
        domain_of(topo, "h9")
