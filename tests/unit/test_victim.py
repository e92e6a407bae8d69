"""The victim scenario (checks/victim.py): who the victim is, and whether only pauses can
hurt it, computed from a lab's files."""
from __future__ import annotations

from dataclasses import replace

from rocelab.checks import incast as ic
from rocelab.checks import victim as vm
from rocelab.labs import generate
from rocelab.labs.generate_spec import Spec
from rocelab.labs.runtimes.sim import simulated

def scenario(name: str) -> tuple[ic.Incast, vm.Victim | None]:
    incast = ic.incast_of(simulated(name))
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


def test_labs_with_a_victim_have_no_reason_against_one():
    for name in ("pfc-victim", "roce-v2-leafspine"):
        incast, victim = scenario(name)
        assert victim is not None and vm.no_victim(simulated(name).topology, incast) is None


def test_why_no_victim_is_true_of_a_spine_and_of_a_leaf(tmp_path):
    """One host and one uplink per leaf: the incast congests the spine, which has no host
    at all; the reason says so (not "no host on spine1 besides h1", which h1 is not on)."""
    folder = generate.write(Spec("u1host", hosts_per_leaf=1, leaves=3), tmp_path / "u1").path
    lab = simulated(str(next(folder.glob("*.clab.yml"))))
    incast = ic.incast_of(lab)
    topo = lab.topology
    assert incast.switch == "spine1" and vm.victim_of(topo, incast) is None
    assert vm.no_victim(topo, incast) == (
        "spine1, where the incast congests, has no host wired to it (the receiver h1 is on "
        "leaf1) to receive a victim flow, one that meets the incast only on the links into "
        "spine1")
    at_leaf = replace(incast, switch="leaf1")  # the receiver's leaf, as on a faster uplink
    assert vm.no_victim(topo, at_leaf).startswith(
        "leaf1, where the incast congests, has no host wired to it besides the receiver h1 ")
    unreached = replace(incast, switch="leaf2", senders=("h3",))  # h2 on leaf2 not a sender
    assert vm.no_victim(topo, unreached).startswith(
        "leaf2, where the incast congests, has no host wired to it that reaches the receiver "
        "h1 (h2 there do not) to receive")
    one_remote = replace(incast, senders=("h2",))
    first, second = vm.no_victim(topo, one_remote).split("; ")
    assert first.startswith("spine1, where") and vm.victim_of(topo, one_remote) is None
    assert second.startswith("1 sender(s) elsewhere than spine1 (h2), and a victim needs two")
