"""Which switches a probe's frames may cross, from the lab's topology and L2 domains: the
switches whose counters a forwarding check reads around a probe.

Reading every switch three times per probe is what made the forwarding checks scale with
hosts x switches; a frame from one host to another can only be on a few of them:

- every switch of the sender's L2 domain: a bridged frame may be flooded through its whole
  domain. RoCEv1 is never routed, so that is all of a RoCEv1 probe's, even to a host of
  another domain (it goes to the gateway inside its own, which refuses it);
- for RoCEv2, also every switch of the receiver's domain, and every switch on a shortest
  path, over switch-to-switch links, from a switch the sender is wired to to one the
  receiver is wired to: the leaves and every spine an ECMP hash may choose, since which
  member a hash picks is the fabric's business, not the topology's.

A frame that lands on a switch off that set is still seen: probes capture every wire of the
lab, so the probe names it and reads it too (``checks.probing.send``).
"""
from __future__ import annotations

from collections import deque

from ..labs import domains as l2
from ..labs.topology import Topology


class Paths:
    """The switches between any two hosts of one topology, computed once per pair of
    switches."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        switches = {node.name for node in topo.switches}
        self.links: dict[str, set[str]] = {name: set() for name in switches}
        self.wired: dict[str, set[str]] = {host.name: set() for host in topo.hosts}
        for link in topo.links:
            a, b = link.a.node, link.b.node
            if a in switches and b in switches:
                self.links[a].add(b)
                self.links[b].add(a)
            elif a in switches and b in self.wired:
                self.wired[b].add(a)
            elif b in switches and a in self.wired:
                self.wired[a].add(b)
        self.domain_switches: dict[str, set[str]] = {host: set() for host in self.wired}
        for domain in l2.l2_domains(topo):
            for host in domain.hosts:
                self.domain_switches[host] |= domain.switches
        self._between: dict[tuple[frozenset[str], frozenset[str]], frozenset[str]] = {}

    def between(self, src: str, dst: str, routed: bool = True) -> frozenset[str]:
        """The switches a frame from host ``src`` to host ``dst`` may cross; ``routed``
        False: a frame no router forwards (RoCEv1), which stays in ``src``'s domain."""
        if not routed:
            return frozenset(self.domain_switches[src])
        ends = (frozenset(self.wired[src]), frozenset(self.wired[dst]))
        if ends not in self._between:
            self._between[ends] = shortest_paths(self.links, *ends)
        return self._between[ends] | self.domain_switches[src] | self.domain_switches[dst]


def distances(links: dict[str, set[str]], start: frozenset[str]) -> dict[str, int]:
    """Hops from the nearest of ``start`` to every switch reachable from it."""
    far = {s: 0 for s in start}
    todo = deque(start)
    while todo:
        here = todo.popleft()
        for there in links[here]:
            if there not in far:
                far[there] = far[here] + 1
                todo.append(there)
    return far


def shortest_paths(links: dict[str, set[str]], src: frozenset[str],
                   dst: frozenset[str]) -> frozenset[str]:
    """Every switch on some shortest path from one of ``src`` to one of ``dst`` (both
    ends included); none when no path joins them."""
    there, back = distances(links, src), distances(links, dst)
    reachable = [there[d] for d in dst if d in there]
    if not reachable:
        return frozenset()
    length = min(reachable)
    return frozenset(s for s in there if s in back and there[s] + back[s] == length)
