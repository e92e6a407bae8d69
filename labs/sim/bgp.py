"""BGP in virtual time: the routes FRR would install, computed from the same config_db.json.

The simulator has no FRR, so it works out what the fabric's eBGP converges to and installs
it in each switch model the way the live agent installs FRR's routes
(``Switch.update_routes``, distance 20):

- sessions: a ``BGP_NEIGHBOR`` entry (admin up) whose address is a directly wired neighbour
  switch's interface address, with the AS numbers agreeing at both ends (as bgpd would
  need to reach Established);
- each family on its own (``fabric.frrconfig`` activates a neighbour in the family of its
  address): IPv4 sessions carry IPv4 prefixes, IPv6 sessions IPv6 ones, with the peer's
  global address as next hop (bgpd prefers it: ``set ipv6 next-hop prefer-global``);
- what a switch announces in a family: its connected subnets (INTERFACE, VLAN_INTERFACE:
  ``redistribute connected``) and loopbacks (``network``) of that family;
- path vector to a fixed point: a switch rejects a path holding its own AS (eBGP loop
  prevention), prefers the shortest AS path, and with ``multipath-relax`` installs every
  neighbour offering a path of that length (ECMP), the next hop being the neighbour's
  address on the shared link; a prefix the switch has connected itself is not installed
  (zebra prefers the connected route);
- a switch passes on its best path with its AS prepended; among equal paths the one from
  the neighbour with the lowest address (FRR would take the oldest: in a Clos fabric equal
  paths cross the same AS tiers, so the choice does not change what anyone installs).

iBGP (equal AS at both ends) and peer ranges are not computed: ``SimError`` says so.
"""
from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address

from ...fabric.config import IPNetwork, SwitchConfig
from ...fabric.model.routes import LearnedRoute
from .hostconfig import SimError
from ..topology import Topology

EBGP_DISTANCE = 20
MAX_ROUNDS = 256


@dataclass(frozen=True)
class Session:
    """One direction of an established session: ``local`` hears ``peer`` at ``address``
    through its interface ``iface``."""

    local: str
    peer: str
    address: IPv4Address | IPv6Address
    iface: str


def sessions(topo: Topology) -> list[Session]:
    """The sessions that would come up: configured at both ends, on a wire between them."""
    configs = {n.name: n.config for n in topo.switches
               if n.config is not None and n.config.bgp is not None}
    owner: dict[IPv4Address | IPv6Address, tuple[str, str]] = {}  # -> (switch, its interface)
    for name, config in configs.items():
        for iface, addr in _l3(config):
            owner[addr.ip] = (name, iface)
    wired = {frozenset(((l.a.node, topo.port(l.a.node, l.a.iface)),
                        (l.b.node, topo.port(l.b.node, l.b.iface))))
             for l in topo.links if l.a.node in configs and l.b.node in configs}
    out = []
    for name, config in configs.items():
        if config.bgp.peer_ranges:
            raise SimError(f"{name}: BGP_PEER_RANGE (dynamic neighbours) is not computed by "
                           "the sim runtime")
        for address, nb in config.bgp.neighbors.items():
            if not nb.admin_up or address not in owner:
                continue
            peer, peer_iface = owner[address]
            peer_bgp = configs[peer].bgp
            back = [b for b in peer_bgp.neighbors.values() if b.admin_up
                    and b.asn == config.bgp.asn and b.address.version == address.version
                    and _iface_of(config, b.address) is not None]
            local_iface = _iface_of(config, address)
            if nb.asn != peer_bgp.asn or not back or local_iface is None:
                continue
            if nb.asn == config.bgp.asn:
                raise SimError(f"{name}: BGP_NEIGHBOR|{address} is iBGP (AS {nb.asn} at both "
                               "ends); the sim runtime computes eBGP fabrics only")
            if local_iface.startswith("Ethernet") and frozenset(
                    ((name, local_iface), (peer, peer_iface))) not in wired:
                continue
            out.append(Session(name, peer, address, local_iface))
    return out


def routes(topo: Topology) -> dict[str, dict[IPNetwork, LearnedRoute]]:
    """Per BGP switch, the routes eBGP installs, IPv4 and IPv6: prefix -> LearnedRoute
    (next hops sorted)."""
    configs = {n.name: n.config for n in topo.switches
               if n.config is not None and n.config.bgp is not None}
    links = sessions(topo)
    out: dict[str, dict[IPNetwork, LearnedRoute]] = {name: {} for name in configs}
    for version in (4, 6):
        family = [s for s in links if s.address.version == version]
        for name, table in _family_routes(configs, family, version).items():
            out[name] |= table
    return out


def _family_routes(configs: dict[str, SwitchConfig], links: list[Session],
                   version: int) -> dict[str, dict[IPNetwork, LearnedRoute]]:
    """Path vector to a fixed point over one family's sessions (see the module doc)."""
    origin = {name: {a.network for _, a in _l3(config) if a.version == version}
              for name, config in configs.items()}
    # best[switch][prefix] = (AS path, [(next hop, iface)]); () for what it originates
    best: dict[str, dict[IPNetwork, tuple[tuple[int, ...], list[Session]]]] = {
        name: {prefix: ((), []) for prefix in prefixes} for name, prefixes in origin.items()}
    for _ in range(MAX_ROUNDS):
        changed = False
        offers: dict[str, dict[IPNetwork, list[tuple[tuple[int, ...], Session]]]] = {
            name: {} for name in configs}
        for s in links:
            peer_asn = configs[s.peer].bgp.asn
            for prefix, (path, _) in best[s.peer].items():
                offered = (peer_asn, *path)
                if configs[s.local].bgp.asn not in offered:
                    offers[s.local].setdefault(prefix, []).append((offered, s))
        for name in configs:
            new = {prefix: ((), []) for prefix in origin[name]}
            for prefix, candidates in offers[name].items():
                if prefix in origin[name]:
                    continue
                shortest = min(len(path) for path, _ in candidates)
                equal = sorted((c for c in candidates if len(c[0]) == shortest),
                               key=lambda c: int(c[1].address))
                new[prefix] = (equal[0][0], [s for _, s in equal])
            if new != best[name]:
                best[name], changed = new, True
        if not changed:
            break
    else:
        raise SimError(f"BGP (IPv{version}) did not converge in {MAX_ROUNDS} rounds")
    return {name: {prefix: LearnedRoute(EBGP_DISTANCE, "bgp", tuple(
                       sorted((int(s.address), s.iface) for s in via)))
                   for prefix, (_, via) in table.items() if via}
            for name, table in best.items()}


def _l3(config: SwitchConfig):
    """(interface, address) of every routed port, SVI and loopback, both families."""
    for table in (config.interfaces, config.loopbacks):
        for name, addrs in table.items():
            for a in addrs:
                yield name, a
    for vlan in config.vlans.values():
        for a in vlan.addresses:
            yield vlan.name, a


def _iface_of(config: SwitchConfig, address: IPv4Address | IPv6Address) -> str | None:
    """The switch's interface whose subnet holds ``address`` (not a loopback)."""
    for name, a in _l3(config):
        if a.version == address.version and address in a.network \
                and not name.startswith("Loopback") and a.network.prefixlen < a.max_prefixlen:
            return name
    return None
