"""The L2 domains of a lab, computed from its topology and its switches' configs.

A domain is everything a frame that cannot be routed (RoCEv1, EtherType 0x8915) can reach:
the endpoints joined by bridging. Checks compute their expectations from here, so nothing
about a lab's shape (which hosts share a VLAN, which links are trunks) is written down twice.

How it is computed, mirroring what the emulated switch does with a frame:

- a switch port that is a member of VLAN V (``VLAN_MEMBER``, any tagging mode) belongs to
  the segment ``(switch, V)``;
- a link between two switch ports carries each VLAN of one end either tagged with its VID
  (``tagged`` member) or untagged (the port's ``untagged``/``priority_tagged`` VLAN, sent
  with no tag or a VID 0 tag). The far end takes a tagged VID V into its own VLAN V if it is
  a member of V, and an untagged frame into its untagged VLAN. Each such hand-over joins the
  two segments (union-find). So two trunk ports both tagged in V join; V on one side and W
  on the other do not (a tagged frame is dropped as ``vlan_not_member``); two untagged ports
  in different VLANs *do* join (a native-VLAN mismatch leaks frames, and the domain says so
  by holding both VIDs);
- a host interface wired to a member port is in the segment of that port's untagged VLAN.
  On a tagged-only port the host reaches the port's VLANs only by tagging its frames: it is
  listed in those domains as a tagged attachment (``Attachment.tagged``);
- routed ports (``INTERFACE``) are members of nothing, so they split domains. A host wired to
  a routed or unconfigured port, or only to other hosts, is in a domain of its own wire.

Ports are listed as ``(node, iface)`` with the wire names of the topology (``leaf1:eth3``),
the names captures and probes use. A trunk port is in every domain whose VLAN it carries.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import IPv4Interface

from ..fabric.config import SwitchConfig
from .topology import Endpoint, Topology

Segment = tuple[str, int]  # (switch, VLAN id)
Port = tuple[str, str]  # (node, iface), e.g. ("leaf1", "eth3")


@dataclass(frozen=True)
class Attachment:
    """One host interface's way into a domain."""

    host: str
    iface: str
    switch: str | None  # None when the host is wired to another host
    port: str | None  # the switch's wire name (eth3)
    vid: int | None  # VLAN the host lands in; None on a routed/unconfigured port or host wire
    tagged: bool = False  # the host reaches this VLAN only with frames tagged ``vid``


@dataclass(frozen=True)
class Domain:
    """One L2 domain: the VLAN segments bridged together and every endpoint on them."""

    segments: frozenset[Segment]
    ports: frozenset[Port]  # switch member ports and host interfaces, wire names
    attachments: tuple[Attachment, ...] = ()
    gateways: dict[str, tuple[IPv4Interface, ...]] = field(  # switch -> its SVI addresses
        default_factory=dict, hash=False)

    @property
    def vids(self) -> frozenset[int]:
        return frozenset(vid for _, vid in self.segments)

    @property
    def vid(self) -> int | None:
        """The domain's VLAN id when it has exactly one (the normal case)."""
        return next(iter(self.vids)) if len(self.vids) == 1 else None

    @property
    def hosts(self) -> frozenset[str]:
        """Hosts in the domain, untagged or tagged."""
        return frozenset(a.host for a in self.attachments)

    @property
    def untagged_hosts(self) -> frozenset[str]:
        """Hosts that are in the domain with plain (untagged or priority-tagged) frames."""
        return frozenset(a.host for a in self.attachments if not a.tagged)

    @property
    def switches(self) -> frozenset[str]:
        return frozenset(switch for switch, _ in self.segments)

    @property
    def name(self) -> str:
        """``Vlan100``, ``Vlan100+Vlan200`` for a leaking domain, or the wire for no VLAN."""
        if self.vids:
            return "+".join(f"Vlan{vid}" for vid in sorted(self.vids))
        return "wire " + ",".join(f"{n}:{i}" for n, i in sorted(self.ports))

    def __str__(self) -> str:
        return f"{self.name} domain {{{','.join(sorted(self.hosts))}}}"

    def attachment(self, host: str) -> Attachment | None:
        return next((a for a in self.attachments if a.host == host), None)


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict = {}

    def add(self, item) -> None:
        self.parent.setdefault(item, item)

    def find(self, item):
        root = item
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[item] != root:  # path compression
            self.parent[item], item = root, self.parent[item]
        return root

    def union(self, a, b) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


@dataclass
class _PortVlans:
    """One switch port's VLAN membership: its untagged VLAN and every VID it carries."""

    native: int | None = None
    vids: set[int] = field(default_factory=set)

    def sends(self) -> list[tuple[int, int | None]]:
        """(VLAN, wire tag) for each VLAN the port carries; tag None = untagged/VID 0."""
        return [(vid, None if vid == self.native else vid) for vid in sorted(self.vids)]

    def takes(self, tag: int | None) -> int | None:
        """The VLAN a frame arriving with ``tag`` lands in, None when it is dropped."""
        if tag is None:
            return self.native
        return tag if tag in self.vids else None


def _membership(config: SwitchConfig) -> dict[str, _PortVlans]:
    """SONiC port name -> its VLAN membership."""
    ports: dict[str, _PortVlans] = {}
    for vlan in config.vlans.values():
        for port, mode in vlan.members.items():
            entry = ports.setdefault(port, _PortVlans())
            entry.vids.add(vlan.vid)
            if mode in ("untagged", "priority_tagged"):
                entry.native = vlan.vid
    return ports


