"""Send a few crafted RoCE or PFC frames from a host and see where they went.

A probe answers the questions a lossless fabric's engineer asks first: does a RoCEv2 packet
get from h1 to h3, over which ports, with what left of its TTL, DSCP, ECN and 802.1Q
priority, and is its ICRC still valid on arrival? Does RoCEv1 stay inside its VLAN? Does the
switch consume PFC rather than forward it?

The frames leave the source host's interface as a host would send them (its own addresses,
next-hop MAC from its kernel's neighbour table) and are captured on every wire of the lab in
both directions. Each RoCE frame carries a random nonce, so only our frames count, and only
as RoCE: the ICMP error a host returns quotes the nonce, but is not RoCE.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..labs.lab import Lab
from ..labs.records import HOST_TTL
from . import packets
from ..nic import roce
from ..labs.sighting import Direction, Sighting
from ..nic.roce import ECT0
from .packets import Flow

Kind = Literal["v1", "v2", "pfc"]
KINDS: tuple[Kind, ...] = ("v1", "v2", "pfc")

PROBE_MAGIC = b"rocelab?"  # marks a probe payload; the 8-byte nonce follows it
NONCE_LEN = 8
PROBE_QPN = 0x000011
PFC_QUANTA = 0xFFFF  # the longest pause: what a congested receiver sends
SPORT_BASE = 0xC000  # RoCEv2 source ports from the dynamic range
QUIET_S = 0.2
SETTLE_TIMEOUT_S = 3.0
FIELDS = ("ttl", "dscp", "ecn", "pcp", "vid", "icrc_ok")


class ProbeError(RuntimeError):
    """A probe cannot be sent as asked; the message says why."""


@dataclass(frozen=True)
class Observation:
    """The probe frames one node sent or received on one interface, and what they carried.

    Each field holds the distinct values seen (usually one); ``changed`` names the fields
    whose values differ from the frames as sent.
    """

    node: str
    iface: str
    direction: Direction
    frames: int
    first_seen: float
    ttl: tuple[int | None, ...]
    dscp: tuple[int | None, ...]
    ecn: tuple[int | None, ...]
    pcp: tuple[int | None, ...]
    vid: tuple[int | None, ...]
    icrc_ok: tuple[bool | None, ...]
    changed: tuple[str, ...]


@dataclass
class ProbeResult:
    kind: Kind
    src: str
    dst: str
    sent: list[bytes]
    sightings: list[Sighting]
    pcap_dir: Path | None = None
    hosts: frozenset[str] = frozenset()  # the lab's hosts: the rest are switches
    capture_drops: int = 0  # frames the capture's kernel buffers lost: nonzero = incomplete

    def received_by(self) -> set[str]:
        """Nodes, hosts or switches, that received at least one probe frame."""
        return {s.node for s in self.sightings if s.direction == "in"}

    def hosts_reached(self) -> set[str]:
        return self.received_by() & self.hosts

    def seen_on(self) -> set[tuple[str, str]]:
        """(node, iface) pairs a probe frame crossed, either way."""
        return {(s.node, s.iface) for s in self.sightings}

    def journeys(self) -> dict[int, list[Sighting]]:
        """Each sent RoCE frame's sightings (key: index in ``sent``), in capture order.
        PFC frames carry no nonce: they appear in no journey."""
        index = {_nonce(frame): i for i, frame in enumerate(self.sent)}
        index.pop(None, None)
        out: dict[int, list[Sighting]] = {}
        for s in self.sightings:
            i = index.get(_nonce(s.frame))
            if i is not None:
                out.setdefault(i, []).append(s)
        return out

    def stopped_at(self) -> dict[str, int]:
        """Switch -> how many probe frames it received and sent on nowhere (dropped or
        consumed)."""
        stopped: dict[str, int] = {}
        for path in self._paths():
            sent_on = {s.node for s in path if s.direction == "out"}
            for s in path:
                if s.direction == "in" and s.node not in self.hosts | sent_on:
                    stopped[s.node] = stopped.get(s.node, 0) + 1
        return stopped

    def sent_values(self) -> dict[str, tuple]:
        """Each field's values in the frames as built, the reference for ``changes``."""
        seen = [Sighting.of(self.src, "", "out", 0.0, frame) for frame in self.sent]
        return {name: _distinct(_field(s, name) for s in seen) for name in FIELDS}

    def changes(self) -> list[Observation]:
        """One Observation per (node, iface, direction), in path order: by the earliest
        hop (position along a frame's path) at which it was seen, then by time."""
        groups: dict[tuple[str, str, Direction], list[Sighting]] = {}
        hop: dict[tuple[str, str, Direction], int] = {}
        for path in self._paths():
            for i, s in enumerate(path):
                key = (s.node, s.iface, s.direction)
                groups.setdefault(key, []).append(s)
                hop[key] = min(hop.get(key, i), i)
        reference = self.sent_values()
        out = []
        for (node, iface, direction), sightings in groups.items():
            values = {name: _distinct(_field(s, name) for s in sightings) for name in FIELDS}
            out.append(Observation(
                node, iface, direction, len(sightings), min(s.time for s in sightings),
                **values, changed=tuple(n for n in FIELDS if values[n] != reference[n])))
        return sorted(out, key=lambda o: (hop[o.node, o.iface, o.direction], o.first_seen))

    def _paths(self) -> list[list[Sighting]]:
        """Sightings per sent frame, in capture order; PFC frames, alike and without a
        nonce, make one path together."""
        paths = [self.sightings] if self.kind == "pfc" else self.journeys().values()
        return [sorted(path, key=lambda s: s.time) for path in paths]

    def verdict(self) -> str:
        """One line: where it got to, where it stopped, how far it spread, TTL on arrival."""
        parts = [f"{self.kind} {self.src} -> {self.dst}: {self._reach()}"]
        stopped = self.stopped_at()
        if stopped:
            parts.append("stopped at " + ", ".join(
                f"{node} ({n} of {len(self.sent)})" for node, n in sorted(stopped.items())))
        parts.append(f"seen on {len(self.seen_on())} ports")
        arrived = [s for s in self.sightings if s.node == self.dst and s.direction == "in"]
        if self.kind != "pfc" and arrived:
            sent_ttl = ",".join(map(str, self.sent_values()["ttl"]))
            ttl = ",".join(map(str, _distinct(s.info.ttl for s in arrived if s.info)))
            parts.append(f"TTL {sent_ttl} -> {ttl}")
        broken = sorted({s.port for s in self.sightings if s.info and not s.info.icrc_ok})
        if broken:
            parts.append("ICRC invalid on " + ", ".join(broken))
        if self.capture_drops:
            parts.append(f"capture lost {self.capture_drops} frames: sightings incomplete")
        return "; ".join(parts)

    def _reach(self) -> str:
        reached = self.hosts_reached() - {self.src}
        if self.kind == "pfc":
            return "reached " + (", ".join(sorted(reached)) if reached else "no host")
        others = sorted(reached - {self.dst})
        text = f"reached {self.dst}" if self.dst in reached else f"did not reach {self.dst}"
        if others:
            text += f" (but reached {', '.join(others)})"
        elif self.dst not in reached:
            text += " (reached no host)"
        return text


