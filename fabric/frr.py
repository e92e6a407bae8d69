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
- Loopback addresses announced with ``network``, connected subnets (routed ports, SVIs)
  with ``redistribute connected``.

Departures from a real switch, for an emulator's needs (docs/lab-guide.md, BGP): zebra
installs plain multipath routes rather than kernel nexthop groups (FRR 8.4 loses ECMP
members of a group after a link flap), ``advertisement-interval 0`` and a 50 ms update
coalescing so a lab converges in about a second.

Address families are rendered per family (``_address_family``), so an IPv6 unicast
family can be added beside IPv4 without changing the rest. For now the rendering is IPv4
only: config_db.json may hold IPv6 neighbours, peer ranges and loopbacks (they are parsed
and checked like IPv4 ones), but only the IPv4 sessions (``rendered``) run in FRR, and only
they are awaited at ``lab.up`` and computed by the sim runtime.
"""
from __future__ import annotations

from ipaddress import IPv4Interface
from pathlib import Path

from fabric.config import Bgp, BgpNeighbor, BgpPeerRange, IPAddress, SwitchConfig

MAXIMUM_PATHS = 64  # bgpcfgd's default for ECMP
COALESCE_MS = 50  # update-group coalescing (FRR's default 1000 ms doubles convergence time)


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
        "!",
        f"router bgp {bgp.asn}",
    ]
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
    for neighbor in rendered(bgp).values():
        lines += _neighbor(neighbor)
    for group in rendered_ranges(bgp):
        lines += [f" neighbor {group.name} peer-group",
                  f" neighbor {group.name} remote-as {group.peer_asn or 'external'}"]
        if group.src_address is not None:
            lines.append(f" neighbor {group.name} update-source {group.src_address}")
        lines += [f" bgp listen range {prefix} peer-group {group.name}"
                  for prefix in group.ip_ranges]
    lines += _address_family("ipv4 unicast", bgp, _loopback_networks(config))
    lines += ["exit", "!"]
    return "\n".join(lines) + "\n"


def rendered(bgp: Bgp) -> dict[IPAddress, BgpNeighbor]:
    """The neighbours FRR runs a session with: the IPv4 ones (see the module doc)."""
    return {a: n for a, n in bgp.neighbors.items() if a.version == 4}


def rendered_ranges(bgp: Bgp) -> list[BgpPeerRange]:
    """BGP_PEER_RANGE entries with their IPv4 prefixes only; none left: not rendered."""
    out = []
    for group in bgp.peer_ranges.values():
        v4 = tuple(p for p in group.ip_ranges if p.version == 4)
        source = group.src_address if group.src_address is None \
            or group.src_address.version == 4 else None
        if v4:
            out.append(BgpPeerRange(group.name, v4, group.peer_asn, source))
    return out


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


def _address_family(family: str, bgp: Bgp, networks: list[IPv4Interface]) -> list[str]:
    """One ``address-family`` block: what is announced, ECMP, and who takes part."""
    lines = [" !", f" address-family {family}"]
    lines += [f"  network {net.network}" for net in networks]
    lines += ["  redistribute connected", f"  maximum-paths {MAXIMUM_PATHS}",
              f"  maximum-paths ibgp {MAXIMUM_PATHS}"]
    for n in rendered(bgp).values():
        lines.append(f"  neighbor {n.address} activate")
        if n.nhopself:
            lines.append(f"  neighbor {n.address} next-hop-self")
        if n.rrclient:
            lines.append(f"  neighbor {n.address} route-reflector-client")
    lines += [f"  neighbor {group.name} activate" for group in rendered_ranges(bgp)]
    lines.append(" exit-address-family")
    return lines


def _loopback_networks(config: SwitchConfig) -> list[IPv4Interface]:
    """bgpcfgd announces the loopbacks with ``network`` (origin IGP): the IPv4 ones here."""
    return [a for _, addrs in sorted(config.loopbacks.items()) for a in addrs
            if a.version == 4]
