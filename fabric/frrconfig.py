"""config_db.json -> FRR's configuration (zebra + bgpd), as SONiC's bgpcfgd renders it.

SONiC's bgpcfgd turns ``DEVICE_METADATA`` (``bgp_asn``, ``bgp_router_id``),
``BGP_NEIGHBOR``, ``BGP_PEER_RANGE`` and ``LOOPBACK_INTERFACE`` into bgpd's configuration
(dockers/docker-fpm-frr/frr/bgpd templates in sonic-buildimage); this renders the same
shape for the FRR that runs in the switch's namespace:

- ``router bgp <bgp_asn>``, the router id (``bgp_router_id``, else Loopback0's address),
  no eBGP policy requirement, ``bestpath as-path multipath-relax`` and ``maximum-paths 64``
  (ECMP across equal paths even through different neighbour ASes);
- one ``neighbor`` per ``BGP_NEIGHBOR`` entry: ``remote-as``, ``description`` (name),
  ``update-source`` (local_addr), ``timers <keepalive> <holdtime>`` when both are given,
  ``shutdown`` when admin_status is down, ``next-hop-self``/``route-reflector-client``;
- ``BGP_PEER_RANGE`` as a peer group with ``bgp listen range`` (dynamic neighbours);
- one ``address-family`` block per family (``ipv4 unicast``, ``ipv6 unicast``): a neighbour
  is activated in the family of its address (as bgpcfgd does: an IPv6 session carries IPv6
  routes), a peer group in the families of its ranges; the family's loopback addresses are
  announced with ``network``, its connected subnets (routed ports, SVIs) with
  ``redistribute connected``; ``maximum-paths`` in each;
- IPv6 sessions get bgpcfgd's inbound route-map ``FROM_BGP_PEER_V6`` with ``set ipv6
  next-hop prefer-global``: over eBGP a directly connected peer sends its link-local
  address beside the global one, and zebra would install the link-local one; the global
  next hop is the one the switch's forwarding table and the sim runtime work with.

Departures from a real switch, for an emulator's needs (docs/lab-guide.md, BGP): zebra
installs plain multipath routes rather than kernel nexthop groups (FRR 8.4 loses ECMP
members of a group after a link flap), ``advertisement-interval 0`` and a 50 ms update
coalescing so a lab converges in about a second; with the IPv6 route-map,
``bgp route-map delay-timer 0``: bgpd holds every session after reading its config until
the route-map timer (5 s by default) has run, which made a dual-stack lab take 4 s to start.
"""
from __future__ import annotations

from pathlib import Path

from .config import Bgp, BgpNeighbor, BgpPeerRange, SwitchConfig

MAXIMUM_PATHS = 64  # bgpcfgd's default for ECMP
COALESCE_MS = 50  # update-group coalescing (FRR's default 1000 ms doubles convergence time)
FAMILIES = {4: "ipv4 unicast", 6: "ipv6 unicast"}
FROM_PEER_V6 = "FROM_BGP_PEER_V6"  # bgpcfgd's inbound route-map for IPv6 sessions


def render(config: SwitchConfig, log_file: Path) -> str:
    """The integrated frr.conf for the switch ``config`` describes (``vtysh -b`` applies it).
    ``log_file`` must be writable by the ``frr`` user."""
    bgp = config.bgp
    if bgp is None:
        raise ValueError(f"{config.path}: no BGP_NEIGHBOR or BGP_PEER_RANGE: nothing to render")
    lines = [
        "frr defaults traditional",
        f"hostname {config.hostname}",
        f"log file {log_file} informational",
        "no zebra nexthop kernel enable",
    ]
    if 6 in session_families(bgp):  # route-maps in force at once (see the module doc)
        lines.append("bgp route-map delay-timer 0")
    lines += ["!", f"router bgp {bgp.asn}"]
    if bgp.router_id is not None:
        lines.append(f" bgp router-id {bgp.router_id}")
    lines += [
        " bgp log-neighbor-changes",
        " no bgp ebgp-requires-policy",
        " no bgp default ipv4-unicast",
        " no bgp network import-check",
        " bgp bestpath as-path multipath-relax",
        f" coalesce-time {COALESCE_MS}",
    ]
    for neighbor in bgp.neighbors.values():
        lines += _neighbor(neighbor)
    for group in bgp.peer_ranges.values():
        lines += [f" neighbor {group.name} peer-group",
                  f" neighbor {group.name} remote-as {group.peer_asn or 'external'}"]
        if group.src_address is not None:
            lines.append(f" neighbor {group.name} update-source {group.src_address}")
        lines += [f" bgp listen range {prefix} peer-group {group.name}"
                  for prefix in group.ip_ranges]
    for version in session_families(bgp):
        lines += _address_family(version, config)
    lines += ["exit", "!"]
    if 6 in session_families(bgp):
        lines += [f"route-map {FROM_PEER_V6} permit 100", " set ipv6 next-hop prefer-global",
                  "exit", "!"]
    return "\n".join(lines) + "\n"


def session_families(bgp: Bgp) -> list[int]:
    """The IP versions some session runs in (a neighbour's address, a peer range's
    prefixes): each gets its address-family block."""
    found = {a.version for a in bgp.neighbors}
    found |= {p.version for group in bgp.peer_ranges.values() for p in group.ip_ranges}
    return sorted(found)


def _neighbor(n: BgpNeighbor) -> list[str]:
    at = f" neighbor {n.address}"
    lines = [f"{at} remote-as {n.asn}", f"{at} advertisement-interval 0"]
    if n.name:
        lines.append(f"{at} description {n.name}")
    if n.local_addr is not None:
        lines.append(f"{at} update-source {n.local_addr}")
    if n.keepalive is not None and n.holdtime is not None:
        lines.append(f"{at} timers {n.keepalive} {n.holdtime}")
    if not n.admin_up:
        lines.append(f"{at} shutdown")
    return lines


def _address_family(version: int, config: SwitchConfig) -> list[str]:
    """One ``address-family`` block: what is announced, ECMP, and who takes part (the
    neighbours of that family, the peer groups with a range in it)."""
    bgp = config.bgp
    lines = [" !", f" address-family {FAMILIES[version]}"]
    lines += [f"  network {a.network}" for _, addrs in sorted(config.loopbacks.items())
              for a in addrs if a.version == version]
    lines += ["  redistribute connected", f"  maximum-paths {MAXIMUM_PATHS}",
              f"  maximum-paths ibgp {MAXIMUM_PATHS}"]
    peers: list[tuple[str, BgpNeighbor | None]] = [
        (str(n.address), n) for n in bgp.neighbors.values() if n.address.version == version]
    peers += [(group.name, None) for group in bgp.peer_ranges.values()
              if _in_family(group, version)]
    for name, n in peers:
        lines.append(f"  neighbor {name} activate")
        if version == 6:
            lines.append(f"  neighbor {name} route-map {FROM_PEER_V6} in")
        if n is not None and n.nhopself:
            lines.append(f"  neighbor {name} next-hop-self")
        if n is not None and n.rrclient:
            lines.append(f"  neighbor {name} route-reflector-client")
    lines.append(" exit-address-family")
    return lines


def _in_family(group: BgpPeerRange, version: int) -> bool:
    return any(p.version == version for p in group.ip_ranges)
