"""A BGP lab live: FRR in every switch namespace, routes synced into the agents.

Brought up once (a copy of topologies/roce-v2-bgp under a fresh name) for the module; every
expectation is read from the lab's own files."""
from __future__ import annotations

import subprocess
import time
from ipaddress import IPv4Address

import pytest

from labs import lab as labs
from labs.runtimes import frr
from labs.sim import bgp as simbgp
from tests.conftest import copy_lab
from tests.integration.test_lab import NOTHING, traces

pytestmark = pytest.mark.skipif(not frr.FRR_BIN.joinpath("bgpd").is_file(),
                                reason="FRR is not installed (scripts/install.sh)")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab = labs.up(str(copy_lab(tmp_path_factory.mktemp("bgp"), lab="roce-v2-bgp")))
    try:
        yield lab
    finally:
        lab.down()
    assert traces(lab.name) == NOTHING
    assert not frr.run_dir(lab.name, "x").parent.exists()


def learned(lab, node: str) -> dict[str, set[tuple[str, str]]]:
    """The agent's BGP routes: prefix -> {(next hop, interface)}."""
    return {r["prefix"]: {(h["ip"], h["interface"]) for h in r["nexthops"]}
            for r in lab.agent(node).counters()["routes"] if r["source"] == "bgp"}


def await_value(read, want, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while (got := read()) != want and time.monotonic() < deadline:
        time.sleep(0.01)
    return got


def test_up_waits_for_sessions_and_reachability(lab):
    assert 0 < lab.state.convergence["sessions"] <= lab.state.convergence["reachable"]
    status = lab.bgp_status()
    assert set(status) == {n.name for n in frr.bgp_switches(lab.topology)}
    for node, entry in status.items():
        configured = {str(a) for a in lab.topology.nodes[node].config.bgp.neighbors}
        assert set(entry["sessions"]) == configured
        assert all(s["state"] == "Established" for s in entry["sessions"].values())
        assert entry["routes"].get("bgp", 0) > 0
    assert all(p.ok for p in lab.ping_all())


def test_routes_equal_what_the_sim_runtime_computes(lab):
    """Point 6: the virtual-time runtime installs the routes FRR installed here."""
    for node, table in simbgp.routes(lab.topology).items():
        want = {str(prefix): {(str(IPv4Address(ip)), iface) for ip, iface in route.nexthops}
                for prefix, route in table.items()}
        assert learned(lab, node) == want, node


def test_link_down_withdraws_routes_and_traffic_moves(lab):
    leaf = next(n for n in frr.bgp_switches(lab.topology) if n.config.vlans)
    before = learned(lab, leaf.name)
    prefix, hops = next((p, h) for p, h in sorted(before.items()) if len(h) > 1)
    gone_ip, gone_port = sorted(hops)[0]
    iface = f"eth{int(gone_port.removeprefix('Ethernet')) // 4 + 1}"
    ns = lab.state.namespaces[leaf.name]
    hold = max(nb.holdtime or 180 for nb in leaf.config.bgp.neighbors.values())
    subprocess.run(["ip", "-n", ns, "link", "set", iface, "down"], check=True)
    try:
        started = time.monotonic()
        left = await_value(lambda: learned(lab, leaf.name).get(prefix), hops - {(gone_ip, gone_port)},
                           hold)
        assert left == hops - {(gone_ip, gone_port)}
        assert time.monotonic() - started < hold
        failed = [f"{p.src}->{p.dst}" for p in lab.ping_all() if not p.ok]
        assert failed == []
    finally:
        subprocess.run(["ip", "-n", ns, "link", "set", iface, "up"], check=True)
    assert await_value(lambda: learned(lab, leaf.name).get(prefix), hops, 30) == hops
