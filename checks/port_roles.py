"""Where each switch port sits in a lab's fabric, from its topology alone: its role.

A switch's tier is how far it is from the hosts, named as SONiC names tiers: T0 for a
switch hosts are wired to (a ToR), T1 for one wired to T0s, and so on. A port's role is its
switch's tier and what it faces: ``T0 toward hosts``, ``T0 toward T1``, ``T1 toward T0``.
Real configs give uplinks and downlinks different QoS maps by design (per-port-role maps);
such a fabric is consistent when every role is, across the switches (lint's
``consistency``). Ports no link uses, and switches no host reaches, have no role: no
traffic of the lab crosses them.
"""
from __future__ import annotations

from collections.abc import Callable

from ..labs.topology import Topology

HOSTS = "hosts"


def tiers(topology: Topology) -> dict[str, int]:
    """Each switch a host reaches: its distance from the nearest host, less one (T0 = 0)."""
    hosts = {h.name for h in topology.hosts}
    distance = {h: 0 for h in hosts}
    frontier = sorted(hosts)
    while frontier:
        nxt = []
        for node in frontier:
            for iface in topology.interfaces(node):
                peer = topology.peer(node, iface)
                if peer is not None and peer.node not in distance:
                    distance[peer.node] = distance[node] + 1
                    nxt.append(peer.node)
        frontier = nxt
    return {node: d - 1 for node, d in distance.items() if node not in hosts}


def port_roles(topology: Topology,
               port_of: Callable[[str, str], str | None]) -> dict[tuple[str, str], str]:
    """(switch, SONiC port) -> its role, for every wired port of a switch a host reaches;
    ``port_of(switch, iface)`` names the PORT entry on a wire (None: none)."""
    tier = tiers(topology)
    roles = {}
    for switch in topology.switches:
        if switch.name not in tier:
            continue
        for iface in topology.interfaces(switch.name):
            peer = topology.peer(switch.name, iface)
            if peer is None:
                continue
            port = port_of(switch.name, iface)
            if port is not None:
                faces = HOSTS if peer.node not in tier else f"T{tier[peer.node]}"
                roles[switch.name, port] = f"T{tier[switch.name]} toward {faces}"
    return roles
