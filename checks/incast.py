"""Which incast a lab has and how big it must be; running it is ``checks.congestion``'s.
The congestion checks need, on any lab, an N:1 incast that overflows the congested switch's
RoCE PG, and nothing here knows a lab's shape: the lab's own topology gives the incast.

The receiver is the first host (by name) that at least two others reach, the senders all
that reach it; the congested switch is where their paths meet (the receiver's, unless one
wire alone brings them there), its bottleneck port the one toward the receiver; the RoCE
class (DSCP, priority) comes from the receiver's NIC settings and the PG and queue it lands
in from the congested switch's own maps. How much each sender must write to overflow that
PG comes from its thresholds (``checks.thresholds``), and a run's time limit from how long
that takes at the bottleneck's line rate.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .deadlock import fabric_wall
from .thresholds import egress_fill, ingress_fill
from ..fabric.config import SwitchConfig
from ..fabric.qos import pg_of_tc, queue_of_tc, tc_of_dscp
from ..labs.lab import Lab
from ..labs.topology import Topology
from ..nic.settings import NicSettings
from ..traffic import patterns

OVERLOAD = 1.5
TIME_LIMIT_X = 4  # a run's time limit, in times its bytes take at line rate


Wire = tuple[str, str, str]  # (switch iface, peer node, peer iface)


class NoIncast(Exception):
    """The lab carries no incast: its congestion checks are skipped, with this reason."""


@dataclass(frozen=True)
class Incast:
    """Who sends to whom, where it congests, and the class it travels in."""

    receiver: str
    senders: tuple[str, ...]
    switch: str  # where the senders' paths meet (``converge``): the congested switch
    port: str  # its SONiC port toward the receiver: the bottleneck
    upstream: tuple[Wire, ...]  # the congested switch's other wires
    input_ports: tuple[str, ...]  # the switch's SONiC port on each ``upstream`` iface
    dscp: int
    priority: int
    pg: int  # where the RoCE class lands on the switch: ingress PG ...
    queue: int  # ... and egress queue
    inputs: int  # the fewest ports the incast enters that switch by (``fewest_inputs``)
    fill: int  # bytes that bring that PG, entering by ``inputs`` ports, to XOFF and
    #            through its headroom (``thresholds.ingress_fill``)

    def message_size(self, qps: int, messages: int, mtu: int, fill: int | None = None) -> int:
        """A message size that makes a sender write one input's share, ``per_input``: what
        each sender wired to the congested switch writes (every sender, when none is)."""
        return whole_mtus(self.per_input(fill) / (qps * messages), mtu)

    def per_input(self, fill: int | None = None) -> float:
        """What each of the ``inputs`` ports must bring in: OVERLOAD x ``fill`` (by default
        the RoCE PG's, ``self.fill``) over (inputs - 1).

        Each of the ports the incast enters by carries its share at line rate until the
        first is done, while the bottleneck sends at line rate: by then the switch holds
        (ports - 1) shares, OVERLOAD x fill when they are ``inputs``, which that many PGs
        filling together cannot hold below their limits. Through more ports the backlog
        grows faster than the PGs' limits add up (``thresholds``: each PG's share of the
        pool shrinks as more fill it), so the fewest is the case to size for."""
        return OVERLOAD * (fill or self.fill) / (self.inputs - 1)

    def sender_bytes(self, fill: int | None = None,
                     senders: tuple[str, ...] | None = None) -> dict[str, float]:
        """What each sender (``senders``: a subset of the incast's, by default all) writes.

        A sender wired to the congested switch brings its input's share through its own
        port. The others come in by uplinks, the fewest inputs counting them as one
        (``fewest_inputs``: ECMP may hash them all onto one uplink), so together they write
        one share: spread over more uplinks they bring it in sooner, never later, and the
        backlog only grows. With no sender wired there, the uplinks are the inputs and any
        of them may carry a single sender, so each writes a whole share."""
        senders = self.senders if senders is None else senders
        share = self.per_input(fill)
        wired = {peer for _, peer, _ in self.upstream}
        remote = sum(s not in wired for s in senders)
        if remote == len(senders):
            return dict.fromkeys(senders, share)
        return {s: share if s in wired else share / remote for s in senders}

    def flows(self, qps: int, messages: int, mtu: int, fill: int | None = None,
              senders: tuple[str, ...] | None = None, at_least: int = 0
              ) -> list[patterns.FlowSpec]:
        """The incast's flows: ``qps`` QPs per sender, each writing ``messages`` messages of
        whole MTUs, one at least, that together carry the sender's ``sender_bytes``, and
        ``at_least`` bytes each."""
        return [f for src, total in self.sender_bytes(fill, senders).items()
                for f in patterns.incast(self.receiver, [src], max(
                    at_least, whole_mtus(total / (qps * messages), mtu)), messages, qps)]

    def qps_to_overflow(self, qps: int, mtu: int, fill: int | None = None) -> int:
        """At least ``qps`` QPs per sender, and enough that the incast can have OVERLOAD x
        ``fill`` in flight: each QP keeps at most ``patterns.WINDOW`` packets
        unacknowledged, a sender no more than it writes, and a queue cannot hold more than
        the senders have in flight."""
        per_qp = patterns.WINDOW * (mtu + patterns.FRAME_OVERHEAD)
        need = OVERLOAD * (fill or self.fill)
        writes = self.sender_bytes(fill).values()
        while sum(min(qps * per_qp, b) for b in writes) < need:
            qps += 1
        return qps

    def ports(self) -> list[str]:
        """The congested switch's SONiC ports the incast may enter by."""
        return list(self.input_ports)

    def class_fill(self, config: SwitchConfig, pg: int, queue: int) -> int | None:
        """Bytes that make another class (ingress ``pg``, egress ``queue`` at the
        bottleneck) drop on the congested switch ``config``, entering by ``inputs`` ports:
        its PG's limit or its egress queue's, whichever comes first; None when no buffer
        limits either."""
        limits = [f for f in (ingress_fill(config, self.ports(), pg, self.inputs),
                              egress_fill(config, self.port, queue)) if f is not None]
        return min(limits, default=None)


def whole_mtus(size: float, mtu: int) -> int:
    """``size`` rounded up to whole MTUs, one at least: a RoCE message's size."""
    return max(1, math.ceil(size / mtu)) * mtu


def fewest_inputs(senders: tuple[str, ...], upstream: tuple[Wire, ...]) -> int:
    """The fewest ports an incast from ``senders`` enters its switch by: each sender wired
    to it by its own, the others all by one uplink (ECMP may hash them onto one); two at
    least, since through one port it congests nothing there."""
    local = sum(1 for _, peer, _ in upstream if peer in senders)
    return max(2, local + (len(senders) > local))


def bottleneck_bps(lab: Lab, incast: Incast) -> float:
    """The bottleneck port's configured (real-fabric) speed."""
    return lab.topology.nodes[incast.switch].config.ports[incast.port].speed_mbps * 1e6


def line_span(lab: Lab, incast: Incast, bits: float) -> float:
    """Wall seconds (live; the simulator runs the same span of fabric time) that ``bits``
    take through the bottleneck at its line rate: the shortest such a run can be."""
    return fabric_wall(lab.topology, bits / bottleneck_bps(lab, incast))


def time_limit(lab: Lab, incast: Incast, bits: float, at_least_s: float) -> float:
    """Wall seconds for a run of ``bits`` into the bottleneck: TIME_LIMIT_X times their
    ``line_span``, never less than ``at_least_s``. Incasts are sized from the lab's buffers,
    so a fixed limit would cut a large buffer's short; an unfinished run leaves its backlog
    under the next check."""
    return max(at_least_s, TIME_LIMIT_X * line_span(lab, incast, bits))


def flow_bits(flows: list[patterns.FlowSpec]) -> int:
    """What ``flows`` write in all, in bits (``time_limit``'s measure)."""
    return 8 * sum(f.size * f.count for f in flows)


def roce_mtu(lab: Lab, incast: Incast) -> int:
    """The RoCE path MTU of the receiver's NIC: what the incast's messages are cut at."""
    return patterns.nic_settings(lab.topology.nodes[incast.receiver], None).roce.mtu


def converge(topo: Topology, receiver: str, senders: tuple[str, ...]
             ) -> tuple[str, str, list[Wire]]:
    """Where the senders' paths meet and congest: (switch, its interface toward the
    receiver, its other wires). It is the receiver's switch unless the incast can enter
    that switch by one wire only, no faster than the one out (a leaf with one uplink and
    no sender of its own): then nothing queues there, and the congestion moves to the
    switch across that wire, at its port toward this one; and so on upstream."""
    node, iface = attachment(topo, receiver)
    seen = {node}
    while True:
        wires = [(i, p.node, p.iface) for i in topo.interfaces(node)
                 if i != iface and (p := topo.peer(node, i)) is not None]
        carry = [w for w in wires if w[1] in senders or topo.nodes[w[1]].is_switch]
        if len(carry) != 1:
            return node, iface, wires
        up, peer, peer_iface = carry[0]
        if peer in senders or peer in seen \
                or port_speed(topo, node, up) > port_speed(topo, node, iface):
            return node, iface, wires
        node, iface = peer, peer_iface
        seen.add(node)


def attachment(topo: Topology, host: str) -> tuple[str, str] | None:
    """(switch, switch interface) a host is wired to; None for an unwired host."""
    for link in topo.links:
        for mine, peer in ((link.a, link.b), (link.b, link.a)):
            if mine.node == host and peer.node in topo.nodes \
                    and topo.nodes[peer.node].is_switch:
                return peer.node, peer.iface
    return None


def port_speed(topo: Topology, switch: str, iface: str) -> int:
    """Mb/s of a switch interface, from its config's PORT table."""
    return topo.nodes[switch].config.ports[topo.port(switch, iface)].speed_mbps


def incast_of(lab: Lab) -> Incast:
    """The lab's incast: the first host (by name) that at least two others reach (by
    ping) receives from all that reach it. Pings go toward one candidate at a time, not
    between every pair: on a fabric of a thousand hosts that was a million pings."""
    topo = lab.topology
    for receiver in sorted(h.name for h in topo.hosts):
        reach = sorted(p.src for p in lab.ping_all(dst=receiver) if p.ok)
        if len(reach) >= 2:
            break
    else:
        raise NoIncast(f"lab {lab.name}: no host is reached by two others, no incast")
    senders = tuple(reach)
    name, out_iface, upstream = converge(topo, receiver, senders)
    switch = topo.nodes[name]
    nic = topo.nodes[receiver].nic or NicSettings()
    port = topo.port(name, out_iface)
    tc, _ = tc_of_dscp(switch.config, port, nic.roce.dscp)
    pg = pg_of_tc(switch.config, port, tc)[0]
    inputs = fewest_inputs(senders, tuple(upstream))
    input_ports = tuple(topo.port(switch.name, iface) for iface, _, _ in upstream)
    fill = ingress_fill(switch.config, list(input_ports), pg, inputs)
    if fill is None:
        raise NoIncast(f"lab {lab.name}: {switch.name} has no ingress buffer pool: nothing "
                       "fills, pauses or drops under an incast")
    return Incast(receiver, senders, switch.name, port, tuple(upstream), input_ports,
                  nic.roce.dscp, nic.roce.priority, pg, queue_of_tc(switch.config, port, tc)[0],
                  inputs, fill)
