"""config_db.json table assembly: one parser per SONiC table, filling a draft configuration.

Each parser takes (draft, key, fields), checks the key's shape and the entry's fields
(``fabric.config_fields``) and the references to entries of earlier tables, and adds what it
accepted to the ``Draft``; ``Draft.finish`` builds the ``SwitchConfig``. ``TABLES`` lists
the parsers in dependency order, the order ``fabric.config_load.parse`` runs them in.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel

from .config import (Bgp, BgpNeighbor, BgpPeerRange, BufferPool, BufferProfile, ConfigError,
                     IPAddress, IPInterface, IPNetwork, PfcWatchdog, Port, PortQos, Qos,
                     QueueConfig, Scheduler, StaticRoute, SwitchConfig, Vlan, WredColor,
                     WredProfile)
from .config_fields import (BgpNeighborFields, BgpPeerRangeFields, Between, BufferPoolFields,
                            BufferProfileFields, BufferRefFields, DeviceMetadata, Empty,
                            Invalid, PfcWdFields, PfcWdGlobalFields, PortFields, PortQosFields,
                            QueueFields, SchedulerFields, StaticRouteFields, VlanFields,
                            VlanMemberFields, WredFields, checked_ip_address,
                            checked_ip_interface, checked_ip_network, validate)
from .userinput import MAX_INT_DIGITS, brief


@contextmanager
def _in_field(name: str) -> Iterator[None]:
    """Attribute problems found by plain (non-pydantic) checks to field *name*."""
    try:
        yield
    except Invalid as invalid:
        raise Invalid(invalid.problem, invalid.field or name) from None


# ---- what has been accepted so far


# QoS tables whose entries other tables refer to by name -> the Qos attribute holding them
_QOS_NAMED = {
    "DSCP_TO_TC_MAP": "dscp_to_tc",
    "DOT1P_TO_TC_MAP": "dot1p_to_tc",
    "TC_TO_PRIORITY_GROUP_MAP": "tc_to_pg",
    "TC_TO_QUEUE_MAP": "tc_to_queue",
    "MAP_PFC_PRIORITY_TO_QUEUE": "pfc_priority_to_queue",
    "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP": "pfc_priority_to_pg",
    "SCHEDULER": "schedulers",
    "WRED_PROFILE": "wred_profiles",
    "BUFFER_POOL": "buffer_pools",
    "BUFFER_PROFILE": "buffer_profiles",
}


@dataclass
class Draft:
    """The entries accepted so far; later tables check their references against them."""

    meta: DeviceMetadata | None = None
    ports: dict[str, Port] = field(default_factory=dict)
    interfaces: dict[str, tuple[IPInterface, ...]] = field(default_factory=dict)
    loopbacks: dict[str, tuple[IPInterface, ...]] = field(default_factory=dict)
    vlans: dict[str, Vlan] = field(default_factory=dict)
    routes: dict[IPNetwork, StaticRoute] = field(default_factory=dict)
    qos: Qos = field(default_factory=Qos)  # its dicts are filled in place
    neighbors: dict[IPAddress, BgpNeighbor] = field(default_factory=dict)
    peer_ranges: dict[str, BgpPeerRange] = field(default_factory=dict)

    def finish(self, path: str) -> SwitchConfig:
        if self.meta is None:
            raise ConfigError(
                f"{path}: DEVICE_METADATA: the localhost entry (hostname, mac) is required"
            )
        meta = self.meta
        return SwitchConfig(
            path=path, hostname=meta.hostname, mac=meta.mac, type=meta.type, hwsku=meta.hwsku,
            buffer_model=meta.buffer_model, ports=self.ports, vlans=self.vlans,
            interfaces=self.interfaces, loopbacks=self.loopbacks,
            static_routes=tuple(self.routes.values()), qos=self.qos, bgp=self.bgp(path),
        )

    def bgp(self, path: str) -> Bgp | None:
        """The BGP speaker, when any session is configured: it needs the switch's AS."""
        if not self.neighbors and not self.peer_ranges:
            return None
        if self.meta.bgp_asn is None:
            table = "BGP_NEIGHBOR" if self.neighbors else "BGP_PEER_RANGE"
            raise ConfigError(f"{path}: DEVICE_METADATA|localhost: bgp_asn: required field is "
                              f"missing ({table} configures BGP sessions, which need this "
                              "switch's AS number)", "DEVICE_METADATA|localhost|bgp_asn")
        router_id = self.meta.bgp_router_id
        if router_id is None:  # Loopback0's IPv4 address, as bgpcfgd takes it
            router_id = next((a.ip for a in self.loopbacks.get("Loopback0", ())
                              if a.version == 4), None)
        if router_id is None and all(a.version == 6 for _, a in self.l3_addresses()):
            # FRR would take one of the switch's IPv4 addresses; with none its BGP
            # identifier is 0.0.0.0, which every peer refuses: no session would come up
            raise ConfigError(f"{path}: DEVICE_METADATA|localhost: bgp_router_id: required "
                              "field is missing (this switch has no IPv4 address to take "
                              "its 32-bit BGP router id from)",
                              "DEVICE_METADATA|localhost|bgp_router_id")
        return Bgp(self.meta.bgp_asn, router_id, self.neighbors, self.peer_ranges)

    def l3_addresses(self) -> list[tuple[str, IPInterface]]:
        """(interface, address) of every routed port, SVI and loopback accepted so far."""
        return [(name, a) for table in (self.interfaces, self.loopbacks)
                for name, addrs in table.items() for a in addrs] + [
                (vlan.name, a) for vlan in self.vlans.values() for a in vlan.addresses]

    def need_port(self, name: str) -> str:
        if name not in self.ports:
            raise Invalid(f"port {name} is not in PORT")
        return name

    def need_vlan(self, name: str) -> str:
        if name not in self.vlans:
            raise Invalid(f"VLAN {name} is not in VLAN")
        return name

    def ref(self, field_name: str, value: str, table: str) -> str:
        """Resolve a reference to a *table* entry; SONiC also writes it "[TABLE|name]"."""
        name = value
        if value.startswith("[") and value.endswith("]"):
            ref_table, _, name = value[1:-1].partition("|")
            if ref_table != table:
                raise Invalid(f"{brief(value)} must refer to {table}", field_name)
        if name not in getattr(self.qos, _QOS_NAMED[table]):
            raise Invalid(f"{brief(name)} is not in {table}", field_name)
        return name

    def refs(self, entry: BaseModel, tables: dict[str, str]) -> dict[str, str]:
        """Resolve the optional reference fields of *entry* ({field: table}) that are given."""
        given = entry.model_dump(include=set(tables), exclude_none=True)
        return {name: self.ref(name, value, tables[name]) for name, value in given.items()}


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


