"""IPv4 routing: ``Router``, with ARP and ICMP.

The router sits behind every L3 interface (routed ports and VLAN SVIs), all of which use
the switch's MAC. It

- routes IPv4 by longest prefix match over the connected subnets of INTERFACE and
  VLAN_INTERFACE and the STATIC_ROUTE table (equal prefixes: lowest distance wins;
  connected routes have distance 0), spreading a route's next hops by a hash of the
  flow (``ecmp.ecmp_index``);
- decrements the TTL with an RFC 1624 checksum update and rewrites the MACs, leaving
  DSCP/ECN alone; TTL <= 1 is answered with ICMP time exceeded from the ingress
  interface's address, so traceroute shows each hop;
- resolves next hops with ARP (a route's next hops as soon as the route is installed, as
  SONiC does; a directly connected host when a packet needs it), holding up to 16 packets
  per next hop, retrying every second and giving up after 3 requests; learned entries are
  re-probed after 600 s (still used meanwhile) and forgotten when the probe goes
  unanswered;
- answers ARP for the ingress interface's own addresses and ICMP echo for any of the
  switch's addresses (replies are routed back like any packet).

Like the bridge, it appends ``(port, frame, cls)`` to an ``out`` list and returns a
disposition (see ``counters``). ``cls`` is the ingress classification ``(tc, pg)``, which a
routed packet keeps (while held for ARP too); what the switch originates carries
``CPU_CLASS``. The table, the route cache, the neighbour cache and their timers are the
routers' common base (``router_base.RouterBase``); this module is IPv4's own part.
"""
from __future__ import annotations

from ipaddress import IPv4Address
from typing import TYPE_CHECKING

import cython

from .classify import CPU_CLASS
from .counters import (ARP_NOT_FOR_US, ARP_QUEUE_FULL, ARP_UNRESOLVED, FORWARDED,
                       IP_HEADER_ERROR, MALFORMED, MTU_EXCEEDED, NON_IP_TO_ROUTER, TO_CPU,
                       TTL_EXPIRED)
from . import frames
from .ecmp import packet_flow_hash
from .frames import (ARP_REPLY, ARP_REQUEST, BROADCAST_MAC,
                     ICMP_ECHO_REQUEST, ICMP_ERROR_TYPES, ICMP_TIME_EXCEEDED, IPPROTO_ICMP,
                     ZERO_MAC, arp_packet, icmp_echo_reply, icmp_error, ipv4_packet,
                     parse_arp, routed_ipv4)
from .interfaces import MASKS
from .neighbors import ARP_RETRY_S, ARP_TRIES
from .ports import PortState
from .router_base import RouterBase
from .routes import Route

# the EtherTypes ``l3_in`` compares a frame's with, C ints when compiled (an imported name
# is a Python object: each comparison boxed the frame's)
ETH_P_ARP = cython.declare(cython.int, frames.ETH_P_ARP)
ETH_P_IPV4 = cython.declare(cython.int, frames.ETH_P_IPV4)

if TYPE_CHECKING:
    from ..config import StaticRoute
    from .interfaces import L3Interface
    from .neighbors import Neighbor


class Router(RouterBase):
    """Everything IPv4 of one switch. ``Switch`` hands it frames addressed to the router."""

    TRIES, RETRY_S, UNRESOLVED, ETHERTYPE = ARP_TRIES, ARP_RETRY_S, ARP_UNRESOLVED, ETH_P_IPV4
    QUEUE_FULL, MASKS, VERSION = ARP_QUEUE_FULL, MASKS, 4

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

    @staticmethod
    def _addresses(iface: L3Interface) -> tuple[tuple[int, int, int, int], ...]:
        return iface.addresses

    def _flow_hash(self, packet: bytes) -> int:
        return packet_flow_hash(packet, salt=self.ecmp_salt)

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

    @cython.locals(frame=bytes, off=cython.Py_ssize_t, size=cython.Py_ssize_t,
                   ihl=cython.Py_ssize_t, total=cython.Py_ssize_t, vihl=cython.int,
                   frag=cython.int, ttl=cython.int, proto=cython.int,
                   port=PortState, head=bytes)
    def ipv4_in(self, iface: L3Interface, ingress: PortState, frame: bytes, off: int,
                prio: int, cls: tuple, out: list, now: float) -> str:
        """Route one IPv4 packet (the per-packet hot path: keep it lean)."""
        size = len(frame)
        if size < off + 20:
            return MALFORMED
        # the fields read a byte at a time: compiled, C reads of the frame where an unpack
        # made eleven Python objects per routed frame (an address's top byte shifted as a
        # 64-bit integer: as a C int, 128.0.0.0 and up would overflow)
        vihl, tos, ttl, proto = frame[off], frame[off + 1], frame[off + 8], frame[off + 9]
        total = frame[off + 2] << 8 | frame[off + 3]
        frag = frame[off + 6] << 8 | frame[off + 7]
        src = (cython.cast(cython.longlong, frame[off + 12]) << 24 | frame[off + 13] << 16
               | frame[off + 14] << 8 | frame[off + 15])
        dst = (cython.cast(cython.longlong, frame[off + 16]) << 24 | frame[off + 17] << 16
               | frame[off + 18] << 8 | frame[off + 19])
        ihl = (vihl & 0x0F) << 2
        if vihl >> 4 != 4 or ihl < 20 or total < ihl or off + total > size:
            return IP_HEADER_ERROR
        address = dst  # boxed once: the route cache and the local addresses both key on it
        hops = self._cache.get(address)  # never one of ours (``resolve``): asked first
        if hops is None and address in self.local_ips:
            return self._local_in(frame, off, ihl, total, frag, proto, tos, src, dst, out, now)
        if ttl <= 1:
            self._time_exceeded(iface, frame, off, ihl, total, frag, proto, src, out, now)
            return TTL_EXPIRED
        if hops is None:
            hops = self.resolve(address)
        if type(hops) is str:
            return hops
        if len(hops) == 1:
            nh = hops[0]
        else:
            nh = hops[packet_flow_hash(frame, off, self.ecmp_salt) % len(hops)]
        head = nh.head
        if head is not None:  # resolved: the frame is built in one copy
            port = nh.port
            if port is None:  # behind an SVI: the FDB has the port (unlearned: flooded)
                disposition = nh.iface.vlan.send_routed(nh.mac, head, frame, off, total,
                                                        prio, cls, out, now)
                if disposition is not None:
                    return disposition
            else:  # behind a routed port: the common case
                if total > port.mtu:
                    return MTU_EXCEEDED
                routed = routed_ipv4(head, frame, off, total)
                if total < 46:  # the ingress frame's Ethernet padding was not carried over
                    routed += bytes(46 - total)
                out.append((port, routed, cls))
                return FORWARDED
        packet = routed_ipv4(b"", frame, off, total)
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
        return self._unanswered

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
