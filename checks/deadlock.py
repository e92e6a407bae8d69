"""PFC deadlock: a link failure, routing that bounces traffic back up, and lossless queues that
wait on each other in a cycle. The scenario, and the evidence that tells a deadlock from mere
congestion.

- **Scenario** (``scenario_of``): the lab names the link to fail with the label
  ``rocelab.fail-link: <iface>`` on a switch. The receivers are the hosts wired to the switch
  at the far end of that link, the senders every other host: their traffic is the traffic the
  failure reroutes. Nothing else about the lab is assumed.
- **Deadlock** (``stuck_queues``, ``cycle_of``): between two counter readings a queue is
  stuck when it held bytes at both, transmitted nothing and kept receiving PFC for its
  priority. The stuck queues of switch ports toward other switches are edges ``switch ->
  peer`` of a wait-for graph; a deadlock is a cycle in it, with no frame dropped anywhere in
  the lab meanwhile (congestion drains; a deadlock waits forever, losing nothing).
- **Fix** (``up_down_routing``): the same lab without summary routes (a static route whose
  prefix holds another static route of the same switch): a spine then never sends traffic
  back up toward another leaf, so no cycle can form; what the failed link carried is dropped
  as ``no_route`` until routing converges.

Times: the scenario's spans are given in fabric time and converted for the runtime. A live
lab runs the fabric S times slower than wall time, the simulator maps a caller's wall
seconds through the live S (``SimLab.sim_s``); both mean the same fabric span by
``fabric_s x S_live`` wall seconds. The PFC watchdog's detection and restoration times run
in fabric time too (``fabric.model.watchdog``, the ``fabric`` profile): its 200 ms are
200 ms x S of a switch's clock, ``watchdog_wall`` converts them. Live, at S = 3000, that is
ten minutes of wall time per detection, too long for a check: ``LIVE_WAIT_LIMIT_S``.
"""
from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from ..fabric.qos import queue_of_tc, tc_of_dscp
from ..nic.settings import NicSettings
from ..labs.topology import DEFAULT_TIME_SCALE, Topology

FAIL_LABEL = "rocelab.fail-link"


@dataclass(frozen=True)
class Scenario:
    """Which link fails, who sends across it, and the lossless class that can deadlock."""

    switch: str  # the switch whose label names the link
    iface: str
    peer: str  # the node at the other end of the link
    peer_iface: str
    senders: tuple[str, ...]
    receivers: tuple[str, ...]
    dscp: int
    priority: int
    queue: int  # the egress queue the RoCE class uses on the failing switch


@dataclass(frozen=True)
class Stuck:
    """A queue that held bytes, sent nothing and stayed paused between two readings."""

    switch: str
    port: str
    peer: str  # the node that paused it
    depth_bytes: int


def scenario_of(topo: Topology) -> Scenario | None:
    """The lab's deadlock scenario from its label; None when no switch carries one."""
    node = next((n for n in topo.switches if FAIL_LABEL in n.labels), None)
    if node is None:
        return None
    iface = node.labels[FAIL_LABEL]
    peer = topo.peer(node.name, iface)
    if peer is None:
        raise ValueError(f"{topo.path}: {node.name} label {FAIL_LABEL}: {iface} is not wired")
    far = {e.node for k in topo.links for e in (k.a, k.b)
           if peer.node in (k.a.node, k.b.node)} - {peer.node}
    receivers = sorted(h.name for h in topo.hosts if h.name in far)
    senders = sorted(h.name for h in topo.hosts if h.name not in far)
    if not receivers or not senders:
        raise ValueError(f"{topo.path}: failing {node.name}:{iface} leaves no host on "
                         f"{'its far side' if not receivers else 'its near side'}")
    nic = topo.nodes[receivers[0]].nic or NicSettings()
    port = topo.port(node.name, iface)
    tc, _ = tc_of_dscp(node.config, port, nic.roce.dscp)
    return Scenario(node.name, iface, peer.node, peer.iface, tuple(senders), tuple(receivers),
                    nic.roce.dscp, nic.roce.priority, queue_of_tc(node.config, port, tc)[0])


