"""Victim flows: congestion spreading through PFC to a flow that never crosses the congested
port.

The incast (``checks.incast.incast_of``) congests a switch C at its port toward the
receiver. The victim is a flow from a sender on another switch V to *another* host on C
(not the receiver): it shares with the incast only the links between V and C, which C
pauses when its ingress PG on them reaches XOFF. Its sender sends nothing else (it leaves the
incast), and nothing else goes to its receiver.

Whether a lost throughput is PFC's doing depends on the links: the scenario is **pause-only**
when V is wired straight to C and each V-C link alone carries every remote sender at its
port's speed (the victim and every incast sender not on C): then neither ECMP nor the
incast's own load can congest the victim anywhere but by a pause. ``pfc-victim`` is built so
(a 400G link for three 100G hosts); ``roce-v2-leafspine``'s victim crosses ECMP spine
uplinks that the incast also loads, so its figures mix queueing with pausing and no verdict
rests on them.
"""
from __future__ import annotations

from dataclasses import dataclass

from .incast import Incast, attachment, port_speed
from ..labs.topology import Topology
from ..traffic import patterns

VICTIM_QP = 99  # the victim's QP number: apart from the incast's QPs 0..QPS-1
LOST = 0.75  # under PFC alone a pause-only victim keeps at most this share of its goodput


@dataclass(frozen=True)
class Victim:
    """The victim flow, the incast that goes with it, and whether only pauses can hurt it."""

    src: str
    dst: str
    senders: tuple[str, ...]  # the incast's senders, the victim's sender left out
    shared: tuple[str, ...]  # C's interfaces toward V: the links the victim shares
    pause_only: bool
    why: str  # the figures pause_only rests on, or why it is false

    def flow(self, size: int, count: int) -> patterns.FlowSpec:
        return patterns.FlowSpec(self.src, self.dst, size, count, qp=VICTIM_QP)


def sides(topo: Topology, incast: Incast) -> tuple[list[str], list[str]]:
    """The incast's senders wired to the congested switch, and those wired elsewhere (each
    by name): a victim flow goes from one of the second to one of the first."""
    where = {h: attachment(topo, h) for h in incast.senders}
    return (sorted(h for h, at in where.items() if at and at[0] == incast.switch),
            sorted(h for h, at in where.items() if at and at[0] != incast.switch))


def no_victim(topo: Topology, incast: Incast) -> str | None:
    """Why the lab has no victim flow (``victim_of`` is None), None when it has one. True
    for any congested switch: the receiver's leaf, or a spine where leaves with one uplink
    meet (``incast.converge``), which has no host wired to it at all."""
    local, remote = sides(topo, incast)
    switch, receiver = incast.switch, incast.receiver
    why = []
    if not local:
        at = attachment(topo, receiver)
        besides = (f"besides the receiver {receiver}" if at and at[0] == switch
                   else f"(the receiver {receiver} is on {at[0] if at else 'no switch'})")
        wired = sorted(h.name for h in topo.hosts if h.name != receiver
                       and (attachment(topo, h.name) or ("",))[0] == switch)
        if wired:  # hosts there, but none of them sends to the receiver: unreachable
            besides = (f"that reaches the receiver {receiver} ({', '.join(wired)} there "
                       "do not)")
        why.append(f"{switch}, where the incast congests, has no host wired to it {besides} "
                   f"to receive a victim flow, one that meets the incast only on the links "
                   f"into {switch}")
    if len(remote) < 2:
        why.append(f"{len(remote)} sender(s) elsewhere than {switch} "
                   f"({', '.join(remote) or 'none'}), and a victim needs two: its own sender "
                   f"leaves the incast, and another must keep loading the links into "
                   f"{switch} for PFC to pause them")
    return "; ".join(why) or None


def victim_of(topo: Topology, incast: Incast) -> Victim | None:
    """The lab's victim: the first remote incast sender (by name) sends to the first host of
    the congested switch (by name) that is neither the receiver nor unwired. None when the
    lab has no such pair or too few remote senders to congest anything without it
    (``no_victim`` says which)."""
    if no_victim(topo, incast) is not None:
        return None
    local, remote = sides(topo, incast)
    where = {h: attachment(topo, h) for h in remote}
    src, dst = remote[0], local[0]
    sender_switch = where[src][0]
    shared = tuple(sorted(iface for iface, peer, _ in incast.upstream if peer == sender_switch))
    senders = tuple(h for h in incast.senders if h != src)
    offered = sum(port_speed(topo, *where[h]) for h in remote)
    if not shared:
        return Victim(src, dst, senders, shared, False,
                      f"{sender_switch} (the victim's) is not wired to {incast.switch}: its "
                      "path crosses links and queues the incast loads too")
    narrowest = min(port_speed(topo, incast.switch, i) for i in shared)
    fits = narrowest >= offered
    why = (f"{incast.switch}-{sender_switch}: {len(shared)} link(s), the narrowest "
           f"{narrowest} Mb/s {'>=' if fits else '<'} {offered} Mb/s that every remote sender "
           f"({', '.join(remote)}) offers")
    return Victim(src, dst, senders, shared, fits, why)


def shared_pause(topo: Topology, before: dict[str, dict], after: dict[str, dict],
                 incast: Incast, victim: Victim) -> dict[str, float]:
    """PFC frames the congested switch sent on the shared links (lossless priority), and the
    seconds (as the counters keep them: wall live, simulated in sim) its peers held that
    priority paused toward it, between two counter readings."""
    def total(side: dict[str, dict], key: str, node: str, ifaces: list[str]) -> float:
        ports = side[node]["ports"]
        return sum(ports[topo.port(node, i)][key][incast.priority] for i in ifaces)

    sent = total(after, "pfc_tx", incast.switch, list(victim.shared)) \
        - total(before, "pfc_tx", incast.switch, list(victim.shared))
    peers = [(peer, peer_iface) for iface, peer, peer_iface in incast.upstream
             if iface in victim.shared]
    paused = sum(total(after, "paused_s", p, [i]) - total(before, "paused_s", p, [i])
                 for p, i in peers)
    return {"pfc_sent": int(sent), "paused_s": paused}
