"""What the IPv4 and IPv6 routers share: ``RouterBase``.

``router.Router`` (ARP) and ``router6.Router6`` (neighbour discovery) are built alike over
the switch's L3 interfaces and keep the same state: a routing table rebuilt from connected
subnets, static routes and a routing protocol's routes; a per-destination route cache; a
neighbour cache whose entries are created on demand (a route's next hops as soon as the
route is installed), retried, given up, re-probed when old, and hold packets while they
resolve. That construction and bookkeeping lives here once; each family adds its header
handling, its static-route binding, its resolution messages (``_request``) and its ECMP hash.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from .classify import CPU_CLASS
from .counters import BLACKHOLE, HELD, NO_ROUTE, PORT_DOWN, TO_CPU, TO_ROUTER_UNSUPPORTED
from .neighbors import ARP_MAX_HELD, INCOMPLETE, NEW, PROBE, REACHABLE, Neighbor
from .routes import LearnedRoute, Route, RoutingTable

if TYPE_CHECKING:
    from ..config import StaticRoute
    from .counters import CpuCounters
    from .interfaces import L3Interface

ROUTE_CACHE_MAX = 65536


class RouterBase:
    """One address family's router over the switch's L3 interfaces.

    A family sets the class constants (its neighbour timings and drop reasons, EtherType,
    prefix masks and route version) and supplies ``_static_route`` (a STATIC_ROUTE bound to
    interfaces), ``_addresses`` (an interface's addresses of the family), ``_request`` (one
    who-has or solicitation) and ``_flow_hash`` (its ECMP hash of a ready packet).

    ``rebuild`` makes the table from the interfaces, static and learned routes; ``resolve``
    maps a destination to its next-hop entries through it, cached per destination. The cache
    holds neighbour objects whose resolution state changes in place, so it only needs
    clearing when the table or the set of neighbours changes. Packets wait in an entry while
    it resolves (``_send_ip``) and are sent once it has (``_learn``).

    The next hops of installed routes are asked for at the next ``tick``, due at once
    (``rebuild``'s time; 0.0 for the table built with the router), not when a first packet
    needs them: SONiC's routeorch asks for every next hop it cannot program yet
    (``NeighOrch::resolveNeighbor``, which nbrmgrd turns into a kernel ARP or NS), so a
    switch has its routes' next hops resolved before traffic comes. A directly connected
    destination is still resolved by the packet that needs it.

    ``next_timer`` walks every entry, and its callers ask after every frame, so the answer is
    kept until an entry's timer moves: ``timers_moved`` is set where a next hop is queued
    (``rebuild``), starts resolving (``_start_resolving``) or is learned (``_learn``), in
    ``tick`` and in ``_forget``.
    """

    # A family's class constants (not annotated here: in the compiled build an annotation in
    # an extension type's body would declare an instance attribute):
    # TRIES (int) and RETRY_S (float), its neighbour timings; UNRESOLVED (str), the drop
    # reason of what waited for a next hop that never answered; QUEUE_FULL (str), that of a
    # packet beyond MAX_HELD waiting for one; ETHERTYPE (int); MASKS (list[int]), its prefix
    # masks, for its RoutingTable; VERSION (int), 4 or 6, on the routes it builds.
    MAX_HELD = ARP_MAX_HELD

    def __init__(self, router_mac: bytes, interfaces: Iterable[L3Interface],
                 static_routes: Iterable[StaticRoute], local_ips: Iterable[int],
                 cpu: CpuCounters, ecmp_salt: int = 0, kernel_stack: bool = False) -> None:
        """``static_routes``: the family's STATIC_ROUTE entries; ``local_ips``: every address
        of the switch in the family. ``ecmp_salt``: the hash seed (a switch's ECMP hash seed;
        0 hashes the bare 5-tuple), so a simulation's seed can move flows between equal-cost
        paths. ``kernel_stack``: the namespace's kernel owns the switch's addresses too (a
        BGP switch: FRR's sessions are kernel TCP), so what the router does not answer itself
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
        self.table = RoutingTable(self.MASKS)
        self._cache: dict[int, tuple[Neighbor, ...] | str] = {}
        # installed routes' next hops not asked for yet (``tick`` asks), by neighbour key
        self._to_resolve: dict[tuple[str, int], Neighbor] = {}
        self._resolve_at = 0.0  # when ``_to_resolve`` was first filled: ``tick`` is due
        self.timers_moved = True  # next_timer must walk the entries again
        self._next_timer: float | None = None  # what it found when it last did
        self.rebuild(0.0)

    # --- what a family supplies ------------------------------------------------------------

    def _static_route(self, sr: StaticRoute) -> Route:
        raise NotImplementedError

    @staticmethod
    def _addresses(iface: L3Interface) -> tuple[tuple[int, int, int, int], ...]:
        """The interface's ``(address, network, mask, prefix length)`` of the family."""
        raise NotImplementedError

    def _request(self, nh: Neighbor, out: list, now: float) -> None:
        raise NotImplementedError

    def _flow_hash(self, packet: bytes) -> int:
        """The ECMP hash of a ready IP packet (at offset 0)."""
        raise NotImplementedError

    @staticmethod
    def _routable(dst: int) -> bool:
        """Whether a destination may be routed at all (IPv6: not link-local or multicast)."""
        return True

    # --- tables -------------------------------------------------------------------------

    def _connected_interface(self, ip: int) -> L3Interface | None:
        """The interface whose subnet holds ``ip`` (longest match), if any."""
        best, best_len = None, -1
        for iface in self.interfaces.values():
            for _, net, mask, plen in self._addresses(iface):
                if ip & mask == net and plen > best_len:
                    best, best_len = iface, plen
        return best

    def _subnets(self, iface: L3Interface) -> list[tuple[int, int]]:
        return [(net, plen) for _, net, _, plen in self._addresses(iface)]

    def learn(self, route: LearnedRoute | None, network: int, prefixlen: int) -> None:
        """Install (``route``) or withdraw (None) a protocol's route for a prefix; the
        caller rebuilds once after a batch."""
        if route is None:
            self._learned.pop((network, prefixlen), None)
        else:
            self._learned[network, prefixlen] = route

    def learned(self) -> dict[tuple[int, int], LearnedRoute]:
        return dict(self._learned)

    def rebuild(self, now: float) -> None:
        """Recompute the active table from interface states (a down interface takes its
        connected subnets and the next hops through it away; a static route with no next
        hop left is not installed, so a less specific one can take over; protocol routes
        are bound to the interfaces by name), forget the neighbours of down interfaces,
        dropping what they held, and queue the installed routes' unresolved next hops for
        the next ``tick``."""
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
        for route in table.routes():
            for ip, iface in route.nexthops:
                if ip is not None:
                    nh = self.neighbor(iface, ip)
                    if nh.state == NEW:
                        if not self._to_resolve:
                            self._resolve_at = now
                        self._to_resolve[iface.name, ip] = nh
                        self.timers_moved = True

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
        if dst in self.local_ips:  # the per-packet path asks the cache before the addresses
            return hops
        if len(self._cache) >= ROUTE_CACHE_MAX:
            self._cache.clear()
        self._cache[dst] = hops
        return hops

    # --- sending and the neighbour cache -------------------------------------------------

    def _send_ip(self, nh: Neighbor, packet: bytes, prio: int, cls: tuple, owner, out: list,
                 now: float) -> str:
        """Send a ready IP packet to a neighbour, or hold it while ARP or NDP resolves it."""
        if nh.mac is not None:
            return nh.iface.send(nh.mac, nh.ethertype, packet, prio, cls, out, now)
        if len(nh.pending) >= self.MAX_HELD:
            return self.QUEUE_FULL
        nh.pending.append((owner, packet, prio, cls))
        if nh.state == NEW:
            self._start_resolving(nh, out, now)
        return HELD

    def _start_resolving(self, nh: Neighbor, out: list, now: float) -> None:
        """The first request for ``nh``; ``tick`` retries it."""
        self._to_resolve.pop((nh.iface.name, nh.ip), None)
        nh.state = INCOMPLETE
        nh.tries = 1
        nh.next_retry = now + self.RETRY_S
        self.timers_moved = True
        self._request(nh, out, now)

    def _learn(self, nh: Neighbor, mac: bytes, out: list, now: float) -> None:
        """Record ``mac`` for ``nh`` and send what it held."""
        self._to_resolve.pop((nh.iface.name, nh.ip), None)  # learned before it was asked for
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
        self._to_resolve.pop(key, None)
        self.timers_moved = True
        self._cache.clear()  # cached routes may hold this neighbour object

    def tick(self, now: float, out: list) -> None:
        """Send the first request for new route next hops, retry or give up on unresolved
        next hops, re-probe old entries."""
        self.timers_moved = True
        for nh in list(self._to_resolve.values()):
            self._start_resolving(nh, out, now)
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
        """When ``tick`` next has work: at once for a route's next hop not yet asked for, a
        retry of a next hop being resolved, or the end of a resolved one's lifetime (None:
        no neighbour has a timer running)."""
        if not self.timers_moved:
            return self._next_timer
        due = self._resolve_at if self._to_resolve else None
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

    def originate(self, packet: bytes, dst: int, out: list, now: float) -> None:
        """Route a packet the switch built itself (no TTL or hop limit decrement); counted
        as cpu."""
        hops = self.resolve(dst)
        if hops.__class__ is str:
            self.cpu.count(hops)
            return
        nh = hops[self._flow_hash(packet) % len(hops)] if len(hops) > 1 else hops[0]
        self.cpu.count(self._send_ip(nh, packet, 0, CPU_CLASS, self.cpu, out, now))

    @property
    def _unanswered(self) -> str:
        """What a packet to our address that the router does not serve counts as."""
        return TO_CPU if self.kernel_stack else TO_ROUTER_UNSUPPORTED

    # --- views -----------------------------------------------------------------------------

    def neighbor_table(self, now: float) -> list[dict]:
        """The ARP or NDP table: every entry a request has gone out for."""
        return [nh.as_dict(now) for nh in self.neighbors.values() if nh.state != NEW]

    def route_table(self) -> list[dict]:
        return [r.as_dict() for r in self.table.routes()]
