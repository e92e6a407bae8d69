"""Route sync: the routes FRR installs in the switch namespace's kernel, copied into the
switch's forwarding table, as SONiC's fpmsyncd copies zebra's routes to APPL_DB's
ROUTE_TABLE for the ASIC.

zebra installs its selected routes in the kernel's main table (plain multipath routes:
``fabric.frrconfig`` turns kernel nexthop groups off). The agent subscribes to IPv4 and IPv6 route
notifications on a netlink socket it polls from its own event loop (non-blocking, no
thread), decodes them with pyroute2, and hands each batch to ``Switch.update_routes``:
a new prefix or a changed next-hop set (NLM_F_REPLACE, carrying the full new set) installs,
RTM_DELROUTE withdraws. Each next hop's kernel interface maps to the switch's: a wire
``ethN`` to the PORT entry the switch's port map gives it (``fabric.portmap``), a ``VlanN``
stub to the SVI. The kernel's own connected routes
(proto kernel: subnets, fe80::/64) and link-local or multicast destinations are skipped:
the switch has those from its config. A lost notification (ENOBUFS: the socket overflowed)
triggers a full re-read of the table.

IPv6 differs in one way: the kernel keeps an IPv6 multipath route as sibling routes, and
one sibling deleted alone is notified as RTM_DELROUTE of a one-hop route though the others
stay, so an IPv6 notification only marks its prefix; after the batch the IPv6 table is read
back and each marked prefix takes the route it holds now (or is withdrawn). Next
hops are what the kernel has: global addresses, because ``fabric.frrconfig`` has bgpd prefer the
global next hop of an IPv6 peer; a link-local one would work as well (the switch resolves
it on the route's interface).
"""
from __future__ import annotations

import errno
import socket
from collections.abc import Callable, Mapping
from ipaddress import IPv6Network, ip_address, ip_network

from pyroute2 import IPRoute
from pyroute2.netlink.rtnl import RTMGRP_IPV4_ROUTE, RTMGRP_IPV6_ROUTE, RTMGRP_LINK
from pyroute2.netlink.rtnl.marshal import MarshalRtnl

from .config import IPNetwork
from .model.routes import LearnedRoute
from .model.switch import Switch

MAIN_TABLE = 254
RTN_UNICAST = 1
PROTO_KERNEL = 2  # connected routes of the kernel's own addresses
PROTOCOLS = {186: "bgp", 196: "static", 188: "ospf", 3: "boot", 4: "static"}
DEFAULT_DISTANCE = {"bgp": 20}  # when the kernel route carries no metric
FAMILIES = (socket.AF_INET, socket.AF_INET6)
NOT_ROUTED6 = (IPv6Network("fe80::/10"), IPv6Network("ff00::/8"))  # link-local, multicast
RECV_BYTES = 1 << 20
SOCKET_BUFFER = 4 << 20


def switch_interface(ifname: str | None, ports: Mapping[str, str]) -> str | None:
    """The switch's interface for a kernel interface: a wire's PORT entry (``ports``: wire ->
    port, the agent's map), Vlan100 stays; None for anything else (lo, an unknown device): a
    next hop there is not the switch's."""
    if ifname is None:
        return None
    if ifname.startswith("Vlan"):
        return ifname
    return ports.get(ifname)