def _field(s: Sighting, name: str) -> Any:
    if name in ("pcp", "vid"):
        return getattr(s, name)
    return None if s.info is None else getattr(s.info, name)


def _distinct(values: Iterable[Any]) -> tuple:
    return tuple(sorted(set(values), key=lambda v: (v is None, v)))


def _nonce(frame: bytes) -> bytes | None:
    at = frame.find(PROBE_MAGIC)
    if at < 0:
        return None
    return frame[at + len(PROBE_MAGIC):at + len(PROBE_MAGIC) + NONCE_LEN]


# --------------------------------------------------------------------------- sending


@dataclass(frozen=True)
class _Path:
    """How ``src`` would send to ``dst``: its interface, addresses, next hop MAC."""

    iface: str
    src_mac: str
    src_ip: str
    dst_ip: str
    dst_host_mac: str
    next_hop_mac: str


def probe(lab: Lab, src: str, dst: str, kind: Kind, *, count: int = 3,
          dscp: int = roce.DSCP_ROCE, ecn: int = ECT0, pcp: int = 3,
          vlan: int | None = 0, sport: int | None = None, dst_mac: str | None = None,
          pcap_dir: Path | None = None) -> ProbeResult:
    """Send ``count`` probe frames from host ``src`` toward host ``dst`` and capture them
    on every wire of the lab until the fabric is quiet.

    - ``v2``: RoCEv2 RC SEND_ONLY over IPv4, or IPv6 for hosts with only IPv6 addresses
      (``lab.host_addresses``), to the next hop's MAC (``dst`` on the same subnet, else
      the gateway), UDP source port ``sport`` or a new one per frame (ECMP);
    - ``v1``: RoCEv1 SEND_ONLY (GRH, GIDs from the MACs) to ``dst``'s MAC, or to the
      gateway's when ``dst`` is off-subnet, which is where a host would send it;
    - ``pfc``: a PFC frame pausing priority ``pcp`` out of the interface toward ``dst``.

    RoCE frames carry ``dscp``/``ecn`` and, with ``vlan`` 0 (default), a priority tag with
    ``pcp``; ``vlan`` N tags VID N, None sends them untagged. ``dst_mac`` overrides the
    next hop's MAC. ``pcap_dir`` keeps one pcapng per interface as evidence.
    """
    _check(lab, src, dst, kind, count, dscp, ecn, pcp, vlan)
    path = _resolve(lab, src, dst, need_next_hop=kind != "pfc" and dst_mac is None)
    if kind == "pfc":
        sent = [bytes(packets.pfc_frame(path.src_mac, {pcp: PFC_QUANTA}))] * count
        match = _pfc_match(path.src_mac)
    else:
        nonces = [os.urandom(NONCE_LEN) for _ in range(count)]
        sent = [_roce_frame(kind, path, dst_mac, i, nonce, dscp, ecn, pcp, vlan, sport)
                for i, nonce in enumerate(nonces)]
        match = _roce_match(set(nonces))
    with lab.capture(pcap_dir=pcap_dir, match=match) as cap:
        lab.send_frames(src, path.iface, sent)
        cap.wait_quiet(QUIET_S, SETTLE_TIMEOUT_S)
    return ProbeResult(kind, src, dst, sent, cap.frames(), pcap_dir,
                       frozenset(h.name for h in lab.topology.hosts), cap.kernel_drops())