def _port_indices(draft: Draft, key: str) -> list[tuple[str, int]]:
    """``Ethernet0|3`` or ``Ethernet0|0-2`` -> [(port, index), ...] for PGs and queues 0..7."""
    port, separator, indices = key.partition("|")
    if not separator:
        raise Invalid("key must be Ethernet<N>|<index> or Ethernet<N>|<first>-<last>")
    draft.need_port(port)
    first, dash, last = indices.partition("-")
    low = Between(0, 7)(first)
    high = Between(0, 7)(last) if dash else low
    if low > high:
        raise Invalid(f"range {brief(indices)} is backwards ({low} > {high})")
    return [(port, index) for index in range(low, high + 1)]


def _assign(target: dict[tuple[str, int], Any], keys: list[tuple[str, int]], value: object) -> None:
    """Overlapping range keys would make the result depend on JSON key order: refuse them."""
    for port, index in keys:
        if (port, index) in target:
            raise Invalid(f"{port} index {index} is already set by another entry")
        target[(port, index)] = value


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
    if not _is_named(key, "Ethernet"):
        raise Invalid("port names must be Ethernet<N>")
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
    with _in_field("members"):
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


def _qos_map(table: str, highest_key: int) -> Callable[[Draft, str, dict[str, Any]], None]:
    """A parser for a ``{"<key 0..highest_key>": "<value 0..7>"}`` map table."""

    def parse_map(draft: Draft, key: str, fields: dict[str, Any]) -> None:
        mapping: dict[int, int] = {}
        for source, target in fields.items():
            with _in_field(source):
                mapping[Between(0, highest_key)(source)] = Between(0, 7)(target)
        getattr(draft.qos, _QOS_NAMED[table])[key] = mapping

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


