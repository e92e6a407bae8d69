"""The deadlock scenario and evidence (checks/deadlock.py), from the labs' own files and from
counters a simulated lab returns."""
from __future__ import annotations

import copy
import json

import pytest

from rocelab.checks import deadlock as dl
from rocelab.labs import actions
from rocelab.labs.runtimes.sim import simulated
from rocelab.labs import topology


def test_scenario_comes_from_the_label():
    topo = topology.load("pfc-deadlock")
    sc = dl.scenario_of(topo)
    labelled = next(n for n in topo.switches if dl.FAIL_LABEL in n.labels)
    assert (sc.switch, sc.iface) == (labelled.name, labelled.labels[dl.FAIL_LABEL])
    peer = topo.peer(sc.switch, sc.iface)
    assert (sc.peer, sc.peer_iface) == (peer.node, peer.iface)
    near_peer = {e.node for k in topo.links for e in (k.a, k.b)
                 if sc.peer in (k.a.node, k.b.node)}
    assert set(sc.receivers) == {h.name for h in topo.hosts} & near_peer
    assert set(sc.senders) == {h.name for h in topo.hosts} - set(sc.receivers)
    assert sc.dscp == topo.nodes[sc.receivers[0]].nic.roce.dscp


def test_a_lab_without_the_label_has_no_scenario():
    assert dl.scenario_of(topology.load("roce-v2-leafspine")) is None


def test_up_down_routing_removes_only_summaries():
    data = {"STATIC_ROUTE": {"10.1.1.0/24": {"nexthop": "10.0.0.1"},
                             "10.1.0.0/16": {"nexthop": "10.0.0.1,10.0.0.5"},
                             "10.9.0.0/16": {"nexthop": "10.0.0.5"}}}
    dl.up_down_routing(data)
    assert set(data["STATIC_ROUTE"]) == {"10.1.1.0/24", "10.9.0.0/16"}


@pytest.fixture(scope="module")
def counters():
    lab = simulated("pfc-deadlock")
    return lab.topology, {s.name: lab.agent(s.name).counters() for s in lab.topology.switches}


def _stuck(c: dict, switch: str, port: str, queue: int, prio: int) -> None:
    entry = c[switch]["ports"][port]
    entry["queues"][str(queue)]["depth_bytes"] = 9000
    entry["pfc_rx"][prio] += 5


def test_two_switches_pausing_each_other_make_a_cycle(counters):
    topo, before = counters
    sc = dl.scenario_of(topo)
    link = next(k for k in topo.links
                if topo.nodes[k.a.node].is_switch and topo.nodes[k.b.node].is_switch)
    a = (link.a.node, topo.port(link.a.node, link.a.iface))
    b = (link.b.node, topo.port(link.b.node, link.b.iface))
    then = copy.deepcopy(before)
    for sw, port in (a, b):
        then[sw]["ports"][port]["queues"][str(sc.queue)]["depth_bytes"] = 9000
    now = copy.deepcopy(then)
    for sw, port in (a, b):
        _stuck(now, sw, port, sc.queue, sc.priority)
    stuck = dl.stuck_queues(topo, then, now, sc.queue, sc.priority)
    assert {(s.switch, s.port) for s in stuck} == {a, b}
    assert {s.switch for s in dl.cycle_of(stuck)} == {a[0], b[0]}
    # one side moving (a frame sent) is congestion, not a deadlock
    now[a[0]]["ports"][a[1]]["queues"][str(sc.queue)]["tx_packets"] += 1
    assert not dl.cycle_of(dl.stuck_queues(topo, then, now, sc.queue, sc.priority))


def test_a_chain_of_paused_queues_is_no_cycle():
    chain = [dl.Stuck("a", "Ethernet0", "b", 1), dl.Stuck("b", "Ethernet0", "c", 1)]
    assert dl.cycle_of(chain) == []


def test_drops_are_deltas_summed_over_switches():
    before = {"x": {"drops": {"no_route": 1}}, "y": {"drops": {}}}
    after = {"x": {"drops": {"no_route": 4}}, "y": {"drops": {"no_route": 2, "wred": 0}}}
    assert dl.drops(before, after) == {"no_route": 5}


def test_watchdog_wall_runs_the_timer_in_fabric_time():
    """0.2 s of watchdog time is 0.2 s x S of a switch's clock, whatever the runtime."""
    sim = simulated("pfc-deadlock", time_scale=2.0)
    switch = sim.topology.switches[0].name
    assert sim.sim_s(dl.watchdog_wall(sim, 0.2, switch)) == pytest.approx(0.4)

    class Live:  # the live lab's clock is wall time
        def wall_s(self, s: float) -> float:
            return s

        def node_time_scale(self, node: str) -> float:
            return 3000.0
    assert dl.watchdog_wall(Live(), 0.2, switch) == pytest.approx(600.0)


def test_variant_files(tmp_path):
    source = topology.resolve("pfc-deadlock")
    host = sorted(h.name for h in topology.load(source).hosts)[0]
    clab = actions.write_variant(source, "dl-remark", tmp_path / "v", actions.without_watchdog,
                                 actions.dscp_remarked(0), (host,))
    topo = topology.load(clab)
    assert topo.name == "dl-remark" and topo.nodes[host].nic.roce.dscp == 0
    others = [h for h in topo.hosts if h.name != host]
    assert all(h.nic.roce.dscp == topology.load(source).nodes[h.name].nic.roce.dscp
               for h in others)
    for node in topo.switches:
        data = json.loads(node.config_path.read_text())
        assert "PFC_WD" not in data and not node.config.qos.pfc_wd


def test_find_link_names_the_file_when_there_is_none():
    topo = topology.load("pfc-deadlock")
    hosts = sorted(h.name for h in topo.hosts)
    with pytest.raises(actions.LabError, match=f"no link between {hosts[0]} and {hosts[1]}"):
        actions.find_link(topo, hosts[0], hosts[1])
