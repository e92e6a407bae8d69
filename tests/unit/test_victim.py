"""The victim scenario (checks/victim.py): who the victim is, and whether only pauses can
hurt it, computed from a lab's files."""
from __future__ import annotations

from rocelab.checks import congestion as cg
from rocelab.checks import victim as vm
from rocelab.labs.runtimes.sim import simulated
def scenario(name: str) -> tuple[cg.Incast, vm.Victim | None]:
    incast = cg.incast_of(simulated(name))
    return incast, vm.victim_of(simulated(name).topology, incast)


def test_pfc_victim_lab_is_pause_only():
    incast, victim = scenario("pfc-victim")
    assert victim is not None
    assert victim.dst != incast.receiver and victim.src not in victim.senders
    topo = simulated("pfc-victim").topology
    assert vm.attachment(topo, victim.dst)[0] == incast.switch
    assert vm.attachment(topo, victim.src)[0] != incast.switch
    assert victim.shared and victim.pause_only, victim.why


def test_leafspine_victim_crosses_ecmp_uplinks_so_is_not_pause_only():
    """roce-v2-leafspine's victim reaches the congested leaf over spines the incast loads."""
    _, victim = scenario("roce-v2-leafspine")
    assert victim is not None and not victim.shared and not victim.pause_only
    assert "not wired" in victim.why


def test_shared_pause_counts_only_the_shared_links():
    incast, victim = scenario("pfc-victim")
    sim = simulated("pfc-victim")
    before = {s.name: sim.agent(s.name).counters() for s in sim.topology.switches}
    after = {s: {**c, "ports": {p: {**e, "pfc_tx": list(e["pfc_tx"]),
                                    "paused_s": list(e["paused_s"])}
                                for p, e in c["ports"].items()}} for s, c in before.items()}
    shared = sim.topology.port(incast.switch, victim.shared[0])
    after[incast.switch]["ports"][shared]["pfc_tx"][incast.priority] += 5
    after[incast.switch]["ports"][incast.port]["pfc_tx"][incast.priority] += 7  # not shared
    peer, peer_iface = next((p, i) for f, p, i in incast.upstream if f == victim.shared[0])
    peer_port = sim.topology.port(peer, peer_iface)
    after[peer]["ports"][peer_port]["paused_s"][incast.priority] += 0.25
    assert vm.shared_pause(sim.topology, before, after, incast, victim) == {
        "pfc_sent": 5, "paused_s": 0.25}
