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

from ..fabric.qos import pauses_sender, tc_of_dscp
from ..labs.lab import Lab
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


def by_design(lab: Lab, dscp: int) -> Callable[[str, str], bool]:
    """Whether a hop (switch, iface) is held to the class marked ``dscp``: only where some
    switch keeps that class lossless on the port's role."""
    kept = lossless_roles(lab, dscp)
    roles = port_roles(lab.topology, lab.topology.port)
    return lambda switch, iface: roles.get((switch, lab.topology.port(switch, iface))) in kept


def host_dscps(lab: Lab) -> set[int]:
    """The DSCPs the lab's hosts mark RoCE with (their NIC files)."""
    return {h.nic.roce.dscp for h in lab.topology.hosts if h.nic is not None}


def lossless_roles(lab: Lab, dscp: int) -> set[str]:
    """The port roles (``checks.port_roles``) on which some switch keeps RoCEv2 marked
    ``dscp`` lossless: its PG there can pause the sender."""
    out = set()
    for (switch, port), role in port_roles(lab.topology, lab.topology.port).items():
        config = lab.topology.nodes[switch].config
        if pauses_sender(config, port, tc_of_dscp(config, port, dscp)[0]):
            out.add(role)
    return out
