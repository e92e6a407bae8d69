"""Neighbour entries: a next hop's (or directly connected host's) MAC and its timers.

One ``Neighbor`` per (interface, address), for ARP (IPv4) and neighbour discovery (IPv6)
alike; the cache that creates, retries, re-probes and forgets them is the routers' common
base (``router_base.RouterBase``). Both families use the timings below; for IPv6 they are
RFC 4861's MAX_MULTICAST_SOLICIT and RETRANS_TIMER.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .frames import ETH_P_IPV4, U16, ip6_text, ip_text, mac_text

if TYPE_CHECKING:
    from .interfaces import L3Interface

ARP_MAX_HELD = 16  # packets waiting per unresolved next hop
ARP_RETRY_S = 1.0
ARP_TRIES = 3
ARP_LIFETIME_S = 600.0

# Neighbour states
NEW = "new"  # created by a route lookup, nothing sent yet
INCOMPLETE = "incomplete"  # ARP request(s) out, packets held
REACHABLE = "reachable"
PROBE = "probe"  # lifetime over: re-resolving while still using the known MAC


class Neighbor:
    """An ARP or NDP entry: next hop or directly connected host, its MAC and its timers.

    ``head`` is the ready-made untagged Ethernet header (MACs + EtherType) once resolved,
    so a routed frame is built in one copy: as it is behind a routed port (``port``),
    tagged or not as the FDB's port wants behind an SVI.
    """

    __slots__ = ("ip", "iface", "port", "mac", "head", "state", "expires", "tries",
                 "next_retry", "pending", "ethertype")

    def __init__(self, ip: int, iface: L3Interface, ethertype: int = ETH_P_IPV4) -> None:
        self.ip = ip
        self.ethertype = ethertype  # ETH_P_IPV6 for an NDP entry
        self.iface = iface
        self.port = iface.port  # None behind an SVI: the port comes from the FDB
        self.mac: bytes | None = None
        self.head: bytes | None = None
        self.state = NEW
        self.expires = 0.0
        self.tries = 0
        self.next_retry = 0.0
        # (owner counters, IP packet ready to send, priority bits, class)
        self.pending: list[tuple[object, bytes, int, tuple]] = []

    def resolved(self, mac: bytes, now: float) -> None:
        self.mac = mac
        self.head = mac + self.iface.router_mac + U16.pack(self.ethertype)
        self.state = REACHABLE
        self.expires = now + ARP_LIFETIME_S
        self.tries = 0

    def as_dict(self, now: float) -> dict:
        text = ip_text(self.ip) if self.ethertype == ETH_P_IPV4 else ip6_text(self.ip)
        return {"ip": text, "interface": self.iface.name,
                "mac": mac_text(self.mac) if self.mac else None, "state": self.state,
                "held": len(self.pending),
                "expires_in": round(self.expires - now, 3) if self.mac else None}
