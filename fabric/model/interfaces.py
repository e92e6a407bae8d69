"""L3 interfaces: routed ports and VLAN SVIs, their addresses, and how a frame leaves one.

Every L3 interface uses the switch's MAC (the router MAC). Both routers (``router.Router``
for IPv4, ``router6.Router6``) work over the same interfaces, each reading its own family's
addresses. Addresses are kept as ints with their network and mask precomputed (``MASKS``,
``MASKS6``: the mask of each prefix length), so on-link tests are one AND and compare.
"""
from __future__ import annotations

from ipaddress import IPv4Interface, IPv6Interface
from typing import TYPE_CHECKING, Iterable

from .counters import FORWARDED, MTU_EXCEEDED, PORT_DOWN
from .frames import MIN_FRAME_LEN, link_local6, pack_u16

if TYPE_CHECKING:
    from .bridge import VlanBridge
    from .ports import PortState

MASKS = [(0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF for plen in range(33)]
MASKS6 = [((1 << 128) - 1) ^ ((1 << (128 - plen)) - 1) for plen in range(129)]


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
        frame = b"".join((dst, self.router_mac, pack_u16(ethertype), payload))
        if len(frame) < MIN_FRAME_LEN:
            frame += bytes(MIN_FRAME_LEN - len(frame))
        out.append((port, frame, cls))
        return FORWARDED
