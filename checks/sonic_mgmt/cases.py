"""Which sonic-mgmt cases a lab has: per switch, per wired port, per lossless PG or lossy
queue, read from the switch's own config (PORT_QOS_MAP, DSCP_TO_TC_MAP, TC_TO_PRIORITY_GROUP_MAP,
TC_TO_QUEUE_MAP, BUFFER_PG). sonic-mgmt picks one src and dst port per DUT from its testbed;
here every wired port is a src once, and its dst is the next wired port of the same switch.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...fabric.config import SwitchConfig
from ...fabric.qos import pauses_sender, pg_of_tc, queue_of_tc, tc_of_dscp
from ...labs.topology import Node, Topology

DSCPS = range(64)


@dataclass(frozen=True)
class PortCase:
    """One src -> dst flow of one DSCP on one switch, and where the config puts it."""

    switch: str
    src: str
    dst: str
    dscp: int
    tc: int
    pg: int  # on src
    queue: int  # on dst

    @property
    def id(self) -> str:
        return f"{self.switch}-{self.src}-{self.dst}-dscp{self.dscp}-pg{self.pg}-q{self.queue}"


@dataclass(frozen=True)
class PortPair:
    """A src and a dst port of one switch: what a case that sweeps DSCPs or PCPs takes."""

    switch: str
    src: str
    dst: str

    @property
    def id(self) -> str:
        return f"{self.switch}-{self.src}-{self.dst}"


def port_pairs(topology: Topology) -> list[PortPair]:
    return [PortPair(node.name, src, dst) for node in switches(topology)
            for src, dst in pairs(node)]


def switches(topology: Topology) -> list[Node]:
    """The lab's switches with a config and at least two wired ports (a src and a dst)."""
    return [n for n in topology.switches
            if n.config is not None and n.ports is not None and len(n.ports.ports) >= 2]


def wired(node: Node) -> list[str]:
    return list(node.ports.ports.values())


def pairs(node: Node) -> list[tuple[str, str]]:
    """Every wired port as a src once, with the next wired port (cyclic) as its dst."""
    ports = wired(node)
    return [(src, ports[(i + 1) % len(ports)]) for i, src in enumerate(ports)]


def case(node: Node, src: str, dst: str, dscp: int) -> PortCase:
    config: SwitchConfig = node.config
    tc, _ = tc_of_dscp(config, src, dscp)
    return PortCase(node.name, src, dst, dscp, tc, pg_of_tc(config, src, tc)[0],
                    queue_of_tc(config, dst, tc)[0])


def lossless_cases(topology: Topology) -> list[PortCase]:
    """Per switch, per src port, per lossless PG (PFC on for the TC and a BUFFER_PG profile
    with an xoff): the lowest DSCP that lands in it."""
    out = []
    for node in switches(topology):
        for src, dst in pairs(node):
            seen: set[int] = set()
            for dscp in DSCPS:
                c = case(node, src, dst, dscp)
                if c.pg not in seen and pauses_sender(node.config, src, c.tc):
                    seen.add(c.pg)
                    out.append(c)
    return out


def lossy_cases(topology: Topology) -> list[PortCase]:
    """Per switch, per src port, per lossy egress queue a DSCP reaches: the lowest such
    DSCP (sonic-mgmt's lossy_queue_1 uses DSCP 8 -> queue 0)."""
    out = []
    for node in switches(topology):
        for src, dst in pairs(node):
            seen: set[int] = set()
            for dscp in DSCPS:
                c = case(node, src, dst, dscp)
                if c.queue not in seen and not pauses_sender(node.config, src, c.tc):
                    seen.add(c.queue)
                    out.append(c)
    return out