def decode(msg, iface_of: Callable[[int], str | None]) -> tuple[IPNetwork, LearnedRoute | None] | None:
    """A route notification as (prefix, route) to install, (prefix, None) to withdraw, or
    None when it is not one to sync (another table or family, a connected or local route,
    a link-local or multicast destination)."""
    table = msg.get_attr("RTA_TABLE") or msg["table"]
    family = msg["family"]
    if family not in FAMILIES or table != MAIN_TABLE or msg["type"] != RTN_UNICAST \
            or msg["proto"] == PROTO_KERNEL:
        return None
    dst = msg.get_attr("RTA_DST") or ("0.0.0.0" if family == socket.AF_INET else "::")
    prefix = ip_network((dst, msg["dst_len"]))
    if prefix.version == 6 and any(prefix.subnet_of(n) for n in NOT_ROUTED6):
        return None
    if msg["event"] == "RTM_DELROUTE":
        return prefix, None
    source = PROTOCOLS.get(msg["proto"], f"proto{msg['proto']}")
    distance = msg.get_attr("RTA_PRIORITY")
    if distance is None:
        distance = DEFAULT_DISTANCE.get(source, 0)
    multipath = msg.get_attr("RTA_MULTIPATH")
    if multipath:
        hops = [(dict(h.get("attrs", ())).get("RTA_GATEWAY"), h["oif"]) for h in multipath]
    else:
        hops = [(msg.get_attr("RTA_GATEWAY"), msg.get_attr("RTA_OIF"))]
    nexthops = []
    for gateway, oif in hops:
        name = iface_of(oif) if oif is not None else None
        if name is not None:
            nexthops.append((int(ip_address(gateway)) if gateway else None, name))
    return prefix, LearnedRoute(min(distance, 255), source, tuple(nexthops))


class RouteSync:
    """The netlink side of one agent: ``fileno`` for its selector, ``ready`` when readable."""

    def __init__(self, switch: Switch, log: Callable[[str], None],
                 ports: Mapping[str, str]) -> None:
        """``ports``: each wire's PORT entry, as the agent was given them."""
        self.switch = switch
        self.ports = dict(ports)
        self.log = log
        self.marshal = MarshalRtnl()
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER)
        # before the dump: miss nothing
        self.sock.bind((0, RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE | RTMGRP_LINK))
        self.sock.setblocking(False)
        self.ifnames: dict[int, str] = {}
        self.stats = {"updates": 0, "resyncs": 0, "learned": 0}
        self.resync()

    def fileno(self) -> int:
        return self.sock.fileno()

    def iface_of(self, index: int) -> str | None:
        return switch_interface(self.ifnames.get(index), self.ports)

    def table(self, family: int) -> dict[IPNetwork, LearnedRoute]:
        """The routes to sync that the kernel's main table holds now, for one family."""
        with IPRoute() as ipr:
            routes = ipr.get_routes(family=family, table=MAIN_TABLE)
        out = {}
        for msg in routes:
            decoded = decode(msg, self.iface_of)
            if decoded is not None and decoded[1] is not None:
                out[decoded[0]] = decoded[1]
        return out

    def resync(self) -> None:
        """Read the links and the whole main table again; withdraw what is gone."""
        with IPRoute() as ipr:
            self.ifnames = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}
        changes: dict[IPNetwork, LearnedRoute | None] = {
            prefix: None for prefix in self.switch.learned_routes()}
        for family in FAMILIES:
            changes |= self.table(family)
        self.apply(changes)

    def ready(self) -> None:
        """Drain the socket; apply what arrived as one batch (IPv6 prefixes read back)."""
        changes: dict[IPNetwork, LearnedRoute | None] = {}
        marked6: set[IPv6Network] = set()
        while True:
            try:
                data = self.sock.recv(RECV_BYTES)
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno != errno.ENOBUFS:
                    raise
                self.log("route sync: netlink notifications were lost; re-reading the table")
                self.stats["resyncs"] += 1
                self.apply(changes)
                self.resync()
                return
            for msg in self.marshal.parse(data):
                if msg["event"] == "RTM_NEWLINK":
                    self.ifnames[msg["index"]] = msg.get_attr("IFLA_IFNAME")
                    continue
                if msg["event"] not in ("RTM_NEWROUTE", "RTM_DELROUTE"):
                    continue
                decoded = decode(msg, self.iface_of)
                if decoded is None:
                    continue
                if decoded[0].version == 6:
                    marked6.add(decoded[0])
                else:
                    changes[decoded[0]] = decoded[1]
        if marked6:
            now = self.table(socket.AF_INET6)
            changes |= {prefix: now.get(prefix) for prefix in marked6}
        self.apply(changes)

    def apply(self, changes: dict[IPNetwork, LearnedRoute | None]) -> None:
        if not changes:
            return
        self.switch.update_routes(changes)
        self.stats["updates"] += len(changes)
        self.stats["learned"] = len(self.switch.learned_routes())

    def close(self) -> None:
        self.sock.close()
