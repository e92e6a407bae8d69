"""A host in virtual time: the small part of a Linux stack a lab's checks use, for IPv4 and
IPv6 side by side (ARP and neighbour discovery, ICMP and ICMPv6 echo, time exceeded for
traceroutes; the addresses and default routes of ``labs.sim.hostconfig``) and the project's
NIC core (``nic.core.Nic``) on its wire, driven as the live endpoint drives it.

Next hops are resolved as a kernel does: packets wait while an ARP request or a neighbour
solicitation (to the solicited-node group) is retried, and are dropped when it goes
unanswered. A host answers ARP and NS for its own addresses (IPv6: its link-local one too)
and learns whoever asks.
"""
from __future__ import annotations

import ipaddress
import math
import struct
from dataclasses import dataclass

import cython

from ...fabric.model.frames import (ALL_NODES6, ARP_REPLY, ARP_REQUEST, BROADCAST_MAC,
                                    ETH_P_ARP, ETH_P_IPV4, ETH_P_IPV6, ICMP_ECHO_REPLY,
                                    ICMP_ECHO_REQUEST, ICMP_TIME_EXCEEDED, ICMPV6_ECHO_REPLY,
                                    ICMPV6_ECHO_REQUEST, ICMPV6_TIME_EXCEEDED, IPPROTO_ICMP,
                                    IPPROTO_ICMPV6, IPV6_HEADER_LEN, NA_OVERRIDE, NA_SOLICITED,
                                    NDP_HOP_LIMIT, NDP_NA, NDP_NS, ZERO_MAC, arp_packet,
                                    ethernet_frame, icmp_echo_reply, icmp_message,
                                    icmpv6_echo_reply, icmpv6_message, icmpv6_valid,
                                    ipv4_packet, ipv6_packet, link_local6, multicast_mac6,
                                    neighbor_advertisement, neighbor_solicitation, parse_arp,
                                    parse_ndp, solicited_node6)
from ..records import HOST_TTL
from .engine import Engine, Handler, to_ps
from .hostconfig import HostConfig, IPAddress, IPInterface
from .link import Wire

ARP_RETRY_S = 1e-3  # fabric time between ARP requests / NS for an unresolved next hop
ARP_TRIES = 3
ECHO_DATA = bytes(56)  # ping's default payload size
ETHERTYPE = {4: ETH_P_IPV4, 6: ETH_P_IPV6}
NO_WAKE = cython.declare(cython.double, math.inf)  # ``Nic.wake_at``: nothing pending


@dataclass
class PingReply:
    ttl: int  # the reply's TTL or hop limit
    from_ip: str
    kind: str  # "reply" | "time-exceeded"
    at_ps: int


class IfaceIn(Handler):
    """An interface's inlet, what its incoming wire hands each frame to (``Wire.deliver``):
    the host's ``arrive`` on that interface, a C call when compiled."""

    def __init__(self, host: SimHost, iface: str) -> None:
        self.host = host
        self.iface = iface

    def fire(self, frame: bytes) -> None:
        self.host.arrive(self.iface, frame)


