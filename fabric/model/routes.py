"""Routes and the longest-prefix-match table, for both families.

A ``Route`` is what a table holds: a prefix with its next hops bound to L3 interfaces
(connected, static, or a routing protocol's). A ``LearnedRoute`` is a protocol's choice as
it arrives, next hops by interface name, bound at each rebuild of the table.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from .frames import ip6_text, ip_text
from .interfaces import MASKS

if TYPE_CHECKING:
    from .interfaces import L3Interface


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