def l2_domains(topo: Topology) -> list[Domain]:
    """Every L2 domain of the lab, ordered by VLAN id then hosts. Every host is in at least
    one (possibly a domain of its own wire); switch ports not in a VLAN are in none."""
    member: dict[str, dict[str, _PortVlans]] = {
        node.name: _membership(node.config) for node in topo.switches if node.config}
    uf = _UnionFind()
    for switch, ports in member.items():
        for vlans in ports.values():
            for vid in vlans.vids:
                uf.add((switch, vid))

    def vlans_at(ep: Endpoint) -> _PortVlans | None:
        if ep.node not in member:
            return None
        return member[ep.node].get(topo.port(ep.node, ep.iface))

    host_wires: list[tuple[Endpoint, Endpoint]] = []  # (host end, other end)
    for link in topo.links:
        a, b = vlans_at(link.a), vlans_at(link.b)
        for near, far, near_ep, far_ep in ((a, b, link.a, link.b), (b, a, link.b, link.a)):
            if near is not None and far is not None:
                for vid, tag in near.sends():
                    lands = far.takes(tag)
                    if lands is not None:
                        uf.union((near_ep.node, vid), (far_ep.node, lands))
            elif near_ep.node not in member:
                host_wires.append((near_ep, far_ep))

    groups: dict[Segment, set[Segment]] = {}
    for segment in uf.parent:
        groups.setdefault(uf.find(segment), set()).add(segment)
    builders: dict[Segment, dict] = {
        root: {"segments": segs, "ports": set(), "attachments": [], "gateways": {}}
        for root, segs in groups.items()}
    for root, segs in groups.items():
        out = builders[root]
        for switch, vid in segs:
            for iface, port in topo.nodes[switch].ports.ports.items():  # wired members
                if port in member[switch] and vid in member[switch][port].vids:
                    out["ports"].add((switch, iface))
            config = topo.nodes[switch].config
            for vlan in config.vlans.values():
                if vlan.vid == vid and vlan.addresses:
                    out["gateways"][switch] = vlan.addresses

    isolated = _UnionFind()  # host interfaces not in any VLAN: grouped by host-to-host wires
    lone: dict[Port, list[Attachment]] = {}
    lone_ports: dict[Port, set[Port]] = {}
    for host_ep, other in host_wires:
        me = (host_ep.node, host_ep.iface)
        vlans = vlans_at(other)
        if other.node in member and vlans is not None and vlans.vids:
            if vlans.native is not None:
                builders[uf.find((other.node, vlans.native))]["attachments"].append(
                    Attachment(host_ep.node, host_ep.iface, other.node, other.iface,
                               vlans.native))
                builders[uf.find((other.node, vlans.native))]["ports"].add(me)
            for vid in sorted(vlans.vids - {vlans.native}):
                builders[uf.find((other.node, vid))]["attachments"].append(
                    Attachment(host_ep.node, host_ep.iface, other.node, other.iface, vid,
                               tagged=True))
                builders[uf.find((other.node, vid))]["ports"].add(me)
            continue
        isolated.add(me)
        switch = other.node if other.node in member else None
        lone.setdefault(me, []).append(Attachment(
            host_ep.node, host_ep.iface, switch, other.iface if switch else None, None))
        lone_ports.setdefault(me, {me}).add((other.node, other.iface))
        if switch is None:  # host to host: the two ends are one wire
            isolated.add((other.node, other.iface))
            isolated.union(me, (other.node, other.iface))

    domains = [Domain(frozenset(b["segments"]), frozenset(b["ports"]),
                      tuple(sorted(b["attachments"], key=lambda a: (a.host, a.iface))),
                      dict(sorted(b["gateways"].items())))
               for b in builders.values()]
    wires: dict[Port, tuple[set[Port], list[Attachment]]] = {}
    for me in isolated.parent:
        ports, attachments = wires.setdefault(isolated.find(me), (set(), []))
        ports |= lone_ports.get(me, {me})
        attachments += lone.get(me, [])
    domains += [Domain(frozenset(), frozenset(ports),
                       tuple(sorted(atts, key=lambda a: (a.host, a.iface))))
                for ports, atts in wires.values()]
    return sorted(domains, key=lambda d: (sorted(d.vids) or [4096], sorted(d.hosts),
                                          sorted(d.ports)))


def domains_of(topo: Topology, host: str) -> list[Domain]:
    """Every domain the host is in (tagged attachments included)."""
    if host not in topo.nodes or topo.nodes[host].is_switch:
        raise ValueError(f"{host!r} is not a host of lab {topo.name}")
    return [d for d in l2_domains(topo) if host in d.hosts]


def domain_of(topo: Topology, host: str) -> Domain:
    """The domain a host's plain (untagged) frames are bridged in: its first interface's.

    A host with no untagged attachment (only tagged-only ports) gets its first tagged
    domain; a host with no wire at all raises ValueError.
    """
    domains = domains_of(topo, host)
    if not domains:
        raise ValueError(f"{host} is not wired to anything in lab {topo.name}")
    first_iface = next(iter(topo.interfaces(host)), None)

    def rank(d: Domain) -> tuple:
        a = next(a for a in d.attachments if a.host == host)
        return (a.tagged, a.iface != first_iface, a.iface)

    return min(domains, key=rank)
