"""config_db.json table assembly: one parser per SONiC table, filling a draft configuration.

Each parser takes (draft, key, fields), checks the key's shape and the entry's fields
(``fabric.config_fields``) and the references to entries of earlier tables, and adds what it
accepted to the ``Draft`` (``fabric.config_draft``); ``Draft.finish`` builds the
``SwitchConfig``. The buffer tables' parsers are in ``fabric.config_buffer_tables``.
``TABLES`` lists them all in dependency order, the order ``fabric.config_load.parse`` runs
them in.
"""
from __future__ import annotations

import re

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .config import (MAX_TC, BgpNeighbor, BgpPeerRange, IPInterface, PfcWatchdog, Port,
                     PortQos, QueueConfig, Scheduler, StaticRoute, Vlan, WredColor,
                     WredProfile)
from .config_buffer_tables import (buffer_pg, buffer_pool, buffer_profile, buffer_queue,
                                   cable_length, port_profile_list)
from .config_draft import QOS_NAMED, Draft, assign, in_field, queue_indices
from .config_fields import (BgpNeighborFields, BgpPeerRangeFields, Between, DeviceMetadata,
                            Empty, Invalid, PfcWdFields, PfcWdGlobalFields, PortFields,
                            PortQosFields, QueueFields, SchedulerFields, StaticRouteFields,
                            VlanFields, VlanMemberFields, WredFields, checked_ip_address,
                            checked_ip_interface, checked_ip_network, validate)
from .userinput import MAX_INT_DIGITS, brief

# A VoQ line card's recycle and inband ports, a multi-ASIC's backplane ports: in PORT, never
# a front-panel wire
INTERNAL_PORT = re.compile(r"Ethernet-(Rec|IB|BP)(0|[1-9][0-9]{0,3})")


# ---- key shapes


def _is_named(name: str, prefix: str) -> bool:
    """``Ethernet8``-style names: prefix plus a number written the canonical way."""
    number = name.removeprefix(prefix)
    return (
        name.startswith(prefix) and number.isascii() and number.isdigit()
        and len(number) <= MAX_INT_DIGITS and number == str(int(number))
    )


def _name_and_address(key: str) -> tuple[str, IPInterface | None]:
    """``Ethernet0`` (L3 on) or ``Ethernet0|10.0.0.1/31`` / ``Ethernet0|fc00::1/126`` (an
    address on it)."""
    name, separator, address = key.partition("|")
    return name, checked_ip_interface(address) if separator else None


def _with_address(
    addresses: dict[str, tuple[IPInterface, ...]], name: str, address: IPInterface | None
) -> None:
    addresses[name] = addresses.get(name, ()) + ((address,) if address else ())


# ---- one parser per table: (draft, key, fields) -> None


