"""What the RoCE checks expect, computed from the lab's configs, and how they read frames.

Nothing here knows a lab's shape: expectations come from the switch configs (QoS maps,
router MACs) and from ``labs.domains``; observations come from probe sightings and the
switches' counters.
"""
from __future__ import annotations

import json
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from ipaddress import IPv4Interface, IPv6Interface


from ..fabric.config import SwitchConfig
from ..fabric.qos import bound, pg_of_tc, queue_of_tc, tc_of_dscp, tc_of_pcp
from ..labs.lab import Lab
from ..labs.topology import Topology

ETH_P_8021Q = 0x8100
ETH_P_IPV4 = 0x0800
ETH_P_IPV6 = 0x86DD
ETH_P_ROCE_V1 = 0x8915


# --------------------------------------------------------------------------- frames


def mac_text(raw: bytes) -> str:
    return ":".join(f"{b:02x}" for b in raw)


def dst_mac(frame: bytes) -> str:
    return mac_text(frame[0:6])


def network(frame: bytes) -> tuple[int, bytes]:
    """(EtherType, the network packet: IPv4/IPv6 header or GRH through the ICRC), the
    802.1Q tag (if any) and Ethernet padding left out."""
    etype, off = struct.unpack_from("!H", frame, 12)[0], 14
    while etype == ETH_P_8021Q and len(frame) >= off + 4:
        etype, off = struct.unpack_from("!H", frame, off + 2)[0], off + 4
    if etype == ETH_P_IPV4:
        length = struct.unpack_from("!H", frame, off + 2)[0]
    elif etype in (ETH_P_IPV6, ETH_P_ROCE_V1):
        length = 40 + struct.unpack_from("!H", frame, off + 4)[0]
    else:
        length = len(frame) - off
    return etype, frame[off:off + length]


def invariant(frame: bytes) -> bytes:
    """The parts of a RoCE packet a switch must not change: for v1 the whole GRH + BTH +
    payload + ICRC; for v2 everything but the IPv4 TTL and header checksum, or the IPv6
    hop limit (DSCP and ECN included: with no congestion nothing may mark CE)."""
    etype, packet = network(frame)
    if etype == ETH_P_IPV4:
        return packet[:8] + packet[9:10] + packet[12:]
    if etype == ETH_P_IPV6:
        return packet[:7] + packet[8:]
    return packet


def hop_limit(frame: bytes) -> int:
    """The IPv4 TTL or the IPv6 (or GRH) hop limit of a frame's network packet."""
    etype, packet = network(frame)
    return packet[8] if etype == ETH_P_IPV4 else packet[7]


def is_ip(frame: bytes) -> bool:
    return network(frame)[0] in (ETH_P_IPV4, ETH_P_IPV6)


def describe(frame: bytes, info=None) -> dict:
    """A frame as a row of an evidence table."""
    from ..nic.roce import classify
    info = info if info is not None else classify(frame)
    etype, _ = network(frame)
    tagged = struct.unpack_from("!H", frame, 12)[0] == ETH_P_8021Q
    tci = struct.unpack_from("!H", frame, 14)[0] if tagged else None
    row = {"dst_mac": dst_mac(frame), "src_mac": mac_text(frame[6:12]),
           "vid": None if tci is None else tci & 0x0FFF,
           "pcp": None if tci is None else tci >> 13,
           "ethertype": f"0x{etype:04x}", "len": len(frame)}
    if info is not None:
        row.update(version=info.version, dscp=info.dscp, ecn=info.ecn, ttl=info.ttl,
                   src=info.src, dst=info.dst, psn=info.psn, icrc_ok=info.icrc_ok)
    return row


def difference(sent: bytes, seen: bytes) -> str:
    """What a switch changed that it must not have, in words."""
    from ..nic.roce import classify
    a, b = classify(sent), classify(seen)
    if a is None or b is None:
        return "no longer a RoCE frame"
    fields = [f"{name} {getattr(a, name)} -> {getattr(b, name)}"
              for name in ("version", "dscp", "ecn", "src", "dst", "opcode", "dqpn", "psn")
              if getattr(a, name) != getattr(b, name)]
    if fields:
        return ", ".join(fields)
    x, y = invariant(sent), invariant(seen)
    at = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
    return f"bytes differ from offset {at} of the packet (length {len(x)} -> {len(y)})"


def hops(topo: Topology, journey) -> list[tuple[str, int, int]]:
    """(switch, TTL in, TTL out) for every switch that received the frame and sent it on.
    (Pairs by switch, not by capture time: one reader serves every wire, so a switch's
    egress copy may be read before its ingress copy.)"""
    ins: dict[str, int] = {}
    outs: list[tuple[str, int]] = []
    for s in journey:
        if not topo.nodes[s.node].is_switch or s.info is None:
            continue
        if s.direction == "in":
            ins.setdefault(s.node, s.info.ttl)
        else:
            outs.append((s.node, s.info.ttl))
    return [(node, ins[node], ttl) for node, ttl in outs if node in ins]


