"""IPv4 routing: L3 interfaces, routing table with ECMP, ARP neighbours, ICMP.

The router sits behind every L3 interface (routed ports and VLAN SVIs), all of which use
the switch's MAC. It

- routes IPv4 by longest prefix match over the connected subnets of INTERFACE and
  VLAN_INTERFACE and the STATIC_ROUTE table (equal prefixes: lowest distance wins;
  connected routes have distance 0), spreading a route's next hops by a hash of the
  flow (``ecmp_index``);
- decrements the TTL with an RFC 1624 checksum update and rewrites the MACs, leaving
  DSCP/ECN alone; TTL <= 1 is answered with ICMP time exceeded from the ingress
  interface's address, so traceroute shows each hop;
- resolves next hops with ARP, holding up to 16 packets per next hop, retrying every
  second and giving up after 3 requests; learned entries are re-probed after 600 s
  (still used meanwhile) and forgotten when the probe goes unanswered;
- answers ARP for the ingress interface's own addresses and ICMP echo for any of the
  switch's addresses (replies are routed back like any packet).

Like the bridge, it appends ``(port, frame, cls)`` to an ``out`` list and returns a
disposition (see ``counters``). ``cls`` is the ingress classification ``(tc, pg)``, which a
routed packet keeps (while held for ARP too); what the switch originates carries
``CPU_CLASS``. Routes are cached per destination address, and the cache holds neighbour
objects whose resolution state changes in place, so it only needs
clearing when the table or the set of neighbours changes.
"""
from __future__ import annotations

import struct
import zlib
from ipaddress import IPv4Address, IPv4Interface, IPv6Interface
from typing import Iterable, NamedTuple

from ..config import StaticRoute
from .bridge import VlanBridge
from .classify import CPU_CLASS
from .counters import (ARP_NOT_FOR_US, ARP_QUEUE_FULL, ARP_UNRESOLVED, BLACKHOLE, CpuCounters,
                       FORWARDED, HELD, IP_HEADER_ERROR, MALFORMED, MTU_EXCEEDED, NO_ROUTE,
                       NON_IP_TO_ROUTER, PORT_DOWN, TO_CPU, TO_ROUTER_UNSUPPORTED, TTL_EXPIRED)
from .frames import (ARP_REPLY, ARP_REQUEST, BROADCAST_MAC, ETH_P_ARP, ETH_P_IPV4,
                     ICMP_ECHO_REQUEST, ICMP_ERROR_TYPES, ICMP_TIME_EXCEEDED, IPPROTO_ICMP,
                     IPPROTO_TCP, IPPROTO_UDP, IPV4_HEADER, MIN_FRAME_LEN, U16, ZERO_MAC,
                     arp_packet, icmp_echo_reply, icmp_error, ip6_text, ip_text, ipv4_packet,
                     link_local6, mac_text, parse_arp, ttl_decrement)
from .ports import PortState

ARP_MAX_HELD = 16  # packets waiting per unresolved next hop
ARP_RETRY_S = 1.0
ARP_TRIES = 3
ARP_LIFETIME_S = 600.0
ROUTE_CACHE_MAX = 65536