def live_scale(topo: Topology) -> float:
    """The S a live run of the lab uses (its switches' ``rocelab.time-scale``)."""
    return max((n.time_scale for n in topo.switches), default=DEFAULT_TIME_SCALE)


def fabric_wall(topo: Topology, fabric_s: float) -> float:
    """The wall seconds a caller gives either runtime for ``fabric_s`` of fabric time."""
    return fabric_s * live_scale(topo)


LIVE_WAIT_LIMIT_S = 120.0  # wall seconds a live check may wait for the watchdog


def watchdog_wall(lab, watchdog_s: float, switch: str) -> float:
    """The wall seconds a caller gives for ``watchdog_s`` of ``switch``'s configured
    watchdog time, which runs in fabric time (x the switch's S on its own clock)."""
    return lab.wall_s(watchdog_s * lab.node_time_scale(switch))


def stuck_queues(topo: Topology, before: dict[str, dict], after: dict[str, dict], queue: int,
                 priority: int) -> list[Stuck]:
    """Queues ``queue`` of every switch port that held bytes at both readings, transmitted
    nothing between them and received PFC for ``priority`` meanwhile."""
    out = []
    for switch, counters in after.items():
        for port, now in counters["ports"].items():
            then = before[switch]["ports"][port]
            q_now, q_then = now["queues"][str(queue)], then["queues"][str(queue)]
            if (q_now["depth_bytes"] and q_then["depth_bytes"]
                    and q_now["tx_packets"] == q_then["tx_packets"]
                    and now["pfc_rx"][priority] > then["pfc_rx"][priority]):
                peer = topo.peer(switch, topo.iface(switch, port))
                out.append(Stuck(switch, port, peer.node if peer else "", q_now["depth_bytes"]))
    return out


def cycle_of(stuck: Iterable[Stuck]) -> list[Stuck]:
    """A cycle in the wait-for graph the stuck queues make (switch -> the peer that pauses
    it), as the queues along it; empty when there is none."""
    edges: dict[str, list[Stuck]] = {}
    for s in stuck:
        edges.setdefault(s.switch, []).append(s)
    for start in sorted(edges):
        path: list[Stuck] = []
        seen: dict[str, int] = {}
        node = start
        while node in edges and node not in seen:
            seen[node] = len(path)
            path.append(edges[node][0])
            node = edges[node][0].peer
        if node in seen:
            return path[seen[node]:]
    return []


def drops(before: dict[str, dict], after: dict[str, dict]) -> dict[str, int]:
    """Every drop reason that rose between the readings, summed over the switches."""
    out: dict[str, int] = {}
    for switch, counters in after.items():
        for reason, n in counters["drops"].items():
            delta = n - before[switch]["drops"].get(reason, 0)
            if delta:
                out[reason] = out.get(reason, 0) + delta
    return out


def watchdog_events(before: dict[str, dict], after: dict[str, dict],
                    queue: int) -> list[dict]:
    """The watchdog events of ``queue`` between the readings, each with its switch."""
    out = []
    for switch, counters in after.items():
        for port, entry in counters["ports"].items():
            now = entry["watchdog"].get(str(queue), {}).get("events", [])
            then = before[switch]["ports"][port]["watchdog"].get(str(queue), {}).get("events", [])
            out += [{"switch": switch, **e} for e in now[len(then):]]
    return out


def up_down_routing(data: dict) -> None:
    """A ``config_db.json`` edit: every static route whose prefix holds another static route
    of the same switch (a summary) removed, so that a route is only ever the specific one
    toward where the prefix lives."""
    routes = data.get("STATIC_ROUTE", {})
    nets = {key: ipaddress.ip_network(key.rpartition("|")[2]) for key in routes}
    for key, net in nets.items():
        if any(other != net and other.subnet_of(net) for other in nets.values()):
            del routes[key]