class SimHost(Handler):
    """One host: its interfaces' stack and, while flows run, its NIC, whose wake is the
    host's event (``fire``)."""

    def __init__(self, engine: Engine, name: str, config: HostConfig, macs: dict[str, bytes],
                 time_scale: float) -> None:
        self.engine = engine
        self.name = name
        self.config = config
        self.macs = macs
        self.wires: dict[str, Wire] = {}
        self.arp_retry_ps = to_ps(ARP_RETRY_S * time_scale)
        self.neighbours: dict[IPAddress, bytes] = {}  # IPv4 or IPv6 address -> MAC
        self._waiting: dict[IPAddress, list[tuple[str, bytes]]] = {}  # unresolved: (iface, packet)
        self.replies: dict[tuple[int, int], PingReply] = {}  # (ident, seq) -> what came back
        # IPv6: each interface's addresses (its global one and fe80:: from its MAC) as ints,
        # and the multicast MACs it listens on (all-nodes, its solicited-node groups)
        self._mine6: dict[str, set[int]] = {}
        self._groups6: dict[str, set[bytes]] = {}
        for iface, mac in macs.items():
            ips = {link_local6(mac)}
            if iface in config.addresses[6]:
                ips.add(int(config.addresses[6][iface].ip))
            self._mine6[iface] = ips
            self._groups6[iface] = {multicast_mac6(ALL_NODES6),
                                    *(multicast_mac6(solicited_node6(ip)) for ip in ips)}
        self.nic = None  # a nic.core.Nic while flows run (labs.runtimes.sim): ``attach``
        self.nic_iface: str | None = None
        self.nic_wire: Wire | None = None  # the NIC's interface's wire
        self._wake_armed = False  # a NIC wake is pending, at _wake_at (ps)
        self._wake_at = 0
        self._seq = -1  # the pending wake's event (``Engine.later``): others return at once
        self.seen = 0  # frames received

    @property
    def address(self) -> IPInterface | None:
        """The host's address as a live one reports it: its first IPv4, else first IPv6."""
        return next(iter(self.config.interfaces()), None)

    def attach(self, nic, iface: str | None) -> None:
        """Drive ``nic`` on ``iface`` (None, None: no NIC any more)."""
        self.nic, self.nic_iface = nic, iface
        self.nic_wire = None if iface is None else self.wires[iface]

    # --- receiving --------------------------------------------------------------------

    def arrive(self, iface: str, frame: bytes) -> None:
        self.seen += 1
        if self.nic is not None and iface == self.nic_iface \
                and self.nic.receive(frame, self.engine.seconds()):
            self.kick()
            return
        dst = frame[0:6]
        if len(frame) < 14 or dst != self.macs[iface] and dst != BROADCAST_MAC \
                and dst not in self._groups6[iface]:
            return
        ethertype = frame[12] << 8 | frame[13]
        if ethertype == ETH_P_ARP:
            self._arp_in(iface, frame)
        elif ethertype == ETH_P_IPV4:
            self._ipv4_in(iface, frame)
        elif ethertype == ETH_P_IPV6:
            self._ipv6_in(iface, frame)

    def _learned(self, ip: IPAddress, mac: bytes) -> None:
        """A neighbour's MAC: record it and send what waited for it."""
        self.neighbours[ip] = mac
        for out_iface, packet in self._waiting.pop(ip, []):
            self._wire(out_iface, ethernet_frame(mac, self.macs[out_iface],
                                                 ETHERTYPE[ip.version], packet))

    def _arp_in(self, iface: str, frame: bytes) -> None:
        arp = parse_arp(frame, 14)
        mine = self.config.addresses[4].get(iface)
        if arp is None or mine is None:
            return
        if arp.op == ARP_REQUEST and arp.tpa == int(mine.ip):
            reply = arp_packet(ARP_REPLY, self.macs[iface], int(mine.ip), arp.sha, arp.spa)
            self._wire(iface, ethernet_frame(arp.sha, self.macs[iface], ETH_P_ARP, reply,
                                             pad=True))
        self._learned(ipaddress.IPv4Address(arp.spa), arp.sha)

    def _ipv4_in(self, iface: str, frame: bytes) -> None:
        mine = self.config.addresses[4].get(iface)
        packet = frame[14:]
        if mine is None or len(packet) < 28 or packet[9] != IPPROTO_ICMP \
                or int.from_bytes(packet[16:20], "big") != int(mine.ip):
            return
        icmp = packet[(packet[0] & 0x0F) * 4:]
        src = ipaddress.IPv4Address(packet[12:16])
        if icmp[0] == ICMP_ECHO_REQUEST:
            self.send_ip(src, ipv4_packet(int(mine.ip), int(src), IPPROTO_ICMP,
                                          icmp_echo_reply(icmp)))
        elif icmp[0] == ICMP_ECHO_REPLY and len(icmp) >= 8:
            self._answer(icmp[4:8], packet[8], src, "reply")
        elif icmp[0] == ICMP_TIME_EXCEEDED and len(icmp) >= 8 + 20 + 8:
            inner = icmp[8 + (icmp[8] & 0x0F) * 4:]
            if inner[0] == ICMP_ECHO_REQUEST:
                self._answer(inner[4:8], packet[8], src, "time-exceeded")

    def _ipv6_in(self, iface: str, frame: bytes) -> None:
        """ICMPv6 to one of this interface's addresses or groups: NS, NA, echo request and
        reply, time exceeded quoting one of our echo requests; anything else is ignored."""
        if len(frame) < 14 + IPV6_HEADER_LEN + 8 or frame[14] >> 4 != 6 \
                or frame[20] != IPPROTO_ICMPV6:
            return
        length = frame[18] << 8 | frame[19]
        icmp = 14 + IPV6_HEADER_LEN
        dst = int.from_bytes(frame[38:54], "big")
        if len(frame) < icmp + length or not icmpv6_valid(frame, icmp, length):
            return
        src = int.from_bytes(frame[22:38], "big")
        kind, hlim = frame[icmp], frame[21]
        if kind in (NDP_NS, NDP_NA):
            ndp = parse_ndp(frame, icmp, length)
            if ndp is not None and hlim == NDP_HOP_LIMIT:
                self._ndp_in(iface, frame, src, ndp)
            return
        if dst not in self._mine6[iface]:
            return
        message = frame[icmp:icmp + length]
        if kind == ICMPV6_ECHO_REQUEST:
            self.send_ip(ipaddress.IPv6Address(src), ipv6_packet(
                dst, src, IPPROTO_ICMPV6, icmpv6_echo_reply(dst, src, message)))
        elif kind == ICMPV6_ECHO_REPLY:
            self._answer(message[4:8], hlim, ipaddress.IPv6Address(src), "reply")
        elif kind == ICMPV6_TIME_EXCEEDED and length >= 8 + IPV6_HEADER_LEN + 8:
            inner = message[8:]
            if inner[6] == IPPROTO_ICMPV6 and inner[IPV6_HEADER_LEN] == ICMPV6_ECHO_REQUEST:
                at = IPV6_HEADER_LEN + 4
                self._answer(inner[at:at + 4], hlim, ipaddress.IPv6Address(src),
                             "time-exceeded")

    def _ndp_in(self, iface: str, frame: bytes, src: int, ndp) -> None:
        """An NS for one of our addresses gets an NA (solicited, override) back to the
        asker, who is learned; an NA resolves its target (RFC 4861 7.2.4, 7.2.5)."""
        mac = ndp.lladdr
        if ndp.type == NDP_NS:
            if ndp.target not in self._mine6[iface]:
                return
            if src and mac is not None:
                reply = neighbor_advertisement(ndp.target, src, ndp.target, self.macs[iface],
                                               NA_SOLICITED | NA_OVERRIDE)
                self._wire(iface, ethernet_frame(frame[6:12], self.macs[iface], ETH_P_IPV6,
                                                 reply))
                self._learned(ipaddress.IPv6Address(src), mac)
        elif mac is not None and not mac[0] & 1:
            self._learned(ipaddress.IPv6Address(ndp.target), mac)

    def _answer(self, ident_seq: bytes, ttl: int, src: IPAddress, kind: str) -> None:
        self.replies[struct.unpack("!HH", ident_seq)] = PingReply(ttl, str(src), kind,
                                                                  self.engine.now_ps)
        self.engine.halt()  # the ping waiting for it runs on (``SimHosts._echo``)

    # --- sending ----------------------------------------------------------------------

    @cython.locals(wire=Wire)
    def _wire(self, iface: str, frame: bytes) -> None:
        wire = self.wires.get(iface)
        if wire is not None:
            wire.send(frame)

    def route(self, dst: IPAddress) -> tuple[str, IPAddress] | None:
        """(interface, next hop) toward ``dst``: on-link, else its family's default
        gateway."""
        addresses = self.config.addresses[dst.version]
        for iface, address in addresses.items():
            if dst in address.network:
                return iface, dst
        gateway = self.config.gateways.get(dst.version)
        if gateway is None:
            return None
        for iface, address in addresses.items():
            if gateway in address.network:
                return iface, gateway
        return None

    def source(self, iface: str, dst: IPAddress) -> IPInterface | None:
        """The address a packet to ``dst`` leaves ``iface`` from: the interface's own of
        ``dst``'s family."""
        return self.config.addresses[dst.version].get(iface)

    def send_ip(self, dst: IPAddress, packet: bytes) -> bool:
        """Send an IP packet, resolving the next hop (ARP, NS) first; False: no route."""
        hop = self.route(dst)
        if hop is None:
            return False
        iface, next_hop = hop
        mac = self.neighbours.get(next_hop)
        if mac is not None:
            self._wire(iface, ethernet_frame(mac, self.macs[iface], ETHERTYPE[dst.version],
                                             packet))
            return True
        pending = self._waiting.setdefault(next_hop, [])
        pending.append((iface, packet))
        if len(pending) == 1:
            self._solicit(iface, next_hop, ARP_TRIES)
        return True

    def _solicit(self, iface: str, target: IPAddress, tries: int) -> None:
        """An ARP request (IPv4) or a neighbour solicitation to ``target``'s solicited-node
        group (IPv6), retried until answered or ``tries`` are spent."""
        if target not in self._waiting:
            return  # resolved meanwhile
        if tries == 0:
            del self._waiting[target]  # unresolved: the packets are lost, as in a kernel
            return
        mine, mac = self.source(iface, target), self.macs[iface]
        if target.version == 4:
            request = arp_packet(ARP_REQUEST, mac, int(mine.ip), ZERO_MAC, int(target))
            frame = ethernet_frame(BROADCAST_MAC, mac, ETH_P_ARP, request, pad=True)
        else:
            frame = ethernet_frame(multicast_mac6(solicited_node6(int(target))), mac,
                                   ETH_P_IPV6, neighbor_solicitation(int(mine.ip),
                                                                     int(target), mac))
        self._wire(iface, frame)
        self.engine.after(self.arp_retry_ps, self._solicit, iface, target, tries - 1)

    def ping(self, dst: str, ident: int, seq: int, ttl: int = HOST_TTL) -> bool:
        """Send one ICMP or ICMPv6 echo request (``ttl``: TTL or hop limit); the answer
        lands in ``replies[ident, seq]``. False: no route or no address to send from."""
        target = ipaddress.ip_address(dst)
        hop = self.route(target)
        mine = None if hop is None else self.source(hop[0], target)
        if mine is None:
            return False
        rest = struct.pack("!HH", ident, seq) + ECHO_DATA
        if target.version == 4:
            echo = icmp_message(ICMP_ECHO_REQUEST, 0, rest)
            packet = ipv4_packet(int(mine.ip), int(target), IPPROTO_ICMP, echo, ttl=ttl)
        else:
            echo = icmpv6_message(int(mine.ip), int(target), ICMPV6_ECHO_REQUEST, 0, rest)
            packet = ipv6_packet(int(mine.ip), int(target), IPPROTO_ICMPV6, echo, ttl)
        return self.send_ip(target, packet)

    # --- the NIC ----------------------------------------------------------------------

    @cython.locals(wire=Wire, at=cython.double)
    def kick(self) -> None:
        """Put on the wire what the NIC has due now, then wake when it next has work."""
        nic, engine = self.nic, self.engine
        if nic is None:
            return
        now = engine.seconds()
        wire = self.nic_wire
        while (frame := nic.dequeue(now)) is not None:
            wire.send(frame)
        at = nic.wake_at(now)
        if at == NO_WAKE:
            return
        when = max(to_ps(at), engine.now_ps + 1)
        if self._wake_armed and engine.now_ps < self._wake_at <= when:
            return
        self._wake_armed, self._wake_at = True, when
        self._seq = engine.later(when, self, None)  # after now: at's check is not needed

    def fire(self, arg: None) -> None:
        """The NIC's wake."""
        if not self._wake_armed or self.engine.firing() != self._seq:
            return
        self._wake_armed = False
        if self.nic is not None:
            self.nic.poll(self.engine.seconds())
            self.kick()