MASKS = [(0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF for plen in range(33)]
MASKS6 = [((1 << 128) - 1) ^ ((1 << (128 - plen)) - 1) for plen in range(129)]
_PROTO_BYTE = [bytes((i,)) for i in range(256)]
_FLOW_5TUPLE = struct.Struct("!IIBHH")
_FLOW_3TUPLE = struct.Struct("!IIB")


# --- ECMP ---------------------------------------------------------------------------------

def flow_hash(src: int, dst: int, proto: int, sport: int | None = None,
              dport: int | None = None) -> int:
    """ECMP hash: zlib.crc32 of the packed 5-tuple (3-tuple when there are no ports).

    The packing (``!IIBHH``) is exactly the header bytes (addresses, protocol, ports in
    network order), so the per-packet path hashes slices of the frame and gets the same
    value. RoCEv2 varies the UDP source port per queue pair, which is what spreads it.
    """
    if sport is None or dport is None:
        return zlib.crc32(_FLOW_3TUPLE.pack(src, dst, proto))
    return zlib.crc32(_FLOW_5TUPLE.pack(src, dst, proto, sport, dport))


def ecmp_index(src: int, dst: int, proto: int, sport: int | None, dport: int | None,
               n: int) -> int:
    """Which of ``n`` equal-cost next hops (in configured order) a flow takes."""
    return flow_hash(src, dst, proto, sport, dport) % n


def packet_flow_hash(packet: bytes, offset: int = 0, salt: int = 0) -> int:
    """``flow_hash`` of the IPv4 packet at ``offset``: 5-tuple for TCP/UDP, 3-tuple for
    other protocols and for fragments (only a first fragment has ports; keeping every
    fragment of a datagram on one path avoids reordering)."""
    ihl = (packet[offset] & 0x0F) << 2
    proto = packet[offset + 9]
    frag = packet[offset + 6] << 8 | packet[offset + 7]
    key = packet[offset + 12:offset + 20] + _PROTO_BYTE[proto]
    if (proto == IPPROTO_UDP or proto == IPPROTO_TCP) and not frag & 0x3FFF:
        key += packet[offset + ihl:offset + ihl + 4]
    return zlib.crc32(key, salt)


# --- interfaces and neighbours --------------------------------------------------------------

class L3Interface:
    """A routed port or a VLAN's SVI: addresses, and how to put a frame on its wire(s).

    IPv4 and IPv6 addresses are kept apart (``addresses``, ``addresses6``), each family's
    router reading its own; an interface with an IPv6 address also has the fe80::/64
    link-local address made from the router MAC, as every IPv6 router interface does.
    """

    __slots__ = ("name", "port", "vlan", "addresses", "ips", "addresses6", "ips6",
                 "link_local6", "router_mac")

    def __init__(self, name: str, addresses: Iterable[IPv4Interface | IPv6Interface],
                 router_mac: bytes, port: PortState | None = None,
                 vlan: VlanBridge | None = None) -> None:
        self.name = name
        self.port = port
        self.vlan = vlan
        given = list(addresses)
        # (address, network, mask, prefix length), all ints
        self.addresses = tuple(
            (int(a.ip), int(a.network.network_address), MASKS[a.network.prefixlen],
             a.network.prefixlen) for a in given if a.version == 4)
        self.ips = frozenset(a[0] for a in self.addresses)
        self.addresses6 = tuple(
            (int(a.ip), int(a.network.network_address), MASKS6[a.network.prefixlen],
             a.network.prefixlen) for a in given if a.version == 6)
        self.link_local6 = link_local6(router_mac) if self.addresses6 else None
        self.ips6 = frozenset([*(a[0] for a in self.addresses6),
                               *([self.link_local6] if self.link_local6 else [])])
        self.router_mac = router_mac

    @property
    def up(self) -> bool:
        return self.port.up if self.port is not None else self.vlan.up

    def on_link(self, ip: int) -> bool:
        """Whether ``ip`` is in one of this interface's subnets."""
        return any(ip & mask == net for _, net, mask, _ in self.addresses)

    def source_for(self, ip: int) -> int | None:
        """The address to speak from toward ``ip``: the one whose subnet holds it, else
        the first one; None if the interface has no address."""
        for addr, net, mask, _ in self.addresses:
            if ip & mask == net:
                return addr
        return self.addresses[0][0] if self.addresses else None

    def send(self, dst: bytes, ethertype: int, payload: bytes, prio: int, cls: tuple,
             out: list, now: float) -> str:
        """Put ``payload`` on the wire toward ``dst``, from the router MAC.

        Routed ports send untagged (the priority bits are a QoS concern of a later stage);
        an SVI sends through its VLAN, to the learned port or flooded, tagged per member.
        Frames are padded to 60 bytes (a short routed packet, ARP, ICMP).
        """
        port = self.port
        if port is None:
            return self.vlan.send(dst, self.router_mac, ethertype, payload, prio, cls, out,
                                  now)
        if not port.up:
            return PORT_DOWN
        if len(payload) > port.mtu:
            return MTU_EXCEEDED
        frame = dst + self.router_mac + U16.pack(ethertype) + payload
        if len(frame) < MIN_FRAME_LEN:
            frame += bytes(MIN_FRAME_LEN - len(frame))
        out.append((port, frame, cls))
        return FORWARDED


# Neighbour states
NEW = "new"  # created by a route lookup, nothing sent yet
INCOMPLETE = "incomplete"  # ARP request(s) out, packets held
REACHABLE = "reachable"
PROBE = "probe"  # lifetime over: re-resolving while still using the known MAC


class Neighbor:
    """An ARP entry: next hop or directly connected host, its MAC and its timers.

    ``l2`` is the ready-made Ethernet header (MACs + EtherType) when the neighbour sits
    behind a routed port, so the common routed case is one bytes join.
    """

    __slots__ = ("ip", "iface", "port", "mac", "l2", "state", "expires", "tries",
                 "next_retry", "pending", "ethertype")

    def __init__(self, ip: int, iface: L3Interface, ethertype: int = ETH_P_IPV4) -> None:
        self.ip = ip
        self.ethertype = ethertype  # ETH_P_IPV6 for an NDP entry
        self.iface = iface
        self.port = iface.port  # None behind an SVI: the port comes from the FDB
        self.mac: bytes | None = None
        self.l2: bytes | None = None
        self.state = NEW
        self.expires = 0.0
        self.tries = 0
        self.next_retry = 0.0
        # (owner counters, IPv4 packet ready to send, priority bits, class)
        self.pending: list[tuple[object, bytes, int, tuple]] = []

    def resolved(self, mac: bytes, now: float) -> None:
        self.mac = mac
        if self.port is not None:
            self.l2 = mac + self.iface.router_mac + U16.pack(self.ethertype)
        self.state = REACHABLE
        self.expires = now + ARP_LIFETIME_S
        self.tries = 0

    def as_dict(self, now: float) -> dict:
        text = ip_text(self.ip) if self.ethertype == ETH_P_IPV4 else ip6_text(self.ip)
        return {"ip": text, "interface": self.iface.name,
                "mac": mac_text(self.mac) if self.mac else None, "state": self.state,
                "held": len(self.pending),
                "expires_in": round(self.expires - now, 3) if self.mac else None}


# --- routing table ------------------------------------------------------------------------

class Route(NamedTuple):
    network: int
    prefixlen: int
    distance: int
    source: str  # "connected" | "static" | a protocol's name ("bgp")
    nexthops: tuple[tuple[int | None, L3Interface], ...]  # (None = the destination itself)
    blackhole: bool = False
    version: int = 4  # 6: network and next hops are IPv6

    def as_dict(self) -> dict:
        text = ip_text if self.version == 4 else ip6_text
        return {"prefix": f"{text(self.network)}/{self.prefixlen}", "source": self.source,
                "distance": self.distance, "blackhole": self.blackhole,
                "nexthops": [{"ip": text(ip) if ip is not None else None,
                              "interface": iface.name} for ip, iface in self.nexthops]}


class LearnedRoute(NamedTuple):
    """A route a routing protocol chose (BGP through FRR): next hops by interface name
    (``Ethernet0``, ``Vlan100``), bound to the L3 interfaces at each rebuild; ``distance``
    is the protocol's administrative distance (eBGP 20, iBGP 200), so STATIC_ROUTE (1)
    wins over BGP for the same prefix, as in SONiC."""

    distance: int
    source: str
    nexthops: tuple[tuple[int | None, str], ...]


class RoutingTable:
    """Longest prefix match: one dict per prefix length, probed longest first. ``masks``
    (``MASKS`` or ``MASKS6``) says the family."""

    def __init__(self, masks: list[int] = MASKS) -> None:
        self._masks = masks
        self._by_len: dict[int, dict[int, Route]] = {}
        self._lens: list[int] = []

    def add(self, route: Route) -> None:
        """Install ``route`` unless the same prefix already has one at a lower or equal
        distance (the first configured wins a tie)."""
        table = self._by_len.setdefault(route.prefixlen, {})
        current = table.get(route.network)
        if current is None or route.distance < current.distance:
            table[route.network] = route
        self._lens = sorted(self._by_len, reverse=True)

    def lookup(self, dst: int) -> Route | None:
        masks = self._masks
        for plen in self._lens:
            route = self._by_len[plen].get(dst & masks[plen])
            if route is not None:
                return route
        return None

    def routes(self) -> list[Route]:
        return [r for plen in self._lens for _, r in sorted(self._by_len[plen].items())]


# --- the router ---------------------------------------------------------------------------

class NeighborCache:
    """The neighbour cache both routers keep, ARP for IPv4 (``Router``) and neighbour
    discovery for IPv6 (``Router6``): entries created on demand, retried, given up, re-probed
    when old, packets held while one resolves (``_send_ip``) and sent once it has (``_learn``).
    A router sets the class constants and ``_request`` (one who-has or solicitation);
    ``neighbors``, ``table`` and ``_cache`` are its own; ``rebuild`` makes the table from its
    interfaces (``_subnets``), static and learned routes, and ``resolve`` maps a destination
    to its next-hop entries through it.

    ``next_timer`` walks every entry, and its callers ask after every frame, so the answer is
    kept until an entry's timer moves: a router sets ``timers_moved`` where it starts
    resolving a next hop (``_send_ip``) or learns one (``_learn``); ``tick`` and ``_forget``
    set it here."""

    TRIES: int
    RETRY_S: float
    UNRESOLVED: str  # the drop reason of what waited for a next hop that never answered
    QUEUE_FULL: str  # the drop reason of a packet beyond MAX_HELD waiting for one
    MAX_HELD = ARP_MAX_HELD
    ETHERTYPE: int
    neighbors: dict[tuple[str, int], Neighbor]
    MASKS: list[int]  # the family's prefix masks, for its RoutingTable
    VERSION: int  # 4 or 6, on the routes it builds
    interfaces: dict[str, L3Interface]
    _statics: list[Route]
    _learned: dict[tuple[int, int], LearnedRoute]
    table: RoutingTable
    _cache: dict[int, tuple[Neighbor, ...] | str]
    timers_moved = True  # next_timer must walk the entries again (an instance attribute once set)
    _next_timer: float | None = None

    def rebuild(self) -> None:
        """Recompute the active table from interface states (a down interface takes its
        connected subnets and the next hops through it away; a static route with no next
        hop left is not installed, so a less specific one can take over; protocol routes
        are bound to the interfaces by name) and forget the neighbours of down interfaces,
        dropping what they held."""
        table, version = RoutingTable(self.MASKS), self.VERSION
        for iface in self.interfaces.values():
            if iface.up:
                for net, plen in self._subnets(iface):
                    table.add(Route(net, plen, 0, "connected", ((None, iface),), False, version))
        for route in self._statics:
            if route.blackhole:
                table.add(route._replace(nexthops=()))
                continue
            hops = tuple(h for h in route.nexthops if h[1].up)
            if hops:
                table.add(route._replace(nexthops=hops))
        for (net, plen), learned in self._learned.items():
            hops = tuple((ip, self.interfaces[name]) for ip, name in learned.nexthops
                         if name in self.interfaces and self.interfaces[name].up)
            if hops:
                table.add(Route(net, plen, learned.distance, learned.source, hops, False,
                                version))
        self.table = table
        self._cache.clear()
        for key, nh in list(self.neighbors.items()):
            if not nh.iface.up:
                self._forget(key, nh, PORT_DOWN)

    def resolve(self, dst: int) -> tuple[Neighbor, ...] | str:
        """The next-hop neighbours for ``dst`` (one per ECMP member), or a drop reason;
        cached per destination until the table changes."""
        hops = self._cache.get(dst)
        if hops is not None:
            return hops
        route = self.table.lookup(dst)
        if route is None or not self._routable(dst):
            hops = NO_ROUTE
        elif route.blackhole:
            hops = BLACKHOLE
        else:
            hops = tuple(self.neighbor(iface, dst if ip is None else ip)
                         for ip, iface in route.nexthops)
        if len(self._cache) >= ROUTE_CACHE_MAX:
            self._cache.clear()
        self._cache[dst] = hops
        return hops

    @staticmethod
    def _routable(dst: int) -> bool:
        """Whether a destination may be routed at all (IPv6: not link-local or multicast)."""
        return True

    def _send_ip(self, nh: Neighbor, packet: bytes, prio: int, cls: tuple, owner, out: list,
                 now: float) -> str:
        """Send a ready IP packet to a neighbour, or hold it while ARP or NDP resolves it."""
        if nh.mac is not None:
            return nh.iface.send(nh.mac, self.ETHERTYPE, packet, prio, cls, out, now)
        if len(nh.pending) >= self.MAX_HELD:
            return self.QUEUE_FULL
        nh.pending.append((owner, packet, prio, cls))
        if nh.state == NEW:
            nh.state = INCOMPLETE
            nh.tries = 1
            nh.next_retry = now + self.RETRY_S
            self.timers_moved = True
            self._request(nh, out, now)
        return HELD

    def _learn(self, nh: Neighbor, mac: bytes, out: list, now: float) -> None:
        """Record ``mac`` for ``nh`` and send what it held."""
        nh.resolved(mac, now)
        self.timers_moved = True
        pending, nh.pending = nh.pending, []
        for owner, packet, prio, cls in pending:
            owner.settle(nh.iface.send(mac, self.ETHERTYPE, packet, prio, cls, out, now))

    def neighbor(self, iface: L3Interface, ip: int) -> Neighbor:
        """The neighbour entry for ``ip`` on ``iface``, created if new."""
        key = (iface.name, ip)
        nh = self.neighbors.get(key)
        if nh is None:
            nh = self.neighbors[key] = Neighbor(ip, iface, self.ETHERTYPE)
        return nh

    def _forget(self, key: tuple[str, int], nh: Neighbor, reason: str) -> None:
        for owner, _, _, _ in nh.pending:
            owner.settle(reason)
        nh.pending.clear()
        del self.neighbors[key]
        self.timers_moved = True
        self._cache.clear()  # cached routes may hold this neighbour object

    def _request(self, nh: Neighbor, out: list, now: float) -> None:
        raise NotImplementedError

    def tick(self, now: float, out: list) -> None:
        """Retry or give up on unresolved next hops, re-probe old entries."""
        self.timers_moved = True
        for key, nh in list(self.neighbors.items()):
            state = nh.state
            if state == INCOMPLETE or state == PROBE:
                if now < nh.next_retry:
                    continue
                if nh.tries >= self.TRIES:
                    self._forget(key, nh, self.UNRESOLVED)
                    continue
                nh.tries += 1
                nh.next_retry = now + self.RETRY_S
                self._request(nh, out, now)
            elif state == REACHABLE and now >= nh.expires:
                nh.state = PROBE
                nh.tries = 1
                nh.next_retry = now + self.RETRY_S
                self._request(nh, out, now)

    def next_timer(self) -> float | None:
        """When ``tick`` next has work: a retry of a next hop being resolved, or the end of
        a resolved one's lifetime (None: no neighbour has a timer running)."""
        if not self.timers_moved:
            return self._next_timer
        due = None
        for nh in self.neighbors.values():
            state = nh.state
            if state == INCOMPLETE or state == PROBE:
                at = nh.next_retry
            elif state == REACHABLE:
                at = nh.expires
            else:
                continue
            if due is None or at < due:
                due = at
        self._next_timer, self.timers_moved = due, False
        return due


class LearnedRoutes:
    """Routes a routing protocol installed (FRR's, through ``fabric.routesync``), by prefix,
    kept alike by both routers; each merges them into its table in ``rebuild``."""

    _learned: dict[tuple[int, int], LearnedRoute]

    def learn(self, route: LearnedRoute | None, network: int, prefixlen: int) -> None:
        """Install (``route``) or withdraw (None) a protocol's route for a prefix; the
        caller rebuilds once after a batch."""
        if route is None:
            self._learned.pop((network, prefixlen), None)
        else:
            self._learned[network, prefixlen] = route

    def learned(self) -> dict[tuple[int, int], LearnedRoute]:
        return dict(self._learned)


class Router(NeighborCache, LearnedRoutes):
    """Everything L3 of one switch. ``Switch`` hands it frames addressed to the router."""

    TRIES, RETRY_S, UNRESOLVED, ETHERTYPE = ARP_TRIES, ARP_RETRY_S, ARP_UNRESOLVED, ETH_P_IPV4
    QUEUE_FULL, MASKS, VERSION = ARP_QUEUE_FULL, MASKS, 4

    def __init__(self, router_mac: bytes, interfaces: Iterable[L3Interface],
                 static_routes: Iterable[StaticRoute], local_ips: Iterable[int],
                 cpu: CpuCounters, ecmp_salt: int = 0, kernel_stack: bool = False) -> None:
        """``ecmp_salt``: the hash seed (a switch's ECMP hash seed; 0 hashes the bare
        5-tuple), so a simulation's seed can move flows between equal-cost paths.
        ``kernel_stack``: the namespace's kernel owns the switch's addresses too (a BGP
        switch: FRR's sessions are kernel TCP), so what the router does not answer itself
        is the kernel's, not a drop."""
        self.kernel_stack = kernel_stack
        self.router_mac = router_mac
        self.ecmp_salt = ecmp_salt
        self.interfaces = {iface.name: iface for iface in interfaces}
        self.local_ips = frozenset(local_ips)
        self.cpu = cpu
        self.warnings: list[str] = []
        self.neighbors: dict[tuple[str, int], Neighbor] = {}
        self._statics = [self._static_route(sr) for sr in static_routes]
        # routes a routing protocol installed (FRR's, through fabric.routesync), by prefix
        self._learned: dict[tuple[int, int], LearnedRoute] = {}
        self.table = RoutingTable()
        self._cache: dict[int, tuple[Neighbor, ...] | str] = {}
        self.rebuild()

    # --- tables -------------------------------------------------------------------------

    def _static_route(self, sr: StaticRoute) -> Route:
        """A STATIC_ROUTE with each next hop bound to its egress interface: the one named
        by ifname, else the connected interface whose subnet holds it (longest match).
        Next hops that bind to nothing are left out, with a warning."""
        prefix = f"STATIC_ROUTE|{sr.prefix}"
        hops: list[tuple[int | None, L3Interface]] = []
        pairs: list[tuple[IPv4Address | None, str]] = [
            (nh, sr.ifnames[i] if i < len(sr.ifnames) else "")
            for i, nh in enumerate(sr.nexthops)]
        if not sr.nexthops:
            pairs = [(None, name) for name in sr.ifnames]
        for nh, ifname in pairs:
            ip = int(nh) if nh is not None and int(nh) != 0 else None
            if ifname:
                iface = self.interfaces.get(ifname)
                if iface is None:
                    self.warnings.append(f"{prefix}: ifname {ifname} is not an L3 interface;"
                                         " next hop ignored")
                    continue
            elif ip is None:
                self.warnings.append(f"{prefix}: next hop 0.0.0.0 needs an ifname; ignored")
                continue
            else:
                iface = self._connected_interface(ip)
                if iface is None:
                    self.warnings.append(f"{prefix}: next hop {nh} is in no connected subnet;"
                                         " ignored (no recursive resolution)")
                    continue
            if ip is not None and ip in self.local_ips:
                self.warnings.append(f"{prefix}: next hop {nh} is this switch; ignored")
                continue
            hops.append((ip, iface))
        return Route(int(sr.prefix.network_address), sr.prefix.prefixlen, sr.distance,
                     "static", tuple(hops), sr.blackhole)

    def _connected_interface(self, ip: int) -> L3Interface | None:
        best, best_len = None, -1
        for iface in self.interfaces.values():
            for _, net, mask, plen in iface.addresses:
                if ip & mask == net and plen > best_len:
                    best, best_len = iface, plen
        return best

    @staticmethod
    def _subnets(iface: L3Interface) -> list[tuple[int, int]]:
        return [(net, plen) for _, net, _, plen in iface.addresses]

    # --- frames addressed to the router ------------------------------------------------

    def l3_in(self, iface: L3Interface, ingress: PortState, frame: bytes, ethertype: int,
              off: int, prio: int, cls: tuple, out: list, now: float) -> str:
        """A frame to the router MAC: IPv4 is routed, ARP answered, anything else (RoCEv1,
        IPv6, ...) dropped, which is what keeps RoCEv1 inside its L2 domain."""
        if ethertype == ETH_P_IPV4:
            return self.ipv4_in(iface, ingress, frame, off, prio, cls, out, now)
        if ethertype == ETH_P_ARP:
            return self.arp_in(iface, ingress, frame, off, prio, out, now)
        return NON_IP_TO_ROUTER

    def ipv4_in(self, iface: L3Interface, ingress: PortState, frame: bytes, off: int,
                prio: int, cls: tuple, out: list, now: float) -> str:
        """Route one IPv4 packet (the per-packet hot path: keep it lean)."""
        size = len(frame)
        if size < off + 20:
            return MALFORMED
        vihl, tos, total, _, frag, ttl, proto, csum, src, dst = IPV4_HEADER.unpack_from(
            frame, off)
        ihl = (vihl & 0x0F) << 2
        if vihl >> 4 != 4 or ihl < 20 or total < ihl or off + total > size:
            return IP_HEADER_ERROR
        if dst in self.local_ips:
            return self._local_in(frame, off, ihl, total, frag, proto, tos, src, dst, out, now)
        if ttl <= 1:
            self._time_exceeded(iface, frame, off, ihl, total, frag, proto, src, out, now)
            return TTL_EXPIRED
        hops = self._cache.get(dst)
        if hops is None:
            hops = self.resolve(dst)
        if hops.__class__ is str:
            return hops
        if len(hops) == 1:
            nh = hops[0]
        else:
            key = frame[off + 12:off + 20] + _PROTO_BYTE[proto]
            if (proto == IPPROTO_UDP or proto == IPPROTO_TCP) and not frag & 0x3FFF:
                key += frame[off + ihl:off + ihl + 4]
            nh = hops[zlib.crc32(key, self.ecmp_salt) % len(hops)]
        l2 = nh.l2
        if l2 is not None:  # resolved next hop behind a routed port: the common case
            port = nh.port
            if total > port.mtu:
                return MTU_EXCEEDED
            routed = b"".join((l2, frame[off:off + 8], ttl_decrement(csum, ttl, proto),
                               frame[off + 12:off + total]))
            if total < 46:  # the ingress frame's Ethernet padding was not carried over
                routed += bytes(46 - total)
            out.append((port, routed, cls))
            return FORWARDED
        packet = b"".join((frame[off:off + 8], ttl_decrement(csum, ttl, proto),
                           frame[off + 12:off + total]))
        return self._send_ip(nh, packet, prio, cls, ingress.counters, out, now)

    def _local_in(self, frame: bytes, off: int, ihl: int, total: int, frag: int, proto: int,
                  tos: int, src: int, dst: int, out: list, now: float) -> str:
        """To one of our addresses: answer ICMP echo (from the address that was pinged,
        routed back normally); nothing else is served."""
        if (proto == IPPROTO_ICMP and not frag & 0x3FFF and total >= ihl + 8
                and frame[off + ihl] == ICMP_ECHO_REQUEST):
            reply = ipv4_packet(dst, src, IPPROTO_ICMP,
                                icmp_echo_reply(frame[off + ihl:off + total]), tos=tos & 0xFC)
            self.originate(reply, src, out, now)
            return TO_CPU
        return TO_CPU if self.kernel_stack else TO_ROUTER_UNSUPPORTED

    def _time_exceeded(self, iface: L3Interface, frame: bytes, off: int, ihl: int, total: int,
                       frag: int, proto: int, src: int, out: list, now: float) -> None:
        """ICMP time exceeded (type 11, code 0) to the source, from the ingress interface's
        address, unless RFC 1812 forbids an error about this packet."""
        if (frag & 0x1FFF or src == 0 or src >= 0xE0000000 or src in self.local_ips
                or (proto == IPPROTO_ICMP and total > ihl
                    and frame[off + ihl] in ICMP_ERROR_TYPES)):
            return
        source = iface.source_for(src)
        if source is None:
            source = next(iter(sorted(self.local_ips)), None)
            if source is None:
                return
        message = icmp_error(ICMP_TIME_EXCEEDED, 0, frame[off:off + total])
        self.originate(ipv4_packet(source, src, IPPROTO_ICMP, message), src, out, now)

    def originate(self, packet: bytes, dst: int, out: list, now: float) -> None:
        """Route a packet the switch built itself (no TTL decrement); counted as cpu."""
        hops = self.resolve(dst)
        if hops.__class__ is str:
            self.cpu.count(hops)
            return
        nh = hops[packet_flow_hash(packet, salt=self.ecmp_salt) % len(hops)] \
            if len(hops) > 1 else hops[0]
        self.cpu.count(self._send_ip(nh, packet, 0, CPU_CLASS, self.cpu, out, now))

    # --- ARP -------------------------------------------------------------------------------

    def arp_in(self, iface: L3Interface, ingress: PortState, frame: bytes, off: int,
               prio: int, out: list, now: float) -> str:
        """Learn from and answer ARP seen on ``iface``.

        A sender is learned when the packet targets one of the interface's addresses
        (and the sender is on-link); an existing entry is refreshed by any ARP from its
        address (gratuitous ARP, overheard replies). Requests for the interface's own
        addresses are answered to the asking station; other interfaces' addresses are
        not (no proxy ARP).
        """
        arp = parse_arp(frame, off)
        if arp is None:
            return MALFORMED
        ours = arp.tpa in iface.ips
        key = (iface.name, arp.spa)
        nh = self.neighbors.get(key)
        learned = False
        if arp.spa and not arp.sha[0] & 1 and (nh is not None or (ours and iface.on_link(arp.spa))):
            self._learn(nh if nh is not None else self.neighbor(iface, arp.spa), arp.sha,
                        out, now)
            learned = True
        if not ours:
            return TO_CPU if learned else ARP_NOT_FOR_US
        if arp.op == ARP_REQUEST:
            reply = arp_packet(ARP_REPLY, self.router_mac, arp.tpa, arp.sha, arp.spa)
            self.cpu.count(iface.send(frame[6:12], ETH_P_ARP, reply, 0, CPU_CLASS, out, now))
        return TO_CPU

    def _request(self, nh: Neighbor, out: list, now: float) -> None:
        """Broadcast a who-has for ``nh`` out of its interface (flooded on an SVI)."""
        iface = nh.iface
        source = iface.source_for(nh.ip) or 0
        request = arp_packet(ARP_REQUEST, self.router_mac, source, ZERO_MAC, nh.ip)
        self.cpu.count(iface.send(BROADCAST_MAC, ETH_P_ARP, request, 0, CPU_CLASS, out, now))

    # --- views -----------------------------------------------------------------------------

    def arp_table(self, now: float) -> list[dict]:
        return [nh.as_dict(now) for nh in self.neighbors.values() if nh.state != NEW]

    def route_table(self) -> list[dict]:
        return [r.as_dict() for r in self.table.routes()]
