"""What a lab means to carry, read from its own files: the RoCE class(es), the CNP DSCP and
the lossless priorities. Lint and the checks take every expectation from here, so nothing
assumes the shipped labs' DSCP 26, priority 3 or their host names.

Where each value comes from, first match wins:

- RoCE DSCP and priority: an option (``--dscp``, ``--priority``); the
  ``rocelab.roce-priority`` label (priority only); the hosts' NIC settings files (each
  distinct class once); the switches' maps (a lossless priority and the lowest DSCP mapped to
  its TC); failing all of these, the NIC defaults of ``nic.settings`` (what a host with no NIC
  file sends), which the lint then reports as not lossless.
- Lossless priorities: the RoCE priorities, and every priority a switch port enables PFC on
  (``pfc_enable``). A lab with two (Azure's 3 and 4) has its chain checked on both; a
  priority no DSCP maps to is checked from its TC on (RoCEv1, by PCP).
- Where a map is read: on the ports the hosts' traffic meets first, every host's switch
  port (by host name), then every other QoS port (``class_ports``), each priority where
  PFC is on for it. Switches whose uplinks and downlinks use different maps by design
  (per-port-role maps) thus give each host path's classes, whichever port comes first.
- CNP DSCP: the option, the hosts' NIC files, the NIC default.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..fabric.config import SwitchConfig
from ..fabric.portmap import wire
from ..fabric.qos import port_setting, qos_ports, tc_of_dscp
from ..nic.settings import NicSettings
from ..labs.topology import Topology

PRIORITY_LABEL = "rocelab.roce-priority"


@dataclass(frozen=True)
class RoceClass:
    """One lossless class: RoCEv2 marked ``dscp`` (None: no DSCP maps to it) on ``priority``."""

    dscp: int | None
    priority: int

    @property
    def label(self) -> str:
        """A test id: ``dscp3-p3``, or ``p4`` for a PCP-only class."""
        return f"p{self.priority}" if self.dscp is None else f"dscp{self.dscp}-p{self.priority}"


@dataclass(frozen=True)
class Expectations:
    """The classes to check (the hosts' RoCE class first), the CNP DSCP, the lossless
    priorities, and a phrase saying where they came from (for reports)."""

    classes: tuple[RoceClass, ...]
    cnp_dscp: int
    lossless: frozenset[int]
    source: str

    @property
    def roce(self) -> RoceClass:
        return self.classes[0]


def lossless_priorities(configs: Iterable[SwitchConfig]) -> frozenset[int]:
    """Every priority some switch port enables PFC on."""
    found: set[int] = set()
    for config in configs:
        for port in qos_ports(config):
            found |= port_setting(config.qos, port, "pfc_enable")[0]
    return frozenset(found)


def class_ports(topology: Topology, configs: Mapping[str, SwitchConfig | None]
                ) -> list[tuple[SwitchConfig, str]]:
    """(switch config, SONiC port) where classes are read: every host's switch port, hosts
    by name, then every other QoS port of every switch, each once; switches whose config
    did not load are left out."""
    seen: dict[tuple[str, str], SwitchConfig] = {}
    for host in sorted(topology.hosts, key=lambda h: h.name):
        for iface in topology.interfaces(host.name):
            peer = topology.peer(host.name, iface)
            config = configs.get(peer.node) if peer else None
            if config is not None:
                port = wire(config, peer.iface, topology.nodes[peer.node].lanemap)
                if port is not None:
                    seen.setdefault((peer.node, port), config)
    for node, config in configs.items():
        for port in qos_ports(config) if config is not None else ():
            seen.setdefault((node, port), config)
    return [(config, port) for (_, port), config in seen.items()]


def dscp_of(ports: list[tuple[SwitchConfig, str]], priority: int) -> int | None:
    """The lowest DSCP mapped to TC ``priority`` on the first of ``ports`` with PFC on for
    it (None: no DSCP reaches it there, a PCP-only class)."""
    for config, port in ports:
        if priority in port_setting(config.qos, port, "pfc_enable")[0]:
            return next((d for d in range(64) if tc_of_dscp(config, port, d)[0] == priority),
                        None)
    return None


def nic_files(topology: Topology) -> list[NicSettings]:
    """The NIC settings of the hosts that have a file, each distinct one once, by host name."""
    out: list[NicSettings] = []
    for host in sorted(topology.hosts, key=lambda h: h.name):
        if host.nic is not None and host.nic not in out:
            out.append(host.nic)
    return out


def expectations(topology: Topology, configs: Mapping[str, SwitchConfig | None],
                 dscp: int | None = None, priority: int | None = None,
                 cnp_dscp: int | None = None) -> Expectations:
    """The lab's expectations from its topology and its switches' configs (by node name);
    ``dscp``, ``priority`` and ``cnp_dscp`` override (None: from the lab)."""
    loaded = [c for c in configs.values() if c is not None]
    ports = class_ports(topology, configs)
    nics = nic_files(topology)
    enabled = lossless_priorities(loaded)
    labelled = [n.labels[PRIORITY_LABEL] for n in topology.nodes.values()
                if PRIORITY_LABEL in n.labels]
    sources = []
    if nics:
        primary = [RoceClass(n.roce.dscp, n.roce.priority) for n in nics]
        sources.append("the hosts' NIC settings")
    elif enabled:
        low = min(enabled)
        primary = [RoceClass(dscp_of(ports, low), low)]
        sources.append("the switches' maps (no host has a NIC settings file)")
    else:
        default = NicSettings().roce
        primary = [RoceClass(default.dscp, default.priority)]
        sources.append("the NIC defaults (no NIC settings file, no pfc_enable)")
    if labelled:
        primary = [RoceClass(c.dscp, int(labelled[0])) for c in primary]
        sources.append(f"label {PRIORITY_LABEL}")
    if dscp is not None or priority is not None:
        primary = [RoceClass(c.dscp if dscp is None else dscp,
                             c.priority if priority is None else priority)
                   for c in primary[:1]]
        sources.append("options")
    classes = list(dict.fromkeys(primary))
    covered = {c.priority for c in classes}
    for p in sorted(enabled - covered):
        classes.append(RoceClass(dscp_of(ports, p), p))
    cnp = cnp_dscp if cnp_dscp is not None else nics[0].cnp.dscp if nics \
        else NicSettings().cnp.dscp
    return Expectations(tuple(classes), cnp, frozenset(enabled | covered), ", ".join(sources))


def control_dscp(configs: Iterable[SwitchConfig], lossless: frozenset[int],
                 avoid: Iterable[int] = ()) -> int | None:
    """The lowest DSCP no switch port maps to a lossless TC (and not in ``avoid``, e.g. the
    CNP DSCP): traffic in a lossy class, the control of a classification check."""
    loaded = list(configs)
    skip = set(avoid)
    for d in range(64):
        if d in skip:
            continue
        if all(tc_of_dscp(c, p, d)[0] not in lossless for c in loaded for p in qos_ports(c)):
            return d
    return None


@dataclass(frozen=True)
class Case:
    """One classification probe: its test id, what it sends, and whether it is lossless."""

    id: str
    value: int
    lossless: bool


def dscp_cases(e: Expectations, configs: Iterable[SwitchConfig]) -> list[Case]:
    """RoCEv2 probes: each lossless class's DSCP, then a lossy control DSCP (not the CNPs')."""
    cases = [Case(f"dscp{c.dscp}-lossless", c.dscp, True)
             for c in e.classes if c.dscp is not None]
    control = control_dscp(configs, e.lossless, avoid=[e.cnp_dscp])
    if control is not None:
        cases.append(Case(f"dscp{control}-control", control, False))
    return cases


def pcp_cases(e: Expectations) -> list[Case]:
    """RoCEv1 probes: one per lossless priority."""
    return [Case(f"pcp{p}-lossless", p, True) for p in sorted(e.lossless)]


def of_topology(topology: Topology) -> Expectations:
    """A loaded lab's expectations (its switch configs parsed, as a running lab's are)."""
    return expectations(topology, {n.name: n.config for n in topology.switches})
