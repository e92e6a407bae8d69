"""BGP labs live: FRR in every switch namespace, routes synced into the agents.

Each lab is brought up once (a copy under a fresh name) for the tests of its parameter:
roce-v2-bgp (IPv4) and roce-v6-bgp (dual-stack fabric, IPv6 hosts: IPv6 sessions, IPv6
routes from FRR in the agents, RoCE hosts reaching each other over them). Every expectation
is read from the lab's own files."""
from __future__ import annotations

import subprocess
import time
from ipaddress import ip_address

import pytest

from rocelab.labs.live import up
from rocelab.labs.runtimes import netns_bgp
from rocelab.labs.sim import bgp as simbgp
from tests.conftest import copy_lab
from tests.integration.test_lab import NOTHING, traces

pytestmark = pytest.mark.skipif(not netns_bgp.FRR_BIN.joinpath("bgpd").is_file(),
                                reason="FRR is not installed (scripts/install.sh)")


@pytest.fixture(scope="module", params=["roce-v2-bgp", "roce-v6-bgp"])
def lab(request, tmp_path_factory):
    lab = up(str(copy_lab(tmp_path_factory.mktemp("bgp"), lab=request.param)))
    try:
        yield lab
    finally:
        lab.down()
    assert traces(lab.name) == NOTHING
    assert not netns_bgp.run_dir(lab.name, "x").parent.exists()


def learned(lab, node: str) -> dict[str, set[tuple[str, str]]]:
    """The agent's BGP routes: prefix -> {(next hop, interface)}."""
    return {r["prefix"]: {(h["ip"], h["interface"]) for h in r["nexthops"]}
            for r in lab.agent(node).counters()["routes"] if r["source"] == "bgp"}


def families(lab) -> set[int]:
    """The IP versions the lab's BGP sessions run in."""
    return {a.version for n in netns_bgp.bgp_switches(lab.topology) for a in n.config.bgp.neighbors}


def await_value(read, want, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while (got := read()) != want and time.monotonic() < deadline:
        time.sleep(0.01)
    return got


def test_up_waits_for_sessions_and_reachability(lab):
    assert 0 < lab.state.convergence["sessions"] <= lab.state.convergence["reachable"]
    status = lab.bgp_status()
    assert set(status) == {n.name for n in netns_bgp.bgp_switches(lab.topology)}
    for node, entry in status.items():
        configured = {str(a) for a in lab.topology.nodes[node].config.bgp.neighbors}
        assert set(entry["sessions"]) == configured  # IPv6 sessions listed as IPv4 ones
        assert all(s["state"] == "Established" for s in entry["sessions"].values())
        assert all(s["prefixes_received"] > 0 for s in entry["sessions"].values())
        assert entry["routes"].get("bgp", 0) > 0
    pings = lab.ping_all()
    assert pings and all(p.ok for p in pings)
    hosts = {ip_address(p.dst_ip).version for p in pings}
    assert hosts <= families(lab)  # the hosts' family is routed by BGP here, not statically
    if hosts == {6}:  # across racks too: some pair crosses a spine (hop count 2 routers)
        assert max(p.hops for p in pings) >= 2


def test_routes_equal_what_the_sim_runtime_computes(lab):
    """Point 6: the virtual-time runtime installs the routes FRR installed here, in every
    family the sessions run."""
    seen = set()
    for node, table in simbgp.routes(lab.topology).items():
        want = {str(prefix): {(str(ip_address(ip)), iface) for ip, iface in route.nexthops}
                for prefix, route in table.items()}
        assert learned(lab, node) == want, node
        seen |= {prefix.version for prefix in table}
    assert seen == families(lab)


def test_link_down_withdraws_routes_and_traffic_moves(lab):
    """A leaf's fabric link down: in each family, an ECMP route loses the path through it
    (quicker than the hold time) and every host pair still reaches the other; link up: the
    paths come back."""
    leaf = next(n for n in netns_bgp.bgp_switches(lab.topology) if n.config.vlans)
    before = learned(lab, leaf.name)
    ecmp = {p: h for p, h in sorted(before.items()) if len(h) > 1}
    port = sorted(next(iter(ecmp.values())))[0][1]
    watched = {}  # one ECMP prefix per family, each with a path through ``port``
    for prefix, hops in ecmp.items():
        version = ip_address(prefix.split("/")[0]).version
        if version not in watched and any(iface == port for _, iface in hops):
            watched[version] = (prefix, hops, {h for h in hops if h[1] != port})
    assert set(watched) == families(lab)
    iface = f"eth{int(port.removeprefix('Ethernet')) // 4 + 1}"
    ns = lab.state.namespaces[leaf.name]
    hold = max(nb.holdtime or 180 for nb in leaf.config.bgp.neighbors.values())

    def current() -> dict[int, set]:
        now = learned(lab, leaf.name)
        return {v: now.get(prefix) for v, (prefix, _, _) in watched.items()}
    subprocess.run(["ip", "-n", ns, "link", "set", iface, "down"], check=True)
    try:
        started = time.monotonic()
        left = {v: remaining for v, (_, _, remaining) in watched.items()}
        assert await_value(current, left, hold) == left
        assert time.monotonic() - started < hold
        failed = [f"{p.src}->{p.dst}" for p in lab.ping_all() if not p.ok]
        assert failed == []
    finally:
        subprocess.run(["ip", "-n", ns, "link", "set", iface, "up"], check=True)
    back = {v: hops for v, (_, hops, _) in watched.items()}
    assert await_value(current, back, 30) == back


@pytest.mark.parametrize("lab", ["roce-v6-bgp"], indirect=True)  # the lab with IPv6 sessions
def test_an_ipv6_next_hop_deleted_alone_leaves_the_others(lab):
    """The kernel reports one IPv6 sibling deleted as the deletion of a one-hop route: the
    route sync must keep the next hops that stay (a kernel route of another protocol, so
    zebra leaves it alone)."""
    leaf = next(n for n in netns_bgp.bgp_switches(lab.topology) if n.config.vlans)
    peers = sorted((a for a in leaf.config.bgp.neighbors if a.version == 6), key=int)
    assert len(peers) >= 2, f"{lab.topology.name}: {leaf.name} has fewer than two IPv6 sessions"
    prefix = "3fff:0:7::/64"  # RFC 9637 documentation space: in no lab
    assert all(prefix not in learned(lab, n.name) for n in netns_bgp.bgp_switches(lab.topology))
    ns = lab.state.namespaces[leaf.name]

    def hops() -> set[str] | None:
        route = [r for r in lab.agent(leaf.name).counters()["routes"] if r["prefix"] == prefix]
        return {h["ip"] for h in route[0]["nexthops"]} if route else None

    def ip(*argv: str) -> None:
        subprocess.run(["ip", "-n", ns, "-6", "route", *argv], check=True)
    ip("add", prefix, "via", str(peers[0]), "proto", "static")
    try:
        ip("append", prefix, "via", str(peers[1]), "proto", "static")
        both = {str(peers[0]), str(peers[1])}
        assert await_value(hops, both, 5) == both
        ip("del", prefix, "via", str(peers[1]), "proto", "static")
        assert await_value(hops, {str(peers[0])}, 5) == {str(peers[0])}
    finally:
        subprocess.run(["ip", "-n", ns, "-6", "route", "flush", prefix], check=False)
    assert await_value(hops, None, 5) is None
