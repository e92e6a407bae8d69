"""What a config_db.json parse has accepted so far (``Draft``), and the key shapes several
tables share: port|index ranges, VoQ system-port keys, references to named QoS entries.

``fabric.config_tables`` and ``fabric.config_buffer_tables`` hold one parser per table; each
checks its entries against the ``Draft`` of the tables before it and adds to it.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from .config import (Bgp, BgpNeighbor, BgpPeerRange, ConfigError, IPAddress, IPInterface,
                     IPNetwork, Port, Qos, StaticRoute, SwitchConfig, Vlan)
from .config_fields import Between, DeviceMetadata, Invalid
from .userinput import brief


@contextmanager
def in_field(name: str) -> Iterator[None]:
    """Attribute problems found by plain (non-pydantic) checks to field *name*."""
    try:
        yield
    except Invalid as invalid:
        raise Invalid(invalid.problem, invalid.field or name) from None


# QoS tables whose entries other tables refer to by name -> the Qos attribute holding them
QOS_NAMED = {
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
    other_line_cards: set[str] = field(default_factory=set)  # "host|asic" of VoQ keys

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
            other_line_cards=tuple(sorted(self.other_line_cards)),
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
        if name not in getattr(self.qos, QOS_NAMED[table]):
            raise Invalid(f"{brief(name)} is not in {table}", field_name)
        return name

    def refs(self, entry: BaseModel, tables: dict[str, str]) -> dict[str, str]:
        """Resolve the optional reference fields of *entry* ({field: table}) that are given."""
        given = entry.model_dump(include=set(tables), exclude_none=True)
        return {name: self.ref(name, value, tables[name]) for name, value in given.items()}


# ---- key shapes


def port_indices(draft: Draft, key: str) -> list[tuple[str, int]]:
    """``Ethernet0|3`` or ``Ethernet0|0-2`` -> [(port, index), ...] for PGs and queues 0..7."""
    port, separator, indices = key.partition("|")
    if not separator:
        raise Invalid("key must be Ethernet<N>|<index> or Ethernet<N>|<first>-<last>")
    draft.need_port(port)
    return [(port, index) for index in _index_range(indices)]


def queue_indices(draft: Draft, key: str) -> list[tuple[str, int]]:
    """QUEUE and BUFFER_QUEUE keys: ``Ethernet0|3`` as ``port_indices``, or on a VoQ switch
    (DEVICE_METADATA ``switch_type`` voq) a system port's ``<host>|<asic>|Ethernet0|3``, as
    SONiC's templates write them. The system ports of this switch (its ``hostname`` and
    ``asic_name``) are its own ports' queues; another line card's are accepted, not
    emulated (the chassis fabric between them is not): [] and noted in ``other_line_cards``."""
    parts = key.split("|")
    if len(parts) != 4:
        return port_indices(draft, key)
    meta = draft.meta
    if meta is None or meta.switch_type != "voq":
        raise Invalid("a system-port key <host>|<asic>|<port>|<queue> needs DEVICE_METADATA "
                      "switch_type voq")
    if meta.asic_name is None:
        raise Invalid("DEVICE_METADATA|localhost has no asic_name: which system ports are "
                      "this switch's own cannot be told")
    host, asic, port, indices = parts
    if (host, asic) != (meta.hostname, meta.asic_name):
        _index_range(indices)
        draft.other_line_cards.add(f"{host}|{asic}")
        return []
    return port_indices(draft, f"{port}|{indices}")


def _index_range(indices: str) -> range:
    """``3`` or ``0-2``: PG or queue indices 0..7."""
    first, dash, last = indices.partition("-")
    low = Between(0, 7)(first)
    high = Between(0, 7)(last) if dash else low
    if low > high:
        raise Invalid(f"range {brief(indices)} is backwards ({low} > {high})")
    return range(low, high + 1)


def assign(target: dict[tuple[str, int], Any], keys: list[tuple[str, int]], value: object) -> None:
    """Overlapping range keys would make the result depend on JSON key order: refuse them."""
    for port, index in keys:
        if (port, index) in target:
            raise Invalid(f"{port} index {index} is already set by another entry")
        target[(port, index)] = value
