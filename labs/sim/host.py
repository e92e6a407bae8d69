"""A host in virtual time: the small part of a Linux stack a lab's checks use (ARP, ICMP
echo and errors, one address and a default route per the topology's ``exec`` lines) and the
project's NIC core (``traffic.nic.Nic``) on its wire, driven as the live endpoint drives it.

Only ``exec`` lines whose effect the simulator models are accepted (``ip addr add``, ``ip
route add|replace default via``, ``ip link set ... up``); anything else is refused before
the run starts, naming the node and the line: a lab the simulator cannot model says so.
"""
from __future__ import annotations

import hashlib
import ipaddress
import shlex
import struct
from dataclasses import dataclass, field

from fabric.model.frames import (
    ARP_REPLY, ARP_REQUEST, BROADCAST_MAC, ETH_P_ARP, ETH_P_IPV4, ICMP_ECHO_REPLY,
    ICMP_ECHO_REQUEST, ICMP_TIME_EXCEEDED, IPPROTO_ICMP, ZERO_MAC, arp_packet, ethernet_frame,
    icmp_echo_reply, icmp_message, ipv4_packet, parse_arp,
)
from labs.sim.engine import Engine, to_ps
from labs.sim.wire import Wire

ARP_RETRY_S = 1e-3  # fabric time between ARP requests for an unresolved next hop
ARP_TRIES = 3
HOST_TTL = 64


class SimError(ValueError):
    """A lab the simulator cannot model, or an operation it cannot do (one line)."""


@dataclass
class HostConfig:
    """What a host's ``exec`` lines configure."""

    addresses: dict[str, ipaddress.IPv4Interface] = field(default_factory=dict)  # iface ->
    gateway: ipaddress.IPv4Address | None = None


def host_config(node: str, lines: tuple[str, ...], ifaces: list[str]) -> HostConfig:
    """Read a host's ``exec`` lines; refuse what the simulator would silently ignore."""
    config = HostConfig()
    for n, line in enumerate(lines, 1):
        where = f"node {node}: exec[{n}] {line!r}"
        try:
            argv = shlex.split(line)
        except ValueError as e:
            raise SimError(f"{where}: {e}") from None
        if argv[:3] == ["ip", "addr", "add"] or argv[:4] == ["ip", "address", "add"]:
            rest = argv[3:] if argv[1] == "addr" else argv[4:]
            if rest and ":" in rest[0]:  # before the shape: IPv6 lines carry nodad & co.
                raise SimError(f"{where}: IPv6 hosts are not modelled by the simulator yet "
                               "(no neighbour discovery or ICMPv6); run this lab live")
            if len(rest) != 3 or rest[1] != "dev" or rest[2] not in ifaces:
                raise SimError(f"{where}: expected 'ip addr add A.B.C.D/N dev <wired iface>'")
            try:
                address = ipaddress.ip_interface(rest[0])
            except ValueError as e:
                raise SimError(f"{where}: {e}") from None
            if rest[2] in config.addresses:
                raise SimError(f"{where}: one address per interface is modelled")
            config.addresses[rest[2]] = address
        elif argv[:2] == ["ip", "route"] and len(argv) == 6 and argv[2] in ("add", "replace") \
                and argv[3] == "default" and argv[4] == "via":
            config.gateway = ipaddress.IPv4Address(argv[5])
        elif argv[:3] == ["ip", "link", "set"] and argv[-1] == "up":
            continue
        else:
            raise SimError(f"{where}: not modelled by the simulator (it models ip addr add, "
                           "ip route add|replace default via, ip link set ... up)")
    return config


def host_mac(lab: str, node: str, iface: str) -> bytes:
    """A stable, locally administered unicast MAC for a host interface."""
    digest = hashlib.sha256(f"{lab}/{node}/{iface}".encode()).digest()
    return bytes([0x02]) + digest[:5]


