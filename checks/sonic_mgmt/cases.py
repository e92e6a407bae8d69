"""Which sonic-mgmt cases a lab has: per switch, per wired port, per lossless PG or lossy
queue, read from the switch's own config (PORT_QOS_MAP, DSCP_TO_TC_MAP, TC_TO_PRIORITY_GROUP_MAP,
TC_TO_QUEUE_MAP, BUFFER_PG, PFC_WD). sonic-mgmt picks one src and dst port per DUT from its
testbed; here every wired port is a src once, and its dst is the next wired port of the same
switch.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...fabric.config import SwitchConfig
from ...fabric.model.egress import queue_priorities
from ...fabric.qos import pauses_sender, pg_of_tc, port_setting, queue_of_tc, tc_of_dscp
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


def first_dscps(node: Node, src: str, dst: str, by: str,
                keep: Callable[[PortCase], bool]) -> list[PortCase]:
    """The lowest DSCP from ``src`` to ``dst`` per PG on ``src`` (``by`` "pg") or queue on
    ``dst`` (``by`` "queue") among the cases ``keep`` accepts."""
    out, seen = [], set()
    for dscp in DSCPS:
        c = case(node, src, dst, dscp)
        if getattr(c, by) not in seen and keep(c):
            seen.add(getattr(c, by))
            out.append(c)
    return out


def lossless(node: Node, src: str, dst: str) -> list[PortCase]:
    """Per lossless PG on ``src`` (PFC on for the TC and a BUFFER_PG profile with an xoff)."""
    return first_dscps(node, src, dst, "pg", lambda c: pauses_sender(node.config, src, c.tc))


def lossless_cases(topology: Topology) -> list[PortCase]:
    """Per switch, per src port, per lossless PG: the lowest DSCP that lands in it."""
    return [c for node in switches(topology) for src, dst in pairs(node)
            for c in lossless(node, src, dst)]


def lossy_cases(topology: Topology) -> list[PortCase]:
    """Per switch, per src port, per lossy egress queue a DSCP reaches: the lowest such
    DSCP (sonic-mgmt's lossy_queue_1 uses DSCP 8 -> queue 0)."""
    return [c for node in switches(topology) for src, dst in pairs(node)
            for c in first_dscps(node, src, dst, "queue",
                                 lambda c: not pauses_sender(node.config, src, c.tc))]


@dataclass(frozen=True)
class WatchdogCase:
    """One lossless queue of a port with a PFC watchdog (``PFC_WD|<port>``): the PFC
    priorities whose pause holds it, and the flow that fills it, the lowest DSCP from
    ``src`` (another wired port, lossless there where one can be) that lands in it.
    ``missing`` names what the config lacks for the case (it then skips), else ""."""

    switch: str
    port: str = ""
    queue: int = -1
    priorities: tuple[int, ...] = ()
    src: str = ""
    dscp: int = -1
    missing: str = ""

    @property
    def id(self) -> str:
        parts = [self.switch, self.port, f"q{self.queue}" if self.queue >= 0 else ""]
        return "-".join(p for p in parts if p)


def watchdog_queues(config: SwitchConfig, port: str) -> dict[int, tuple[int, ...]]:
    """The queues of ``port`` a PFC watchdog guards, as the switch model builds them: each
    queue a priority of ``pfc_enable`` pauses (``pfc_to_queue_map``), with its priorities."""
    enabled, _ = port_setting(config.qos, port, "pfc_enable")
    return {queue: prios for queue, prios in enumerate(queue_priorities(config.qos, port))
            if enabled & set(prios)}


def watchdog_cases(topology: Topology) -> list[WatchdogCase]:
    """Per switch, per wired port with a ``PFC_WD`` entry, per queue its watchdog guards;
    a switch without one, or such a port without a lossless queue, as one case that skips."""
    out = []
    for node in switches(topology):
        config: SwitchConfig = node.config
        ports = [p for p in wired(node) if p in config.qos.pfc_wd]
        if not ports:
            out.append(WatchdogCase(node.name, missing=f"{node.name}: no PFC_WD entry for any "
                                    "of its wired ports (PFC_WD|<port>)"))
        for port in ports:
            queues = watchdog_queues(config, port)
            if not queues:
                out.append(WatchdogCase(node.name, port, missing=(
                    f"{node.name} {port}: PFC_WD is set but no queue is lossless "
                    f"(PORT_QOS_MAP|{port} pfc_enable, pfc_to_queue_map)")))
            for queue, prios in queues.items():
                out.append(_filled_by(node, port, queue, prios))
    return out


def _filled_by(node: Node, port: str, queue: int, prios: tuple[int, ...]) -> WatchdogCase:
    """The case with its flow: from the wired port before ``port`` (cyclic, as ``pairs``
    pairs them) or the next ones, the lowest DSCP reaching ``queue``, lossless first."""
    config: SwitchConfig = node.config
    ports = wired(node)
    at = ports.index(port)
    sources = [ports[(at - i) % len(ports)] for i in range(1, len(ports))]
    found = [(not pauses_sender(config, src, tc), n, dscp, src)
             for n, src in enumerate(sources) for dscp in DSCPS
             if queue_of_tc(config, port, tc := tc_of_dscp(config, src, dscp)[0])[0] == queue]
    if not found:
        return WatchdogCase(node.name, port, queue, prios, missing=(
            f"{node.name} {port}: no DSCP from another port reaches queue {queue} "
            f"(DSCP_TO_TC_MAP, TC_TO_QUEUE_MAP on {port})"))
    _, _, dscp, src = min(found)
    return WatchdogCase(node.name, port, queue, prios, src, dscp)


def headroom_pool_sources(node: Node) -> tuple[str, list[PortCase]]:
    """HdrmPoolSizeTest's layout on one switch: its last wired port is the dst, every other
    wired port a src with each of its lossless PGs (the lowest DSCP landing in it)."""
    ports = wired(node)
    dst = ports[-1]
    return dst, [c for src in ports[:-1] for c in lossless(node, src, dst)]


@dataclass(frozen=True)
class WredCase:
    """One queue of a dst port with a ``WRED_PROFILE`` (``QUEUE|<dst>|<q> wred_profile``)
    and the flow into it: the lowest DSCP from src that lands there. ``missing`` names what
    the config lacks (the case then skips), else ""."""

    switch: str
    flow: PortCase | None = None
    profile: str = ""
    missing: str = ""

    @property
    def id(self) -> str:
        if self.flow is None:
            return self.switch
        return f"{self.flow.id}-{self.profile}"


def wred_cases(topology: Topology) -> list[WredCase]:
    """Per switch, per src port (``pairs``), per queue of its dst with a WRED profile that
    a DSCP from src reaches; a switch with none as one case that skips."""
    out = []
    for node in switches(topology):
        config: SwitchConfig = node.config
        found = []
        for src, dst in pairs(node):
            def wred(c: PortCase, dst: str = dst) -> str | None:
                entry = config.qos.queues.get((dst, c.queue))
                return entry.wred_profile if entry is not None else None
            found += [WredCase(node.name, c, wred(c))
                      for c in first_dscps(node, src, dst, "queue", wred)]
        out += found or [WredCase(node.name, missing=(
            f"{node.name}: no queue a DSCP reaches has a WRED profile "
            "(QUEUE|<port>|<q> wred_profile)"))]
    return out