# --------------------------------------------------------------------------- routers


def router_macs(topo: Topology) -> dict[str, str]:
    """Router MAC -> switch."""
    return {node.config.mac: node.name for node in topo.switches if node.config}


def routed_by(topo: Topology, sightings) -> list[str]:
    """Switches that routed the frame: they received it addressed to their router MAC
    (a bridge forwards other MACs; a router takes only its own), in path order."""
    macs = router_macs(topo)
    out: list[str] = []
    for s in sorted(sightings, key=lambda s: s.time):
        if s.direction == "in" and macs.get(dst_mac(s.frame)) == s.node and s.node not in out:
            out.append(s.node)
    return out


# --------------------------------------------------------------------------- QoS


@dataclass(frozen=True)
class Expected:
    """Where a frame must land on one switch: ingress port and PG, egress port and queue."""

    switch: str
    ingress: str  # wire name (eth3)
    egress: str
    in_port: str  # the PORT entries on those wires (Ethernet8)
    out_port: str
    tc: int
    pg: int
    queue: int
    why: str  # "DSCP 26 -> TC 3 (DSCP_TO_TC_MAP AZURE of Ethernet8)"


def expected_class(config: SwitchConfig, in_port: str, out_port: str, frame: bytes,
                   pcp: int | None) -> tuple[int, int, int, str]:
    """(TC, PG, queue, explanation) for ``frame`` received on port ``in_port`` with tag
    priority ``pcp`` (None: untagged), leaving by ``out_port``. The rule SONiC/SAI applies,
    written from the config: IP on a port with a DSCP map -> DSCP; anything else -> PCP
    through the dot1p map (untagged = 0); unmapped -> TC 0; PG from the ingress port's
    TC_TO_PRIORITY_GROUP_MAP, queue from the egress port's TC_TO_QUEUE_MAP (unmapped: 0)."""
    dscp_map, dscp_from = bound(config.qos, in_port, "dscp_to_tc_map")
    if is_ip(frame) and dscp_map is not None:
        _, packet = network(frame)
        dscp = packet[1] >> 2 if packet[0] >> 4 == 4 else ((packet[0] & 0x0F) << 2
                                                           | packet[1] >> 6)
        tc, _ = tc_of_dscp(config, in_port, dscp)
        why = f"DSCP {dscp} -> TC {tc} (DSCP_TO_TC_MAP {dscp_map} of {dscp_from})"
    else:
        dot1p_map, dot1p_from = bound(config.qos, in_port, "dot1p_to_tc_map")
        prio = pcp or 0
        tc, _ = tc_of_pcp(config, in_port, prio)
        why = (f"PCP {prio}{'' if pcp is not None else ' (untagged)'} -> TC {tc} "
               + (f"(DOT1P_TO_TC_MAP {dot1p_map} of {dot1p_from})" if dot1p_map
                  else "(no DOT1P_TO_TC_MAP: default TC 0)"))
    pg, _ = pg_of_tc(config, in_port, tc)
    queue, _ = queue_of_tc(config, out_port, tc)
    why += f", PG {pg} on {in_port}, queue {queue} on {out_port}"
    return tc, pg, queue, why


def path_expectations(topo: Topology, sightings) -> list[Expected]:
    """For every switch the frame crossed (seen coming in on one port and going out of
    another): where its classification must put it."""
    out = []
    by_switch: dict[str, dict[str, list]] = {}
    for s in sorted(sightings, key=lambda s: s.time):
        if topo.nodes[s.node].is_switch:
            by_switch.setdefault(s.node, {"in": [], "out": []})[s.direction].append(s)
    for switch, seen in by_switch.items():
        if not seen["in"] or not seen["out"]:
            continue
        first_in = seen["in"][0]
        for egress in sorted({s.iface for s in seen["out"]}):
            in_port, out_port = topo.port(switch, first_in.iface), topo.port(switch, egress)
            tc, pg, queue, why = expected_class(topo.nodes[switch].config, in_port, out_port,
                                                first_in.frame, first_in.pcp)
            out.append(Expected(switch, first_in.iface, egress, in_port, out_port, tc, pg,
                                queue, why))
    return out


# --------------------------------------------------------------------------- counters


def snapshot(lab: Lab, switches: Iterable[str] | None = None) -> dict[str, dict]:
    """The counters of ``switches`` (None: every switch), by name."""
    names = [node.name for node in lab.topology.switches] if switches is None \
        else sorted(switches)
    return {name: lab.agent(name).counters() for name in names}