@dataclass
class PingReply:
    ttl: int
    from_ip: str
    kind: str  # "reply" | "time-exceeded"
    at_ps: int


class SimHost:
    """One host: its interfaces' stack and, while flows run, its NIC."""

    def __init__(self, engine: Engine, name: str, config: HostConfig, macs: dict[str, bytes],
                 time_scale: float) -> None:
        self.engine = engine
        self.name = name
        self.config = config
        self.macs = macs
        self.wires: dict[str, Wire] = {}
        self.arp_retry_ps = to_ps(ARP_RETRY_S * time_scale)
        self.neighbours: dict[int, bytes] = {}  # IPv4 (int) -> MAC
        self._waiting: dict[int, list[tuple[str, bytes]]] = {}  # unresolved: (iface, packet)
        self.replies: dict[tuple[int, int], PingReply] = {}  # (ident, seq) -> what came back
        self.nic = None  # a traffic.nic.Nic while flows run (labs.runtimes.sim)
        self.nic_iface: str | None = None
        self._nic_wake: tuple[int, int] | None = None  # (time, generation)
        self._gen = 0
        self.seen = 0  # frames received

    @property
    def address(self) -> ipaddress.IPv4Interface | None:
        return next(iter(self.config.addresses.values()), None)

    # --- receiving --------------------------------------------------------------------

    def arrive(self, iface: str, frame: bytes) -> None:
        self.seen += 1
        if self.nic is not None and iface == self.nic_iface \
                and self.nic.receive(frame, self.engine.now):
            self.kick()
            return
        mac = self.macs[iface]
        if frame[0:6] not in (mac, BROADCAST_MAC) or len(frame) < 14:
            return
        ethertype = frame[12] << 8 | frame[13]
        if ethertype == ETH_P_ARP:
            self._arp_in(iface, frame)
        elif ethertype == ETH_P_IPV4:
            self._ipv4_in(iface, frame)

    def _arp_in(self, iface: str, frame: bytes) -> None:
        arp = parse_arp(frame, 14)
        mine = self.config.addresses.get(iface)
        if arp is None or mine is None:
            return
        self.neighbours[arp.spa] = arp.sha
        if arp.op == ARP_REQUEST and arp.tpa == int(mine.ip):
            reply = arp_packet(ARP_REPLY, self.macs[iface], int(mine.ip), arp.sha, arp.spa)
            self._wire(iface, ethernet_frame(arp.sha, self.macs[iface], ETH_P_ARP, reply,
                                             pad=True))
        for out_iface, packet in self._waiting.pop(arp.spa, []):
            self._wire(out_iface, ethernet_frame(arp.sha, self.macs[out_iface], ETH_P_IPV4,
                                                 packet))

    def _ipv4_in(self, iface: str, frame: bytes) -> None:
        mine = self.config.addresses.get(iface)
        packet = frame[14:]
        if mine is None or len(packet) < 28 or packet[9] != IPPROTO_ICMP \
                or int.from_bytes(packet[16:20], "big") != int(mine.ip):
            return
        header = (packet[0] & 0x0F) * 4
        icmp = packet[header:]
        src = int.from_bytes(packet[12:16], "big")
        if icmp[0] == ICMP_ECHO_REQUEST:
            self.send_ip(src, ipv4_packet(int(mine.ip), src, IPPROTO_ICMP,
                                          icmp_echo_reply(icmp)))
        elif icmp[0] == ICMP_ECHO_REPLY and len(icmp) >= 8:
            ident, seq = struct.unpack_from("!HH", icmp, 4)
            self.replies[ident, seq] = PingReply(packet[8], str(ipaddress.IPv4Address(src)),
                                                 "reply", self.engine.now_ps)
        elif icmp[0] == ICMP_TIME_EXCEEDED and len(icmp) >= 8 + 20 + 8:
            quoted = icmp[8:]
            inner = quoted[(quoted[0] & 0x0F) * 4:]
            if inner[0] == ICMP_ECHO_REQUEST:
                ident, seq = struct.unpack_from("!HH", inner, 4)
                self.replies[ident, seq] = PingReply(packet[8], str(ipaddress.IPv4Address(src)),
                                                     "time-exceeded", self.engine.now_ps)

    # --- sending ----------------------------------------------------------------------

    def _wire(self, iface: str, frame: bytes) -> None:
        wire = self.wires.get(iface)
        if wire is not None:
            wire.send(frame)

    def route(self, dst: int) -> tuple[str, int] | None:
        """(interface, next hop) toward ``dst``: on-link, else the default gateway."""
        ip = ipaddress.IPv4Address(dst)
        for iface, address in self.config.addresses.items():
            if ip in address.network:
                return iface, dst
        gateway = self.config.gateway
        if gateway is None:
            return None
        for iface, address in self.config.addresses.items():
            if gateway in address.network:
                return iface, int(gateway)
        return None

    def send_ip(self, dst: int, packet: bytes) -> bool:
        """Send an IPv4 packet, resolving the next hop by ARP first; False: no route."""
        hop = self.route(dst)
        if hop is None:
            return False
        iface, next_hop = hop
        mac = self.neighbours.get(next_hop)
        if mac is not None:
            self._wire(iface, ethernet_frame(mac, self.macs[iface], ETH_P_IPV4, packet))
            return True
        pending = self._waiting.setdefault(next_hop, [])
        pending.append((iface, packet))
        if len(pending) == 1:
            self._arp_request(iface, next_hop, ARP_TRIES)
        return True

    def _arp_request(self, iface: str, target: int, tries: int) -> None:
        if target not in self._waiting:
            return  # resolved meanwhile
        if tries == 0:
            del self._waiting[target]  # unresolved: the packets are lost, as in a kernel
            return
        mine = self.config.addresses[iface]
        request = arp_packet(ARP_REQUEST, self.macs[iface], int(mine.ip), ZERO_MAC, target)
        self._wire(iface, ethernet_frame(BROADCAST_MAC, self.macs[iface], ETH_P_ARP, request,
                                         pad=True))
        self.engine.after(self.arp_retry_ps, self._arp_request, iface, target, tries - 1)

    def ping(self, dst: str, ident: int, seq: int, ttl: int = HOST_TTL) -> bool:
        """Send one ICMP echo request; the answer lands in ``replies[ident, seq]``."""
        mine = self.address
        if mine is None:
            return False
        target = int(ipaddress.IPv4Address(dst))
        echo = icmp_message(ICMP_ECHO_REQUEST, 0, struct.pack("!HH", ident, seq) + bytes(56))
        return self.send_ip(target, ipv4_packet(int(mine.ip), target, IPPROTO_ICMP, echo,
                                                ttl=ttl))

    def next_hop_mac(self, dst: str) -> bytes | None:
        hop = self.route(int(ipaddress.IPv4Address(dst)))
        return None if hop is None else self.neighbours.get(hop[1])

    # --- the NIC ----------------------------------------------------------------------

    def kick(self) -> None:
        """Put on the wire what the NIC has due now, then wake when it next has work."""
        nic, engine = self.nic, self.engine
        if nic is None:
            return
        now = engine.now
        wire = self.wires[self.nic_iface]
        while (frame := nic.dequeue(now)) is not None:
            wire.send(frame)
        at = nic.next_wake(now)
        if at is None:
            return
        when = max(to_ps(at), engine.now_ps + 1)
        if self._nic_wake is not None and self._nic_wake[0] <= when \
                and self._nic_wake[0] > engine.now_ps:
            return
        self._gen += 1
        self._nic_wake = (when, self._gen)
        engine.at(when, self._wake, self._gen)

    def _wake(self, gen: int) -> None:
        if self._nic_wake is None or self._nic_wake[1] != gen:
            return
        self._nic_wake = None
        if self.nic is not None:
            self.nic.poll(self.engine.now)
            self.kick()