def _device_metadata(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    if key != "localhost":
        raise Invalid("only the 'localhost' entry is understood")
    draft.meta = validate(DeviceMetadata, fields)


def _port(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    if not (_is_named(key, "Ethernet") or INTERNAL_PORT.fullmatch(key)):
        raise Invalid("port names must be Ethernet<N> (or a chassis line card's internal "
                      "Ethernet-Rec<N>, Ethernet-IB<N>, Ethernet-BP<N>)")
    entry = validate(PortFields, fields)
    draft.ports[key] = Port(key, entry.speed, entry.mtu, entry.admin_status == "up", entry.alias,
                           entry.lanes)


def _interface(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    port, address = _name_and_address(key)
    draft.need_port(port)
    validate(Empty, fields)
    _with_address(draft.interfaces, port, address)


def _loopback_interface(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    name, address = _name_and_address(key)
    if not _is_named(name, "Loopback"):
        raise Invalid("loopback names must be Loopback<N>")
    validate(Empty, fields)
    _with_address(draft.loopbacks, name, address)


def _vlan(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    if not _is_named(key, "Vlan"):
        raise Invalid("VLAN names must be Vlan<N>")
    entry = validate(VlanFields, fields)
    if entry.vlanid != int(key.removeprefix("Vlan")):
        raise Invalid(f"{entry.vlanid} does not match the VLAN name {key}", "vlanid")
    with in_field("members"):
        for port in entry.members:
            draft.need_port(port)
    draft.vlans[key] = Vlan(key, entry.vlanid)


def _vlan_member(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    vlan, separator, port = key.partition("|")
    if not separator:
        raise Invalid("key must be Vlan<N>|Ethernet<M>")
    draft.need_vlan(vlan)
    draft.need_port(port)
    if port in draft.interfaces:
        raise Invalid(f"port {port} is routed (INTERFACE|{port}); it cannot be a VLAN member too")
    mode = validate(VlanMemberFields, fields).tagging_mode
    if mode != "tagged":  # untagged and priority_tagged both make this the port's native VLAN
        for other in draft.vlans.values():
            if other.members.get(port, "tagged") != "tagged":
                raise Invalid(f"port {port} is already untagged in {other.name}", "tagging_mode")
    draft.vlans[vlan].members[port] = mode


def _vlan_interface(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    name, address = _name_and_address(key)
    vlan = draft.vlans[draft.need_vlan(name)]
    validate(Empty, fields)
    if address:
        draft.vlans[name] = replace(vlan, addresses=vlan.addresses + (address,))


def _static_route(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    vrf, _, prefix_text = key.rpartition("|")
    if vrf not in ("", "default"):
        raise Invalid(f"VRF {brief(vrf)} is not supported (only the default VRF)")
    prefix = checked_ip_network(prefix_text)
    if prefix in draft.routes:
        raise Invalid(f"route {prefix} is already given by another entry")
    entry = validate(StaticRouteFields, fields)
    for hop in entry.nexthop:
        if hop.version != prefix.version:
            raise Invalid(f"{hop} is IPv{hop.version}, the prefix {prefix} IPv{prefix.version}",
                           "nexthop")
    if not entry.nexthop and not entry.blackhole:
        raise Invalid('needs a nexthop (or blackhole "true")')
    if entry.nexthop and entry.blackhole:
        raise Invalid("a blackhole route takes no nexthop", "blackhole")
    if entry.ifname and len(entry.ifname) != len(entry.nexthop):
        count = f"{len(entry.ifname)} names for {len(entry.nexthop)} nexthops"
        raise Invalid(f"{count}; give one name per nexthop", "ifname")
    for name in entry.ifname:
        if name not in draft.ports and name not in draft.vlans:
            raise Invalid(f"{name} is not in PORT or VLAN", "ifname")
    draft.routes[prefix] = StaticRoute(
        prefix, entry.nexthop, entry.ifname, entry.distance, entry.blackhole
    )


def _bgp_neighbor(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    """A session runs over a directly connected subnet: rocelab runs no IGP that could
    carry it to a loopback, so a neighbour outside every INTERFACE and VLAN_INTERFACE subnet
    would never come up."""
    vrf, _, address_text = key.rpartition("|")
    if vrf not in ("", "default"):
        raise Invalid(f"VRF {brief(vrf)} is not supported (only the default VRF)")
    address = checked_ip_address(address_text)
    entry = validate(BgpNeighborFields, fields)
    ours = draft.l3_addresses()
    if any(a.ip == address for _, a in ours):
        raise Invalid(f"{address} is this switch's own address")
    link = [(name, a) for name, a in ours
            if address in a.network and a.network.prefixlen < a.max_prefixlen
            and not name.startswith("Loopback")]
    if not link:
        raise Invalid(f"{address} is in no subnet of INTERFACE or VLAN_INTERFACE: no interface "
                       "leads to this neighbour (sessions must be directly connected)")
    if entry.local_addr is not None and entry.local_addr not in {a.ip for _, a in link}:
        raise Invalid(f"{entry.local_addr} is not this switch's address on the subnet of "
                       f"{address} ({', '.join(f'{n} {a}' for n, a in link)})", "local_addr")
    admin = entry.admin_status or (draft.meta.default_bgp_status if draft.meta else "up")
    draft.neighbors[address] = BgpNeighbor(
        address, entry.asn, entry.name, entry.local_addr, admin == "up", entry.holdtime,
        entry.keepalive, entry.nhopself, entry.rrclient)


def _bgp_peer_range(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    entry = validate(BgpPeerRangeFields, fields)
    if not entry.ip_range:
        raise Invalid("needs at least one prefix", "ip_range")
    if entry.src_address is not None and entry.src_address not in {
            a.ip for _, a in draft.l3_addresses()}:
        raise Invalid(f"{entry.src_address} is not an address of this switch", "src_address")
    draft.peer_ranges[key] = BgpPeerRange(entry.name or key, entry.ip_range, entry.peer_asn,
                                          entry.src_address)


def _qos_map(table: str, highest_key: int,
             highest_value: int = 7) -> Callable[[Draft, str, dict[str, Any]], None]:
    """A parser for a ``{"<key 0..highest_key>": "<value 0..highest_value>"}`` map table."""

    def parse_map(draft: Draft, key: str, fields: dict[str, Any]) -> None:
        mapping: dict[int, int] = {}
        for source, target in fields.items():
            with in_field(source):
                mapping[Between(0, highest_key)(source)] = Between(0, highest_value)(target)
        getattr(draft.qos, QOS_NAMED[table])[key] = mapping

    return parse_map


# PORT_QOS_MAP field -> the table its name refers to (the PortQos attributes have these names)
_PORT_QOS_REFS = {
    "dscp_to_tc_map": "DSCP_TO_TC_MAP",
    "dot1p_to_tc_map": "DOT1P_TO_TC_MAP",
    "tc_to_pg_map": "TC_TO_PRIORITY_GROUP_MAP",
    "tc_to_queue_map": "TC_TO_QUEUE_MAP",
    "pfc_to_queue_map": "MAP_PFC_PRIORITY_TO_QUEUE",
    "pfc_to_pg_map": "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP",
    "scheduler": "SCHEDULER",
}


def _port_qos_map(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    if key != "global":
        draft.need_port(key)
    entry = validate(PortQosFields, fields)
    draft.qos.port_qos[key] = PortQos(
        **draft.refs(entry, _PORT_QOS_REFS),
        pfc_enable=entry.pfc_enable,
        pfcwd_sw_enable=entry.pfcwd_sw_enable,
    )


def _wred_color(entry: WredFields, color: str) -> WredColor | None:
    """A color is configured when anything about it is given; it then needs both thresholds."""
    enable = getattr(entry, f"wred_{color}_enable")
    low = getattr(entry, f"{color}_min_threshold")
    high = getattr(entry, f"{color}_max_threshold")
    probability = getattr(entry, f"{color}_drop_probability")
    if not enable and low is None and high is None and probability is None:
        return None
    for name, value in ((f"{color}_min_threshold", low), (f"{color}_max_threshold", high)):
        if value is None:
            raise Invalid(f"required when {color} WRED is configured", name)
    if low > high:
        problem = f"must be at least {color}_min_threshold ({low}), got {high}"
        raise Invalid(problem, f"{color}_max_threshold")
    # SAI's default drop probability is 100 %
    return WredColor(enable, low, high, 100 if probability is None else probability)


def _wred_profile(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    entry = validate(WredFields, fields)
    colors = {color: _wred_color(entry, color) for color in ("green", "yellow", "red")}
    draft.qos.wred_profiles[key] = WredProfile(key, entry.ecn, **colors)


def _scheduler(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    entry = validate(SchedulerFields, fields)
    if entry.type != "STRICT" and entry.weight is None:
        raise Invalid(f"required for {entry.type} scheduling", "weight")
    draft.qos.schedulers[key] = Scheduler(
        key, entry.type, entry.weight, entry.priority, entry.cir, entry.pir
    )


def _queue(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    """A queue's scheduler and WRED profile; VoQ system-port keys: ``queue_indices``."""
    keys = queue_indices(draft, key)
    entry = validate(QueueFields, fields)
    refs = draft.refs(entry, {"scheduler": "SCHEDULER", "wred_profile": "WRED_PROFILE"})
    assign(draft.qos.queues, keys, QueueConfig(**refs))


def _pfc_wd(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    if key == "GLOBAL":
        interval = validate(PfcWdGlobalFields, fields).POLL_INTERVAL
        draft.qos = replace(draft.qos, pfc_wd_poll_interval_ms=interval)
        return
    draft.need_port(key)
    entry = validate(PfcWdFields, fields)
    draft.qos.pfc_wd[key] = PfcWatchdog(entry.action, entry.detection_time, entry.restoration_time)


# The tables rocelab models, in dependency order: each comes after every table it refers to.
TABLES: dict[str, Callable[[Draft, str, dict[str, Any]], None]] = {
    "DEVICE_METADATA": _device_metadata,
    "PORT": _port,
    "INTERFACE": _interface,
    "LOOPBACK_INTERFACE": _loopback_interface,
    "VLAN": _vlan,
    "VLAN_MEMBER": _vlan_member,
    "VLAN_INTERFACE": _vlan_interface,
    "STATIC_ROUTE": _static_route,
    "BGP_NEIGHBOR": _bgp_neighbor,
    "BGP_PEER_RANGE": _bgp_peer_range,
    # traffic classes 0..15, as SONiC's YANG allows (dual-ToR templates use TC 8); PGs,
    # queues and PFC priorities 0..7
    "DSCP_TO_TC_MAP": _qos_map("DSCP_TO_TC_MAP", 63, MAX_TC),
    "DOT1P_TO_TC_MAP": _qos_map("DOT1P_TO_TC_MAP", 7, MAX_TC),
    "TC_TO_PRIORITY_GROUP_MAP": _qos_map("TC_TO_PRIORITY_GROUP_MAP", MAX_TC),
    "TC_TO_QUEUE_MAP": _qos_map("TC_TO_QUEUE_MAP", MAX_TC),
    "MAP_PFC_PRIORITY_TO_QUEUE": _qos_map("MAP_PFC_PRIORITY_TO_QUEUE", 7),
    "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP": _qos_map("PFC_PRIORITY_TO_PRIORITY_GROUP_MAP", 7),
    "SCHEDULER": _scheduler,
    "WRED_PROFILE": _wred_profile,
    "PORT_QOS_MAP": _port_qos_map,
    "BUFFER_POOL": buffer_pool,
    "BUFFER_PROFILE": buffer_profile,
    "BUFFER_PG": buffer_pg,
    "BUFFER_QUEUE": buffer_queue,
    "BUFFER_PORT_INGRESS_PROFILE_LIST": port_profile_list("ingress"),
    "BUFFER_PORT_EGRESS_PROFILE_LIST": port_profile_list("egress"),
    "CABLE_LENGTH": cable_length,
    "QUEUE": _queue,
    "PFC_WD": _pfc_wd,
}
