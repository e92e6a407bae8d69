"""IPv6 routing: routing table with ECMP, neighbour discovery, ICMPv6.

The IPv6 half of the switch's router, over the same L3 interfaces as ``router.Router``
(each interface's ``addresses6``, plus its fe80::/64 link-local address made from the
router MAC), and built on the same base (``router_base.RouterBase``: tables, route and
neighbour caches, timers). It

- routes IPv6 by longest prefix match over the connected subnets of INTERFACE and
  VLAN_INTERFACE and the IPv6 entries of STATIC_ROUTE (lowest distance wins a tie;
  connected routes have distance 0), spreading a route's next hops by a hash of the flow:
  source, destination, next header and, for UDP and TCP, the ports (the IPv6 5-tuple; RoCEv2
  varies the UDP source port per QP), plus the flow label when ``hash_flow_label`` is on
  (``ecmp.flow_hash6``);
- decrements the hop limit (IPv6 has no header checksum) and rewrites the MACs, leaving
  the traffic class (DSCP, ECN) alone; hop limit <= 1 is answered with ICMPv6 time
  exceeded from the ingress interface's address;
- resolves next hops with neighbour solicitations to the solicited-node group (a route's
  next hops as soon as the route is installed, as the IPv4 side does), holding up to 16
  packets per next hop, retrying every second and giving up after 3 (RFC 4861's
  MAX_MULTICAST_SOLICIT, RETRANS_TIMER); learned entries are re-probed after 600 s, as
  the IPv4 side does;
- answers NS for the ingress interface's own addresses (router flag set) and ICMPv6 echo
  for any of the switch's addresses; the replies are routed back like any packet, except
  NAs, which go straight back to the soliciting station.

Link-local destinations are never routed; multicast is not forwarded (only NS/NA to the
router are read). Extension headers are not parsed: a packet whose next header is not
UDP/TCP hashes on the 3-tuple and is routed all the same.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from .classify import CPU_CLASS
from .counters import (FORWARDED, IP_HEADER_ERROR, MALFORMED, MTU_EXCEEDED, NDP_NOT_FOR_US,
                       NDP_QUEUE_FULL, NDP_UNRESOLVED, TO_CPU, TTL_EXPIRED)
from .ecmp import flow_hash6
from .frames import (ETH_P_IPV6, ICMPV6_ECHO_REQUEST, ICMPV6_TIME_EXCEEDED, IPPROTO_ICMPV6,
                     IPV6_HEADER_LEN, LINK_LOCAL6, NA_OVERRIDE, NA_ROUTER, NA_SOLICITED,
                     NDP_HOP_LIMIT, NDP_NS, ALL_NODES6, icmpv6_echo_reply, icmpv6_error,
                     icmpv6_valid, ip6_text, ipv6_packet, multicast_mac6,
                     neighbor_advertisement, neighbor_solicitation, parse_ndp)
from .interfaces import MASKS6
from .neighbors import (ARP_MAX_HELD as NDP_MAX_HELD, ARP_RETRY_S as NDP_RETRY_S,
                        ARP_TRIES as NDP_TRIES, PROBE)
from .router_base import RouterBase
from .routes import Route

if TYPE_CHECKING:
    from ..config import StaticRoute
    from .counters import CpuCounters
    from .interfaces import L3Interface
    from .neighbors import Neighbor
    from .ports import PortState

_LINK_LOCAL_MASK = MASKS6[10]  # fe80::/10
_HOP_BYTE = [bytes((i,)) for i in range(256)]


def _is_multicast(ip: int) -> bool:
    return ip >> 120 == 0xFF


def _is_link_local(ip: int) -> bool:
    return ip & _LINK_LOCAL_MASK == LINK_LOCAL6


class Router6(RouterBase):
    """Everything IPv6 of one switch. ``Switch`` hands it IPv6 frames to the router MAC
    (``ipv6_in``) and IPv6 multicast seen on an L3 interface (``multicast_in``)."""

    TRIES, RETRY_S, UNRESOLVED, ETHERTYPE = NDP_TRIES, NDP_RETRY_S, NDP_UNRESOLVED, ETH_P_IPV6
    QUEUE_FULL, MAX_HELD, MASKS, VERSION = NDP_QUEUE_FULL, NDP_MAX_HELD, MASKS6, 6

    def __init__(self, router_mac: bytes, interfaces: Iterable[L3Interface],
                 static_routes: Iterable[StaticRoute], local_ips: Iterable[int],
                 cpu: CpuCounters, ecmp_salt: int = 0, hash_flow_label: bool = False,
                 kernel_stack: bool = False) -> None:
        """As ``RouterBase``'s (``local_ips``: the switch's IPv6 addresses, link-locals
        included), plus ``hash_flow_label``: put the flow label in the ECMP hash too."""
        self.hash_flow_label = hash_flow_label
        super().__init__(router_mac, interfaces, static_routes, local_ips, cpu, ecmp_salt,
                         kernel_stack)

    # --- tables -------------------------------------------------------------------------

    def _static_route(self, sr: StaticRoute) -> Route:
        """An IPv6 STATIC_ROUTE with each next hop bound to its egress interface: the one
        named by ifname, else the connected interface whose subnet holds it. A link-local
        next hop needs an ifname (it is on every link). Unbindable next hops are left out,
        with a warning."""
        prefix = f"STATIC_ROUTE|{sr.prefix}"
        hops: list[tuple[int | None, L3Interface]] = []
        pairs = [(int(nh), sr.ifnames[i] if i < len(sr.ifnames) else "")
                 for i, nh in enumerate(sr.nexthops)]
        if not sr.nexthops:
            pairs = [(0, name) for name in sr.ifnames]
        for ip, ifname in pairs:
            if ifname:
                iface = self.interfaces.get(ifname)
                if iface is None or not iface.addresses6:
                    self.warnings.append(f"{prefix}: ifname {ifname} is not an IPv6 L3 "
                                         "interface; next hop ignored")
                    continue
            elif ip == 0 or _is_link_local(ip):
                self.warnings.append(f"{prefix}: next hop {ip6_text(ip)} needs an ifname;"
                                     " ignored")
                continue
            else:
                iface = self._connected_interface(ip)
                if iface is None:
                    self.warnings.append(f"{prefix}: next hop {ip6_text(ip)} is in no "
                                         "connected subnet; ignored (no recursive resolution)")
                    continue
            if ip in self.local_ips:
                self.warnings.append(f"{prefix}: next hop {ip6_text(ip)} is this switch; "
                                     "ignored")
                continue
            hops.append((ip or None, iface))
        return Route(int(sr.prefix.network_address), sr.prefix.prefixlen, sr.distance,
                     "static", tuple(hops), sr.blackhole, 6)

    @staticmethod
    def _addresses(iface: L3Interface) -> tuple[tuple[int, int, int, int], ...]:
        return iface.addresses6

    def _flow_hash(self, packet: bytes) -> int:
        return flow_hash6(packet, 0, self.ecmp_salt, self.hash_flow_label)

    @staticmethod
    def _routable(dst: int) -> bool:
        """Link-local and multicast destinations are never routed."""
        return not (_is_link_local(dst) or _is_multicast(dst))

    # --- frames addressed to the router ------------------------------------------------

    def ipv6_in(self, iface: L3Interface, ingress: PortState, frame: bytes, off: int,
                prio: int, cls: tuple, out: list, now: float) -> str:
        """Route one IPv6 packet sent to the router MAC (the per-packet hot path)."""
        size = len(frame)
        if size < off + IPV6_HEADER_LEN:
            return MALFORMED
        total = IPV6_HEADER_LEN + (frame[off + 4] << 8 | frame[off + 5])
        if frame[off] >> 4 != 6 or off + total > size:
            return IP_HEADER_ERROR
        dst = int.from_bytes(frame[off + 24:off + 40], "big")
        if dst in self.local_ips or _is_multicast(dst):
            return self._local_in(iface, frame, off, total, dst, out, now)
        hlim = frame[off + 7]
        if hlim <= 1:
            self._time_exceeded(iface, frame, off, total, out, now)
            return TTL_EXPIRED
        hops = self._cache.get(dst)
        if hops is None:
            hops = self.resolve(dst)
        if hops.__class__ is str:
            return hops
        if len(hops) == 1:
            nh = hops[0]
        else:
            nh = hops[flow_hash6(frame, off, self.ecmp_salt, self.hash_flow_label)
                      % len(hops)]
        head, port = nh.head, nh.port
        if head is not None and port is not None:  # resolved, behind a routed port
            if total > port.mtu:
                return MTU_EXCEEDED
            out.append((port, b"".join((head, frame[off:off + 7], _HOP_BYTE[hlim - 1],
                                        frame[off + 8:off + total])), cls))
            return FORWARDED
        packet = b"".join((frame[off:off + 7], _HOP_BYTE[hlim - 1], frame[off + 8:off + total]))
        return self._send_ip(nh, packet, prio, cls, ingress.counters, out, now)

    def multicast_in(self, iface: L3Interface, frame: bytes, off: int, out: list,
                     now: float) -> str:
        """An IPv6 multicast frame seen on ``iface`` (flooded in a VLAN, or arriving on a
        routed port): NDP is read, anything else (MLD, router solicitations) ignored."""
        size = len(frame)
        if size < off + IPV6_HEADER_LEN or frame[off] >> 4 != 6:
            return MALFORMED
        total = IPV6_HEADER_LEN + (frame[off + 4] << 8 | frame[off + 5])
        if off + total > size:
            return IP_HEADER_ERROR
        dst = int.from_bytes(frame[off + 24:off + 40], "big")
        return self._local_in(iface, frame, off, total, dst, out, now)

    def _local_in(self, iface: L3Interface, frame: bytes, off: int, total: int, dst: int,
                  out: list, now: float) -> str:
        """To one of our addresses or a multicast group: NS/NA (on-link only, hop limit
        255, valid checksum) and echo requests are served, nothing else."""
        if frame[off + 6] != IPPROTO_ICMPV6 or total < IPV6_HEADER_LEN + 8:
            return NDP_NOT_FOR_US if _is_multicast(dst) else self._unanswered
        icmp = off + IPV6_HEADER_LEN
        length = total - IPV6_HEADER_LEN
        kind = frame[icmp]
        if kind == ICMPV6_ECHO_REQUEST and not _is_multicast(dst):
            if not icmpv6_valid(frame, icmp, length):
                return MALFORMED
            src = int.from_bytes(frame[off + 8:off + 24], "big")
            tclass = (frame[off] & 0x0F) << 4 | frame[off + 1] >> 4
            reply = ipv6_packet(dst, src, IPPROTO_ICMPV6,
                                icmpv6_echo_reply(dst, src, frame[icmp:icmp + length]),
                                tclass=tclass & 0xFC)
            if _is_link_local(src):
                self.cpu.count(iface.send(frame[6:12], ETH_P_IPV6, reply, 0, CPU_CLASS, out,
                                          now))
            else:
                self.originate(reply, src, out, now)
            return TO_CPU
        ndp = parse_ndp(frame, icmp, length)
        if ndp is None:
            return NDP_NOT_FOR_US if _is_multicast(dst) else self._unanswered
        if frame[off + 7] != NDP_HOP_LIMIT or not icmpv6_valid(frame, icmp, length):
            return MALFORMED
        src = int.from_bytes(frame[off + 8:off + 24], "big")
        if ndp.type == NDP_NS:
            return self._ns_in(iface, frame, src, ndp.target, ndp.lladdr, out, now)
        return self._na_in(iface, frame, ndp.target, ndp.lladdr, out, now)

    def _ns_in(self, iface: L3Interface, frame: bytes, src: int, target: int,
               lladdr: bytes | None, out: list, now: float) -> str:
        """A solicitation: learn the sender (when it asks for one of our addresses and is
        on-link) and answer for our own addresses on this interface."""
        if target not in iface.ips6:
            return NDP_NOT_FOR_US
        if src and lladdr is not None and not lladdr[0] & 1 and self._on_link(iface, src):
            key = (iface.name, src)
            self._learn(self.neighbors.get(key) or self.neighbor(iface, src), lladdr, out,
                        now)
        flags = NA_ROUTER | NA_OVERRIDE | (NA_SOLICITED if src else 0)
        reply = neighbor_advertisement(target, src or ALL_NODES6, target, self.router_mac,
                                       flags)
        dst_mac = frame[6:12] if src else multicast_mac6(ALL_NODES6)
        self.cpu.count(iface.send(dst_mac, ETH_P_IPV6, reply, 0, CPU_CLASS, out, now))
        return TO_CPU

    def _na_in(self, iface: L3Interface, frame: bytes, target: int, lladdr: bytes | None,
               out: list, now: float) -> str:
        """An advertisement: resolves (or refreshes) an entry we have for its target."""
        nh = self.neighbors.get((iface.name, target))
        mac = lladdr if lladdr is not None else frame[6:12]
        if nh is None or mac[0] & 1:
            return NDP_NOT_FOR_US
        self._learn(nh, mac, out, now)
        return TO_CPU

    @staticmethod
    def _on_link(iface: L3Interface, ip: int) -> bool:
        return _is_link_local(ip) or any(ip & mask == net
                                         for _, net, mask, _ in iface.addresses6)

    def _source_for(self, iface: L3Interface, ip: int) -> int | None:
        """The address to speak from toward ``ip``: link-local to a link-local, else the
        one whose subnet holds it, else the interface's first."""
        if _is_link_local(ip):
            return iface.link_local6
        for addr, net, mask, _ in iface.addresses6:
            if ip & mask == net:
                return addr
        return iface.addresses6[0][0] if iface.addresses6 else None

    def _request(self, nh: Neighbor, out: list, now: float) -> None:
        """Multicast an NS for ``nh`` to its solicited-node group (unicast when probing an
        entry whose MAC we still have, RFC 4861 7.3.3)."""
        iface = nh.iface
        source = self._source_for(iface, nh.ip)
        if source is None:
            return
        packet = neighbor_solicitation(source, nh.ip, self.router_mac)
        dst_mac = nh.mac if nh.state == PROBE and nh.mac else multicast_mac6(
            int.from_bytes(packet[24:40], "big"))
        self.cpu.count(iface.send(dst_mac, ETH_P_IPV6, packet, 0, CPU_CLASS, out, now))

    def _time_exceeded(self, iface: L3Interface, frame: bytes, off: int, total: int,
                       out: list, now: float) -> None:
        """ICMPv6 time exceeded (type 3, code 0) to the source, from the ingress
        interface's address, unless RFC 4443 2.4 forbids it (an ICMPv6 error, a multicast
        or unspecified source)."""
        src = int.from_bytes(frame[off + 8:off + 24], "big")
        if (src == 0 or _is_multicast(src) or src in self.local_ips
                or (frame[off + 6] == IPPROTO_ICMPV6 and total > IPV6_HEADER_LEN
                    and frame[off + IPV6_HEADER_LEN] < 128)):
            return
        source = self._source_for(iface, src)
        if source is None:
            return
        message = icmpv6_error(source, src, ICMPV6_TIME_EXCEEDED, 0, frame[off:off + total])
        self.originate(ipv6_packet(source, src, IPPROTO_ICMPV6, message), src, out, now)