def settled(lab: Lab, quiet: float = 0.15, timeout: float = 2.0,
            switches: Iterable[str] | None = None) -> dict[str, dict]:
    """Counters of ``switches`` (None: every switch) once they stop moving between two
    looks ``quiet`` apart (frames in flight through the agents are counted), looking at
    most ``timeout / quiet`` times. The lab's own clock runs between looks (``Lab.wait``):
    wall time live, simulated time in sim, where no wall second is slept and the answer
    does not depend on the machine's speed."""
    names = None if switches is None else sorted(switches)
    last = _essentials(snapshot(lab, names))
    for _ in range(max(1, round(timeout / quiet))):
        lab.wait(quiet)
        now = snapshot(lab, names)
        if _essentials(now) == last:
            return now
        last = _essentials(now)
    return snapshot(lab, names)


def _essentials(snap: dict[str, dict]) -> str:
    return json.dumps({sw: {"drops": c.get("drops"), "ports": {
        p: (v.get("rx_packets"), v.get("tx_packets")) for p, v in c.get("ports", {}).items()}}
        for sw, c in snap.items()}, sort_keys=True)


def port_delta(run, switch: str, port: str, key: str) -> int:
    """How much a port counter (rx_packets, tx_packets) moved during a probe ``run``."""
    return (run.after[switch]["ports"][port][key] - run.before[switch]["ports"][port][key])


def quiet(lab: Lab, still: float = 0.5, timeout: float = 5.0, step: float = 0.1,
          switches: Iterable[str] | None = None) -> bool:
    """Wait until no port of ``switches`` (None: every switch) counted a frame for
    ``still`` seconds (True), or give up at ``timeout`` (False), looking every ``step`` of
    the lab's own clock (``Lab.wait``)."""
    names = None if switches is None else sorted(switches)
    last, unchanged = _essentials(snapshot(lab, names)), 0.0
    for _ in range(max(1, round(timeout / step))):
        lab.wait(step)
        now = _essentials(snapshot(lab, names))
        if now != last:
            last, unchanged = now, 0.0
            continue
        unchanged += step
        if unchanged >= still - 1e-9:
            return True
    return False


def pg_rx(snap: dict, switch: str, port: str, pg: int) -> int:
    return snap[switch]["ports"][port]["pgs"][str(pg)]["rx_packets"]


def queue_tx(snap: dict, switch: str, port: str, queue: int) -> int:
    return snap[switch]["ports"][port]["queues"][str(queue)]["tx_packets"]


def drops(snap: dict, switch: str, reason: str) -> int:
    return snap[switch]["drops"].get(reason, 0)


def trimmed(snap: dict, moved: dict) -> dict:
    """The counters a check reasons about (drops, per port rx/tx, PGs, queues) of what
    ``moved`` (a ``delta``) names: its switches, their ports, the PGs and queues that
    counted frames, without the FDB, ARP and route tables."""
    out: dict = {}
    for switch, c in snap.items():
        if switch not in moved:
            continue
        ports = {}
        for port, seen in moved[switch].get("ports", {}).items():
            v = c.get("ports", {}).get(port, {})
            ports[port] = {k: v[k] for k in ("rx_packets", "tx_packets", "forwarded", "drops")
                           if k in v}
            for group in ("pgs", "queues"):
                if group in seen:
                    ports[port][group] = {i: v.get(group, {}).get(i) for i in seen[group]}
        out[switch] = {"drops": c.get("drops", {}), "ports": ports}
    return out


def delta(before: dict, after: dict) -> dict:
    """Only what changed, per switch: drops by reason, and per port rx/tx, PGs, queues."""
    out: dict = {}
    for switch, now in after.items():
        was = before.get(switch, {})
        d: dict = {}
        dropped = {r: n - was.get("drops", {}).get(r, 0)
                   for r, n in now.get("drops", {}).items()
                   if n != was.get("drops", {}).get(r, 0)}
        if dropped:
            d["drops"] = dropped
        for port, c in now.get("ports", {}).items():
            p0 = was.get("ports", {}).get(port, {})
            pd = {k: c[k] - p0.get(k, 0) for k in ("rx_packets", "tx_packets")
                  if c.get(k, 0) != p0.get(k, 0)}
            for group, key in (("pgs", "rx_packets"), ("queues", "tx_packets")):
                moved = {i: v[key] - p0.get(group, {}).get(i, {}).get(key, 0)
                         for i, v in c.get(group, {}).items()
                         if v[key] != p0.get(group, {}).get(i, {}).get(key, 0)}
                if moved:
                    pd[group] = moved
            port_drops = {r: n - p0.get("drops", {}).get(r, 0)
                          for r, n in c.get("drops", {}).items()
                          if n != p0.get("drops", {}).get(r, 0)}
            if port_drops:
                pd["drops"] = port_drops
            if pd:
                d.setdefault("ports", {})[port] = pd
        if d:
            out[switch] = d
    return out


# --------------------------------------------------------------------------- hosts


def same_subnet(a: list[IPv4Interface | IPv6Interface],
                b: list[IPv4Interface | IPv6Interface]) -> bool:
    return any(x.network == y.network for x in a for y in b)