def _check(lab: Lab, src: str, dst: str, kind: str, count: int, dscp: int, ecn: int,
           pcp: int, vlan: int | None) -> None:
    if lab.runtime_name != "sim" and os.geteuid() != 0:
        raise ProbeError("probing needs root: it opens raw sockets inside the lab's "
                         "namespaces")
    hosts = sorted(h.name for h in lab.topology.hosts)
    for role, host in (("src", src), ("dst", dst)):
        if host not in hosts:
            raise ProbeError(f"lab {lab.name} has no host {host!r} ({role}; hosts: "
                             f"{', '.join(hosts)})")
    if src == dst:
        raise ProbeError(f"src and dst are both {src}")
    checks = ((kind in KINDS, f"kind {kind!r} is not one of {', '.join(KINDS)}"),
              (count >= 1, f"count {count} must be at least 1"),
              (0 <= dscp <= 63, f"dscp {dscp} is not 0..63"),
              (0 <= ecn <= 3, f"ecn {ecn} is not 0..3"),
              (0 <= pcp <= 7, f"pcp {pcp} is not 0..7"),
              (vlan is None or 0 <= vlan <= 4094, f"vlan {vlan} is not 0..4094"))
    for ok, problem in checks:
        if not ok:
            raise ProbeError(problem)


def _resolve(lab: Lab, src: str, dst: str, *, need_next_hop: bool) -> _Path:
    """Ask the hosts (their kernels, live): addresses, the route src takes to dst, the next
    hop's MAC."""
    addrs = lab.host_addresses()
    for host in (src, dst):
        if host not in addrs:
            raise ProbeError(f"{host} has no IP address on a wired interface")
    iface, gateway = lab.route(src, addrs[dst])
    dst_host_mac = lab.mac(dst, lab.host_iface(dst, addrs[dst]))
    next_hop = gateway or addrs[dst]
    next_hop_mac = ""
    if need_next_hop:
        next_hop_mac = lab.neighbour(src, iface, next_hop) or ""
        if not next_hop_mac:
            raise ProbeError(f"{src} cannot resolve {next_hop}'s MAC on {iface} "
                             "(no ARP or neighbour discovery reply)")
    return _Path(iface, lab.mac(src, iface), addrs[src], addrs[dst], dst_host_mac, next_hop_mac)


def _roce_frame(kind: Kind, path: _Path, dst_mac: str | None, i: int, nonce: bytes,
                dscp: int, ecn: int, pcp: int, vlan: int | None, sport: int | None) -> bytes:
    if kind == "v2":
        flow = Flow(path.src_mac, dst_mac or path.next_hop_mac, path.src_ip, path.dst_ip,
                    version=2, sport=SPORT_BASE + i if sport is None else sport, dscp=dscp,
                    ttl=HOST_TTL, vid=vlan, pcp=pcp)
    else:
        flow = Flow(path.src_mac, dst_mac or path.next_hop_mac,
                    packets.gid_from_mac(path.src_mac), packets.gid_from_mac(path.dst_host_mac),
                    version=1, dscp=dscp, ttl=HOST_TTL, vid=vlan, pcp=pcp)
    return bytes(packets.rc_send(flow, PROBE_QPN, i, PROBE_MAGIC + nonce, ecn=ecn))


def _roce_match(nonces: set[bytes]) -> Callable[[bytes], bool]:
    """Our RoCE frames only: not the ICMP errors that quote them."""
    def match(frame: bytes) -> bool:
        return _nonce(frame) in nonces and roce.classify(frame) is not None
    return match


def _pfc_match(src_mac: str) -> Callable[[bytes], bool]:
    mac = bytes.fromhex(src_mac.replace(":", ""))

    def match(frame: bytes) -> bool:
        return frame[6:12] == mac and roce.parse_pfc(frame) is not None
    return match