def _buffer_pool(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    entry = validate(BufferPoolFields, fields)
    draft.qos.buffer_pools[key] = BufferPool(key, entry.type, entry.mode, entry.size, entry.xoff)


def _buffer_profile(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    entry = validate(BufferProfileFields, fields)
    pool = draft.ref("pool", entry.pool, "BUFFER_POOL")
    if (entry.dynamic_th is None) == (entry.static_th is None):
        raise Invalid("needs exactly one of dynamic_th and static_th")
    draft.qos.buffer_profiles[key] = BufferProfile(
        key, pool, entry.size, entry.dynamic_th, entry.static_th, entry.xon, entry.xoff, entry.xon_offset
    )


def _buffer_pg(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    keys = _port_indices(draft, key)
    profile = draft.ref("profile", validate(BufferRefFields, fields).profile, "BUFFER_PROFILE")
    _assign(draft.qos.buffer_pg, keys, profile)


def _buffer_queue(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    """An egress queue's profile: its pool must be an egress one (or ``both``), the buffer
    the queue's egress admission draws on."""
    keys = _port_indices(draft, key)
    profile = draft.ref("profile", validate(BufferRefFields, fields).profile, "BUFFER_PROFILE")
    pool = draft.qos.buffer_pools[draft.qos.buffer_profiles[profile].pool]
    if pool.type == "ingress":
        raise Invalid(f"{profile} is in {pool.name}, an ingress pool: an egress queue needs "
                       "a profile of an egress pool", "profile")
    _assign(draft.qos.buffer_queue, keys, profile)


def _cable_length(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    """``CABLE_LENGTH|AZURE``: {"Ethernet0": "40m"}; the key's name does not matter."""
    for port, length in fields.items():
        with _in_field(port):
            draft.need_port(port)
            if port in draft.qos.cable_length_m:
                raise Invalid("cable length is already set by another CABLE_LENGTH entry")
            if not isinstance(length, str) or not length.endswith("m"):
                raise Invalid(f"{brief(length)} is not a length in metres like '40m'")
            draft.qos.cable_length_m[port] = Between(0)(length.removesuffix("m"))


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
    keys = _port_indices(draft, key)
    entry = validate(QueueFields, fields)
    refs = draft.refs(entry, {"scheduler": "SCHEDULER", "wred_profile": "WRED_PROFILE"})
    _assign(draft.qos.queues, keys, QueueConfig(**refs))


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
    "DSCP_TO_TC_MAP": _qos_map("DSCP_TO_TC_MAP", 63),
    "DOT1P_TO_TC_MAP": _qos_map("DOT1P_TO_TC_MAP", 7),
    "TC_TO_PRIORITY_GROUP_MAP": _qos_map("TC_TO_PRIORITY_GROUP_MAP", 7),
    "TC_TO_QUEUE_MAP": _qos_map("TC_TO_QUEUE_MAP", 7),
    "MAP_PFC_PRIORITY_TO_QUEUE": _qos_map("MAP_PFC_PRIORITY_TO_QUEUE", 7),
    "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP": _qos_map("PFC_PRIORITY_TO_PRIORITY_GROUP_MAP", 7),
    "SCHEDULER": _scheduler,
    "WRED_PROFILE": _wred_profile,
    "PORT_QOS_MAP": _port_qos_map,
    "BUFFER_POOL": _buffer_pool,
    "BUFFER_PROFILE": _buffer_profile,
    "BUFFER_PG": _buffer_pg,
    "BUFFER_QUEUE": _buffer_queue,
    "CABLE_LENGTH": _cable_length,
    "QUEUE": _queue,
    "PFC_WD": _pfc_wd,
}
